// Outage tests: the only ps of a job is stopped (SIGSTOP) with no standby, with
// real coordinator, ps and worker processes on loopback. While the shard is
// unreachable the workers compute nothing and say what they wait for; after
// SIGCONT the job ends with every configured step applied once and a trained
// model. An outage longer than training.outage_timeout_s makes the workers
// exit 1 and the job is never declared done. They assert on what a client can
// observe (ClusterStatus, the workers' and the ps's Status, its Checksums),
// never on log text.
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/mnist.h"
#include "common/subprocess.h"
#include "common/testing/poll.h"
#include "coordinator/test_cluster.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "membership/coordinator_client.h"
#include "proto/ps.grpc.pb.h"
#include "proto/status.grpc.pb.h"
#include "rpc/server_util.h"
#include "tests/daemon_harness.h"

namespace downpour {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int kWorkers = 2;
constexpr int kSteps = 1500;  // per worker
constexpr int kBatch = 32;

class OutageTest : public testing::DaemonJobTest {
 protected:
  // A job of one ps and two workers, `kSteps` steps each, small model.
  // `name` keeps each job's coordinator state and checkpoints apart.
  // `fetch`: training.fetch.
  void WriteConfig(const std::string& name, double outage_timeout_s,
                   int steps = kSteps,
                   const std::string& fetch = "after_push") {
    const std::string dir = absl::StrCat(testing::TestDir(), "/", name);
    // Real MNIST where tests/run_all.sh provides it (synthetic blobs are
    // learnt perfectly, which makes the accuracy comparison weak).
    const std::string data =
        testing::MnistDir().empty()
            ? "data:\n  source: synthetic\n"
            : absl::StrCat("data:\n  source: mnist\n  path: ",
                           testing::MnistDir(), "\n");
    std::string yaml = testing::LoopbackConfig(
        1, kWorkers,
        absl::StrCat(
            data,
            "  train_examples: 3000\n  test_examples: 500\n"
            "model:\n  layers: [",
            kMnistDim, ", 32, ", kMnistClasses,
            "]\n"
            "optimizer:\n  type: adam\n  learning_rate: 0.001\n"
            "training:\n  batch_size: ",
            kBatch, "\n  fetch: ", fetch, "\n  steps: ", steps,
            "\n  eval_every_steps: 500\n  outage_timeout_s: ", outage_timeout_s,
            "\ncheckpoint:\n  dir: ", dir, "/ckpt\n  interval_s: 0\n"));
    // Short RPC deadlines, so that a stopped ps shows up as failed calls
    // within a second; this job's own coordinator state.
    yaml = absl::StrReplaceAll(
        yaml, {{"deadline_s: 5", "deadline_s: 1"},
               {absl::StrCat(testing::TestDir(), "/coordinator"),
                absl::StrCat(dir, "/coordinator")}});
    config_ = testing::WriteConfig(name + ".yaml", yaml);
  }

  // Starts the coordinator, the ps and the workers of the job in config_.
  void StartJob() {
    const std::string port_file = config_ + ".coordinator.port";
    Subprocess& c =
        Start("coordinator", "coordinator/coordinator",
              {"--port_file", port_file, "--set", "heartbeat.timeout_s=1"});
    auto address = testing::WaitForPort(c, port_file);
    ASSERT_TRUE(address.ok()) << address.status();
    coordinator_ = *address;
    Start("ps-0", "server/ps_server",
          {"--index", "0", "--coordinator", coordinator_});
    for (int i = 0; i < kWorkers; ++i) {
      Start(absl::StrCat("worker-", i), "worker/ps_worker",
            {"--index", absl::StrCat(i), "--coordinator", coordinator_});
    }
  }

  proto::ClusterStatusResponse Cluster() {
    RpcSection rpc;
    rpc.deadline_s = 2;
    membership::CoordinatorClient client(coordinator_, rpc, "test");
    auto status = client.ClusterStatus();
    return status.ok() ? *status : proto::ClusterStatusResponse();
  }

