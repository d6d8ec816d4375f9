// serve_bench: the serving daemon (serve/, docs/SERVING.md) under load while
// its model file is swapped. Starts the real `serve` binary on 127.0.0.1:0 as
// a subprocess, serving a sparse_linear model of --keys random keys; then for
// each count of --clients runs that many client threads (each with its own
// connection) sending Predict requests of --batch Criteo-like examples (39
// keys each, nine in ten held by the model) back to back for --seconds, while
// a swapper thread replaces the file by rename every --swap_ms (two models
// alternating). Prints per row: client-side latency p50/p99/p999, requests
// and examples per second, failed requests (the target is 0), files swapped
// and snapshots the clients saw answer. No timed assertions.
//
//   bazel build -c opt //bench:serve_bench //serve
//   bazel-bin/bench/serve_bench --keys=1000000 --clients=1,8,64 --seconds=10
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_util.h"
#include "common/config.h"
#include "common/file_util.h"
#include "common/subprocess.h"
#include "grpcpp/grpcpp.h"
#include "model/sparse_model.h"
#include "proto/serve.grpc.pb.h"
#include "rpc/server_util.h"

ABSL_FLAG(int64_t, keys, 1'000'000, "keys (rows) in the served model");
ABSL_FLAG(int, keys_per_example, 39, "keys in each example (Criteo: 39)");
ABSL_FLAG(int, batch, 1, "examples per Predict request");
ABSL_FLAG(std::string, clients, "1,8,64", "concurrent clients, one row each");
ABSL_FLAG(double, seconds, 10, "measured seconds per row (after 1 s warm-up)");
ABSL_FLAG(int, swap_ms, 500,
          "replace the model file every this many ms (0 = never)");
ABSL_FLAG(double, reload_interval_s, 0.1,
          "the daemon's --reload_interval_s (its default is 1)");
ABSL_FLAG(int, reload_nice, 10, "the daemon's --reload_nice (its default)");
ABSL_FLAG(std::string, bin_dir, "",
          "folder holding serve/serve (default: this binary's bazel-bin)");
ABSL_FLAG(std::string, run_dir, "",
          "where the model, config and daemon log go (default: a new "
          "/tmp/downpour-serve_bench-XXXXXX)");

namespace downpour::bench {
namespace {

void Check(const absl::Status& status, const std::string& what) {
  CheckOrExit(status, "serve_bench", what);
}

// A sparse_linear model of `n` random keys (the same keys for every seed),
// weights from `seed`.
model::SparseModel MakeModel(const std::vector<uint64_t>& keys, uint64_t seed,
                             uint64_t updates) {
  Config config;
  config.model.task = Task::kBinary;
  config.model.type = ModelType::kSparseLinear;
  config.model.sparse_buckets = 64;
  config.data.source = DataSource::kLibsvm;
  model::SparseModel m;
  m.meta = model::MakeSparseMeta(config, {"-1", "+1"}, {});
  m.meta.set_updates(updates);
  m.meta.set_origin("serve_bench");
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0, 0.1f);
  m.bias = -1;
  m.keys = keys;
  m.weights.resize(keys.size());
  for (float& w : m.weights) {
    w = normal(rng);
    if (w == 0) w = 1e-3f;
  }
  return m;
}

// Requests of `batch` examples of `per` keys: nine keys in ten the model
// holds, the rest random; values 1.
std::vector<proto::PredictRequest> MakeRequests(
    const std::vector<uint64_t>& keys, int batch, int per, int count) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<size_t> pick(0, keys.size() - 1);
  std::vector<proto::PredictRequest> requests(count);
  for (proto::PredictRequest& r : requests) {
    std::vector<uint64_t> k;
    std::vector<float> v;
    std::vector<uint32_t> offsets = {0};
    for (int e = 0; e < batch; ++e) {
      for (int i = 0; i < per; ++i) {
        k.push_back(rng() % 10 == 0 ? rng() : keys[pick(rng)]);
        v.push_back(1);
      }
      offsets.push_back(static_cast<uint32_t>(k.size()));
    }
    r.set_keys(
        std::string(reinterpret_cast<const char*>(k.data()), k.size() * 8));
    r.set_values(
        std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
    r.set_offsets(std::string(reinterpret_cast<const char*>(offsets.data()),
                              offsets.size() * 4));
  }
  return requests;
}

// VmRSS or VmHWM (peak) of process `pid` in MB, 0 when unreadable.
double MemoryMb(pid_t pid, const std::string& field) {
  absl::StatusOr<std::string> status =
      ReadFile(absl::StrCat("/proc/", pid, "/status"), 1 << 16);
  if (!status.ok()) return 0;
  const size_t at = status->find(field + ":");
  if (at == std::string::npos) return 0;
  return std::atof(status->c_str() + at + field.size() + 1) / 1024;
}

double Quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const size_t i = std::min(sorted.size() - 1,
                            static_cast<size_t>(q * (sorted.size() - 1) + 0.5));
  return sorted[i];
}

