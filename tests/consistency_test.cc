// training.consistency ssp and bsp with real coordinator, ps and worker
// processes on loopback: a stopped worker holds the others back no more than
// max_staleness pushes (ssp), and a bsp job finishes when a worker is killed in
// the middle of it. They assert on what a client observes (ClusterStatus, the
// ps's Status counters and Checksums, exit codes), never on log text.
#include <signal.h>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/subprocess.h"
#include "common/testing/poll.h"
#include "coordinator/test_cluster.h"
#include "gtest/gtest.h"
#include "membership/coordinator_client.h"
#include "proto/ps.grpc.pb.h"
#include "proto/status.grpc.pb.h"
#include "rpc/server_util.h"
#include "tests/daemon_harness.h"

namespace downpour {
namespace {

constexpr absl::Duration kDeadline = absl::Seconds(60);
// Long enough (a few seconds) for the stop and the kill to land mid-job.
constexpr int kSteps = 3000;

class ConsistencyTest : public testing::DaemonJobTest {
 protected:
  // One ps, `workers` workers, a small model on synthetic digits, `steps`
  // steps each, one push per step; `training` is appended to the training
  // section. Members are declared dead after `heartbeat_timeout_s` of
  // silence.
  void StartJob(int workers, const std::string& training,
                double heartbeat_timeout_s = 2, int steps = kSteps) {
    const std::string dir = testing::TestDir();
    const std::string yaml = testing::LoopbackConfig(
        1, workers,
        absl::StrCat("data:\n  source: synthetic\n  train_examples: 600\n"
                     "  test_examples: 100\n"
                     "model:\n  layers: [784, 16, 10]\n  block_size: 4096\n"
                     "optimizer:\n  type: sgd\n  learning_rate: 0.05\n"
                     "training:\n  batch_size: 16\n  steps: ",
                     steps, "\n  eval_every_steps: 0\n", training,
                     "compute:\n  device: cpu\n"
                     "checkpoint:\n  dir: ",
                     dir, "/ckpt\n"),
        heartbeat_timeout_s);
    config_ = testing::WriteConfig("job.yaml", yaml);
    const std::string port_file = dir + "/coordinator.port";
    Subprocess& c =
        Start("coordinator", "coordinator/coordinator",
              {"--listen", "127.0.0.1:0", "--port_file", port_file});
    auto address = testing::WaitForPort(c, port_file);
    ASSERT_TRUE(address.ok()) << address.status();
    coordinator_ = *address;
    Start("ps-0", "server/ps_server",
          {"--index", "0", "--coordinator", coordinator_});
    for (int i = 0; i < workers; ++i) {
      Start(absl::StrCat("worker-", i), "worker/ps_worker",
            {"--index", absl::StrCat(i), "--coordinator", coordinator_});
    }
  }

  proto::ClusterStatusResponse Status() {
    RpcSection rpc;
    rpc.deadline_s = 2;
    membership::CoordinatorClient client(coordinator_, rpc, "test");
    auto status = client.ClusterStatus();
    return status.ok() ? *status : proto::ClusterStatusResponse();
  }

  bool WaitUntil(const std::function<bool()>& done) {
    return testing::WaitUntil(done, kDeadline, absl::Milliseconds(50));
  }

  bool WorkerAtStep(int index, uint64_t step) {
    const auto status = Status();
    const auto* m = coordinator::FindMember(status, "worker", index);
    return m != nullptr && m->report().step() >= step;
  }

  std::string PsAddress() {
    const auto status = Status();
    const auto* m = coordinator::FindMember(status, "ps", 0);
    return m == nullptr ? "" : m->address();
  }

  // Counter `name` of the ps's Status service; -1 when unknown.
  double PsCounter(const std::string& name) {
    return testing::StatusCounter(PsAddress(), name);
  }

  // Every block's version on the ps (updates applied to it).
  std::vector<uint64_t> BlockVersions() {
    auto stub = proto::ParameterServer::NewStub(MakeChannel(PsAddress()));
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(5));
    proto::ChecksumResponse response;
    std::vector<uint64_t> versions;
    if (!stub->Checksums(&context, proto::ChecksumRequest(), &response).ok()) {
      return versions;
    }
    for (const auto& b : response.blocks()) versions.push_back(b.version());
    return versions;
  }