  const proto::MemberStatus* Member(const proto::ClusterStatusResponse& status,
                                    const std::string& role, int index) {
    return coordinator::FindMember(status, role, index);
  }

  // A daemon's own Status; nullopt when it does not answer.
  static std::optional<proto::GetStatusResponse> DaemonStatus(
      const std::string& address) {
    auto stub = proto::Status::NewStub(MakeChannel(address));
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(2));
    proto::GetStatusResponse response;
    if (!stub->GetStatus(&context, proto::GetStatusRequest(), &response).ok()) {
      return std::nullopt;
    }
    return response;
  }

  // The ps's block checksums and versions; empty when it does not answer.
  static proto::ChecksumResponse Checksums(const std::string& address) {
    auto stub = proto::ParameterServer::NewStub(MakeChannel(address));
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(2));
    proto::ChecksumResponse response;
    if (!stub->Checksums(&context, proto::ChecksumRequest(), &response).ok()) {
      return proto::ChecksumResponse();
    }
    return response;
  }

  static double Counter(const proto::GetStatusResponse& s,
                        const std::string& name) {
    auto it = s.counters().find(name);
    return it == s.counters().end() ? -1 : it->second;
  }

  bool WaitUntil(const std::function<bool()>& done, absl::Duration timeout) {
    return testing::WaitUntil(done, timeout, absl::Milliseconds(50));
  }

  bool WorkersAtStep(int step) {
    const auto status = Cluster();
    for (int i = 0; i < kWorkers; ++i) {
      const auto* m = Member(status, "worker", i);
      if (m == nullptr || m->report().step() < static_cast<uint64_t>(step))
        return false;
    }
    return true;
  }

  // Waits for every worker to exit; their exit statuses (-1: still running).
  std::vector<int> WorkerExits(absl::Duration timeout) {
    std::vector<int> exits;
    for (int i = 0; i < kWorkers; ++i) {
      const std::optional<int> status =
          daemons_[absl::StrCat("worker-", i)]->Wait(timeout);
      exits.push_back(status.value_or(-1));
    }
    return exits;
  }

  std::string coordinator_;
};

class StoppedShardTest : public OutageTest,
                         public ::testing::WithParamInterface<const char*> {};