struct Row {
  int clients = 0;
  int64_t requests = 0, failed = 0, swaps = 0;
  uint64_t first_snapshot = 0, last_snapshot = 0;
  double seconds = 0, p50 = 0, p99 = 0, p999 = 0;
  double connect_s = 0;  // to connect every client before the row
  std::string first_error;
};

// What one client saw while the row was measured.
struct ClientTally {
  std::vector<double> latencies;  // seconds, of the requests that succeeded
  int64_t failed = 0;
  uint64_t lo = UINT64_MAX, hi = 0;  // the snapshots that answered
  std::string error;                 // the first failure's message
};

// Each client's own connection, established before the row starts: on a
// loaded machine a fresh connection's handshake can outlast MakeChannel's
// connect timeout (its reconnect backoff, 0.1-1 s), and calls on a channel
// still connecting fail at once rather than wait.
std::vector<std::shared_ptr<grpc::Channel>> ConnectClients(
    const std::string& address, int clients) {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int c = 0; c < clients; ++c) {
    channels.push_back(MakeChannel(address, true));
  }
  for (int c = 0; c < clients; ++c) {
    if (!channels[c]->WaitForConnected(DeadlineIn(60))) {
      Check(absl::UnavailableError(
                absl::StrCat("client ", c, " could not connect in 60 s")),
            address);
    }
  }
  return channels;
}

// Client `c`'s thread: Predict requests back to back until `stop`, counted
// in *tally while `measuring`.
void RunClient(const std::shared_ptr<grpc::Channel>& channel, int c,
               const std::vector<proto::PredictRequest>& requests,
               const std::atomic<bool>& stop,
               const std::atomic<bool>& measuring, ClientTally* tally) {
  auto stub = proto::Predictor::NewStub(channel);
  size_t next = static_cast<size_t>(c) * 97;
  proto::PredictResponse reply;
  while (!stop.load(std::memory_order_relaxed)) {
    const proto::PredictRequest& request = requests[next++ % requests.size()];
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(10));
    const auto t0 = std::chrono::steady_clock::now();
    const grpc::Status status = stub->Predict(&context, request, &reply);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    if (!measuring.load(std::memory_order_relaxed)) continue;
    if (!status.ok()) {
      if (tally->failed++ == 0) tally->error = status.error_message();
      continue;
    }
    tally->latencies.push_back(s);
    tally->lo = std::min<uint64_t>(tally->lo, reply.snapshot());
    tally->hi = std::max<uint64_t>(tally->hi, reply.snapshot());
  }
}

// Until `end`, replaces `path` with files[0], files[1], ... every --swap_ms
// (or just waits when it is 0); returns the swaps made.
int64_t SwapUntil(absl::Time end, const std::string& path,
                  const std::vector<std::string>& files) {
  const int swap_ms = absl::GetFlag(FLAGS_swap_ms);
  int64_t swaps = 0;
  static size_t next_file = 0;
  while (absl::Now() < end) {
    if (swap_ms <= 0) {
      absl::SleepFor(end - absl::Now());
      break;
    }
    const absl::Time due = absl::Now() + absl::Milliseconds(swap_ms);
    // Replace by rename, as psctl export does.
    Check(WriteFileAtomically(path, files[next_file++ % files.size()]),
          "swap " + path);
    ++swaps;
    absl::SleepFor(std::min(due, end) - absl::Now());
  }
  return swaps;
}

