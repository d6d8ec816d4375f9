// The chaos harness (see chaos.h): the run against the launcher and what it
// observed (schedules and invariants: chaos_schedule.cc).
#include "tests/chaos.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <random>
#include <set>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/config.h"
#include "common/file_util.h"
#include "common/host_port.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "coordinator/state_file.h"
#include "deploy/daemon_process.h"
#include "deploy/run_dir_guard.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "membership/coordinator_client.h"
#include "server/checkpoint.h"
#include "tests/chaos_sparse.h"
#include "tests/daemon_harness.h"
#include "tests/netns_lab.h"

namespace downpour::chaos {
namespace {

namespace fs = std::filesystem;

// The tmpfs under the checkpoint folder: mounted in the launcher's own mount
// namespace by this script, which copies what it holds to $2 when the
// launcher ends (the tmpfs goes with the namespace).
constexpr char kMountScript[] =
    "ck=\"$1\"; save=\"$2\"; shift 2; "
    "mount -t tmpfs -o size=64m downpour-chaos \"$ck\" || exit 97; "
    "\"$@\"; rc=$?; cp -a \"$ck\"/. \"$save\"/ 2>/dev/null; exit $rc";

// The lab's hosts: the harness and the launcher on "ctl", each daemon on
// one of its own, at a fixed port (each host is a namespace of its own).
const std::vector<std::pair<std::string, int>>& LabHosts() {
  static const auto* hosts = new std::vector<std::pair<std::string, int>>{
      {"ctl", 2},       {"coordinator", 10}, {"ps0", 11},     {"ps1", 12},
      {"standby0", 13}, {"standby1", 14},    {"worker0", 21}, {"worker1", 22}};
  return *hosts;
}

// The cluster section: loopback ephemeral ports, or the lab's hosts.
std::string ClusterYaml(const Options& options, const std::string& dir) {
  if (options.lab == nullptr) {
    // A standby per shard, two with replication 3.
    return absl::StrCat(
        "cluster:\n  coordinator: 127.0.0.1:0\n"
        "  ps: [127.0.0.1:0, 127.0.0.1:0]\n"
        "  standby_ps: [",
        options.replication >= 3 ? "127.0.0.1:0, 127.0.0.1:0, " : "",
        "127.0.0.1:0, 127.0.0.1:0]\n"
        "  replication: ",
        options.replication,
        "\n"
        "  workers: [127.0.0.1:0, 127.0.0.1:0]\n",
        // A third worker slot, for ps_worker --join.
        options.sparse ? "  max_workers: 3\n" : "");
  }
  auto at = [&](const std::string& host, int port) {
    return absl::StrCat(options.lab->host(host).ip, ":", port);
  };
  return absl::StrCat(
      "cluster:\n  coordinator: ", at("coordinator", 7000), "\n  ps: [",
      at("ps0", 7001), ", ", at("ps1", 7001), "]\n  standby_ps: [",
      at("standby0", 7001), ", ", at("standby1", 7001), "]\n  workers: [",
      at("worker0", 7100), ", ", at("worker1", 7100), "]\n",
      "coordinator:\n  state_dir: ", dir, "/coordinator-state\n",
      // Plaintext between the namespaces' hosts (a lab no one else reaches).
      "security:\n  insecure_network: true\n");
}

std::string JobYaml(const Options& options, const std::string& dir,
                    const std::string& checkpoints) {
  const std::string data =
      options.mnist_dir.empty()
          ? std::string(
                "data:\n  source: synthetic\n  train_examples: 6000\n"
                "  test_examples: 1000\n")
          : absl::StrCat("data:\n  source: mnist\n  path: ", options.mnist_dir,
                         "\n  train_examples: 6000\n  test_examples: 1000\n");
  const std::string rest =
      absl::StrCat("checkpoint:\n  dir: ", checkpoints,
                   "\n  interval_s: 0.5\n"
                   "launcher:\n  max_restarts: 20\n  restart_backoff_s: 0.2\n");
  const std::string head =
      absl::StrCat(ClusterYaml(options, dir),
                   "heartbeat:\n  interval_s: 0.2\n  timeout_s: 1\n"
                   "rpc:\n  deadline_s: 1\n  connect_timeout_s: 5\n");
  if (options.sparse) {
    return absl::StrCat(head, internal::SparseJobYaml(dir, options.epochs),
                        rest);
  }
  return absl::StrCat(head, data,
                      "model:\n  layers: [784, 64, 10]\n  block_size: 16384\n"
                      "optimizer:\n  type: adam\n  learning_rate: 0.001\n"
                      "training:\n  batch_size: 64\n  epochs: ",
                      options.epochs, "\n  eval_every_steps: 0\n", rest);
}

// summary.json's fields, through protobuf's JSON parser.
// `worker_restarts`: per worker slot, the launcher's restarts;
// `worker_left_down`: the slots whose last process ended with a failure the
// launcher did not restart (once the job was over): its pushes in flight at
// its end may be applied, and its last count is not final.
absl::Status ReadSummary(const std::string& path, Observed* observed,
                         std::map<int, uint64_t>* final_pushes,
                         std::map<int, int>* worker_restarts,
                         std::set<int>* worker_left_down) {
  ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  google::protobuf::Struct summary;
  const auto parsed =
      google::protobuf::util::JsonStringToMessage(text, &summary);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", parsed.message().as_string()));
  }
  const auto& f = summary.fields();
  auto str = [&](const char* key) {
    auto it = f.find(key);
    return it == f.end() ? std::string() : it->second.string_value();
  };
  auto num = [&](const google::protobuf::Value& v) {
    return v.kind_case() == google::protobuf::Value::kNumberValue
               ? v.number_value()
               : NAN;
  };
  observed->outcome = str("outcome");
  observed->failure = str("failure");
  if (auto it = f.find("accuracy"); it != f.end()) {
    observed->accuracy = num(it->second);
  }
  if (auto it = f.find("interrupted"); it != f.end()) {
    observed->interrupted = it->second.bool_value();
  }
  if (auto it = f.find("acked_pushes_lost"); it != f.end()) {
    observed->acked_pushes_lost = static_cast<uint64_t>(num(it->second));
  }
  if (auto it = f.find("acked_loss_exact"); it != f.end()) {
    observed->loss_exact = it->second.bool_value();
  }
  if (auto it = f.find("acked_pushes_lost_per_shard"); it != f.end()) {
    for (const auto& [shard, lost] : it->second.struct_value().fields()) {
      int s = 0;
      if (absl::SimpleAtoi(shard, &s)) {
        observed->lost_per_shard[s] = static_cast<uint64_t>(num(lost));
      }
    }
  }
  if (auto it = f.find("shard_recoveries"); it != f.end()) {
    for (const auto& r : it->second.list_value().values()) {
      const auto& rf = r.struct_value().fields();
      auto shard = rf.find("shard");
      auto source = rf.find("source");
      if (shard == rf.end() || source == rf.end()) continue;
      observed->recovery_sources[static_cast<int>(num(shard->second))]
          .push_back(source->second.string_value());
    }
  }
  worker_restarts->clear();
  worker_left_down->clear();
  if (auto it = f.find("faults"); it != f.end()) {
    for (const auto& fault : it->second.list_value().values()) {
      const auto& ff = fault.struct_value().fields();
      auto daemon = ff.find("daemon");
      auto action = ff.find("action");
      if (daemon == ff.end() || action == ff.end()) continue;
      absl::string_view name = daemon->second.string_value();
      int index = 0;
      if (!absl::ConsumePrefix(&name, "worker ") ||
          !absl::SimpleAtoi(name, &index)) {
        continue;
      }
      if (action->second.string_value() == "restarted") {
        ++(*worker_restarts)[index];
      } else if (action->second.string_value() == "left down") {
        worker_left_down->insert(index);
      }
    }
  }
  final_pushes->clear();
  if (auto it = f.find("workers"); it != f.end()) {
    for (const auto& w : it->second.list_value().values()) {
      const auto& wf = w.struct_value().fields();
      auto p = wf.find("pushes");
      auto index = wf.find("index");
      if (p != wf.end() && index != wf.end()) {
        (*final_pushes)[static_cast<int>(num(index->second))] +=
            static_cast<uint64_t>(num(p->second));
      }
    }
  }
  return absl::OkStatus();
}

// The launcher's argv prefix that mounts the checkpoint tmpfs (kMountScript).
std::vector<std::string> MountPrefix(const std::string& checkpoints,
                                     const std::string& saved) {
  return {FindProgram("unshare"),
          "--mount",
          "--propagation",
          "private",
          FindProgram("sh"),
          "-c",
          kMountScript,
          "chaos",
          checkpoints,
          saved};
}

// Fills the filesystem holding `dir` with one file; returns its path.
absl::StatusOr<std::string> FillDisk(const std::string& dir) {
  const std::string path = dir + "/chaos-filler";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("open ", path));
  const std::string chunk(1 << 20, '\0');
  while (::write(fd, chunk.data(), chunk.size()) > 0) {
  }
  // The last partial chunk: page by page until ENOSPC.
  while (::write(fd, chunk.data(), 4096) > 0) {
  }
  ::close(fd);
  return path;
}

