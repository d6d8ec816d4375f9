// sparse_budget: the ps memory budget against the attacks of issue 42, item 4,
// on real daemons (coordinator, one ps, one legitimate sparse worker).
//
//   bazel build -c opt //bench:sparse_budget //:daemons
//   bazel-bin/bench/sparse_budget                    # 60 s flood, 256 MiB
//   bazel-bin/bench/sparse_budget --budget_mb=0 --bin_dir=OLD/bazel-bin
//       # the same against daemons built without the budget (no key written)
//
// flood    worker 0 trains sparse_linear on generated LIBSVM data while a
//          client in the free worker slot 1 (bench/sparse_flood.h) pushes
//          fresh keys for --seconds. Every 10 s: the ps's VmRSS (from
//          /proc), its Status sparse_bytes, the flood's keys and worker 0's
//          step; then the peak RSS against the budget (target: within the
//          budget + 10 %) and the worker's steps during the flood.
// lookups  --lookups concurrent Lookups of one key repeated to fill a
//          message (64 MiB), three rounds; the ps's peak VmRSS (sampled
//          every 5 ms) before and during, and the replies by gRPC code.
// Exit 0 when the figures were taken (the targets are printed, not judged),
// 1 when a daemon failed, 2 for bad flags.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_util.h"
#include "bench/sparse_flood.h"
#include "common/file_util.h"
#include "common/subprocess.h"
#include "grpcpp/grpcpp.h"
#include "membership/coordinator_client.h"
#include "proto/ps.grpc.pb.h"
#include "proto/status.grpc.pb.h"
#include "rpc/server_util.h"

ABSL_FLAG(int, seconds, 60, "length of the flood");
ABSL_FLAG(int, budget_mb, 256,
          "eviction.memory_budget_mb of the ps (0: the key is not written, "
          "for daemons built without it)");
ABSL_FLAG(int, lookups, 16, "concurrent Lookups of repeated keys");
ABSL_FLAG(std::string, sections, "flood,lookups", "which phases to run");
ABSL_FLAG(std::string, bin_dir, "",
          "folder holding coordinator/, server/ and worker/ (default: the "
          "bazel-bin this binary is in)");
ABSL_FLAG(std::string, run_dir, "",
          "folder for the config, data and logs (default: a new "
          "/tmp/downpour-sparse_budget-XXXXXX)");

namespace downpour::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

// VmRSS of `pid` in MiB, 0 when unreadable.
double RssMib(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(in, line);) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "VmRSS:")) continue;
    rest = absl::StripAsciiWhitespace(rest);
    absl::ConsumeSuffix(&rest, "kB");
    int64_t kib = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &kib)) {
      return kib / 1024.0;
    }
  }
  return 0;
}

// LIBSVM rows over 3000 ids: 30 ids each, label +1 when more than 10 are of
// the "positive" third.
void WriteData(const std::string& path, int rows) {
  std::mt19937_64 rng(7);
  std::vector<uint64_t> ids(3000);
  for (uint64_t& id : ids) id = rng() >> 1;
  std::ofstream out(path);
  for (int r = 0; r < rows; ++r) {
    std::vector<uint64_t> row;
    int positive = 0;
    for (int j = 0; j < 30; ++j) {
      const size_t i = rng() % ids.size();
      positive += i % 3 == 0;
      row.push_back(ids[i]);
    }
    std::sort(row.begin(), row.end());
    row.erase(std::unique(row.begin(), row.end()), row.end());
    out << (positive > 10 ? "+1" : "-1");
    for (uint64_t id : row) out << " " << id << ":1";
    out << "\n";
  }
}

struct Cluster {
  std::string dir;
  std::string bin;
  std::unique_ptr<Subprocess> coordinator, ps, worker;
  std::string coordinator_address, ps_address;
};

absl::StatusOr<std::string> Launch(Cluster& c, const std::string& name,
                                   const std::string& binary,
                                   std::vector<std::string> args,
                                   std::unique_ptr<Subprocess>* out) {
  const std::string port_file = absl::StrCat(c.dir, "/", name, ".port");
  std::vector<std::string> argv = {c.bin + "/" + binary, "--config",
                                   c.dir + "/job.yaml"};
  argv.insert(argv.end(), args.begin(), args.end());
  if (!port_file.empty() && name != "worker") {
    argv.insert(argv.end(), {"--port_file", port_file});
  }
  auto started = Subprocess::Start(name, argv, c.dir + "/" + name + ".log");
  if (!started.ok()) return started.status();
  *out = *std::move(started);
  if (name == "worker") return std::string();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    if (auto status = (*out)->Poll()) {
      return absl::AbortedError(absl::StrCat(name, " exited with ", *status,
                                             ":\n", (*out)->LogTail(20)));
    }
    absl::StatusOr<std::string> text = ReadFile(port_file);
    int port = 0;
    if (text.ok() &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &port)) {
      return absl::StrCat("127.0.0.1:", port);
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(name + " did not listen");
}