// The clients' tallies merged into the row's counts and latency quantiles.
void MergeTallies(const std::vector<ClientTally>& tallies, Row* row) {
  std::vector<double> all;
  row->first_snapshot = UINT64_MAX;
  for (const ClientTally& t : tallies) {
    all.insert(all.end(), t.latencies.begin(), t.latencies.end());
    row->failed += t.failed;
    if (t.failed > 0 && row->first_error.empty()) row->first_error = t.error;
    row->first_snapshot = std::min(row->first_snapshot, t.lo);
    row->last_snapshot = std::max(row->last_snapshot, t.hi);
  }
  std::sort(all.begin(), all.end());
  row->requests = static_cast<int64_t>(all.size());
  row->p50 = Quantile(all, 0.5);
  row->p99 = Quantile(all, 0.99);
  row->p999 = Quantile(all, 0.999);
}

// One row: `clients` threads for warm-up + measured seconds, while the
// swapper replaces `path` with files[0], files[1], ... every swap_ms.
Row RunRow(const std::string& address, int clients,
           const std::vector<proto::PredictRequest>& requests,
           const std::string& path, const std::vector<std::string>& files) {
  const absl::Duration warmup = absl::Seconds(1);
  const absl::Duration measured = absl::Seconds(absl::GetFlag(FLAGS_seconds));
  std::atomic<bool> stop{false};
  std::atomic<bool> measuring{false};
  std::vector<ClientTally> tallies(clients);
  const absl::Time connect_start = absl::Now();
  const std::vector<std::shared_ptr<grpc::Channel>> channels =
      ConnectClients(address, clients);
  const double connect_s = absl::ToDoubleSeconds(absl::Now() - connect_start);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      RunClient(channels[c], c, requests, stop, measuring, &tallies[c]);
    });
  }
  Row row;
  row.clients = clients;
  row.connect_s = connect_s;
  absl::SleepFor(warmup);
  measuring = true;
  const absl::Time start = absl::Now();
  row.swaps = SwapUntil(start + measured, path, files);
  measuring = false;
  row.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  stop = true;
  for (std::thread& t : threads) t.join();
  MergeTallies(tallies, &row);
  return row;
}