// Every process the launcher's pid file named while the run went on.
class DaemonsSeen {
 public:
  void Note(const std::string& run_dir) {
    for (const PidEntry& e : ReadPidFile(run_dir)) {
      seen_.emplace(e.pid, e.start_time, e.name);
      current_[e.name] = e.pid;  // the file names each daemon's latest
    }
  }
  // How many processes of daemon `name` the file named.
  int Count(const std::string& name) const {
    int n = 0;
    for (const auto& [pid, start, seen_name] : seen_) n += seen_name == name;
    return n;
  }
  // The latest process of daemon `name` ("worker 1"); 0 when never seen.
  pid_t Latest(const std::string& name) const {
    auto it = current_.find(name);
    return it == current_.end() ? 0 : it->second;
  }
  // Those still running (same pid and start time) once `patience` is over.
  std::vector<std::string> StillRunning(absl::Duration patience) const {
    std::vector<std::string> left;
    const absl::Time until = absl::Now() + patience;
    do {
      left.clear();
      for (const auto& [pid, start, name] : seen_) {
        absl::StatusOr<unsigned long long> now = ProcessStartTime(pid);
        if (now.ok() && *now == start) {
          left.push_back(absl::StrCat(name, " (pid ", pid, ")"));
        }
      }
      if (left.empty()) break;
      absl::SleepFor(absl::Milliseconds(200));
    } while (absl::Now() < until);
    return left;
  }

