// psctl: command-line client for a running Downpour cluster.
//
//   psctl status --coordinator 127.0.0.1:7000
//   psctl status --config deploy/configs/mnist_local.yaml --json
//   psctl watch | workers | shards | health | plot --out curves.svg | history
//   psctl move-buckets --to 2 --buckets 0-99 | add-ps HOST:PORT | drain-ps 2
//   psctl drain-worker 2
//   psctl moves
//
// Exit status: 0 done; 1 the cluster (or a member) did not answer or is not
// healthy; 2 bad flags or config.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/config.h"
#include "common/exit_codes.h"
#include "common/file_util.h"
#include "common/parse_flags.h"
#include "common/subprocess.h"
#include "coordinator/bucket_moves.h"
#include "google/protobuf/util/json_util.h"
#include "membership/coordinator_client.h"
#include "model/export.h"
#include "proto/serve.grpc.pb.h"
#include "rpc/security.h"
#include "rpc/server_util.h"
#include "server/checkpoint.h"
#include "tools/bucket_move_commands.h"
#include "tools/cluster_tables.h"
#include "tools/drain_worker_command.h"
#include "tools/json_output.h"
#include "tools/member_probe.h"
#include "tools/model_export.h"
#include "tools/status_table.h"
#include "tools/training_plot.h"

ABSL_FLAG(std::string, coordinator, "",
          "coordinator host:port (default: cluster.coordinator of --config)");
ABSL_FLAG(std::string, config, "",
          "cluster YAML file to read the coordinator address from");
ABSL_FLAG(double, timeout_s, 3, "how long to wait for each answer");
ABSL_FLAG(std::string, token_file, "",
          "with security tokens on: the bearer token to call with (default: "
          "security.admin_token_file of --config when readable, else "
          "security.reader_token_file)");
ABSL_FLAG(
    bool, json, false,
    "status: print JSON (every member's full Status) instead of the table");
ABSL_FLAG(double, interval_s, 2, "watch: seconds between refreshes");
ABSL_FLAG(int, count, 0,
          "watch: stop after this many refreshes; export with "
          "export.interval_s: after this many exports (0 = until Ctrl-C)");
ABSL_FLAG(double, sample_s, 1,
          "shards: seconds between the two reads of block versions");
ABSL_FLAG(int, top, 10, "shards: how many of the hottest blocks to list");
ABSL_FLAG(
    std::string, out, "",
    "plot: the SVG file to write (default downpour-plot.svg); history: the "
    "JSON file to write (default: stdout)");
ABSL_FLAG(std::string, history, "",
          "plot: draw from this saved history JSON (e.g. run/history.json) "
          "instead of asking the coordinator");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "export: read the parameters from this checkpoint folder (e.g. "
          "run/checkpoints) instead of the live cluster");
ABSL_FLAG(std::vector<std::string>, set, {},
          "export: config overrides as the daemons took them, "
          "section.key=value[,...]");
ABSL_FLAG(std::string, address, "",
          "health: probe only this host:port (exit 0 when SERVING, like "
          "grpc_health_probe)");
ABSL_FLAG(std::string, buckets, "",
          "move-buckets: the hash buckets to move, e.g. 0-99,200");
ABSL_FLAG(std::string, blocks, "",
          "move-buckets: dense blocks to move with (or instead of) the "
          "buckets, e.g. 0-3,7 (numbered from 0; psctl moves counts each "
          "shard's)");
ABSL_FLAG(int, to, -1, "move-buckets: the shard to move them to");
ABSL_FLAG(double, wait_s, 600,
          "move-buckets, add-ps, drain-ps: how long to wait for the moves "
          "(add-ps: and for the ps to register) before giving up waiting; "
          "drain-worker: for the worker to exit (default there 60)");
ABSL_FLAG(std::string, service, "",
          "health: the service name to ask about (\"\" = whole server)");

