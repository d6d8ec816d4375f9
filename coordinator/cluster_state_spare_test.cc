// ClusterState with spares: restarted ps rejoining as spares, backups,
// outages and the loss a take-over costs.
#include "coordinator/cluster_state.h"
#include "coordinator/cluster_state_test_fixture.h"
#include "gtest/gtest.h"

namespace downpour::coordinator {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class SpareTest : public ClusterStateTest {
 protected:
  // A ps whose shard is served elsewhere rejoins as a spare at `address`;
  // returns its standby slot.
  int RegisterSpare(const std::string& address, int former_shard) {
    proto::RegisterServerRequest request;
    request.set_index(-1);
    request.set_address(address);
    request.set_standby(true);
    request.set_spare(true);
    request.set_former_shard(former_shard);
    auto response =
        AfterTheLease([&] { return state_->RegisterServer(request); });
    EXPECT_THAT(response, IsOk());
    if (!response.ok()) return -1;
    Remember("standby", response->standby_index(), address,
             response->member_key(), response->incarnation());
    return response->standby_index();
  }

  static proto::HeartbeatRequest Replicated(proto::HeartbeatRequest beat) {
    beat.mutable_report()->set_replicated(true);
    return beat;
  }

  // ps 0 at :1 and ps 1 at :2; standby 0 at :5 holds an in-sync copy of
  // shard 0, whose primary reports it in sync; shard 1 has no backup.
  void StartWithShard0BackedUp() {
    RegisterPs(0, "127.0.0.1:1");
    RegisterPs(1, "127.0.0.1:2");
    RegisterPs(0, "127.0.0.1:5", /*standby=*/true);
    ASSERT_THAT(Heartbeat(Replicated(PsBeat(0, "127.0.0.1:1", 500))), IsOk());
    ASSERT_THAT(Heartbeat(StandbyBeat(0, 0)), IsOk());
  }

  // Without replication, ps 0 goes silent while 2 workers train, and
  // standby 0 takes shard 0 over from its checkpoint.
  void TakeShard0OverFromItsCheckpoint() {
    config_.cluster.replication = 1;
    Restart();
    RegisterPs(0, "127.0.0.1:1");
    RegisterPs(1, "127.0.0.1:2");
    RegisterPs(0, "127.0.0.1:5", /*standby=*/true);
    RegisterWorker(0);
    RegisterWorker(1);
    ASSERT_THAT(Heartbeat(PsBeat(0, "127.0.0.1:1", 500)), IsOk());
    clock_.Advance(absl::Seconds(4));
    ASSERT_THAT(Heartbeat(PsBeat(1, "127.0.0.1:2", 80)), IsOk());
    ASSERT_THAT(Heartbeat(StandbyBeat(0, -1)), IsOk());
    for (int w : {0, 1}) ASSERT_THAT(Beat("worker", w, 0.5), IsOk());
    state_->CheckLiveness();
  }

  void FinishWorkers() {
    for (int w : {0, 1}) {
      proto::HeartbeatRequest done;
      done.set_role("worker");
      done.set_index(w);
      done.mutable_report()->set_finished(true);
      done.mutable_report()->set_accuracy(0.5);
      ASSERT_THAT(Heartbeat(done), IsOk());
    }
  }

  // The last report of shard 0's new server (TakeShard0OverFromItsCheckpoint),
  // sent after its server stopped: 5 pushes skipped, 3 holes.
  proto::HeartbeatRequest LastReportOfShard0() {
    proto::HeartbeatRequest last = PsBeat(0, "127.0.0.1:5", 320);
    last.mutable_report()->set_acked_pushes_lost(5);
    last.mutable_report()->set_push_holes(3);
    last.mutable_report()->set_final_report(true);
    return last;
  }