// `n` random keys (the same for every run), sorted and without repeats.
std::vector<uint64_t> RandomKeys(int64_t n) {
  std::mt19937_64 rng(1);
  std::vector<uint64_t> keys(static_cast<size_t>(n));
  for (uint64_t& k : keys) k = rng();
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

// Two models over the same keys, serialized once under run_dir; the swapper
// writes their bytes alternately.
std::vector<std::string> ModelFiles(const std::string& run_dir,
                                    const std::vector<uint64_t>& keys) {
  std::vector<std::string> files;
  for (uint64_t seed : {1, 2}) {
    const std::string staged = absl::StrCat(run_dir, "/staged", seed, ".npz");
    Check(model::WriteSparseModel(staged, MakeModel(keys, seed, seed)),
          "write " + staged);
    absl::StatusOr<std::string> bytes = ReadFile(staged);
    Check(bytes.status(), "read " + staged);
    files.push_back(*std::move(bytes));
  }
  return files;
}

// Starts the serve binary on the model at `path` and sets *address to where
// it listens once it wrote its port file.
std::unique_ptr<Subprocess> StartServe(const std::string& bin_dir,
                                       const std::string& run_dir,
                                       const std::string& path,
                                       std::string* address) {
  const std::string config = run_dir + "/serve.yaml";
  Check(WriteFileAtomically(config, std::string("logging:\n  level: warn\n")),
        "write " + config);
  const std::string port_file = run_dir + "/serve.port";
  auto daemon = Subprocess::Start(
      "serve",
      {bin_dir + "/serve/serve", "--config", config, "--model", path,
       "--listen", "127.0.0.1:0", "--port_file", port_file,
       "--reload_interval_s",
       absl::StrCat(absl::GetFlag(FLAGS_reload_interval_s)), "--reload_nice",
       absl::StrCat(absl::GetFlag(FLAGS_reload_nice))},
      run_dir + "/serve.log");
  Check(daemon.status(), "start " + bin_dir + "/serve/serve");
  for (const absl::Time give_up = absl::Now() + absl::Seconds(60);
       address->empty();) {
    if ((*daemon)->Poll().has_value() || absl::Now() > give_up) {
      Check(absl::UnavailableError((*daemon)->LogTail(10)), "serve");
    }
    absl::StatusOr<std::string> port = ReadFile(port_file);
    if (port.ok() && !port->empty() && port->back() == '\n') {
      *address = absl::StrCat("127.0.0.1:", port->substr(0, port->size() - 1));
    } else {
      absl::SleepFor(absl::Milliseconds(20));
    }
  }
  return *std::move(daemon);
}

// Prints one row of the table, and its first failure and slow connecting.
void PrintRow(const Row& row, int batch) {
  const uint64_t seen = row.last_snapshot >= row.first_snapshot
                            ? row.last_snapshot - row.first_snapshot + 1
                            : 0;
  absl::PrintF("%8d %12.0f %12.0f %9.0f %9.0f %9.0f %7d %7d %10d\n",
               row.clients, row.requests / row.seconds,
               row.requests * batch / row.seconds, row.p50 * 1e6, row.p99 * 1e6,
               row.p999 * 1e6, row.failed, row.swaps, seen);
  if (!row.first_error.empty()) {
    absl::PrintF("  first failure: %s\n", row.first_error);
  }
  if (row.connect_s > 1) {
    absl::PrintF("  (connecting the %d clients took %.1f s)\n", row.clients,
                 row.connect_s);
  }
}

int Main() {
  const int64_t n = absl::GetFlag(FLAGS_keys);
  const int batch = absl::GetFlag(FLAGS_batch);
  const int per = absl::GetFlag(FLAGS_keys_per_example);
  if (n < 1 || batch < 1 || per < 1) {
    Check(absl::InvalidArgumentError(
              "--keys, --batch and --keys_per_example must be at least 1"),
          "flags");
  }
  const std::string run_dir =
      RunDirOr(absl::GetFlag(FLAGS_run_dir), "serve_bench");
  const std::string bin_dir = BinDirOr(absl::GetFlag(FLAGS_bin_dir));
  const std::string path = run_dir + "/model.npz";
  const std::vector<uint64_t> keys = RandomKeys(n);
  const std::vector<std::string> files = ModelFiles(run_dir, keys);
  Check(WriteFileAtomically(path, files[0]), "write " + path);
  std::string address;
  std::unique_ptr<Subprocess> daemon =
      StartServe(bin_dir, run_dir, path, &address);

  const std::vector<proto::PredictRequest> requests =
      MakeRequests(keys, batch, per, 4096);
  const pid_t pid = daemon->pid();
  const double rss_loaded = MemoryMb(pid, "VmRSS");
  absl::PrintF(
      "serve_bench: the serve binary on %s (a subprocess), a model of %d "
      "keys (%.1f MB file), %d keys per example, batch %d, file swapped "
      "every %d ms, daemon --reload_interval_s %g --reload_nice %d; %g s per "
      "row, %d cores\n",
      address, keys.size(), files[0].size() / 1e6, per, batch,
      absl::GetFlag(FLAGS_swap_ms), absl::GetFlag(FLAGS_reload_interval_s),
      absl::GetFlag(FLAGS_reload_nice), absl::GetFlag(FLAGS_seconds),
      std::thread::hardware_concurrency());
  absl::PrintF("%8s %12s %12s %9s %9s %9s %7s %7s %10s\n", "clients",
               "requests/s", "examples/s", "p50 us", "p99 us", "p999 us",
               "failed", "swaps", "snapshots");
  for (int clients : ParseInts(absl::GetFlag(FLAGS_clients))) {
    PrintRow(RunRow(address, clients, requests, path, files), batch);
  }
  absl::PrintF(
      "snapshots: how many snapshots answered the row's requests (swaps "
      "the clients saw, +1); daemon log: %s\n",
      run_dir + "/serve.log");
  absl::PrintF(
      "daemon memory: RSS %.0f MB with the first snapshot loaded, %.0f MB "
      "now, peak %.0f MB (%.0f bytes a key at the peak)\n",
      rss_loaded, MemoryMb(pid, "VmRSS"), MemoryMb(pid, "VmHWM"),
      MemoryMb(pid, "VmHWM") * 1024 * 1024 / keys.size());
  daemon->Stop(absl::Seconds(10));
  return 0;
}

}  // namespace
}  // namespace downpour::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Predict latency and throughput of the serving daemon at 1, 8 and 64 "
      "clients while its model file is swapped; docs/SERVING.md.\n"
      "  bazel build -c opt //bench:serve_bench //serve && "
      "bazel-bin/bench/serve_bench");
  absl::ParseCommandLine(argc, argv);
  return downpour::bench::Main();
}