namespace {

using namespace downpour;
using namespace downpour::tools;

constexpr char kUsage[] =
    "psctl COMMAND [flags]\n\n"
    "Commands:\n"
    "  status    table of every ps and worker: alive, last heartbeat, step,\n"
    "            examples/s, pulls, pushes, bytes, staleness, loss, accuracy;\n"
    "            --json prints the table's data plus every member's own "
    "Status\n"
    "            (rates, p50/p99 latency, memory) and health as JSON\n"
    "  watch     the cluster refreshing in place, like top (--interval_s, "
    "--count)\n"
    "  workers   per worker: step, examples/s, loss, accuracy, staleness\n"
    "            p50/p99/max, pulls/s, pushes/s, MB/s, p50/p99 pull and push\n"
    "            latency, memory, device\n"
    "  shards    per ps: blocks, bytes, pulls/s, pushes/s, updates/s, "
    "latency,\n"
    "            staleness p50/p99/max; then the hottest blocks (--sample_s,\n"
    "            --top)\n"
    "  health    grpc.health.v1 check of the coordinator and every member, or "
    "of\n"
    "            one endpoint with --address HOST:PORT\n"
    "  plot      training curves (loss and test accuracy against time and\n"
    "            steps for every worker, throughput, ps updates, staleness\n"
    "            p99) to an SVG file (--out);\n"
    "            from the live coordinator or a saved --history FILE\n"
    "  history   the coordinator's metrics history as JSON (--out FILE)\n"
    "  serving   a serving daemon's state (--address HOST:PORT; --json):\n"
    "            snapshot, its age, requests, miss ratio, latency, reloads\n"
    "  export    the trained model as a NumPy .npz (--out, default "
    "model.npz):\n"
    "            from the live cluster, or from --checkpoint_dir DIR; needs\n"
    "            --config (and the job's --set overrides), and reads the\n"
    "            training data for its classes and standardization\n"
    "            (docs/DATA.md); a sparse model (sparse_linear, fm,\n"
    "            wide_deep) only from --checkpoint_dir (its rows, and its\n"
    "            bias or MLP); with export.interval_s > 0 (--set\n"
    "            export.interval_s=30) it first waits for the job's first\n"
    "            checkpoint, then exports again on that schedule until\n"
    "            stopped or --count exports, skipping unchanged parameters\n"
    "  move-buckets --to N --buckets 0-99,200 [--blocks 3,4]\n"
    "            moves sparse hash buckets (and dense blocks) to shard N\n"
    "            while the job trains\n"
    "  add-ps HOST:PORT\n"
    "            waits for a ps started with ps_server --join there, then\n"
    "            moves buckets and dense blocks to it until the shards are\n"
    "            even\n"
    "  drain-ps N\n"
    "            moves every bucket and dense block off shard N\n"
    "  moves     buckets and blocks per shard and the moves\n"
    "  drain-worker N\n"
    "            hands worker N's data parts to the other workers, prints\n"
    "            each part and to whom, and waits (--wait_s, default 60)\n"
    "            until the worker exits (docs/OPERATIONS.md, Workers that\n"
    "            join and leave)\n"
    "  add-standby HOST:PORT\n"
    "            waits for a standby started with ps_server --spare there to\n"
    "            register and back up a shard without a backup, in sync\n"
    "            (docs/OPERATIONS.md, Growing and shrinking the ps set)\n\n"
    "Give the coordinator with --coordinator HOST:PORT or --config FILE.";

// What a command talks to: the coordinator (null for the commands that need
// none: plot --history, health --address) and the members.
struct Cluster {
  Cluster(const std::string& coordinator_address, double timeout_s)
      : probe(timeout_s) {
    if (coordinator_address.empty()) return;
    RpcSection rpc;
    rpc.deadline_s = timeout_s;  // every call is a single attempt
    coordinator = std::make_unique<membership::CoordinatorClient>(
        coordinator_address, rpc, "psctl");
  }