 private:
  std::set<std::tuple<pid_t, unsigned long long, std::string>> seen_;
  std::map<std::string, pid_t> current_;
};

// Every worker process seen: its last count of whole pushes acknowledged,
// read from its Status while it ran, and in a sparse job its last report's
// row updates (`rows`, at `rows_pushes` of its pushes; rows < 0: none).
class WorkerPushes {
 public:
  void Note(int index, uint32_t pid, double pushes, double rows = -1,
            double rows_pushes = 0) {
    const absl::Time now = absl::Now();
    auto [it, fresh] = seen_.try_emplace(pid);
    Process& p = it->second;
    if (fresh) {
      p.index = index;
      order_.push_back(pid);
    } else if (now > p.read) {
      p.max_rise = std::max(p.max_rise, pushes - p.pushes);
      p.max_rate =
          std::max(p.max_rate,
                   (pushes - p.pushes) / absl::ToDoubleSeconds(now - p.read));
    }
    p.pushes = std::max(p.pushes, pushes);
    p.read = p.alive = now;
    if (rows >= p.rows) {
      p.rows = rows;
      p.rows_pushes = rows_pushes;
    }
  }
  // Notes which processes still run (their last moment alive bounds what
  // they pushed after their last read).
  void NoteAlive() {
    const absl::Time now = absl::Now();
    for (auto& [pid, p] : seen_) {
      if (::kill(static_cast<pid_t>(pid), 0) == 0) p.alive = now;
    }
  }
  // The last process read in worker slot `index` (0: none).
  pid_t LastSeen(int index) const {
    pid_t last = 0;
    for (uint32_t pid : order_) {
      if (seen_.at(pid).index == index) last = static_cast<pid_t>(pid);
    }
    return last;
  }
  // Adds the processes other than each worker's last one (whose count
  // summary.json gives) to o.acked_pushes, o.acked_slack and o.worker_ends.
  // A process may have had pushes applied after its last read: 2 in flight,
  // its largest rise between reads, and its fastest rate over the time it
  // lived past the read (stopped or starved, it could not be read).
  // `latest(index)` is worker `index`'s last process (the launcher's pid
  // file names it), whose count summary.json gives.
  // Row updates likewise (o.acked_row_updates, o.acked_row_slack): a
  // process's last report's, and as slack its pushes' slack plus the
  // pushes it made after that report, at the most row updates per push any
  // report showed.
  void AddEarlier(const std::function<pid_t(int)>& latest, Observed* o) const {
    double rows_per_push = 0;
    for (const auto& [pid, p] : seen_) {
      if (p.rows_pushes > 0) {
        rows_per_push = std::max(rows_per_push, p.rows / p.rows_pushes);
      }
    }
    for (uint32_t pid : order_) {
      const Process& p = seen_.at(pid);
      if (latest(p.index) == static_cast<pid_t>(pid)) continue;
      const double slack =
          2 + p.max_rise + p.max_rate * absl::ToDoubleSeconds(p.alive - p.read);
      o->acked_pushes += static_cast<uint64_t>(p.pushes);
      o->acked_slack += static_cast<uint64_t>(slack);
      ++o->worker_ends;
      o->acked_row_updates += static_cast<uint64_t>(std::max(p.rows, 0.0));
      o->acked_row_slack += static_cast<uint64_t>(std::ceil(
          rows_per_push *
          (slack + std::max(0.0, p.pushes - std::max(p.rows_pushes, 0.0)))));
    }
  }

 private:
  struct Process {
    int index = 0;
    double pushes = 0;
    double max_rise = 0;
    double max_rate = 0;  // pushes per second between two reads
    absl::Time read, alive;
    double rows = -1, rows_pushes = 0;
  };
  std::map<uint32_t, Process> seen_;
  std::vector<uint32_t> order_;  // first seen first
};