// The fault users saw: the ps stopped for 15 s, the workers burned their step
// budget on stale parameters and the job ended "done" at accuracy 0.75. Now
// their step counters stand still while it is stopped, they say what they
// wait for, and after SIGCONT the job ends as an undisturbed one does: every
// configured step computed, pushed and acknowledged once, each applied once
// to every block, and a trained model. With fetch after_push each step also
// waits for its pull; with overlap only backpressure on pushes holds compute.
// The accuracy is held to a bar, not to an undisturbed run's: two async runs
// differ by a few points (0.873 and 0.920 were seen) whatever happened.
TEST_P(StoppedShardTest, HoldsTrainingAndTheJobEndsAsIfUndisturbed) {
  const std::string fetch = GetParam();
  WriteConfig("stopped", 300, kSteps, fetch);
  StartJob();
  // The workers' own Status, not the coordinator's heartbeat-old copy: a
  // worker runs about 1000 steps a second here, so a stop decided on a
  // heartbeat report could come after it had finished all of them.
  std::string worker[kWorkers];
  ASSERT_TRUE(WaitUntil(
      [&] {
        const auto status = Cluster();
        for (int i = 0; i < kWorkers; ++i) {
          const auto* m = Member(status, "worker", i);
          // Registered: before that the list shows the config's address.
          if (m == nullptr || !m->registered()) return false;
          worker[i] = m->address();
        }
        return true;
      },
      absl::Seconds(30)));
  ASSERT_TRUE(WaitUntil(
      [&] {
        for (int i = 0; i < kWorkers; ++i) {
          const auto s = DaemonStatus(worker[i]);
          if (!s.has_value() || Counter(*s, "step") < 100) return false;
        }
        return true;
      },
      absl::Seconds(30)));
  const std::string ps = Member(Cluster(), "ps", 0)->address();
  daemons_["ps-0"]->Signal(SIGSTOP);
  const absl::Time stopped = absl::Now();

  // Each worker's calls time out (rpc.deadline_s 1) and it starts waiting,
  // naming the shard.
  double held_step[kWorkers];
  for (int i = 0; i < kWorkers; ++i) {
    std::optional<proto::GetStatusResponse> s;
    ASSERT_TRUE(WaitUntil(
        [&] {
          s = DaemonStatus(worker[i]);
          return s.has_value() && !s->waiting_for().empty();
        },
        absl::Seconds(10)))
        << "worker " << i << " never said it waits";
    EXPECT_THAT(s->waiting_for(),
                StartsWith(absl::StrCat("ps 0 at ", ps, " (unreachable for ")));
    EXPECT_THAT(s->waiting_for(),
                HasSubstr("gives up after 300 s, training.outage_timeout_s"));
    EXPECT_EQ(Counter(*s, "waiting_for_ps"), 0);
    held_step[i] = Counter(*s, "step");
    // At most the step whose push is in flight and the one summed behind it
    // (n_push 1, max_pushes_in_flight 1) are ahead of what the ps acknowledged.
    EXPECT_LE(held_step[i] - Counter(*s, "pushed_steps"), 2) << "worker " << i;
  }
  // For 3 s more of waiting (several heartbeat timeouts: the coordinator
  // declares the ps dead), no worker computes a step.
  int moved = 0;
  ASSERT_TRUE(WaitUntil(
      [&] {
        bool all_waited = true;
        for (int i = 0; i < kWorkers; ++i) {
          const auto s = DaemonStatus(worker[i]);
          if (!s.has_value()) return false;
          if (Counter(*s, "step") != held_step[i]) ++moved;
          all_waited = all_waited && Counter(*s, "waiting_for_s") >= 3;
        }
        return all_waited;
      },
      absl::Seconds(20)));
  EXPECT_EQ(moved, 0)
      << "a worker computed steps while its only ps was stopped";
  {
    const auto status = Cluster();
    ASSERT_NE(Member(status, "ps", 0), nullptr);
    EXPECT_FALSE(Member(status, "ps", 0)->alive())
        << "the stop outlasted the heartbeat timeout";
  }
  daemons_["ps-0"]->Signal(SIGCONT);
  const double stop_s = absl::ToDoubleSeconds(absl::Now() - stopped);

  const std::vector<int> exits = WorkerExits(absl::Seconds(60));
  EXPECT_THAT(exits, ::testing::Each(0));
  const auto status = Cluster();
  EXPECT_THAT(status.stop_reason(), HasSubstr("every worker finished"));
  uint64_t pushes = 0;
  double accuracy = 0;
  for (int i = 0; i < kWorkers; ++i) {
    const auto* m = Member(status, "worker", i);
    ASSERT_NE(m, nullptr);
    EXPECT_TRUE(m->report().finished());
    // Exactly the configured steps, each pushed once and acknowledged:
    // applied, or refused by the push guard (counted apart, below).
    EXPECT_EQ(m->report().step(), static_cast<uint64_t>(kSteps))
        << "worker " << i;
    EXPECT_LE(m->report().pushes(), static_cast<uint64_t>(kSteps))
        << "worker " << i;
    EXPECT_EQ(m->report().examples(), m->report().pushes() * kBatch);
    pushes += m->report().pushes();
    accuracy += m->report().accuracy() / kWorkers;
  }
  // The ps applied each push exactly once (retries came back as duplicates),
  // and each to every block: its version counts the updates applied to it.
  // Except an outlier the push guard refused (robustness.norm_refuse_factor:
  // on synthetic data the loss falls near 0, and a worker's first gradients
  // after the stop can be 1000x the others'): the worker is told so
  // (PushResponse.refused), goes on, and does not count it as applied. The
  // workers' applied pushes are exactly the ps's; with the refused ones
  // they are every step.
  const auto ps_status = DaemonStatus(ps);
  ASSERT_TRUE(ps_status.has_value());
  // Absent (-1) until the guard first refused one.
  const double refused =
      std::max(0.0, Counter(*ps_status, "guard_refused_norm"));
  EXPECT_LE(refused, 0.01 * pushes) << "the guard refused honest workers";
  const double applied = Counter(*ps_status, "pushes");
  EXPECT_EQ(applied, static_cast<double>(pushes));
  EXPECT_EQ(applied + refused, static_cast<double>(kWorkers * kSteps));
  const proto::ChecksumResponse sums = Checksums(ps);
  ASSERT_GT(sums.blocks_size(), 0);
  for (const proto::BlockChecksum& block : sums.blocks()) {
    EXPECT_EQ(block.version(), applied) << "block " << block.block_id();
  }
  // A trained model, far from chance (0.1): undisturbed runs end at 0.87 to
  // 0.92 on real MNIST and near 1 on the synthetic data.
  EXPECT_GT(accuracy, 0.8);
  std::printf(
      "fetch %s: ps stopped %.1f s: workers held at steps %.0f and "
      "%.0f; %llu pushes acknowledged, %.0f applied to each of %d "
      "blocks, %.0f refused as outliers; final accuracy %.4f\n",
      fetch.c_str(), stop_s, held_step[0], held_step[1],
      static_cast<unsigned long long>(pushes), applied, sums.blocks_size(),
      refused, accuracy);
}