  std::unique_ptr<membership::CoordinatorClient> coordinator;
  MemberProbe probe;
};

int Fail(const std::string& message, int code) {
  std::fprintf(stderr, "psctl: %s\n", message.c_str());
  return code;
}

int Unreachable(const absl::Status& status) {
  return Fail(absl::StrCat(
                  status.message(),
                  "\nIs the cluster running? Check the address (--coordinator) "
                  "and the coordinator's log."),
              1);
}

// The coordinator address from the flags; exits 2 when there is none.
std::string CoordinatorAddress() {
  std::string address = absl::GetFlag(FLAGS_coordinator);
  if (address.empty() && !absl::GetFlag(FLAGS_config).empty()) {
    auto config = LoadConfig(absl::GetFlag(FLAGS_config));
    if (!config.ok())
      std::exit(Fail(std::string(config.status().message()), 2));
    address = config->cluster.coordinator;
  }
  if (address.empty()) {
    std::exit(Fail("give --coordinator HOST:PORT or --config FILE", 2));
  }
  return address;
}

// TLS and a token from --config's security section (and --token_file), so
// that every call below is made as the cluster expects; exits 2 on a bad file.
void InstallClientSecurity() {
  auto config = LoadConfig(absl::GetFlag(FLAGS_config));
  if (!config.ok()) std::exit(Fail(std::string(config.status().message()), 2));
  const absl::Status installed =
      InstallSecurity(config->security, "client", ClientRole(config->security),
                      absl::GetFlag(FLAGS_token_file));
  if (!installed.ok()) std::exit(Fail(std::string(installed.message()), 2));
}

std::vector<absl::StatusOr<std::string>> AllHealth(
    Cluster& client, const proto::ClusterStatusResponse& cluster) {
  std::vector<absl::StatusOr<std::string>> health;
  for (const proto::MemberStatus& m : cluster.members()) {
    health.push_back(m.registered()
                         ? client.probe.Health(m.address())
                         : absl::StatusOr<std::string>(
                               absl::UnavailableError("never registered")));
  }
  return health;
}

int Status(Cluster& client) {
  auto cluster = client.coordinator->ClusterStatus();
  if (!cluster.ok()) return Unreachable(cluster.status());
  if (!absl::GetFlag(FLAGS_json)) {
    std::fputs(FormatStatusTable(*cluster).c_str(), stdout);
    return 0;
  }
  const MemberStatuses statuses = client.probe.AllMemberStatus(*cluster);
  std::fputs(StatusJson(client.coordinator->address(), *cluster, statuses,
                        AllHealth(client, *cluster))
                 .c_str(),
             stdout);
  return 0;
}

// A member's health and, when it serves, its Status (for DescribeHealth).
MemberHealth ProbeHealth(Cluster& client, const std::string& address,
                         const std::string& service) {
  const absl::StatusOr<std::string> health =
      client.probe.Health(address, service);
  if (!health.ok() || *health != "SERVING") {
    return DescribeHealth(health, absl::UnavailableError("not asked"));
  }
  return DescribeHealth(health, client.probe.MemberStatus(address));
}

// A ps that serves but cannot checkpoint is DEGRADED: still SERVING to
// grpc health (probes must not restart it: a restart would lose every update
// since its last good checkpoint), but `psctl health` of the cluster exits 1.
// psctl serving --address HOST:PORT: a serving daemon's ServeStatus
// (docs/SERVING.md), as lines or (--json) as the message's JSON.
int Serving(double timeout_s) {
  const std::string address = absl::GetFlag(FLAGS_address);
  if (address.empty()) {
    return Fail("serving needs --address HOST:PORT (the daemon's --listen)",
                kExitConfig);
  }
  auto stub = proto::Predictor::NewStub(MakeChannel(address));
  grpc::ClientContext context;
  context.set_deadline(
      std::chrono::system_clock::now() +
      std::chrono::microseconds(static_cast<int64_t>(timeout_s * 1e6)));
  proto::ServeStatusRequest request;
  proto::ServeStatusResponse s;
  const grpc::Status status = stub->ServeStatus(&context, request, &s);
  if (!status.ok()) {
    return Fail(absl::StrCat(address, ": ServeStatus: ", status.error_message(),
                             " (is `serve` listening there? With TLS, give "
                             "the cluster's --config)"),
                1);
  }
  if (absl::GetFlag(FLAGS_json)) {
    std::string json;
    google::protobuf::util::JsonPrintOptions options;
    options.always_print_primitive_fields = true;
    (void)google::protobuf::util::MessageToJsonString(s, &json, options);
    std::printf("%s\n", json.c_str());
    return 0;
  }
  std::printf("%s: %s\n", address.c_str(),
              s.loaded() ? "serving" : "no snapshot loaded yet");
  std::printf("  model        %s\n", s.model_path().c_str());
  if (s.loaded()) {
    std::printf(
        "  snapshot     %lu: %s %s, %lu rows%s, %lu updates, age %.1f s\n",
        static_cast<unsigned long>(s.snapshot()), s.task().c_str(),
        s.type().c_str(), static_cast<unsigned long>(s.rows()),
        s.embedding_rows() > 0
            ? absl::StrCat(", ", s.embedding_rows(), " embeddings").c_str()
            : "",
        static_cast<unsigned long>(s.updates()), s.snapshot_age_s());
    std::printf("  origin       %s\n", s.origin().c_str());
  }
  std::printf(
      "  requests     %lu (%lu examples), rejected %lu, unavailable %lu\n",
      static_cast<unsigned long>(s.requests()),
      static_cast<unsigned long>(s.examples()),
      static_cast<unsigned long>(s.rejected()),
      static_cast<unsigned long>(s.unavailable()));
  std::printf("  keys         %lu looked up, miss ratio %.4f\n",
              static_cast<unsigned long>(s.keys()), s.miss_ratio());
  std::printf("  latency      p50 %.0f us, p99 %.0f us, max %.0f us\n",
              s.latency_p50_s() * 1e6, s.latency_p99_s() * 1e6,
              s.latency_max_s() * 1e6);
  std::printf("  loads        %lu (%lu reloads), %lu failed%s\n",
              static_cast<unsigned long>(s.loads()),
              static_cast<unsigned long>(s.reloads()),
              static_cast<unsigned long>(s.reload_failures()),
              s.last_reload_error().empty()
                  ? ""
                  : absl::StrCat(": ", s.last_reload_error()).c_str());
  return 0;
}

int Health(Cluster& client) {
  const std::string service = absl::GetFlag(FLAGS_service);
  if (!absl::GetFlag(FLAGS_address).empty()) {
    const std::string address = absl::GetFlag(FLAGS_address);
    const MemberHealth member = ProbeHealth(client, address, service);
    if (!member.answered) return Fail(member.text, 1);
    std::printf("%s: %s\n", address.c_str(), member.text.c_str());
    return member.serving ? 0 : 1;
  }
  auto cluster = client.coordinator->ClusterStatus();
  if (!cluster.ok()) return Unreachable(cluster.status());
  int unhealthy = 0;
  auto line = [&](const std::string& who, const std::string& address,
                  bool expected) {
    const MemberHealth member = ProbeHealth(client, address, service);
    if (expected && (!member.serving || member.degraded)) ++unhealthy;
    std::printf("%-13s %-21s %s\n", who.c_str(), address.c_str(),
                member.text.c_str());
  };
  line("coordinator", client.coordinator->address(), true);
  for (const proto::MemberStatus& m : cluster->members()) {
    const std::string who = absl::StrCat(m.role(), " ", m.index());
    if (!m.registered()) {
      std::printf("%-13s %-21s never registered\n", who.c_str(), "-");
      ++unhealthy;
      continue;
    }
    // A worker that finished has left on purpose: not a failure.
    const bool expected = m.alive() || !m.report().finished();
    line(who, m.address(), expected);
  }
  return unhealthy == 0 ? 0 : 1;
}

int Workers(Cluster& client) {
  auto cluster = client.coordinator->ClusterStatus();
  if (!cluster.ok()) return Unreachable(cluster.status());
  std::fputs(
      FormatWorkersTable(*cluster, client.probe.AllMemberStatus(*cluster))
          .c_str(),
      stdout);
  return 0;
}

// Block versions of every ps, keyed by block id: (shard, version).
std::map<uint32_t, std::pair<int, uint64_t>> BlockVersions(
    Cluster& client, const proto::GetPlacementResponse& placement) {
  std::map<uint32_t, std::pair<int, uint64_t>> versions;
  for (const proto::ShardInfo& shard : placement.shards()) {
    auto blocks = client.probe.BlockVersions(shard.address());
    if (!blocks.ok()) continue;  // the table shows the shard as unreachable
    for (const proto::BlockChecksum& b : blocks->blocks()) {
      versions[b.block_id()] = {shard.index(), b.version()};
    }
  }
  return versions;
}

int Shards(Cluster& client) {
  auto cluster = client.coordinator->ClusterStatus();
  if (!cluster.ok()) return Unreachable(cluster.status());
  auto placement = client.coordinator->GetPlacement();
  if (!placement.ok()) return Unreachable(placement.status());
  auto model = client.coordinator->DescribeModel();
  if (!model.ok()) return Unreachable(model.status());
  if (placement->epoch() == 0) {
    std::printf("no placement yet: %s\n", placement->waiting_for().c_str());
  }
  const absl::Time first_time = absl::Now();
  const auto first = BlockVersions(client, *placement);
  absl::SleepFor(absl::Seconds(absl::GetFlag(FLAGS_sample_s)));
  const auto second = BlockVersions(client, *placement);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - first_time);
  std::vector<BlockRate> rates;
  for (const auto& [id, shard_version] : second) {
    auto before = first.find(id);
    const double delta =
        before == first.end() || before->second.second > shard_version.second
            ? 0.0
            : shard_version.second - before->second.second;
    rates.push_back(
        {id, shard_version.first, shard_version.second, delta / seconds});
  }
  std::fputs(
      FormatShardsTable(*cluster, client.probe.AllMemberStatus(*cluster),
                        *placement, *model, rates, absl::GetFlag(FLAGS_top))
          .c_str(),
      stdout);
  // A sparse model: the buckets per shard and the moves.
  if (placement->shards_size() > 0 &&
      placement->shards(0).buckets_size() + cluster->bucket_moves_size() > 0) {
    std::fputs(absl::StrCat("\n", FormatMoves(*cluster, *placement)).c_str(),
               stdout);
  }
  return 0;
}

