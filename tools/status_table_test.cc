#include "tools/status_table.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::tools {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(StatusTableTest, ShowsEveryMemberWithItsFigures) {
  proto::ClusterStatusResponse status;
  status.set_placement_epoch(3);
  proto::MemberStatus* ps = status.add_members();
  ps->set_role("ps");
  ps->set_address("127.0.0.1:7001");
  ps->set_registered(true);
  ps->set_alive(true);
  ps->mutable_report()->set_pushes(42);
  ps->mutable_report()->set_bytes(3.5e6);
  ps->mutable_report()->set_loss(NAN);
  proto::MemberStatus* worker = status.add_members();
  worker->set_role("worker");
  worker->set_index(1);
  worker->set_registered(true);
  worker->set_alive(false);
  worker->mutable_report()->set_accuracy(0.9512);
  worker->mutable_report()->set_loss(0.25);
  const std::string table = FormatStatusTable(status);
  EXPECT_THAT(table, HasSubstr("placement epoch 3"));
  EXPECT_THAT(table, HasSubstr("127.0.0.1:7001"));
  EXPECT_THAT(table, HasSubstr("3.5 MB"));
  EXPECT_THAT(table, HasSubstr("DEAD"));
  EXPECT_THAT(table, HasSubstr("0.9512"));
}

TEST(StatusTableTest, NamesTheWorkersThatJoinedOrWereDrained) {
  proto::ClusterStatusResponse status;
  for (int i = 0; i < 3; ++i) {
    proto::MemberStatus* w = status.add_members();
    w->set_role("worker");
    w->set_index(i);
    w->set_registered(true);
    w->set_alive(i != 1);
  }
  status.mutable_members(1)->set_drained(true);  // exited: not DEAD
  status.mutable_members(2)->set_joined(true);
  std::string table = FormatStatusTable(status);
  EXPECT_THAT(table, Not(HasSubstr("DEAD")));
  EXPECT_THAT(table,
              HasSubstr("worker 2 joined the running job (ps_worker --join)"));
  EXPECT_THAT(table, HasSubstr("worker 1 drained (psctl drain-worker): its "
                               "data parts went to the other workers; it "
                               "left"));
  EXPECT_THAT(table, Not(HasSubstr("worker 0 ")));
  status.mutable_members(2)->set_drained(true);
  EXPECT_THAT(FormatStatusTable(status),
              HasSubstr("worker 2 drained (psctl drain-worker): its data "
                        "parts went to the other workers; it is ending its "
                        "step"));
}

// A regression worker has no accuracy: the TEST column shows its rmse.
TEST(StatusTableTest, RegressionWorkersShowTheirRmse) {
  proto::ClusterStatusResponse status;
  proto::MemberStatus* worker = status.add_members();
  worker->set_role("worker");
  worker->set_registered(true);
  worker->set_alive(true);
  worker->mutable_report()->set_step(10);
  worker->mutable_report()->set_accuracy(NAN);
  (*worker->mutable_report()->mutable_metrics())["rmse"] = 53.7368;
  (*worker->mutable_report()->mutable_metrics())["r2"] = 0.455;
  EXPECT_EQ(TestFigure(worker->report()), 53.7368);
  EXPECT_THAT(FormatStatusTable(status), HasSubstr("53.7368"));
  proto::MemberReport classifier;
  classifier.set_accuracy(0.9);
  EXPECT_EQ(TestFigure(classifier), 0.9);
}

// Issue 25: a worker whose pushes all come back as duplicates is named.
TEST(StatusTableTest, NamesAWorkerWhosePushesAreAllDuplicates) {
  proto::ClusterStatusResponse status;
  proto::MemberStatus* worker = status.add_members();
  worker->set_role("worker");
  worker->set_index(2);
  worker->set_registered(true);
  worker->set_alive(true);
  worker->mutable_report()->set_duplicate_push_streak_s(1.5);
  EXPECT_THAT(FormatStatusTable(status), ::testing::Not(HasSubstr("duplicate")))
      << "a retry or two is normal";
  worker->mutable_report()->set_duplicate_push_streak_s(9.2);
  EXPECT_THAT(FormatStatusTable(status),
              HasSubstr("worker 2: every push of the last 9 s was answered as "
                        "a duplicate, so none was applied"));
}