INSTANTIATE_TEST_SUITE_P(Fetch, StoppedShardTest,
                         ::testing::Values("after_push", "overlap"));

// An outage longer than training.outage_timeout_s: the workers give up and
// exit 1, and the coordinator never declares the job done, even once the ps is
// back (nobody trained the data parts to the end).
TEST_F(OutageTest, OutageLongerThanTheLimitFailsTheJob) {
  WriteConfig("too_long", /*outage_timeout_s=*/2, /*steps=*/1000000);
  StartJob();
  ASSERT_TRUE(WaitUntil([&] { return WorkersAtStep(100); }, absl::Seconds(30)));
  daemons_["ps-0"]->Signal(SIGSTOP);
  const absl::Time stopped = absl::Now();
  const std::vector<int> exits = WorkerExits(absl::Seconds(30));
  const double gave_up_s = absl::ToDoubleSeconds(absl::Now() - stopped);
  EXPECT_THAT(exits, ::testing::Each(1));
  {
    const auto status = Cluster();
    EXPECT_EQ(status.stop_reason(), "");
    for (int i = 0; i < kWorkers; ++i) {
      const auto* m = Member(status, "worker", i);
      ASSERT_NE(m, nullptr);
      EXPECT_FALSE(m->report().finished()) << "worker " << i;
    }
  }
  daemons_["ps-0"]->Signal(SIGCONT);
  // The ps heartbeats again (each heartbeat asks whether the job is done) and
  // both workers are declared dead: their parts have nowhere to go.
  ASSERT_TRUE(WaitUntil(
      [&] {
        const auto status = Cluster();
        const auto* ps = Member(status, "ps", 0);
        const auto* w0 = Member(status, "worker", 0);
        const auto* w1 = Member(status, "worker", 1);
        return ps != nullptr && ps->alive() && w0 != nullptr && !w0->alive() &&
               w1 != nullptr && !w1->alive();
      },
      absl::Seconds(20)));
  const auto status = Cluster();
  EXPECT_EQ(status.stop_reason(), "")
      << "a job whose workers gave up is not done";
  // Wait (deadline 1 s) + limit (2 s), with time to exit.
  EXPECT_LT(gave_up_s, 15);
  std::printf("outage_timeout_s 2: workers exited 1 after %.1f s\n", gave_up_s);
}

}  // namespace
}  // namespace downpour