int Watch(Cluster& client) {
  const bool tty = isatty(STDOUT_FILENO);
  const int count = absl::GetFlag(FLAGS_count);
  bool ever_answered = false;
  for (int frame = 0; count <= 0 || frame < count; ++frame) {
    if (frame > 0)
      absl::SleepFor(absl::Seconds(absl::GetFlag(FLAGS_interval_s)));
    std::string text;
    auto cluster = client.coordinator->ClusterStatus();
    if (!cluster.ok()) {
      if (!ever_answered) return Unreachable(cluster.status());
      text = absl::StrCat("psctl watch: ", cluster.status().message(),
                          " (retrying)\n");
    } else {
      ever_answered = true;
      // The last two minutes of history feed the sparklines.
      auto history =
          client.coordinator->History(cluster->uptime_seconds() - 120);
      text = FormatWatchFrame(
          client.coordinator->address(), *cluster,
          client.probe.AllMemberStatus(*cluster),
          history.ok() ? *history : proto::GetHistoryResponse());
    }
    // On a terminal: home, draw, clear what is left of the old frame (like
    // top).
    std::fputs(tty ? absl::StrCat("\x1b[H\x1b[2J", text).c_str()
                   : absl::StrCat(text, "\n").c_str(),
               stdout);
    std::fflush(stdout);
  }
  return 0;
}