absl::Status StartCluster(Cluster& c) {
  WriteData(c.dir + "/train.svm", 20000);
  const int budget = absl::GetFlag(FLAGS_budget_mb);
  std::ofstream(c.dir + "/job.yaml") << absl::StrCat(
      "cluster:\n  coordinator: 127.0.0.1:0\n  ps: [127.0.0.1:0]\n"
      "  workers: [127.0.0.1:0, 127.0.0.1:0]\n  replication: 1\n"
      "model:\n  type: sparse_linear\n  task: binary\n  sparse_buckets: 32\n"
      "data:\n  source: libsvm\n  path: ",
      c.dir,
      "/train.svm\n"
      "optimizer:\n  type: ftrl\n  learning_rate: 0.2\n"
      "training:\n  batch_size: 32\n  steps: 100000000\n"
      "checkpoint:\n  dir: ''\n"
      "heartbeat:\n  interval_s: 0.5\n  timeout_s: 10\n"
      "coordinator:\n  state_dir: ",
      c.dir, "/coordinator\n",
      budget > 0 ? absl::StrCat("eviction:\n  memory_budget_mb: ", budget, "\n")
                 : std::string());
  absl::StatusOr<std::string> a =
      Launch(c, "coordinator", "coordinator/coordinator",
             {"--listen", "127.0.0.1:0"}, &c.coordinator);
  if (!a.ok()) return a.status();
  c.coordinator_address = *a;
  a = Launch(c, "ps", "server/ps_server",
             {"--index", "0", "--coordinator", c.coordinator_address}, &c.ps);
  if (!a.ok()) return a.status();
  c.ps_address = *a;
  return Launch(c, "worker", "worker/ps_worker",
                {"--index", "0", "--coordinator", c.coordinator_address},
                &c.worker)
      .status();
}

// The ps's Status counter `name` (-1 when unanswered).
double PsCounter(const Cluster& c, const std::string& name) {
  auto stub = proto::Status::NewStub(MakeChannel(c.ps_address));
  proto::GetStatusRequest request;
  proto::GetStatusResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(2));
  if (!stub->GetStatus(&context, request, &response).ok()) return -1;
  auto it = response.counters().find(name);
  return it == response.counters().end() ? -1 : it->second;
}

// Worker 0's step as the coordinator last heard it (-1: unknown).
double WorkerStep(const Cluster& c) {
  RpcSection rpc;
  membership::CoordinatorClient client(c.coordinator_address, rpc, "bench");
  auto status = client.ClusterStatus();
  if (!status.ok()) return -1;
  for (const proto::MemberStatus& m : status->members()) {
    if (m.role() == "worker" && m.index() == 0) {
      return static_cast<double>(m.report().step());
    }
  }
  return -1;
}

