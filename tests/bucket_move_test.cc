// Live bucket moves with real daemons (docs/OPERATIONS.md, "Moving
// buckets"): a coordinator, two ps with standbys and two workers train a
// sparse model while buckets move from ps 0 to ps 1; moves are interrupted by
// kill -9 of the source and of the destination during the copy. Each ends
// done or rolled back, the workers finish without a failed step, and the row
// updates the ps hold are exactly those the workers had acknowledged.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/poll.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "rpc/server_util.h"
#include "server/checkpoint.h"
#include "tests/fault_fixture.h"

namespace downpour {
namespace {

class BucketMoveTest : public FaultJobTest {
 protected:
  // The coordinator's MoveBuckets (what psctl move-buckets sends).
  absl::StatusOr<proto::MoveBucketsResponse> Move(
      const std::vector<uint32_t>& buckets, int to_shard) {
    auto stub = proto::Coordinator::NewStub(MakeChannel(coordinator_));
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(10));
    proto::MoveBucketsRequest request;
    request.mutable_buckets()->Add(buckets.begin(), buckets.end());
    request.set_to_shard(to_shard);
    request.set_drain_shard(-1);
    proto::MoveBucketsResponse response;
    const grpc::Status status = stub->MoveBuckets(&context, request, &response);
    if (!status.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          status.error_message());
    }
    return response;
  }

  // The buckets the placement gives `shard` now.
  std::vector<uint32_t> BucketsOf(int shard) {
    const proto::ShardInfo info = ShardInfoOf(shard);
    return {info.buckets().begin(), info.buckets().end()};
  }

  // Starts moving the first half of ps 0's buckets to ps 1; returns the move.
  proto::BucketMove MoveHalfOfShard0(std::vector<uint32_t>* moved) {
    const std::vector<uint32_t> held = BucketsOf(0);
    EXPECT_EQ(held.size(), 16u);
    moved->assign(held.begin(), held.begin() + held.size() / 2);
    absl::StatusOr<proto::MoveBucketsResponse> started = Move(*moved, 1);
    EXPECT_TRUE(started.ok()) << started.status();
    if (!started.ok() || started->started_size() != 1) return {};
    return started->started(0);
  }

  // Stops daemon `name` (the source "ps-0" or the destination "ps-1"), so
  // that the copy of a move of half of ps 0's buckets cannot finish, then
  // kills it: its standby takes the shard over and the move rolls back (ps 0
  // keeps its buckets), with nothing lost.
  void KillDuringTheCopyAndExpectRollBack(const std::string& name, int index) {
    ASSERT_NO_FATAL_FAILURE(StartReplicatedJobAndTrain(/*sparse=*/true, 100));
    const std::vector<uint32_t> held = BucketsOf(0);
    daemons_[name]->Signal(SIGSTOP);
    std::vector<uint32_t> moved;
    const proto::BucketMove move = MoveHalfOfShard0(&moved);
    ASSERT_GT(move.id(), 0u);
    EXPECT_EQ(PhaseOf(move.id()), "copy");
    KillAndRestart(name, index, /*standby=*/false, /*restart=*/false);
    ASSERT_TRUE(WaitUntil([&] { return PhaseOf(move.id()) == "rolled back"; },
                          absl::Seconds(60)))
        << "phase " << PhaseOf(move.id());
    EXPECT_EQ(BucketsOf(0), held) << "the source's shard keeps its buckets";
    ExpectWorkersFinish(2, 0.7);
    ExpectNoAcknowledgedRowUpdateLost(2);
  }

  // Moves half of ps 0's buckets to ps 1, stops daemon `name` (the source
  // "ps-0" or the destination "ps-1") the moment the placement switches and
  // kills it; its standby takes the shard over and the move must still
  // complete, with nothing lost.
  void KillAtTheSwitchAndExpectTheMoveDone(const std::string& name, int index) {
    ASSERT_NO_FATAL_FAILURE(StartReplicatedJobAndTrain(/*sparse=*/true, 100));
    std::vector<uint32_t> moved;
    const proto::BucketMove move = MoveHalfOfShard0(&moved);
    ASSERT_GT(move.id(), 0u);
    ASSERT_TRUE(testing::WaitUntil(
        [&] {
          const std::string phase = PhaseOf(move.id());
          return phase == "switched" || phase == "done";
        },
        absl::Seconds(60), absl::Milliseconds(2)));
    daemons_[name]->Signal(SIGSTOP);
    std::printf("%s was stopped %s the destination's last pass\n", name.c_str(),
                PhaseOf(move.id()) == "switched" ? "before" : "after");
    KillAndRestart(name, index, /*standby=*/false, /*restart=*/false);
    ASSERT_TRUE(WaitUntil([&] { return PhaseOf(move.id()) == "done"; },
                          absl::Seconds(60)))
        << "phase " << PhaseOf(move.id());
    EXPECT_TRUE(Holds(1, moved));
    ExpectWorkersFinish(2, 0.7);
    ExpectNoAcknowledgedRowUpdateLost(2);
  }