absl::StatusOr<proto::GetHistoryResponse> LoadHistory(Cluster* client) {
  const std::string path = absl::GetFlag(FLAGS_history);
  if (path.empty()) return client->coordinator->History(0);
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  proto::GetHistoryResponse history;
  absl::Status parsed = FromJson(*text, path, &history);
  if (!parsed.ok()) return parsed;
  return history;
}

int Plot(Cluster* client) {
  std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) out = "downpour-plot.svg";
  if (!absl::EndsWith(out, ".svg")) {
    return Fail(
        absl::StrCat(
            "--out ", out,
            ": psctl writes SVG only; name the file *.svg "
            "(any browser opens it; rsvg-convert or inkscape make a PNG)"),
        2);
  }
  auto history = LoadHistory(client);
  if (!history.ok()) {
    return absl::GetFlag(FLAGS_history).empty()
               ? Unreachable(history.status())
               : Fail(std::string(history.status().message()), 1);
  }
  std::ofstream file(out);
  file << TrainingPlotSvg(*history);
  file.close();
  if (!file) return Fail(absl::StrCat("cannot write ", out), 1);
  std::printf("wrote %s (%d samples)\n", out.c_str(), history->samples_size());
  return 0;
}

int History(Cluster& client) {
  auto history = client.coordinator->History(0);
  if (!history.ok()) return Unreachable(history.status());
  const std::string json = ToJson(*history);
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) {
    std::fputs(json.c_str(), stdout);
    return 0;
  }
  std::ofstream file(out);
  file << json;
  file.close();
  if (!file) return Fail(absl::StrCat("cannot write ", out), 1);
  std::printf("wrote %s (%d samples)\n", out.c_str(), history->samples_size());
  return 0;
}

// Values the flag parser accepts but psctl cannot use: InvalidArgument
// naming the flag.
absl::Status CheckFlagValues() {
  struct Positive {
    const char* name;
    double value;
  } positive[] = {{"--timeout_s", absl::GetFlag(FLAGS_timeout_s)},
                  {"--interval_s", absl::GetFlag(FLAGS_interval_s)},
                  {"--sample_s", absl::GetFlag(FLAGS_sample_s)},
                  {"--wait_s", absl::GetFlag(FLAGS_wait_s)}};
  for (const Positive& flag : positive) {
    if (!(flag.value > 0 && flag.value <= 86400)) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag.name, " must be in (0, 86400] seconds, got ", flag.value));
    }
  }
  if (absl::GetFlag(FLAGS_count) < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--count must be 0 (until Ctrl-C) or more, got ",
                     absl::GetFlag(FLAGS_count)));
  }
  if (absl::GetFlag(FLAGS_top) < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--top must be 1 or more, got ", absl::GetFlag(FLAGS_top)));
  }
  return absl::OkStatus();
}

// A scheduled export's check: true (and says so) when the parameters hold
// the same `updates` as the last export's (*last), which then writes
// nothing; else records them in *last.
bool Unchanged(const std::string& out, uint64_t updates, uint64_t* last) {
  if (updates == *last) {
    std::printf("%s: no update since the last export (%lu updates)\n",
                out.c_str(), static_cast<unsigned long>(updates));
    return true;
  }
  *last = updates;
  return false;
}

