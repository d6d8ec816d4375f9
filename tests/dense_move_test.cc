// Live moves of dense blocks with real daemons (issue 43; docs/OPERATIONS.md,
// "Growing and shrinking the ps set"): the MNIST MLP trains on two ps with
// standbys and two workers while `psctl drain-ps 1` moves every block of
// shard 1 to shard 0, and, in the fault tests, the source or the destination
// is SIGKILLed the moment the placement switches (its standby takes the shard
// over and the move still completes). The workers finish without a failed
// step, and every block holds exactly the pushes the workers had
// acknowledged: none lost, none applied twice.
#include <signal.h>

#include <cstdio>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/poll.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/server_util.h"
#include "tests/fault_fixture.h"

namespace downpour {
namespace {

using ::testing::HasSubstr;

class DenseMoveTest : public FaultJobTest {
 protected:
  std::vector<uint32_t> BlocksOf(int shard) {
    const proto::ShardInfo info = ShardInfoOf(shard);
    return {info.block_ids().begin(), info.block_ids().end()};
  }

  // Runs `psctl drain-ps 1` to its end: its exit status, its output in *out.
  int DrainShard1(std::string* out) {
    const std::string log = dir_ + "/drain-ps.log";
    const int status =
        testing::RunToEnd({testing::BinDir() + "/tools/psctl", "drain-ps", "1",
                           "--coordinator", coordinator_, "--wait_s", "90"},
                          log);
    *out = testing::ReadText(log);
    std::printf("%s", out->c_str());
    return status;
  }

  // Once the workers finished: each block, asked of the ps serving it now,
  // holds exactly the pushes the workers acknowledged (each whole push
  // updates every block once), and every block is served by one ps.
  void ExpectEveryBlockHoldsEveryAcknowledgedPush(size_t blocks) {
    const proto::ClusterStatusResponse status = Status();
    uint64_t pushes = 0;
    for (const auto& m : status.members()) {
      if (m.role() == "worker") pushes += m.report().pushes();
    }
    ASSERT_GT(pushes, 0u);
    std::set<uint32_t> seen;
    const proto::GetPlacementResponse placement = Placement();
    for (const proto::ShardInfo& info : placement.shards()) {
      auto stub = proto::ParameterServer::NewStub(MakeChannel(info.address()));
      grpc::ClientContext context;
      context.set_deadline(DeadlineIn(5));
      proto::ChecksumResponse sums;
      ASSERT_TRUE(
          stub->Checksums(&context, proto::ChecksumRequest(), &sums).ok());
      std::set<uint32_t> held;
      for (const proto::BlockChecksum& b : sums.blocks()) {
        held.insert(b.block_id());
        EXPECT_TRUE(seen.insert(b.block_id()).second)
            << "block " << b.block_id() << " is held by two ps";
        EXPECT_EQ(b.version(), pushes)
            << "shard " << info.index() << " block " << b.block_id()
            << ": its version counts the pushes applied to it";
      }
      EXPECT_EQ(held, std::set<uint32_t>(info.block_ids().begin(),
                                         info.block_ids().end()))
          << "shard " << info.index() << " holds other blocks than placed";
    }
    EXPECT_EQ(seen.size(), blocks);
  }