  // Starts a ps with --join, waits until it serves shard 2, and moves 4 of
  // shard 0's buckets to it; returns them (empty on a failure reported).
  std::vector<uint32_t> JoinAShardAndMoveBucketsToIt(Subprocess** joined) {
    *joined = &Start(
        "ps-joined", "server/ps_server",
        {"--join", "--listen", "127.0.0.1:0", "--coordinator", coordinator_});
    if (!WaitUntil([&] { return ShardInfoOf(2).index() == 2; },
                   absl::Seconds(30))) {
      ADD_FAILURE() << "no shard 2:\n" << (*joined)->LogTail(20);
      return {};
    }
    std::vector<uint32_t> moved = BucketsOf(0);
    moved.resize(4);
    // Under load the new shard may miss a heartbeat and be dead for a
    // moment; the coordinator refuses the move until it is back
    // (FAILED_PRECONDITION, "wait until it is back"), so ask again.
    absl::StatusOr<proto::MoveBucketsResponse> started;
    WaitUntil(
        [&] {
          started = Move(moved, 2);
          return !absl::IsFailedPrecondition(started.status());
        },
        absl::Seconds(30));
    if (!started.ok() || started->started_size() != 1) {
      ADD_FAILURE() << "move-buckets: " << started.status();
      return {};
    }
    const uint64_t id = started->started(0).id();
    if (!WaitUntil([&] { return PhaseOf(id) == "done"; }, absl::Seconds(60))) {
      ADD_FAILURE() << "move phase " << PhaseOf(id);
      return {};
    }
    return moved;
  }

  // Once the job is over and ps 2 heard so, stops the coordinator (as the
  // launcher does last) and expects `ps2`, not the launcher's, to end by
  // itself, exit 0.
  void ExpectEndsWithTheJob(Subprocess* ps2) {
    proto::ClusterStatusResponse over;
    ASSERT_TRUE(
        WaitUntil([&] { return (over = Status()).stop(); }, absl::Seconds(30)));
    // A heartbeat of ps 2 answered after that: its reply said stop.
    ASSERT_TRUE(WaitUntil(
        [&] {
          const proto::ClusterStatusResponse now = Status();
          const auto* m = coordinator::FindMember(now, "ps", 2);
          return m != nullptr &&
                 m->seconds_since_heartbeat() <
                     now.uptime_seconds() - over.uptime_seconds();
        },
        absl::Seconds(10)));
    daemons_["coordinator"]->Stop(absl::Seconds(10));
    const std::optional<int> status = ps2->Wait(absl::Seconds(30));
    ASSERT_TRUE(status.has_value())
        << ps2->name() << " still runs after the job ended:\n"
        << ps2->LogTail(20);
    EXPECT_EQ(*status, 0) << ps2->LogTail(20);
  }

  bool Holds(int shard, const std::vector<uint32_t>& buckets) {
    const std::vector<uint32_t> now = BucketsOf(shard);
    for (uint32_t b : buckets) {
      if (std::find(now.begin(), now.end(), b) == now.end()) return false;
    }
    return true;
  }
};

// Half of ps 0's buckets move to ps 1 while both workers train: the move
// completes, the placement gives ps 1 the buckets, the workers finish (no
// step failed: they exit 0), and no acknowledged row update is lost or
// applied twice.
TEST_F(BucketMoveTest, HalfAShardMovesWhileWorkersTrainAndNothingIsLost) {
  ASSERT_NO_FATAL_FAILURE(StartReplicatedJobAndTrain(/*sparse=*/true, 100));
  std::vector<uint32_t> moved;
  const proto::BucketMove move = MoveHalfOfShard0(&moved);
  ASSERT_GT(move.id(), 0u);
  const absl::Time started = absl::Now();
  ASSERT_TRUE(WaitUntil([&] { return PhaseOf(move.id()) == "done"; },
                        absl::Seconds(60)))
      << "the move never completed; phase " << PhaseOf(move.id());
  std::printf("move of %zu buckets done %.2f s after it started\n",
              moved.size(), absl::ToDoubleSeconds(absl::Now() - started));
  EXPECT_TRUE(Holds(1, moved));
  EXPECT_EQ(BucketsOf(0).size(), 8u);
  ExpectWorkersFinish(2, 0.7);
  ExpectNoAcknowledgedRowUpdateLost(2);
}