  const proto::ShardReplication* Backup(const proto::ClusterStatusResponse& s,
                                        int shard) {
    for (const auto& r : s.shard_replication()) {
      if (r.shard() == shard) return &r;
    }
    return nullptr;
  }
};

TEST_F(SpareTest, ARestartedPsRejoinsAsASpareAndBacksUpItsShard) {
  ASSERT_NO_FATAL_FAILURE(StartWithShard0BackedUp());
  // ps 0 restarted from an older checkpoint: its backup takes over, and the
  // restarted process is refused the shard...
  proto::RegisterServerRequest restart;
  restart.set_index(0);
  restart.set_address("127.0.0.1:1");
  restart.set_applied_total(300);
  ASSERT_THAT(RegisterServer(restart),
              StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_EQ(state_->Placement().shards(0).address(), "127.0.0.1:5");
  // ...so it rejoins as a spare (slot 1, after the configured standby) and
  // becomes the backup of its own former shard, although shard 1 has none
  // either.
  EXPECT_EQ(RegisterSpare("127.0.0.1:1", 0), 1);
  auto spare = Heartbeat(StandbyBeat(1, -1));
  ASSERT_THAT(spare, IsOk());
  EXPECT_EQ(spare->replica_of(), 0);
  auto primary = Heartbeat(PsBeat(0, "127.0.0.1:5", 500));
  ASSERT_THAT(primary, IsOk());
  EXPECT_EQ(primary->backup_address(), "127.0.0.1:1");
  EXPECT_EQ(primary->backup_standby(), 1);
  const auto status = state_->Status();
  const proto::MemberStatus* m = FindMember(status, "standby", 1);
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->spare());
  EXPECT_EQ(m->former_shard(), 0);
  EXPECT_EQ(Backup(status, 0)->backup_standby(), 1);
  EXPECT_FALSE(Backup(status, 0)->in_sync());
  EXPECT_EQ(Backup(status, 1)->backup_standby(), -1);
  // Kept across a coordinator restart: the spare heartbeats on.
  Restart();
  EXPECT_EQ(Heartbeat(StandbyBeat(1, 0))->replica_of(), 0);
  // A second spare gets its own slot; one at the same address is the same
  // daemon restarted (its old slot).
  EXPECT_EQ(RegisterSpare("127.0.0.1:9", 1), 2);
  EXPECT_EQ(RegisterSpare("127.0.0.1:9", 1), 2);
}

TEST_F(SpareTest, ARestartedPsYieldsToAnInSyncBackupWhateverItRestored) {
  ASSERT_NO_FATAL_FAILURE(StartWithShard0BackedUp());
  // Its checkpoint was written after its last heartbeat: it restored more
  // than the shard last reported, but less than the backup holds (every
  // acknowledged push). The backup takes over all the same.
  proto::RegisterServerRequest restart;
  restart.set_index(0);
  restart.set_address("127.0.0.1:1");
  restart.set_applied_total(600);
  EXPECT_THAT(RegisterServer(restart),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       HasSubstr("holds every acknowledged push")));
  EXPECT_EQ(state_->Placement().shards(0).address(), "127.0.0.1:5");
  // Without a backup (shard 1), a new process is let in and its restart
  // recorded, so that what it lost is counted.
  ASSERT_THAT(Heartbeat(PsBeat(1, "127.0.0.1:2", 40)), IsOk());
  proto::RegisterServerRequest restart1;
  restart1.set_index(1);
  restart1.set_address("127.0.0.1:2");
  restart1.set_applied_total(45);
  ASSERT_THAT(RegisterServer(restart1), IsOk());
  const auto status = state_->Status();
  ASSERT_EQ(status.recoveries_size(), 2);
  EXPECT_EQ(status.recoveries(1).source(), "restart");
  EXPECT_EQ(status.recoveries(1).shard(), 1);
}