// psctl export of a sparse model (sparse_linear, fm, wide_deep): bias (or
// MLP) and rows from the
// checkpoint folder `dir` (a live cluster cannot list its rows), one .npz.
// *last: the updates of the previous export of a schedule (0: none); an
// export whose parameters have received no update since writes nothing.
int ExportSparse(const Config& config, const std::string& dir,
                 const std::string& out, uint64_t* last) {
  if (dir.empty()) {
    return Fail(std::string(CheckExportableFromCluster(config).message()),
                kExitConfig);
  }
  const absl::Time start = absl::Now();
  absl::StatusOr<SparseParams> params = SparseFromCheckpoints(config, dir);
  if (!params.ok()) return Fail(std::string(params.status().message()), 1);
  const int64_t rows = params->rows;
  const uint64_t updates = params->updates;
  if (Unchanged(out, updates, last)) return 0;
  const std::string origin = absl::StrCat("checkpoints ", dir);
  const std::string embeddings =
      params->embedding_rows > 0
          ? absl::StrCat(", ", params->embedding_rows, " embeddings of dim ",
                         EmbeddingOptions(config.model).dim)
          : "";
  absl::StatusOr<model::SparseModel> model =
      BuildSparseExport(config, *std::move(params), origin);
  if (!model.ok()) return Fail(std::string(model.status().message()), 1);
  absl::Status written = model::WriteSparseModel(out, *model);
  if (!written.ok()) return Fail(std::string(written.message()), 1);
  std::printf(
      "wrote %s: %s %s, %lu nonzero weights of %ld rows%s, %lu "
      "updates, from %s, in %.2f s\n",
      out.c_str(), model->meta.task().c_str(), model->meta.type().c_str(),
      static_cast<unsigned long>(model->keys.size()), static_cast<long>(rows),
      embeddings.c_str(), static_cast<unsigned long>(updates), origin.c_str(),
      absl::ToDoubleSeconds(absl::Now() - start));
  return 0;
}

// One export of `config`'s model to `out` (*last as in ExportSparse).
int ExportOnce(const Config& config, const std::string& dir,
               const std::string& out, double timeout_s, uint64_t* last) {
  if (IsSparseModel(config.model.type)) {
    return ExportSparse(config, dir, out, last);
  }
  uint64_t updates = 0;
  std::string origin;
  absl::StatusOr<std::vector<float>> params;
  if (!dir.empty()) {
    params = ParamsFromCheckpoints(config, dir, &updates);
    origin = absl::StrCat("checkpoints ", dir);
  } else {
    Cluster client(CoordinatorAddress(), timeout_s);
    auto placement = client.coordinator->GetPlacement();
    if (!placement.ok()) return Unreachable(placement.status());
    params = ParamsFromCluster(config, *placement, client.probe, &updates);
    origin = absl::StrCat("cluster ", config.cluster.coordinator,
                          " (placement epoch ", placement->epoch(), ")");
  }
  if (!params.ok()) return Fail(std::string(params.status().message()), 1);
  if (Unchanged(out, updates, last)) return 0;
  absl::StatusOr<model::ExportedModel> model =
      BuildExport(config, *std::move(params), origin, updates);
  if (!model.ok()) return Fail(std::string(model.status().message()), 1);
  absl::Status written = model::WriteModel(out, *model);
  if (!written.ok()) return Fail(std::string(written.message()), 1);
  std::printf("wrote %s: %s %s, layers [%s], %lu updates, from %s\n",
              out.c_str(), model->meta.task().c_str(),
              model->meta.type().c_str(),
              absl::StrJoin(model->meta.layers(), ", ").c_str(),
              static_cast<unsigned long>(updates), origin.c_str());
  return 0;
}

// True while some ps of the `shards` has no checkpoint generation in `dir`
// (server::ShardCheckpoints::List): the job exporting from it, started
// beside, has not taken its first checkpoint everywhere yet (or dir is no
// checkpoint folder at all, which the wait's message lets a user see).
bool CheckpointsMissing(const std::string& dir, size_t shards) {
  for (size_t i = 0; i < shards; ++i) {
    server::ShardCheckpoints::Options options;
    options.dir = dir;
    options.shard_index = static_cast<int>(i);
    const auto generations = server::ShardCheckpoints(options).List();
    if (!generations.ok() || generations->empty()) return true;
  }
  return false;
}