// A ps that joined the job (ps_server --join, not the launcher's) ends with
// it: once the coordinator said the job is over and then stops answering
// (the launcher stops it last), the ps writes its final checkpoint, with the
// rows of the buckets it took, and exits 0 on its own. Before, it carried on
// alone until someone killed it.
TEST_F(BucketMoveTest, AJoinedPsEndsWithTheJob) {
  ASSERT_NO_FATAL_FAILURE(StartReplicatedJobAndTrain(/*sparse=*/true, 100));
  Subprocess* joined = nullptr;
  ASSERT_FALSE(JoinAShardAndMoveBucketsToIt(&joined).empty());
  ExpectWorkersFinish(2, 0.7);
  ASSERT_NO_FATAL_FAILURE(ExpectEndsWithTheJob(joined));
  absl::StatusOr<server::Checkpoint> final =
      server::ReadNewestCheckpoint(dir_ + "/ckpt", 2);
  ASSERT_TRUE(final.ok()) << final.status();
  ASSERT_FALSE(final->sparse_tables.empty());
  EXPECT_GT(final->sparse_tables[0].second.keys.size(), 0u)
      << "the final checkpoint holds the rows of the buckets it took";
}

// A ps that joined and died, with no standby to take its shard over, comes
// back as its shard with --index N (N beyond cluster.ps: the coordinator
// knows the shard from the join) and --listen: it loads the shard's
// checkpoint, serves its buckets again, and the workers finish. Before,
// ps_server refused any --index beyond cluster.ps, so a joined shard without
// a backup could not be served again at all.
TEST_F(BucketMoveTest, AJoinedPsRestartedWithItsIndexServesItsShardAgain) {
  // No standby: one would take the dead shard over from its checkpoint.
  WriteSparseConfig(/*ps=*/2, /*standbys=*/0, /*workers=*/2, /*epochs=*/100);
  StartCoordinator();
  StartPs(0);
  StartPs(1);
  StartWorker(0);
  StartWorker(1);
  ASSERT_TRUE(WaitUntil([&] { return WorkerAtStep(0, 100); }));
  Subprocess* joined = nullptr;
  const std::vector<uint32_t> moved = JoinAShardAndMoveBucketsToIt(&joined);
  ASSERT_FALSE(moved.empty());
  const std::string old_address = ShardAddress(2);
  joined->Signal(SIGKILL);
  // Declared dead: its lease is over, so the restart takes the shard back
  // (not a spare's place).
  ASSERT_TRUE(WaitUntil(
      [&] {
        const proto::ClusterStatusResponse status = Status();
        const auto* m = coordinator::FindMember(status, "ps", 2);
        return m != nullptr && !m->alive();
      },
      absl::Seconds(30)));
  const std::string port_file = dir_ + "/ps-2-again.port";
  Subprocess& again =
      Start("ps-joined-again", "server/ps_server",
            {"--index", "2", "--listen", "127.0.0.1:0", "--coordinator",
             coordinator_, "--port_file", port_file});
  absl::StatusOr<std::string> address = testing::WaitForPort(again, port_file);
  ASSERT_TRUE(address.ok()) << address.status() << again.LogTail(20);
  ASSERT_NE(*address, old_address);
  ASSERT_TRUE(WaitUntil([&] { return ShardInfoOf(2).address() == *address; },
                        absl::Seconds(30)))
      << again.LogTail(20);
  EXPECT_TRUE(Holds(2, moved));
  ExpectWorkersFinish(2, 0.7);
  // Restarted by hand, it is not the launcher's either.
  ExpectEndsWithTheJob(&again);
}

// The source is stopped, so the copy cannot finish, then killed: its standby
// takes shard 0 over from its replica and the move rolls back (ps 0 keeps
// the buckets); training goes on and loses nothing.
TEST_F(BucketMoveTest, KilledSourceDuringTheCopyRollsTheMoveBack) {
  KillDuringTheCopyAndExpectRollBack("ps-0", 0);
}

// The same with the destination stopped and killed: its standby takes shard
// 1 over, the move rolls back, and the rows it had copied are dropped.
TEST_F(BucketMoveTest, KilledDestinationDuringTheCopyRollsTheMoveBack) {
  KillDuringTheCopyAndExpectRollBack("ps-1", 1);
}

