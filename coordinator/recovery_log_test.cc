// RecoveryLog: what each take-over or restart of a shard lost, and when the
// figures are final.
#include "coordinator/recovery_log.h"

#include "common/testing/fake_clock.h"
#include "gtest/gtest.h"

namespace downpour::coordinator {
namespace {

Member Shard(int index, const std::string& address) {
  Member ps;
  ps.index = index;
  ps.address = address;
  ps.alive = ps.registered = true;
  return ps;
}

class RecoveryLogTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  RecoveryLog log_{&clock_, clock_.Now()};
};

TEST_F(RecoveryLogTest, ARestartWithItsFigureIsSettledAtOnce) {
  clock_.Advance(absl::Seconds(2));
  log_.Record(0, "a:1", "a:2", "restart", 100, 80);
  ASSERT_EQ(log_.recoveries().size(), 1u);
  const proto::ShardRecovery& r = log_.recoveries()[0];
  EXPECT_TRUE(r.settled());
  EXPECT_EQ(r.lost(), 20u);
  EXPECT_EQ(r.time_seconds(), 2);
  EXPECT_FALSE(r.loss_final());
  EXPECT_EQ(r.backup_in_sync_seconds(), -1);
}

TEST_F(RecoveryLogTest, ATakeOverIsSettledByItsNewServersReport) {
  log_.Record(1, "a:1", "b:1", "checkpoint", 50, std::nullopt);
  EXPECT_FALSE(log_.SettleApplied(1, "a:1", 10));  // the old server: no
  EXPECT_FALSE(log_.SettleApplied(0, "b:1", 10));  // another shard: no
  EXPECT_TRUE(log_.SettleApplied(1, "b:1", 45));
  EXPECT_EQ(log_.recoveries()[0].lost(), 5u);
  EXPECT_FALSE(log_.SettleApplied(1, "b:1", 40));  // settled once
}

TEST_F(RecoveryLogTest, AckedLossBecomesFinalWithTheLastReport) {
  log_.Record(0, "a:1", "b:1", "checkpoint", 50, std::nullopt);
  Member ps = Shard(0, "b:1");
  ps.report.set_acked_pushes_lost(3);
  ps.report.set_push_holes(2);
  EXPECT_FALSE(log_.SettleAckedLoss(ps, /*final=*/false));
  EXPECT_EQ(log_.recoveries()[0].acked_pushes_lost(), 3u);
  EXPECT_TRUE(log_.SettleAckedLoss(ps, /*final=*/true));
  EXPECT_EQ(log_.recoveries()[0].acked_pushes_lost(), 5u);
  EXPECT_TRUE(log_.recoveries()[0].loss_final());
  EXPECT_FALSE(log_.SettleAckedLoss(ps, /*final=*/true));  // already final
}

// Issue 42: a ps killed again before it wrote a newer checkpoint restores
// the same one, and its windows skip the sequences the previous restart
// already counted lost: "at least 342" were reported where 338 were lost.
// Each loss counts once.
TEST_F(RecoveryLogTest, TheSameCheckpointRestoredTwiceCountsItsLossOnce) {
  log_.Record(0, "a:1", "a:1", "restart", 500, 400);
  Member ps = Shard(0, "a:1");
  ps.report.set_acked_pushes_lost(30);  // skipped by restart 1's windows
  log_.SettleAckedLoss(ps, /*final=*/false);
  // Killed again; restored from the same checkpoint (400 updates): its
  // windows skip those 30 again, and 4 pushes that restart 1 applied.
  log_.Record(0, "a:1", "a:1", "restart", 410, 400);
  ps.report.set_acked_pushes_lost(34);
  log_.SettleAckedLoss(ps, /*final=*/true);
  // Killed a third time after a newer checkpoint (420): nothing recounted.
  log_.Record(0, "a:1", "a:1", "restart", 425, 420);
  ps.report.set_acked_pushes_lost(2);
  log_.SettleAckedLoss(ps, /*final=*/true);
  ASSERT_EQ(log_.recoveries().size(), 3u);
  EXPECT_EQ(log_.recoveries()[1].acked_pushes_recounted(), 30u);
  EXPECT_EQ(log_.recoveries()[1].acked_pushes_lost(), 4u);
  EXPECT_EQ(log_.recoveries()[2].acked_pushes_recounted(), 0u);
  proto::ClusterStatusResponse status;
  log_.AddStatus(&status);
  EXPECT_EQ(status.acked_pushes_lost(), 30u + 4u + 2u);
  // A take-over settled later restoring the same checkpoint as the change
  // before it recounts too.
  log_.Record(0, "a:1", "b:1", "checkpoint", 430, std::nullopt);
  log_.SettleApplied(0, "b:1", 420);
  EXPECT_EQ(log_.recoveries()[3].acked_pushes_recounted(), 2u);
}

TEST_F(RecoveryLogTest, ALostWorkerProcessMakesCheckpointLossesLowerBounds) {
  log_.Record(0, "a:1", "b:1", "checkpoint", 50, std::nullopt);
  log_.NoteWorkerProcessLost(2, 7);
  EXPECT_TRUE(log_.worker_pushes_uncountable());
  Member ps = Shard(0, "b:1");
  EXPECT_FALSE(log_.SettleAckedLoss(ps, /*final=*/true));
  EXPECT_FALSE(log_.recoveries()[0].loss_final());
  proto::ClusterStatusResponse status;
  log_.AddStatus(&status);
  EXPECT_FALSE(status.acked_loss_final());
}

TEST_F(RecoveryLogTest, OnlyTheLatestChangeOfAShardIsSettled) {
  log_.Record(0, "a:1", "b:1", "checkpoint", 50, std::nullopt);
  log_.Record(0, "b:1", "c:1", "replica", 60, std::nullopt);
  Member old_server = Shard(0, "b:1");
  old_server.report.set_acked_pushes_lost(9);
  EXPECT_FALSE(log_.SettleAckedLoss(old_server, /*final=*/false));
  EXPECT_EQ(log_.recoveries()[0].acked_pushes_lost(), 0u);
  EXPECT_TRUE(log_.recoveries()[1].loss_final());  // from a replica
}

TEST_F(RecoveryLogTest, BackupInSyncStampsOpenRecoveriesOnce) {
  log_.Record(0, "a:1", "b:1", "checkpoint", 50, std::nullopt);
  clock_.Advance(absl::Seconds(3));
  log_.NoteBackupInSync(0);
  clock_.Advance(absl::Seconds(3));
  log_.NoteBackupInSync(0);
  EXPECT_EQ(log_.recoveries()[0].backup_in_sync_seconds(), 3);
}

TEST_F(RecoveryLogTest, StatusTotalsAndStateRoundTrip) {
  log_.Record(0, "a:1", "b:1", "restart", 100, 90);
  log_.Record(1, "a:2", "b:2", "restart", 10, 5);
  log_.NoteWorkerProcessLost(0, 1);
  proto::ClusterStatusResponse status;
  log_.AddStatus(&status);
  EXPECT_EQ(status.recoveries_size(), 2);
  EXPECT_EQ(status.updates_lost(), 15u);

  proto::CoordinatorState state;
  log_.SaveTo(&state);
  RecoveryLog restored(&clock_, clock_.Now());
  restored.Restore(state);
  EXPECT_EQ(restored.recoveries().size(), 2u);
  EXPECT_TRUE(restored.worker_pushes_uncountable());
}

}  // namespace
}  // namespace downpour::coordinator