TEST(StatusTableTest, ShowsTheDataEachStreamingWorkerRead) {
  proto::ClusterStatusResponse status;
  for (int i = 0; i < 2; ++i) {
    proto::MemberStatus* worker = status.add_members();
    worker->set_role("worker");
    worker->set_index(i);
    worker->set_registered(true);
  }
  EXPECT_THAT(FormatStatusTable(status), ::testing::Not(HasSubstr("data:")))
      << "in-memory data";
  status.mutable_members(1)->mutable_report()->set_data_bytes_read(1.2e9);
  status.mutable_members(1)->mutable_report()->set_data_bytes_total(4e9);
  EXPECT_THAT(FormatStatusTable(status),
              HasSubstr("\nworker 1 data: 1.20 GB of 4.00 GB read (30 %)\n"));
  EXPECT_THAT(FormatStatusTable(status),
              ::testing::Not(HasSubstr("worker 0 data")));
}

TEST(StatusTableTest, ShowsEachShardsBackupAndTheLoss) {
  proto::ClusterStatusResponse status;
  EXPECT_EQ(FormatBackups(status), "");  // replication 1, no recoveries
  status.set_replication_factor(2);
  auto* backed = status.add_shard_replication();
  backed->set_shard(0);
  backed->set_backup_standby(0);
  backed->set_backup_address("127.0.0.1:7201");
  backed->set_in_sync(true);
  backed->set_unreplicated_since(-1);
  auto* bare = status.add_shard_replication();
  bare->set_shard(1);
  bare->set_backup_standby(-1);
  bare->set_unreplicated_seconds(12.34);
  bare->set_unreplicated_since(3);
  auto* r = status.add_recoveries();
  r->set_shard(1);
  r->set_acked_pushes_lost(336);
  status.set_acked_pushes_lost(336);
  status.set_acked_loss_final(true);
  const std::string lines = FormatBackups(status);
  EXPECT_THAT(lines, HasSubstr("shard 0: standby 0 at 127.0.0.1:7201, in sync; "
                               "0.0 s unreplicated\n"));
  EXPECT_THAT(lines, HasSubstr("shard 1: NONE"));
  EXPECT_THAT(lines, HasSubstr("12.3 s unreplicated so far"));
  EXPECT_THAT(lines, HasSubstr("acknowledged pushes lost in 1 recoveries: 336 "
                               "(shard 1: 336)"));
  EXPECT_THAT(FormatStatusTable(status), HasSubstr("shard 1: NONE"));
}

TEST(StatusTableTest, ShowsBothBackupsWithReplication3) {
  proto::ClusterStatusResponse status;
  status.set_replication_factor(3);
  auto* both = status.add_shard_replication();
  both->set_shard(0);
  both->set_backup_standby(0);
  both->set_backup_address("h:1");
  both->add_backup_standbys(0);
  both->add_backup_addresses("h:1");
  both->add_backup_standbys(2);
  both->add_backup_addresses("h:3");
  both->set_backups_in_sync(1);
  both->set_unreplicated_since(-1);
  auto* one = status.add_shard_replication();
  one->set_shard(1);
  one->set_backup_standby(1);
  one->set_backup_address("h:2");
  one->add_backup_standbys(1);
  one->add_backup_addresses("h:2");
  one->set_in_sync(true);
  one->set_unreplicated_since(-1);
  const std::string lines = FormatBackups(status);
  EXPECT_THAT(lines, HasSubstr("shard 0: standbys 0 at h:1 and 2 at h:3 (1 of "
                               "2 in sync), syncing; 0.0 s unreplicated\n"));
  EXPECT_THAT(lines, HasSubstr("shard 1: standby 1 at h:2, in sync (1 of 2 "
                               "backups: no standby free); 0.0 s"));
}

TEST(StatusTableTest, FormatsBytes) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(2.5e9), "2.50 GB");
}

}  // namespace
}  // namespace downpour::tools