// Talks to the running cluster: its members, their pids and counters.
class Cluster {
 public:
  // `coordinator`: its configured address; "" when it listens on an
  // ephemeral port that the launcher writes to its port file.
  Cluster(std::string run_dir, std::string coordinator)
      : run_dir_(std::move(run_dir)), coordinator_(std::move(coordinator)) {}

  // The coordinator's address; "" before the launcher wrote its port.
  std::string CoordinatorAddress() const {
    if (!coordinator_.empty()) return coordinator_;
    absl::StatusOr<std::string> port = ReadFile(run_dir_ + "/coordinator.port");
    return port.ok()
               ? absl::StrCat("127.0.0.1:", absl::StripAsciiWhitespace(*port))
               : "";
  }

  absl::StatusOr<proto::ClusterStatusResponse> Status() {
    const std::string address = CoordinatorAddress();
    if (address.empty())
      return absl::UnavailableError("no coordinator.port yet");
    RpcSection rpc;
    rpc.deadline_s = 1;
    membership::CoordinatorClient client(address, rpc, "chaos");
    return client.ClusterStatus();
  }

  // The member's address: a shard's server for "ps", else role and index.
  std::string Address(const std::string& role, int index) {
    if (role == "coordinator") return CoordinatorAddress();
    absl::StatusOr<proto::ClusterStatusResponse> status = Status();
    if (!status.ok()) return "";
    for (const auto& m : status->members()) {
      if (m.role() == role && m.index() == index && m.alive())
        return m.address();
    }
    return "";
  }

  // The daemon serving `address` (its Status), within 2 s.
  absl::StatusOr<proto::GetStatusResponse> DaemonAt(
      const std::string& address) {
    if (address.empty()) return absl::NotFoundError("no such member now");
    return testing::DaemonStatus(address, absl::Seconds(2));
  }

  // Reads every live worker's pushes_acked into `pushes`; with `view` (a
  // sparse job) also the coordinator's status and placement into it, and
  // each worker's reported row updates into `pushes`.
  void NoteWorkers(WorkerPushes* pushes, internal::SparseView* view) {
    absl::StatusOr<proto::ClusterStatusResponse> status = Status();
    if (!status.ok()) return;
    if (view != nullptr) {
      view->NoteStatus(*status);
      RpcSection rpc;
      rpc.deadline_s = 1;
      membership::CoordinatorClient client(CoordinatorAddress(), rpc, "chaos");
      absl::StatusOr<proto::GetPlacementResponse> p = client.GetPlacement();
      if (p.ok()) view->NotePlacement(*p);
    }
    for (const auto& m : status->members()) {
      if (m.role() != "worker" || !m.alive() || m.address().empty()) continue;
      absl::StatusOr<proto::GetStatusResponse> s =
          testing::DaemonStatus(m.address(), absl::Milliseconds(300));
      if (!s.ok() || s->pid() == 0) continue;
      auto it = s->counters().find("pushes_acked");
      const double acked = it == s->counters().end() ? 0 : it->second;
      // The report is this process's when it claims no more pushes than
      // the process counts now (read after it); a restarted worker's slot
      // shows its old process's report until its first heartbeat.
      const proto::MemberReport& r = m.report();
      const bool own = view != nullptr && r.pushes() > 0 && r.pushes() <= acked;
      pushes->Note(m.index(), s->pid(), acked,
                   own ? static_cast<double>(r.sparse_row_updates()) : -1,
                   own ? static_cast<double>(r.pushes()) : 0);
    }
  }

  // The standbys the coordinator names as shard `shard`'s backups, in order.
  std::vector<int> Backups(int shard) {
    absl::StatusOr<proto::ClusterStatusResponse> status = Status();
    if (!status.ok()) return {};
    for (const auto& r : status->shard_replication()) {
      if (r.shard() != shard) continue;
      if (r.backup_standbys_size() > 0) {
        return {r.backup_standbys().begin(), r.backup_standbys().end()};
      }
      if (r.backup_standby() >= 0) return {r.backup_standby()};
    }
    return {};
  }

  bool TrainingAndBackedUp(int shards, int workers) {
    absl::StatusOr<proto::ClusterStatusResponse> status = Status();
    if (!status.ok()) return false;
    int trained = 0, backed = 0;
    for (const auto& m : status->members()) {
      if (m.role() == "worker" && m.report().step() >= 20) ++trained;
      if (m.role() == "ps" && m.report().replicated()) ++backed;
    }
    return trained == workers && backed == shards;
  }

 private:
  const std::string run_dir_;
  const std::string coordinator_;
};

}  // namespace