TEST_F(SpareTest, SparesAreBounded) {
  RegisterPs(0, "127.0.0.1:1");
  RegisterPs(1, "127.0.0.1:2");
  const size_t most = 2 + ClusterState::kExtraSpares;
  for (size_t i = 0; i < most; ++i) {
    RegisterSpare(absl::StrCat("127.0.0.1:", 100 + i), 0);
  }
  proto::RegisterServerRequest one_more;
  one_more.set_index(-1);
  one_more.set_address("127.0.0.1:999");
  one_more.set_standby(true);
  one_more.set_spare(true);
  EXPECT_THAT(state_->RegisterServer(one_more),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("no spare slot left")));
  // A configured standby index beyond the config is still refused.
  proto::RegisterServerRequest standby;
  standby.set_index(1);
  standby.set_address("127.0.0.1:7");
  standby.set_standby(true);
  EXPECT_THAT(state_->RegisterServer(standby),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(SpareTest, AStandbyRestartedWhileServingAShardFailsItOverAtOnce) {
  ASSERT_NO_FATAL_FAILURE(StartWithShard0BackedUp());
  clock_.Advance(absl::Seconds(4));
  ASSERT_THAT(Heartbeat(PsBeat(1, "127.0.0.1:2", 80)), IsOk());
  ASSERT_THAT(Heartbeat(StandbyBeat(0, 0)), IsOk());
  state_->CheckLiveness();
  ASSERT_EQ(Heartbeat(StandbyBeat(0, 0))->take_over_index(), 0);
  ASSERT_THAT(Heartbeat(PsBeat(0, "127.0.0.1:5", 500)), IsOk());
  // The old ps rejoins as a spare and syncs shard 0 from its new server.
  ASSERT_EQ(RegisterSpare("127.0.0.1:1", 0), 1);
  ASSERT_EQ(Heartbeat(StandbyBeat(1, 0))->replica_of(), 0);
  ASSERT_THAT(Heartbeat(Replicated(PsBeat(0, "127.0.0.1:5", 600))), IsOk());
  EXPECT_TRUE(Backup(state_->Status(), 0)->in_sync());
  // The standby serving shard 0 is killed and restarted at its address: its
  // registration shows the old process is gone, so shard 0 goes to the
  // spare now, without waiting for the heartbeat timeout.
  RegisterPs(0, "127.0.0.1:5", /*standby=*/true);
  EXPECT_EQ(state_->Placement().shards(0).address(), "127.0.0.1:1");
  EXPECT_EQ(Heartbeat(StandbyBeat(1, 0))->take_over_index(), 0);
  const auto status = state_->Status();
  ASSERT_EQ(status.recoveries_size(), 2);
  EXPECT_EQ(status.recoveries(1).source(), "replica");
  EXPECT_EQ(status.recoveries(1).from_address(), "127.0.0.1:5");
  // The restarted standby is free again, and never the backup of a process
  // at its own address.
  const auto beat = Heartbeat(StandbyBeat(0, -1));
  EXPECT_EQ(beat->take_over_index(), -1);
  EXPECT_EQ(beat->replica_of(), 0);  // it backs up shard 0, served at :1
}

TEST_F(SpareTest, ARestartedStandbyIsHandedItsOldShardWhenNoneElseIsFree) {
  ASSERT_NO_FATAL_FAILURE(StartWithShard0BackedUp());
  clock_.Advance(absl::Seconds(4));
  ASSERT_THAT(Heartbeat(PsBeat(1, "127.0.0.1:2", 80)), IsOk());
  ASSERT_THAT(Heartbeat(StandbyBeat(0, 0)), IsOk());
  state_->CheckLiveness();
  ASSERT_EQ(Heartbeat(StandbyBeat(0, 0))->take_over_index(), 0);
  ASSERT_THAT(Heartbeat(PsBeat(0, "127.0.0.1:5", 500)), IsOk());
  // Standby 0, serving shard 0, is restarted: nobody else is free, so the new
  // process takes the shard over (from the checkpoint: the old process's
  // replica report is not its own), and is told so on its next heartbeat.
  RegisterPs(0, "127.0.0.1:5", /*standby=*/true);
  EXPECT_EQ(Heartbeat(StandbyBeat(0, -1))->take_over_index(), 0);
  const auto status = state_->Status();
  ASSERT_EQ(status.recoveries_size(), 2);
  EXPECT_EQ(status.recoveries(1).source(), "checkpoint");
  EXPECT_FALSE(status.recoveries(1).loss_final());
}

TEST_F(SpareTest, AShardWithoutABackupCountsItsTime) {
  RegisterPs(0, "127.0.0.1:1");
  RegisterPs(1, "127.0.0.1:2");
  RegisterPs(0, "127.0.0.1:5", /*standby=*/true);
  ASSERT_THAT(Heartbeat(StandbyBeat(0, 0)), IsOk());
  clock_.Advance(absl::Seconds(2));
  // Shard 0 syncing: its first sync is not counted; shard 1 has no standby
  // and counts from the placement.
  ASSERT_THAT(Heartbeat(Replicated(PsBeat(0, "127.0.0.1:1", 10))), IsOk());
  ASSERT_THAT(Heartbeat(PsBeat(1, "127.0.0.1:2", 10)), IsOk());
  auto status = state_->Status();
  EXPECT_EQ(status.replication_factor(), 2);
  EXPECT_TRUE(Backup(status, 0)->in_sync());
  EXPECT_EQ(Backup(status, 0)->unreplicated_seconds(), 0);
  EXPECT_EQ(Backup(status, 0)->unreplicated_since(), -1);
  EXPECT_EQ(Backup(status, 1)->backup_standby(), -1);
  EXPECT_NEAR(Backup(status, 1)->unreplicated_seconds(), 2, 1e-6);
  // Shard 0's primary loses its backup (it reports it out of sync) for 3 s.
  ASSERT_THAT(Heartbeat(PsBeat(0, "127.0.0.1:1", 20)), IsOk());
  clock_.Advance(absl::Seconds(3));
  ASSERT_THAT(Heartbeat(StandbyBeat(0, 0)), IsOk());
  ASSERT_THAT(Heartbeat(PsBeat(1, "127.0.0.1:2", 20)), IsOk());
  ASSERT_THAT(Heartbeat(Replicated(PsBeat(0, "127.0.0.1:1", 30))), IsOk());
  status = state_->Status();
  EXPECT_NEAR(Backup(status, 0)->unreplicated_seconds(), 3, 1e-6);
  EXPECT_NEAR(Backup(status, 1)->unreplicated_seconds(), 5, 1e-6);
  EXPECT_GE(Backup(status, 1)->unreplicated_since(), 0);
}

TEST_F(SpareTest, AnOutageIsRecordedUntilTheMemberIsBack) {
  RegisterPs(0, "127.0.0.1:1");
  RegisterPs(1, "127.0.0.1:2");
  ASSERT_THAT(Heartbeat(PsBeat(0, "127.0.0.1:1", 10)), IsOk());
  clock_.Advance(absl::Seconds(4));
  ASSERT_THAT(Heartbeat(PsBeat(1, "127.0.0.1:2", 10)), IsOk());
  EXPECT_EQ(state_->CheckLiveness(), 1);  // ps 0; no standby registered
  auto outages = state_->Status().outages();
  ASSERT_EQ(outages.size(), 1);
  EXPECT_EQ(outages[0].role(), "ps");
  EXPECT_EQ(outages[0].index(), 0);
  EXPECT_EQ(outages[0].start_seconds(), 4);
  EXPECT_EQ(outages[0].end_seconds(), -1);
  clock_.Advance(absl::Seconds(9.5));
  ASSERT_THAT(Heartbeat(PsBeat(0, "127.0.0.1:1", 10)), IsOk());
  outages = state_->Status().outages();
  ASSERT_EQ(outages.size(), 1);
  EXPECT_EQ(outages[0].end_seconds(), 13.5);
  EXPECT_EQ(outages[0].ended_by(), "alive again");
}

TEST_F(SpareTest, TheLossIsTheNewServersCountAndFinalOnceTheJobIsOver) {
  ASSERT_NO_FATAL_FAILURE(TakeShard0OverFromItsCheckpoint());
  // The standby serves shard 0 from its checkpoint; the workers' pushes past
  // what it holds show up as skipped sequences (certain) and holes (maybe
  // in flight).
  proto::HeartbeatRequest beat = PsBeat(0, "127.0.0.1:5", 320);
  beat.mutable_report()->set_acked_pushes_lost(5);
  beat.mutable_report()->set_push_holes(3);
  ASSERT_THAT(Heartbeat(beat), IsOk());
  auto status = state_->Status();
  ASSERT_EQ(status.recoveries_size(), 1);
  EXPECT_EQ(status.recoveries(0).acked_pushes_lost(), 5u);
  EXPECT_FALSE(status.recoveries(0).loss_final());
  EXPECT_FALSE(status.acked_loss_final());
  // Every worker finishes: the ps's next report after it is told so counts
  // its holes as lost.
  ASSERT_NO_FATAL_FAILURE(FinishWorkers());
  ASSERT_TRUE(Heartbeat(beat)->stop());
  EXPECT_FALSE(state_->Status().acked_loss_final()) << "sent before it knew";
  ASSERT_THAT(Heartbeat(beat), IsOk());
  status = state_->Status();
  EXPECT_EQ(status.recoveries(0).acked_pushes_lost(), 8u);
  EXPECT_TRUE(status.acked_loss_final());
  EXPECT_EQ(status.acked_pushes_lost(), 8u);
  Restart();
  EXPECT_EQ(state_->Status().acked_pushes_lost(), 8u)
      << "kept in the state file";
}

// A worker process that had pushes acknowledged and is replaced by a new
// one (killed and restarted) never pushes again, so the gaps that would
// show what a recovery from a checkpoint lost of its pushes never come: from
// then on such a loss is a lower bound, never final (kept across a restart
// of the coordinator).
TEST_F(SpareTest, ALostWorkerProcessMakesACheckpointLossALowerBound) {
  ASSERT_NO_FATAL_FAILURE(TakeShard0OverFromItsCheckpoint());
  proto::HeartbeatRequest pushed;
  pushed.set_role("worker");
  pushed.set_index(1);
  pushed.mutable_report()->set_pushes(40);
  pushed.mutable_report()->set_accuracy(0.5);
  ASSERT_THAT(Heartbeat(pushed), IsOk());
  RegisterWorker(1);  // a new process: no member key
  ASSERT_NO_FATAL_FAILURE(FinishWorkers());
  const proto::HeartbeatRequest last = LastReportOfShard0();
  ASSERT_THAT(Heartbeat(last), IsOk());
  auto status = state_->Status();
  EXPECT_EQ(status.recoveries(0).acked_pushes_lost(), 8u);
  EXPECT_FALSE(status.recoveries(0).loss_final());
  EXPECT_FALSE(status.acked_loss_final());
  Restart();
  ASSERT_THAT(Heartbeat(last), IsOk());
  EXPECT_FALSE(state_->Status().acked_loss_final()) << "kept in the state file";
}

// Chaos seed 4: ps 0 stalled as the job ended, its backup took the shard
// over while the launcher was stopping the standbys, and ps 0, told it was
// replaced, stood down: nobody wrote shard 0's final checkpoint. Once the
// job is over a silent ps is waited for, not replaced.
TEST_F(SpareTest, APsSilentAfterTheJobEndedIsWaitedForNotReplaced) {
  ASSERT_NO_FATAL_FAILURE(StartWithShard0BackedUp());
  RegisterWorker(0);
  RegisterWorker(1);
  ASSERT_NO_FATAL_FAILURE(FinishWorkers());
  ASSERT_TRUE(state_->Status().stop());
  clock_.Advance(absl::Seconds(4));  // past the 3 s timeout
  ASSERT_THAT(Heartbeat(PsBeat(1, "127.0.0.1:2", 80)), IsOk());
  ASSERT_THAT(Heartbeat(StandbyBeat(0, 0)), IsOk());
  state_->CheckLiveness();  // ps 0 (and the finished workers) silent
  auto status = state_->Status();
  EXPECT_EQ(status.recoveries_size(), 0) << "no take-over";
  for (const proto::MemberStatus& m : status.members()) {
    if (m.role() == "standby") EXPECT_EQ(m.serving_index(), -1);
    if (m.role() == "ps" && m.index() == 0) EXPECT_FALSE(m.alive());
  }
  // ps 0 answers again: it still serves shard 0, and is told to stop.
  auto reply = Heartbeat(PsBeat(0, "127.0.0.1:1", 500));
  ASSERT_THAT(reply, IsOk());
  EXPECT_FALSE(reply->replaced());
  EXPECT_TRUE(reply->stop());
  status = state_->Status();
  for (const proto::MemberStatus& m : status.members()) {
    if (m.role() == "ps" && m.index() == 0) EXPECT_TRUE(m.alive());
  }
}

// A ps that sent its final report after the job ended wrote its final
// checkpoint and stopped: its shard goes to a standby (a ps restarted after
// the job, which rejoined as a spare, serves it again).
TEST_F(SpareTest, APsThatStoppedAfterTheJobEndedIsTakenOver) {
  ASSERT_NO_FATAL_FAILURE(StartWithShard0BackedUp());
  RegisterWorker(0);
  RegisterWorker(1);
  ASSERT_NO_FATAL_FAILURE(FinishWorkers());
  proto::HeartbeatRequest last = PsBeat(0, "127.0.0.1:1", 500);
  last.mutable_report()->set_final_report(true);
  ASSERT_THAT(Heartbeat(last), IsOk());
  clock_.Advance(absl::Seconds(4));
  ASSERT_THAT(Heartbeat(PsBeat(1, "127.0.0.1:2", 80)), IsOk());
  ASSERT_THAT(Heartbeat(StandbyBeat(0, 0)), IsOk());
  state_->CheckLiveness();
  const auto status = state_->Status();
  ASSERT_EQ(status.recoveries_size(), 1);
  EXPECT_EQ(status.recoveries(0).shard(), 0);
  EXPECT_EQ(status.recoveries(0).to_address(), "127.0.0.1:5");
}

TEST_F(SpareTest, APsLastReportAfterTheWorkersFinishedIsFinal) {
  ASSERT_NO_FATAL_FAILURE(TakeShard0OverFromItsCheckpoint());
  ASSERT_NO_FATAL_FAILURE(FinishWorkers());
  // The ps is stopped before any heartbeat told it the job is over: its
  // last report, sent after its server stopped, is final all the same.
  const proto::HeartbeatRequest last = LastReportOfShard0();
  ASSERT_THAT(Heartbeat(last), IsOk());
  const auto status = state_->Status();
  EXPECT_EQ(status.recoveries(0).acked_pushes_lost(), 8u);
  EXPECT_TRUE(status.acked_loss_final());
}

}  // namespace
}  // namespace downpour::coordinator
