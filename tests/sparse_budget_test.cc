// The ps memory budget with real daemons (issue 42, item 4): a sparse_linear
// job trains on worker 0 while a client in the free worker slot 1 floods
// both ps with fresh keys (bench/sparse_flood.h). Asserts on what a client
// observes: each ps's Status (sparse_bytes against sparse_budget_bytes, the
// budget's evictions), the worker's exit, and a Lookup of every key the job
// trained, polled with deadlines.
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/sparse_flood.h"
#include "common/subprocess.h"
#include "common/testing/poll.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/server_util.h"
#include "tests/daemon_harness.h"

namespace downpour {
namespace {

constexpr int kBudgetMb = 16;  // the tables of each ps: 8 MiB
constexpr absl::Duration kLong = absl::Seconds(120);

// The feature ids of a LIBSVM file ("label id:value ...").
std::set<uint64_t> FeatureIds(const std::string& path) {
  std::set<uint64_t> ids;
  std::ifstream in(path);
  std::string token;
  while (in >> token) {
    const size_t colon = token.find(':');
    if (colon != std::string::npos) {
      ids.insert(std::stoull(token.substr(0, colon)));
    }
  }
  return ids;
}

class SparseBudgetTest : public testing::DaemonJobTest {
 protected:
  void SetUp() override {
    dir_ = testing::TestDir();
    testing::WriteSparseLibsvm(dir_ + "/train.svm", 4000, 1);
    testing::WriteSparseLibsvm(dir_ + "/test.svm", 500, 2);
    // Two worker slots; only worker 0 runs: slot 1 is the attacker's.
    config_ = testing::WriteConfig(
        "job.yaml",
        testing::LoopbackConfig(
            2, 2,
            absl::StrCat("data:\n  source: libsvm\n  path: ", dir_,
                         "/train.svm\n  test_path: ", dir_,
                         "/test.svm\n"
                         "model:\n  type: sparse_linear\n  task: binary\n"
                         "  sparse_buckets: 32\n"
                         "optimizer:\n  type: ftrl\n  learning_rate: 0.2\n"
                         "training:\n  batch_size: 32\n  steps: 1500\n"
                         "eviction:\n  memory_budget_mb: ",
                         kBudgetMb, "\n")));
  }

  std::string StartDaemon(const std::string& name, const std::string& binary,
                          std::vector<std::string> args) {
    const std::string port_file = absl::StrCat(dir_, "/", name, ".port");
    args.insert(args.end(), {"--port_file", port_file});
    Subprocess& d = Start(name, binary, args);
    auto address = testing::WaitForPort(d, port_file);
    EXPECT_TRUE(address.ok()) << address.status();
    return address.ok() ? *address : "";
  }

  // How many of `keys` no ps holds a row for (each asked of both: the one
  // whose buckets hold it answers).
  int MissingRows(const std::vector<std::string>& ps,
                  const std::set<uint64_t>& keys) {
    int missing = 0;
    for (uint64_t key : keys) {
      bool held = false;
      for (const std::string& address : ps) {
        auto stub = proto::ParameterServer::NewStub(MakeChannel(address));
        proto::LookupRequest request;
        request.set_keys(&key, sizeof(key));
        proto::LookupResponse response;
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() +
                             std::chrono::seconds(10));
        if (stub->Lookup(&context, request, &response).ok() &&
            response.missing() == std::string(1, '\0')) {
          held = true;
        }
      }
      missing += !held;
    }
    return missing;
  }

  std::string dir_;
};

// The flood fills each ps's tables to its budget and evicts its own rows;
// sparse_bytes never passes sparse_budget_bytes, the job finishes, and every
// key it trained still has its row.
TEST_F(SparseBudgetTest,
       AFloodOfFreshKeysStaysWithinTheBudgetAndTrainingGoesOn) {
  const std::string coordinator = StartDaemon(
      "coordinator", "coordinator/coordinator", {"--listen", "127.0.0.1:0"});
  std::vector<std::string> ps;
  for (int i = 0; i < 2; ++i) {
    ps.push_back(StartDaemon(
        absl::StrCat("ps-", i), "server/ps_server",
        {"--index", absl::StrCat(i), "--coordinator", coordinator}));
  }
  ASSERT_FALSE(coordinator.empty() || ps[0].empty() || ps[1].empty());
  Subprocess& worker = Start("worker-0", "worker/ps_worker",
                             {"--index", "0", "--coordinator", coordinator});
  auto flood = bench::SparseFlood::Start({coordinator, /*worker_id=*/1});
  ASSERT_TRUE(flood.ok()) << flood.status();

  const double budget = testing::LiveCounter(ps[0], "sparse_budget_bytes");
  EXPECT_EQ(budget, (kBudgetMb << 20) / 2) << "half of the budget";
  double most = 0;
  auto within = [&] {
    bool evicting = true;
    for (const std::string& address : ps) {
      most = std::max(most, testing::StatusCounter(address, "sparse_bytes"));
      evicting = evicting &&
                 testing::StatusCounter(address, "sparse_budget_evicted_rows") >
                     100000;
    }
    return evicting;
  };
  // Ends at once when the budget is passed (without it the flood would take
  // gigabytes within the deadline).
  ASSERT_TRUE(testing::WaitUntil([&] { return within() || most > budget; },
                                 kLong, absl::Milliseconds(20)))
      << "the flood never filled the budget: " << flood->get()->figures().pushes
      << " pushes, last error " << flood->get()->figures().last_error;
  ASSERT_LE(most, budget) << "sparse_bytes passed the budget's half";

  // Training goes on to its end while the flood goes on.
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        within();
        return most > budget || worker.Wait(absl::ZeroDuration()).has_value();
      },
      kLong, absl::Milliseconds(20)))
      << "the worker still runs";
  ASSERT_LE(most, budget) << "sparse_bytes passed the budget's half";
  EXPECT_EQ(worker.Wait(absl::ZeroDuration()).value_or(-1), 0)
      << worker.LogTail(20);
  EXPECT_EQ(MissingRows(ps, FeatureIds(dir_ + "/train.svm")), 0)
      << "rows the job kept touching were evicted by the flood";
  const bench::SparseFlood::Figures f = flood->get()->Stop();
  EXPECT_EQ(f.refused.count("RESOURCE_EXHAUSTED"), 0u)
      << "the flood's own rows make room for it: " << f.last_error;
  std::printf(
      "flood: %lld pushes, %lld fresh keys; sparse_bytes at most %.0f of "
      "%.0f\n",
      static_cast<long long>(f.pushes), static_cast<long long>(f.keys_sent),
      most, budget);
}

}  // namespace
}  // namespace downpour