std::string CanMountTmpfs() {
  char dir_template[] = "/tmp/chaos_mount.XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) return "mkdtemp failed";
  std::vector<std::string> argv = MountPrefix(dir, dir);
  argv.push_back(FindProgram("true"));
  auto probe =
      Subprocess::Start("mount probe", argv, std::string(dir) + ".log");
  std::string why;
  if (!probe.ok()) {
    why = std::string(probe.status().message());
  } else if (std::optional<int> rc = (*probe)->Wait(absl::Seconds(20));
             rc != 0) {
    why = absl::StrCat("unshare --mount with a tmpfs failed (exit ",
                       rc.value_or(-1), "): ", (*probe)->LogTail(3));
  }
  std::error_code ignored;
  fs::remove_all(dir, ignored);
  fs::remove(std::string(dir) + ".log", ignored);
  return why;
}

std::string Summarize(uint64_t seed, const Outcome& run) {
  std::string text = absl::StrFormat(
      "seed %llu: %s, accuracy %.4f, %.1f s",
      static_cast<unsigned long long>(seed), run.observed.outcome,
      run.observed.accuracy, run.observed.seconds);
  for (const std::string& done : run.done) absl::StrAppend(&text, "\n  ", done);
  return text;
}

std::string SetUpLab(NetnsLab* lab) {
  if (std::string why = lab->SetUp(LabHosts()); !why.empty()) return why;
  return lab->Enter("ctl");
}

namespace {

// The sparse figures of a run that ended: the row updates the final
// checkpoints in `final_dir` hold, the workers' last processes' final
// reports (`run_dir`/history.json; each slot's pushes in summary.json are
// `final_pushes`), and the last placement and moves read.
void ObserveSparse(const internal::SparseView& view,
                   const std::string& final_dir, const std::string& run_dir,
                   const std::map<int, uint64_t>& final_pushes,
                   const std::set<int>& left_down, Observed* o) {
  o->sparse = true;
  o->sparse_buckets = internal::kSparseBuckets;
  absl::StatusOr<uint64_t> held =
      internal::CheckpointRowUpdates(final_dir, /*shards=*/2);
  if (held.ok()) {
    o->held_row_updates = *held;
  } else {
    absl::StrAppend(&o->checkpoint_error,
                    o->checkpoint_error.empty() ? "" : "; ",
                    held.status().message());
  }
  // Each slot's last report: history.json's (the launcher's last read, once
  // the workers ended: the final ones, which a poll may miss), else the last
  // one polled. Not the larger of the two: a slot's last process may have
  // pushed less than the one before it (restarted near the end).
  absl::StatusOr<std::map<int, proto::MemberReport>> final_reports =
      internal::FinalWorkerReports(run_dir + "/history.json");
  std::map<int, proto::MemberReport> last;
  for (int index : view.Reported()) last[index] = *view.LastReport(index);
  if (final_reports.ok()) {
    for (const auto& [index, r] : *final_reports) last[index] = r;
  }
  for (const auto& [index, r] : last) {
    if (r.step() == 0 && !r.finished()) continue;  // never trained
    if (left_down.count(index) > 0) continue;      // counted as an earlier one
    o->acked_row_updates += r.sparse_row_updates();
    // Its last report is the final one when it counts the pushes the
    // launcher read last (summary.json), finished or not (a job that ends
    // stops a worker mid-way).
    auto it = final_pushes.find(index);
    if (!r.finished() &&
        (it == final_pushes.end() || r.pushes() < it->second)) {
      o->rows_unread.push_back(index);
    }
  }
  view.Fill(o);
}

}  // namespace