  // Drains shard 1 while the workers train; SIGSTOPs daemon `name` (the
  // source "ps-1" or the destination "ps-0") the moment the placement
  // switches and SIGKILLs it: its standby takes the shard over and the move
  // must still complete, with nothing lost.
  void KillAtTheSwitchAndExpectTheMoveDone(const std::string& name) {
    ASSERT_NO_FATAL_FAILURE(StartReplicatedJobAndTrain(/*sparse=*/false, 100));
    const size_t blocks = BlocksOf(0).size() + BlocksOf(1).size();
    const uint64_t epoch = Placement().epoch();
    std::string output;
    std::thread drain([&] { DrainShard1(&output); });
    const bool switched =
        testing::WaitUntil([&] { return Placement().epoch() > epoch; },
                           absl::Seconds(60), absl::Milliseconds(2));
    daemons_[name]->Signal(SIGSTOP);
    std::printf("%s was stopped %s the destination's last pass\n", name.c_str(),
                PhaseOf(1) == "done" ? "after" : "before");
    drain.join();  // waits for the move to complete, through the take-over
    ASSERT_TRUE(switched) << "the placement never switched";
    const int index = name == "ps-0" ? 0 : 1;
    KillAndRestart(name, index, /*standby=*/false, /*restart=*/false);
    EXPECT_THAT(output, HasSubstr("holds no buckets and no dense blocks now"));
    EXPECT_TRUE(BlocksOf(1).empty());
    ExpectWorkersFinish(2, 0.7);
    ExpectEveryBlockHoldsEveryAcknowledgedPush(blocks);
  }
};

// Every dense block of shard 1 moves to shard 0 while both workers train:
// drain-ps ends 0, shard 1 holds no block, the workers finish (no step
// failed: they exit 0), and no acknowledged push is lost or applied twice.
TEST_F(DenseMoveTest, DrainMovesEveryBlockWhileWorkersTrainAndLosesNothing) {
  ASSERT_NO_FATAL_FAILURE(StartReplicatedJobAndTrain(/*sparse=*/false, 100));
  const std::vector<uint32_t> moving = BlocksOf(1);
  ASSERT_FALSE(moving.empty());
  const size_t blocks = BlocksOf(0).size() + moving.size();
  // Steps/s of both workers over a window (a figure, not a condition: the
  // reports come with the heartbeats).
  const auto steps = [&] {
    uint64_t sum = 0;
    const proto::ClusterStatusResponse status = Status();
    for (const auto& m : status.members()) {
      if (m.role() == "worker") sum += m.report().step();
    }
    return static_cast<double>(sum);
  };
  const absl::Duration window = absl::Seconds(3);
  const double before0 = steps();
  absl::SleepFor(window);
  const double before1 = steps();
  std::string output;
  const absl::Time started = absl::Now();
  EXPECT_EQ(DrainShard1(&output), 0) << output;
  const double took = absl::ToDoubleSeconds(absl::Now() - started);
  const double after0 = steps();
  absl::SleepFor(window);
  const double after1 = steps();
  const double seconds = absl::ToDoubleSeconds(window);
  std::printf(
      "drain of %zu dense blocks took %.2f s; workers' steps/s: %.0f in the "
      "%.0f s before, %.0f during the drain, %.0f in the %.0f s after\n",
      moving.size(), took, (before1 - before0) / seconds, seconds,
      (after0 - before1) / took, (after1 - after0) / seconds, seconds);
  EXPECT_THAT(output, HasSubstr("dense blocks"));
  EXPECT_THAT(output, HasSubstr("holds no buckets and no dense blocks now"));
  EXPECT_TRUE(BlocksOf(1).empty());
  EXPECT_EQ(BlocksOf(0).size(), blocks);
  ExpectWorkersFinish(2, 0.7);
  ExpectEveryBlockHoldsEveryAcknowledgedPush(blocks);
}

// The source is stopped at the switch and killed: its standby serves shard 1
// from its replica, which holds the moved blocks as the source last served
// them, and the destination takes its last pass from the standby.
TEST_F(DenseMoveTest, KilledSourceAtTheSwitchStillCompletes) {
  KillAtTheSwitchAndExpectTheMoveDone("ps-1");
}

// The destination is stopped at the switch and killed: its standby takes
// shard 0 over and, serving the switched epoch, copies the blocks again from
// the source, which keeps them until the move is done.
TEST_F(DenseMoveTest, KilledDestinationAtTheSwitchStillCompletes) {
  KillAtTheSwitchAndExpectTheMoveDone("ps-0");
}

}  // namespace
}  // namespace downpour