  // Waits for worker `i` to exit 0 with its training of `steps` steps
  // finished.
  void ExpectWorkerFinishes(int i, int steps = kSteps) {
    Subprocess& w = *daemons_[absl::StrCat("worker-", i)];
    const std::optional<int> exit = w.Wait(kDeadline);
    ASSERT_TRUE(exit.has_value()) << w.name() << " still running";
    EXPECT_EQ(*exit, 0) << w.LogTail(20);
    const auto status = Status();
    const auto* m = coordinator::FindMember(status, "worker", i);
    ASSERT_NE(m, nullptr);
    EXPECT_TRUE(m->report().finished()) << "worker " << i;
    EXPECT_EQ(m->report().step(), static_cast<uint64_t>(steps))
        << "worker " << i;
  }

  std::string coordinator_;
};

// Deterministic under load: worker 1 is stopped long before the job could
// end (a few hundred of 6000 steps), and it stays a member while stopped (no
// heartbeat timeout within the test), so worker 0, never more than
// max_staleness pushes ahead, runs into the gate within a few pushes however
// slowly anything runs. (With the default 2 s timeout, a loaded machine could
// see worker 1 declared dead before worker 0 reached the gate.)
TEST_F(ConsistencyTest, SspBoundsTheLeadOverAStoppedWorker) {
  constexpr int kSspSteps = 6000;
  StartJob(2, "  consistency: ssp\n  max_staleness: 2\n",
           /*heartbeat_timeout_s=*/600, kSspSteps);
  ASSERT_TRUE(
      WaitUntil([&] { return WorkerAtStep(1, 100) && WorkerAtStep(0, 100); }));
  const double waits = PsCounter("ssp_waits");
  ASSERT_GE(waits, 0) << "the ps's Status did not answer";
  daemons_["worker-1"]->Signal(SIGSTOP);
  ASSERT_FALSE(daemons_["worker-1"]->Poll().has_value())
      << "worker 1 ended before it was stopped: the job is too short";
  // Worker 0 runs into the gate: its push is held for worker 1.
  ASSERT_TRUE(WaitUntil([&] { return PsCounter("ssp_waits") > waits; }))
      << "worker 0 was never held for the stopped worker 1";
  daemons_["worker-1"]->Signal(SIGCONT);
  ExpectWorkerFinishes(0, kSspSteps);
  ExpectWorkerFinishes(1, kSspSteps);
  const double lead = PsCounter("ssp_max_lead");
  EXPECT_GE(lead, 0);
  EXPECT_LE(lead, 2);
  // Every step of both workers was pushed and applied once: one update per
  // block per step.
  const std::vector<uint64_t> versions = BlockVersions();
  ASSERT_FALSE(versions.empty());
  for (uint64_t v : versions) EXPECT_EQ(v, 2u * kSspSteps);
}

TEST_F(ConsistencyTest, BspFinishesWhenAWorkerIsKilledMidJob) {
  StartJob(3, "  consistency: bsp\n");
  ASSERT_TRUE(WaitUntil([&] { return WorkerAtStep(2, 100); }));
  daemons_["worker-2"]->Signal(SIGKILL);
  ASSERT_FALSE(WorkerAtStep(0, kSteps)) << "the job is too short for this test";
  // The others' rounds complete without it once the coordinator finds it dead.
  ExpectWorkerFinishes(0);
  ExpectWorkerFinishes(1);
  EXPECT_GT(PsCounter("bsp_rounds"), 0);
  // Each block got one update per round (workers 0 and 1 contribute to every
  // round from the moment both are active), so at least kSteps, and the same
  // number for every block: no round was lost or applied twice.
  const std::vector<uint64_t> versions = BlockVersions();
  ASSERT_FALSE(versions.empty());
  for (uint64_t v : versions) {
    EXPECT_GE(v, static_cast<uint64_t>(kSteps));
    EXPECT_EQ(v, versions[0]);
  }
}

}  // namespace
}  // namespace downpour