// The coordinator is killed while the copy waits on a stopped destination
// and restarted from its state file on the same port: the move rolls back
// (a copy is never resumed by a coordinator that restarted), the destination
// drops what it copied once it runs again, and nothing is lost.
TEST_F(BucketMoveTest, RestartedCoordinatorRollsACopyBack) {
  ASSERT_NO_FATAL_FAILURE(StartReplicatedJobAndTrain(/*sparse=*/true, 100));
  const std::vector<uint32_t> held = BucketsOf(0);
  daemons_["ps-1"]->Signal(SIGSTOP);
  std::vector<uint32_t> moved;
  const proto::BucketMove move = MoveHalfOfShard0(&moved);
  ASSERT_GT(move.id(), 0u);
  daemons_["coordinator"]->Signal(SIGKILL);
  daemons_["coordinator"]->Wait(absl::Seconds(5));
  daemons_.erase("coordinator");
  const std::string port = coordinator_.substr(coordinator_.rfind(':') + 1);
  StartCoordinator("127.0.0.1:" + port);
  daemons_["ps-1"]->Signal(SIGCONT);
  ASSERT_TRUE(WaitUntil([&] { return PhaseOf(move.id()) == "rolled back"; },
                        absl::Seconds(60)))
      << "phase " << PhaseOf(move.id());
  EXPECT_EQ(BucketsOf(0), held);
  ExpectWorkersFinish(2, 0.7);
  ExpectNoAcknowledgedRowUpdateLost(2);
}

// A switched move never rolls back. The source is stopped the moment the
// placement switches (the destination cannot take its last pass from a
// stopped process), then killed: its standby takes shard 0 over from its
// replica, which holds the moved rows, and the destination takes the last
// pass from the standby. The move completes and nothing is lost. When the
// poll sees the move done already (the last pass won the race), the test says
// so and checks the same outcome.
TEST_F(BucketMoveTest, KilledSourceAfterTheSwitchStillCompletes) {
  KillAtTheSwitchAndExpectTheMoveDone("ps-0", 0);
}

// The same with the destination stopped at the switch and killed: its
// standby takes shard 1 over and, serving the switched epoch, copies every
// row of the move again from the source, which keeps them until the move is
// done.
TEST_F(BucketMoveTest, KilledDestinationAfterTheSwitchStillCompletes) {
  KillAtTheSwitchAndExpectTheMoveDone("ps-1", 1);
}

// A standby is killed, so a shard runs without a backup; a spare started with
// ps_server --spare and `psctl add-standby` (which waits until it is in sync)
// give the shard an in-sync backup again while the workers train.
TEST_F(BucketMoveTest, AddedStandbyBacksUpAShardThatLostItsBackup) {
  ASSERT_NO_FATAL_FAILURE(StartReplicatedJobAndTrain(/*sparse=*/true, 100));
  KillAndRestart("standby-0", 0, /*standby=*/true, /*restart=*/false);
  ASSERT_TRUE(
      WaitUntil([&] { return !AllShardsBackedUp(2); }, absl::Seconds(30)))
      << "no shard lost its backup";
  const std::string port_file = dir_ + "/spare.port";
  Subprocess& spare =
      Start("spare", "server/ps_server",
            {"--spare", "--listen", "127.0.0.1:0", "--coordinator",
             coordinator_, "--port_file", port_file});
  auto address = testing::WaitForPort(spare, port_file);
  ASSERT_TRUE(address.ok()) << address.status();
  const std::string log = dir_ + "/add-standby.log";
  const int status = testing::RunToEnd(
      {testing::BinDir() + "/tools/psctl", "add-standby", *address,
       "--coordinator", coordinator_, "--wait_s", "60"},
      log);
  const std::string output = testing::ReadText(log);
  EXPECT_EQ(status, 0) << output;
  EXPECT_THAT(output, ::testing::HasSubstr("holds an in-sync copy of shard"));
  std::printf("%s", output.c_str());
  EXPECT_TRUE(AllShardsBackedUp(2));
  ExpectWorkersFinish(2, 0.7);
  ExpectNoAcknowledgedRowUpdateLost(2);
}

// Hostile requests change nothing: a bucket beyond model.sparse_buckets, a
// shard that does not exist, buckets the destination holds already.
TEST_F(BucketMoveTest, BadMovesAreRefusedWithTheReason) {
  ASSERT_NO_FATAL_FAILURE(StartReplicatedJobAndTrain(/*sparse=*/true, 20));
  const uint64_t epoch = Status().placement_epoch();
  EXPECT_EQ(Move({32}, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(Move({BucketsOf(0)[0]}, 7).ok());
  EXPECT_FALSE(Move({BucketsOf(1)[0]}, 1).ok());
  EXPECT_EQ(Status().placement_epoch(), epoch);
  EXPECT_EQ(Status().bucket_moves_size(), 0);
}

}  // namespace
}  // namespace downpour