void RunFlood(const Cluster& c) {
  const int seconds = absl::GetFlag(FLAGS_seconds);
  const int budget = absl::GetFlag(FLAGS_budget_mb);
  // Wait for the job to train before the flood starts.
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (WorkerStep(c) < 50 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  // The job's pace alone, for comparison.
  const double alone0 = WorkerStep(c);
  absl::SleepFor(absl::Seconds(10));
  const double rss0 = RssMib(c.ps->pid());
  const double step0 = WorkerStep(c);
  std::printf("worker 0 alone: %.1f steps/s over 10 s\n",
              (step0 - alone0) / 10);
  auto flood = SparseFlood::Start({c.coordinator_address, 1});
  CheckOrExit(flood.status(), "sparse_budget", "starting the flood");
  std::printf(
      "== flood: %d s of fresh keys from worker slot 1, budget %d MiB ==\n"
      "%6s %9s %12s %14s %12s\n",
      seconds, budget, "t_s", "rss_mib", "sparse_mib", "flood_keys",
      "worker_step");
  double peak = rss0;
  const SteadyClock::time_point start = SteadyClock::now();
  for (int t = 0; t <= seconds * 10; ++t) {
    peak = std::max(peak, RssMib(c.ps->pid()));
    if (t % 100 == 0) {
      std::printf("%6d %9.1f %12.1f %14lld %12.0f\n", t / 10,
                  RssMib(c.ps->pid()), PsCounter(c, "sparse_bytes") / 1048576,
                  static_cast<long long>((*flood)->figures().keys_sent),
                  WorkerStep(c));
      std::fflush(stdout);
    }
    std::this_thread::sleep_until(start + std::chrono::milliseconds(100 * t));
  }
  const SparseFlood::Figures f = (*flood)->Stop();
  const double step1 = WorkerStep(c);
  std::printf("ps rss at start %.1f MiB, peak %.1f MiB", rss0, peak);
  if (budget > 0) {
    std::printf(" = %.2f x the budget (target <= 1.10: %s)", peak / budget,
                peak <= budget * 1.1 ? "met" : "MISSED");
  }
  std::printf("\nflood: %lld pushes applied, %lld fresh keys; refused:",
              static_cast<long long>(f.pushes),
              static_cast<long long>(f.keys_sent));
  for (const auto& [code, n] : f.refused) {
    std::printf(" %s %lld", code.c_str(), static_cast<long long>(n));
  }
  std::printf(
      "\nps: sparse_rows %.0f, sparse_budget_evicted_rows %.0f, "
      "sparse_refused_keys %.0f\nworker 0: %.0f steps during the flood "
      "(%.0f/s)%s\n",
      PsCounter(c, "sparse_rows"), PsCounter(c, "sparse_budget_evicted_rows"),
      PsCounter(c, "sparse_refused_keys"), step1 - step0,
      (step1 - step0) / seconds,
      c.worker->Poll().has_value() ? " -- the worker EXITED" : "");
}

void RunLookups(const Cluster& c) {
  const int n = absl::GetFlag(FLAGS_lookups);
  // One key ps 0 holds (every bucket is its own), repeated to fill a
  // message just under 64 MiB.
  const std::vector<uint64_t> keys((kMaxMessageBytes - 64) / 8, 12345);
  proto::LookupRequest request;
  request.set_keys(keys.data(), keys.size() * sizeof(uint64_t));
  const double before = RssMib(c.ps->pid());
  std::atomic<bool> done{false};
  double peak = before;
  std::thread sampler([&] {
    while (!done.load()) {
      peak = std::max(peak, RssMib(c.ps->pid()));
      absl::SleepFor(absl::Milliseconds(5));
    }
  });
  std::map<std::string, int> codes;
  std::mutex codes_mu;
  for (int round = 0; round < 3; ++round) {
    std::vector<std::thread> clients;
    for (int i = 0; i < n; ++i) {
      clients.emplace_back([&] {
        // A channel each: one connection per client, as n attackers.
        auto stub = proto::ParameterServer::NewStub(
            MakeChannel(c.ps_address, /*fresh_connection=*/true));
        proto::LookupResponse response;
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() +
                             std::chrono::seconds(60));
        const grpc::Status s = stub->Lookup(&context, request, &response);
        std::lock_guard<std::mutex> lock(codes_mu);
        ++codes[absl::StatusCodeToString(
            static_cast<absl::StatusCode>(s.error_code()))];
      });
    }
    for (std::thread& t : clients) t.join();
  }
  done.store(true);
  sampler.join();
  std::printf(
      "== lookups: %d concurrent Lookups of one key x %zu (%.0f MiB each), "
      "3 rounds ==\nps rss before %.1f MiB, peak %.1f MiB (+%.1f)\nreplies:",
      n, keys.size(), keys.size() * 8 / 1048576.0, before, peak, peak - before);
  for (const auto& [code, count] : codes) {
    std::printf(" %s %d", code.c_str(), count);
  }
  std::printf("\n");
}

int Run() {
  const SteadyClock::time_point start = SteadyClock::now();
  Cluster c;
  c.dir = RunDirOr(absl::GetFlag(FLAGS_run_dir), "sparse_budget");
  c.bin = BinDirOr(absl::GetFlag(FLAGS_bin_dir));
  std::printf("run dir %s, daemons from %s\n", c.dir.c_str(), c.bin.c_str());
  CheckOrExit(StartCluster(c), "sparse_budget", "starting the cluster");
  const std::string sections = absl::GetFlag(FLAGS_sections);
  if (SectionOn(sections, "flood")) RunFlood(c);
  if (SectionOn(sections, "lookups")) RunLookups(c);
  for (auto* d : {&c.worker, &c.ps, &c.coordinator})
    (*d)->Stop(absl::Seconds(5));
  PrintTotal(start);
  return 0;
}

}  // namespace
}  // namespace downpour::bench

int main(int argc, char** argv) {
  return downpour::bench::ParseFlagsAndRun(argc, argv, &downpour::bench::Run);
}