// psctl export: parameters from the cluster or a checkpoint folder, the
// data's meta, one .npz; with export.interval_s, again every so many seconds
// (each file replaced whole, by rename, so a reader such as the serving
// daemon never sees half of one) until stopped or --count exports.
int Export(double timeout_s) {
  const std::string config_path = absl::GetFlag(FLAGS_config);
  if (config_path.empty()) {
    return Fail(
        "export needs --config FILE (the job's config: it names the "
        "model and the training data)",
        2);
  }
  absl::StatusOr<Config> config =
      LoadConfig(config_path, MergeOverrideFragments(absl::GetFlag(FLAGS_set)));
  if (!config.ok()) return Fail(std::string(config.status().message()), 2);
  std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) out = "model.npz";
  const std::string dir = absl::GetFlag(FLAGS_checkpoint_dir);
  const double every = config->exports.interval_s;
  uint64_t last = 0;
  if (every <= 0) return ExportOnce(*config, dir, out, timeout_s, &last);
  const int count = absl::GetFlag(FLAGS_count);
  std::printf("exporting to %s every %g s (export.interval_s)%s\n", out.c_str(),
              every,
              count > 0 ? absl::StrCat(", ", count, " times").c_str()
                        : "; stop with Ctrl-C");
  // A job started beside this may not have taken its first checkpoint yet.
  if (!dir.empty() && CheckpointsMissing(dir, config->cluster.ps.size())) {
    std::printf("waiting for the job's first checkpoint in %s\n", dir.c_str());
    std::fflush(stdout);
    while (CheckpointsMissing(dir, config->cluster.ps.size())) {
      absl::SleepFor(absl::Seconds(every));
    }
  }
  for (int64_t done = 0;; ++done) {
    const int rc = ExportOnce(*config, dir, out, timeout_s, &last);
    // The first export must work (a wrong folder or config is not worth
    // retrying); later failures (a ps restarting) are retried on schedule.
    if (rc != 0 && done == 0) return rc;
    std::fflush(stdout);
    if (count > 0 && done + 1 >= count) return 0;
    absl::SleepFor(absl::Seconds(every));
  }
}

tools::MovesCalls MoveCalls(Cluster& client) {
  membership::CoordinatorClient* c = client.coordinator.get();
  tools::MovesCalls calls;
  calls.status = [c] { return c->ClusterStatus(); };
  calls.placement = [c] { return c->GetPlacement(); };
  calls.move = [c](const proto::MoveBucketsRequest& request) {
    return c->MoveBuckets(request);
  };
  calls.print = [](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  };
  calls.timeout = absl::Seconds(absl::GetFlag(FLAGS_wait_s));
  return calls;
}

int Moved(const absl::Status& status) {
  if (status.ok()) return 0;
  return Fail(std::string(status.message()), 1);
}

// --wait_s as given, else `fallback` (the command's own default).
double WaitSeconds(double fallback) {
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag("wait_s");
  if (flag != nullptr && flag->CurrentValue() == flag->DefaultValue()) {
    return fallback;
  }
  return absl::GetFlag(FLAGS_wait_s);
}

// drain-worker N: the drain, each part handed, the wait for the exit.
int DrainWorker(const std::vector<char*>& args) {
  const std::string arg = args.size() == 3 ? args[2] : "";
  int worker = -1;
  if (args.size() != 3 || !absl::SimpleAtoi(arg, &worker) || worker < 0) {
    return Fail(absl::StrCat("drain-worker: give the worker to drain as a "
                             "number: psctl drain-worker N (got '",
                             arg, "')"),
                2);
  }
  Cluster client(CoordinatorAddress(), absl::GetFlag(FLAGS_timeout_s));
  membership::CoordinatorClient* c = client.coordinator.get();
  tools::DrainWorkerCalls calls;
  calls.drain = [c](const proto::DrainWorkerRequest& request) {
    return c->DrainWorker(request);
  };
  calls.status = [c] { return c->ClusterStatus(); };
  calls.print = [](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  };
  calls.timeout = absl::Seconds(WaitSeconds(60));
  return Moved(DrainWorkerCommand(calls, worker));
}

int Moves(Cluster& client) {
  auto cluster = client.coordinator->ClusterStatus();
  if (!cluster.ok()) return Unreachable(cluster.status());
  auto placement = client.coordinator->GetPlacement();
  if (!placement.ok()) return Unreachable(placement.status());
  std::fputs(FormatMoves(*cluster, *placement).c_str(), stdout);
  return 0;
}