absl::StatusOr<Outcome> Harness::Run(uint64_t seed,
                                     const std::vector<Fault>& faults) {
  if (options_.lab != nullptr && options_.replication >= 3) {
    return absl::InvalidArgumentError(
        "chaos: replication 3 runs on loopback only (the lab has a host for "
        "two standbys); leave out --net");
  }
  if (options_.lab != nullptr && options_.sparse) {
    return absl::InvalidArgumentError(
        "chaos: the sparse job runs on loopback only; leave out --net");
  }
  Outcome out;
  const std::string dir = absl::StrCat(options_.work_dir, "/seed-", seed,
                                       faults.empty() ? "-undisturbed" : "");
  std::error_code ignored;
  fs::remove_all(dir, ignored);
  const std::string checkpoints = dir + "/checkpoints";
  const std::string saved = dir + "/checkpoints-final";
  fs::create_directories(checkpoints);
  fs::create_directories(saved);
  out.run_dir = dir + "/run";
  const std::string config = dir + "/job.yaml";
  RETURN_IF_ERROR(
      WriteFileAtomically(config, JobYaml(options_, dir, checkpoints)));
  if (options_.sparse) internal::WriteSparseData(dir, options_.sparse_examples);
  NetnsLab* const lab = options_.lab;
  std::vector<std::string> argv;
  if (options_.full_disk) argv = MountPrefix(checkpoints, saved);
  for (const std::string& a :
       {options_.bin_dir + "/deploy/launcher", std::string("--config"), config,
        std::string("--run_dir"), out.run_dir, std::string("--bin_dir"),
        options_.bin_dir, std::string("--progress_s"), std::string("2")}) {
    argv.push_back(a);
  }
  if (lab != nullptr) {
    // Each daemon on its host, through a stand-in for ssh.
    for (const std::string& a :
         {std::string("--ssh"), std::string("--ssh_command"),
          lab->WriteSsh(dir + "/ssh")}) {
      argv.push_back(a);
    }
  }
  Subprocess::Options process;
  process.own_process_group = true;
  ASSIGN_OR_RETURN(
      std::unique_ptr<Subprocess> launcher,
      Subprocess::Start("launcher", argv, dir + "/launcher.log", process));
  const absl::Time start = absl::Now();
  const absl::Time bound = start + options_.bound;
  DaemonsSeen seen;
  WorkerPushes worker_pushes;
  Cluster cluster(
      out.run_dir,
      lab == nullptr ? "" : absl::StrCat(lab->host("coordinator").ip, ":7000"));
  Observed& o = out.observed;
  internal::SparseView view;
  internal::SparseView* const sparse = options_.sparse ? &view : nullptr;
  absl::Time next_note = absl::InfinitePast();
  // Polls the pid file (and every 0.1 s the workers' counts) while waiting;
  // false when the launcher ended or the bound passed.
  auto wait = [&](absl::Duration d) {
    const absl::Time until = std::min(absl::Now() + d, bound);
    do {
      seen.Note(out.run_dir);
      worker_pushes.NoteAlive();
      if (absl::Now() >= next_note) {
        cluster.NoteWorkers(&worker_pushes, sparse);
        next_note = absl::Now() + absl::Milliseconds(100);
      }
      if (launcher->Poll().has_value()) return false;
      absl::SleepFor(absl::Milliseconds(20));
    } while (absl::Now() < until);
    return !launcher->Poll().has_value() && absl::Now() < bound;
  };
  internal::ElasticFaults elastic(options_.bin_dir, config, dir, wait);
  // Training, every shard backed up.
  bool ready = false;
  while (!ready && wait(absl::Milliseconds(200)) && absl::Now() < bound) {
    ready = cluster.TrainingAndBackedUp(2, 2);
  }
  if (!ready && !faults.empty()) {
    out.done.push_back("the cluster never trained with every shard backed up");
  }
  const absl::Time t0 = absl::Now();
  std::vector<pid_t> stopped;
  std::string filler;
  absl::Time unstop = absl::InfiniteFuture(), unfill = absl::InfiniteFuture();
  // Hosts cut off or crawling, and when their link is mended.
  struct NetFault {
    std::string host;
    bool crawl = false;
    absl::Time until;
  };
  std::vector<NetFault> net_faults;
  // Ends faults whose time is up.
  auto settle = [&](bool all) {
    const absl::Time now = absl::Now();
    if (!stopped.empty() && (all || now >= unstop)) {
      for (pid_t pid : stopped) ::kill(pid, SIGCONT);
      stopped.clear();
      unstop = absl::InfiniteFuture();
    }
    if (!filler.empty() && (all || now >= unfill)) {
      fs::remove(filler, ignored);
      filler.clear();
      unfill = absl::InfiniteFuture();
    }
    for (auto it = net_faults.begin(); it != net_faults.end();) {
      if (!all && now < it->until) {
        ++it;
        continue;
      }
      const std::string error =
          it->crawl ? lab->UnshapeLink(it->host) : lab->MendLink(it->host);
      if (!error.empty()) {
        out.done.push_back(
            absl::StrCat("could not mend ", it->host, ": ", error));
      }
      it = net_faults.erase(it);
    }
  };
  // The daemon in that place now, asked again for up to 5 s (a coordinator
  // being restarted, a member re-registering), ending earlier faults on
  // their time meanwhile.
  auto member = [&](const std::string& role,
                    int index) -> absl::StatusOr<proto::GetStatusResponse> {
    const absl::Time until = absl::Now() + absl::Seconds(5);
    absl::StatusOr<proto::GetStatusResponse> s;
    do {
      settle(false);
      s = cluster.DaemonAt(cluster.Address(role, index));
      if (s.ok() && s->pid() != 0) return s;
    } while (wait(absl::Milliseconds(100)) && absl::Now() < until);
    if (s.ok()) return absl::NotFoundError("no pid");
    return s.status();
  };
  // SIGKILLs the daemon `s` names; for a worker, first reads its pushes.
  auto kill = [&](const std::string& role,
                  const absl::StatusOr<proto::GetStatusResponse>& s,
                  std::string* note) {
    if (!s.ok() || s->pid() == 0) {
      absl::StrAppend(note, " skipped: nobody answers there");
      return false;
    }
    if (role == "worker") {
      // Its count just before the kill (whole pushes every shard acknowledged).
      auto it = s->counters().find("pushes_acked");
      worker_pushes.Note(s->index(), s->pid(),
                         it == s->counters().end() ? 0 : it->second);
      ++o.worker_kills;
    }
    ::kill(static_cast<pid_t>(s->pid()), SIGKILL);
    absl::StrAppend(note, " pid ", s->pid());
    return true;
  };
  // The lab host a fault's target lives on now: a shard's server's (it may
  // be a standby's), else the configured one's; "" when none answers.
  auto host_of = [&](const Fault& f) -> std::string {
    if (f.role == "ps") {
      const std::string address = cluster.Address("ps", f.index);
      const NetnsHost* h = lab->HostWithIp(HostOf(address));
      return h == nullptr ? "" : h->role;
    }
    return f.role == "coordinator" ? f.role : absl::StrCat(f.role, f.index);
  };
  for (const Fault& f : faults) {
    if (!ready) break;
    // Wait for its time, ending earlier faults on theirs.
    while (absl::Now() < t0 + absl::Seconds(f.at_s)) {
      settle(false);
      if (!wait(absl::Milliseconds(20))) break;
    }
    if (launcher->Poll().has_value() || absl::Now() >= bound) break;
    settle(false);
    std::string note = Describe(f) + ":";
    switch (f.kind) {
      case FaultKind::kKill:
        kill(f.role, member(f.role, f.index), &note);
        break;
      case FaultKind::kStop: {
        absl::StatusOr<proto::GetStatusResponse> s = member(f.role, f.index);
        if (!s.ok() || s->pid() == 0) {
          absl::StrAppend(&note, " skipped: nobody answers there");
          break;
        }
        ::kill(static_cast<pid_t>(s->pid()), SIGSTOP);
        stopped.push_back(static_cast<pid_t>(s->pid()));
        unstop = std::min(unstop, absl::Now() + absl::Seconds(f.duration_s));
        absl::StrAppend(&note, " pid ", s->pid());
        break;
      }
      case FaultKind::kDoubleKill: {
        absl::StatusOr<proto::GetStatusResponse> primary =
            member("ps", f.index);
        const std::string first = cluster.Address("ps", f.index);
        if (!kill("ps", primary, &note)) break;
        // Whoever takes the shard over, killed soon after.
        std::string second;
        const absl::Time until = absl::Now() + absl::Seconds(15);
        while (absl::Now() < until && wait(absl::Milliseconds(50))) {
          settle(false);
          second = cluster.Address("ps", f.index);
          if (!second.empty() && second != first &&
              cluster.DaemonAt(second).ok()) {
            break;
          }
          second.clear();
        }
        if (second.empty()) {
          absl::StrAppend(&note, "; nobody took the shard over within 15 s");
          break;
        }
        wait(absl::Seconds(f.duration_s));
        absl::StrAppend(&note, "; then");
        kill("ps", cluster.DaemonAt(second), &note);
        break;
      }
      case FaultKind::kPrimaryAndBackup: {
        const std::vector<int> backups = cluster.Backups(f.index);
        if (backups.empty()) {
          absl::StrAppend(&note, " skipped: the shard has no backup now");
          break;
        }
        const int b = backups[f.backup % backups.size()];
        // Both found first, then killed back to back.
        absl::StatusOr<proto::GetStatusResponse> primary =
            member("ps", f.index);
        absl::StatusOr<proto::GetStatusResponse> backup = member("standby", b);
        if (!backup.ok() || backup->pid() == 0) {
          absl::StrAppend(&note, " skipped: standby ", b, " does not answer");
          break;
        }
        if (!kill("ps", primary, &note)) break;
        absl::StrAppend(&note, " and standby ", b);
        kill("standby", backup, &note);
        break;
      }
      case FaultKind::kFullDisk: {
        if (!options_.full_disk || !filler.empty()) {
          absl::StrAppend(&note, " skipped: ",
                          filler.empty() ? "no tmpfs" : "already full");
          break;
        }
        absl::StatusOr<std::string> path = FillDisk(
            absl::StrCat("/proc/", launcher->pid(), "/root", checkpoints));
        if (!path.ok()) {
          absl::StrAppend(&note, " skipped: ", path.status().message());
          break;
        }
        filler = *path;
        unfill = absl::Now() + absl::Seconds(f.duration_s);
        break;
      }
      case FaultKind::kPartition:
      case FaultKind::kCrawl: {
        if (lab == nullptr) {
          absl::StrAppend(&note, " skipped: the cluster is not in a lab");
          break;
        }
        const std::string host = host_of(f);
        if (host.empty()) {
          absl::StrAppend(&note, " skipped: nobody serves the shard now");
          break;
        }
        if (std::any_of(net_faults.begin(), net_faults.end(),
                        [&](const NetFault& n) { return n.host == host; })) {
          absl::StrAppend(&note, " skipped: ", host, " is already faulted");
          break;
        }
        const bool crawl = f.kind == FaultKind::kCrawl;
        LinkShape shape;
        shape.rate_mbit = f.rate_mbit;
        const std::string error =
            crawl ? lab->ShapeLink(host, shape) : lab->CutLink(host);
        if (!error.empty()) {
          absl::StrAppend(&note, " failed: ", error);
          break;
        }
        absl::StrAppend(&note, " host ", host);
        net_faults.push_back(
            {host, crawl, absl::Now() + absl::Seconds(f.duration_s)});
        break;
      }
      case FaultKind::kMoveBuckets:
        absl::StrAppend(&note,
                        elastic.Move(f, cluster.CoordinatorAddress(), view));
        break;
      case FaultKind::kJoinWorker:
        absl::StrAppend(&note, elastic.Join(cluster.CoordinatorAddress()));
        break;
      case FaultKind::kDrainWorker: {
        absl::StatusOr<proto::ClusterStatusResponse> status = cluster.Status();
        absl::StrAppend(&note, elastic.Drain(f, cluster.CoordinatorAddress(),
                                             status.ok() ? &*status : nullptr));
        break;
      }
    }
    out.done.push_back(note);
  }
  // The rest of the faults' time, then the job's end.
  while (!stopped.empty() || !filler.empty() || !net_faults.empty()) {
    settle(false);
    if (!wait(absl::Milliseconds(20))) break;
  }
  settle(true);
  while (wait(absl::Milliseconds(200))) {
  }
  o.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (std::optional<int> rc = launcher->Poll()) {
    o.ended = true;
    o.exit_status = *rc;
  } else {
    launcher->Stop(absl::Seconds(20));
  }
  for (std::string& line : elastic.Finish()) out.done.push_back(line);
  seen.Note(out.run_dir);
  o.left_behind = seen.StillRunning(absl::Seconds(15));
  // Per worker slot, its last process's pushes (the launcher's last read).
  std::map<int, uint64_t> final_pushes;
  std::map<int, int> worker_restarts;
  std::set<int> worker_left_down;
  if (absl::Status read =
          ReadSummary(out.run_dir + "/summary.json", &o, &final_pushes,
                      &worker_restarts, &worker_left_down);
      !read.ok()) {
    o.outcome.clear();
  }
  // A slot whose last process failed and was left down: every process read
  // in it is counted as an earlier one, with the slack for what it had in
  // flight (its summary.json count is its last report, not final).
  for (int index : worker_left_down) final_pushes.erase(index);
  for (const auto& [index, pushes] : final_pushes) o.acked_pushes += pushes;
  // Each slot's last process, whose count summary.json gives:
  // - a slot the launcher never ran is a joined worker's: the last process
  //   read in it (not the last join the harness started: one refused for
  //   want of a slot trained in none; chaos seed 22 counted the one that
  //   did twice);
  // - a slot the launcher ran more processes for than the pid file showed
  //   (a restart that started and ended while a fault held the harness up:
  //   chaos seed 35 took a killed worker's 1,472 pushes for its
  //   successor's 3) has its last process unread: none (0), so every
  //   process read is an earlier one.
  worker_pushes.AddEarlier(
      [&](int index) {
        if (worker_left_down.count(index) > 0) return pid_t{0};
        const std::string name = absl::StrCat("worker ", index);
        const pid_t pid = seen.Latest(name);
        if (pid == 0) return worker_pushes.LastSeen(index);
        auto restarts = worker_restarts.find(index);
        const int ran =
            1 + (restarts == worker_restarts.end() ? 0 : restarts->second);
        return seen.Count(name) >= ran ? pid : pid_t{0};
      },
      &o);
  const std::string final_dir = options_.full_disk ? saved : checkpoints;
  for (int shard = 0; shard < 2; ++shard) {
    absl::StatusOr<server::Checkpoint> c =
        server::ReadNewestCheckpoint(final_dir, shard);
    if (!c.ok()) {
      absl::StrAppend(&o.checkpoint_error,
                      o.checkpoint_error.empty() ? "" : "; ",
                      c.status().message());
      continue;
    }
    std::vector<uint64_t>& versions = o.versions[shard];
    for (const auto& b : c->blocks) versions.push_back(b.version);
  }
  if (options_.sparse) {
    // The moves as the coordinator saved them last (it saves each phase
    // change before it answers, and its state once more as it stops): in
    // the lab its configured state_dir, else the launcher's default.
    const coordinator::StateFile state(coordinator::StateFilePath(
        lab != nullptr ? dir + "/coordinator-state"
                       : out.run_dir + "/coordinator"));
    if (absl::StatusOr<proto::CoordinatorState> saved = state.Read();
        saved.ok()) {
      view.NoteFinalState(*saved);
    } else {
      out.done.push_back(absl::StrCat("the coordinator's state file: ",
                                      saved.status().message()));
    }
    ObserveSparse(view, final_dir, out.run_dir, final_pushes, worker_left_down,
                  &o);
  }
  return out;
}

}  // namespace downpour::chaos