// move-buckets, add-ps and drain-ps: their arguments checked (exit 2 with
// the fix) before the coordinator is called.
int MoveCommand(const std::string& command, const std::vector<char*>& args) {
  const std::string arg = args.size() == 3 ? args[2] : "";
  int shard = -1;
  if (command == "move-buckets") {
    if (args.size() != 2 ||
        (absl::GetFlag(FLAGS_buckets).empty() &&
         absl::GetFlag(FLAGS_blocks).empty()) ||
        absl::GetFlag(FLAGS_to) < 0) {
      return Fail(
          "move-buckets: give the buckets (or dense blocks) and the shard to "
          "move them to: psctl move-buckets --to N --buckets 0-99,200 "
          "[--blocks 3,4]",
          2);
    }
    for (const std::string& list :
         {absl::GetFlag(FLAGS_buckets), absl::GetFlag(FLAGS_blocks)}) {
      if (list.empty()) continue;
      auto parsed = coordinator::ParseBucketList(list);
      if (!parsed.ok()) return Fail(std::string(parsed.status().message()), 2);
    }
  } else if (command == "add-standby" && (args.size() != 3 || arg.empty())) {
    return Fail(
        "add-standby: give the address of the new standby: psctl add-standby "
        "HOST:PORT (started with ps_server --spare)",
        2);
  } else if (command == "add-ps" && (args.size() != 3 || arg.empty())) {
    return Fail(
        "add-ps: give the address of the new ps: psctl add-ps "
        "HOST:PORT (started with ps_server --join)",
        2);
  } else if (command == "drain-ps" &&
             (args.size() != 3 || !absl::SimpleAtoi(arg, &shard) ||
              shard < 0)) {
    return Fail(absl::StrCat("drain-ps: give the shard to empty as a number: "
                             "psctl drain-ps N (got '",
                             arg, "')"),
                2);
  }
  Cluster client(CoordinatorAddress(), absl::GetFlag(FLAGS_timeout_s));
  const tools::MovesCalls calls = MoveCalls(client);
  if (command == "add-ps") return Moved(AddPsCommand(calls, arg));
  if (command == "add-standby") return Moved(AddStandbyCommand(calls, arg));
  if (command == "drain-ps") return Moved(DrainPsCommand(calls, shard));
  return Moved(MoveBucketsCommand(calls, absl::GetFlag(FLAGS_buckets),
                                  absl::GetFlag(FLAGS_to),
                                  absl::GetFlag(FLAGS_blocks)));
}

}  // namespace

int main(int argc, char** argv) {
  SetUsage(kUsage);
  std::vector<char*> args = ParseFlags(argc, argv);
  const absl::Status flags = CheckFlagValues();
  if (!flags.ok()) return Fail(std::string(flags.message()), kExitConfig);
  const std::string command = args.size() >= 2 ? args[1] : "";
  if (command == "move-buckets" || command == "add-ps" ||
      command == "drain-ps" || command == "add-standby") {
    if (!absl::GetFlag(FLAGS_config).empty()) InstallClientSecurity();
    return MoveCommand(command, args);
  }
  if (command == "drain-worker") {
    if (!absl::GetFlag(FLAGS_config).empty()) InstallClientSecurity();
    return DrainWorker(args);
  }
  if (args.size() != 2) {
    std::fprintf(stderr, "%s\n", kUsage);
    return 2;
  }
  const double timeout_s = absl::GetFlag(FLAGS_timeout_s);
  if (!absl::GetFlag(FLAGS_config).empty()) InstallClientSecurity();
  if (command == "plot" && !absl::GetFlag(FLAGS_history).empty()) {
    Cluster offline("", timeout_s);  // no coordinator needed
    return Plot(&offline);
  }
  if (command == "export") return Export(timeout_s);
  if (command == "serving") return Serving(timeout_s);
  if (command == "health" && !absl::GetFlag(FLAGS_address).empty()) {
    Cluster direct("", timeout_s);
    return Health(direct);
  }
  static const std::map<std::string, int (*)(Cluster&)> kCommands = {
      {"status", Status},   {"watch", Watch},
      {"workers", Workers}, {"shards", Shards},
      {"health", Health},   {"history", History},
      {"moves", Moves},     {"plot", [](Cluster& c) { return Plot(&c); }}};
  auto it = kCommands.find(command);
  if (it == kCommands.end()) {
    std::fprintf(stderr, "psctl: unknown command '%s'\n\n%s\n", command.c_str(),
                 kUsage);
    return 2;
  }
  Cluster client(CoordinatorAddress(), timeout_s);
  return it->second(client);
}
