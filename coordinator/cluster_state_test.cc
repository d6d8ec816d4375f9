#include "coordinator/cluster_state.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/push_key.h"
#include "common/testing/fake_clock.h"
#include "common/testing/status_matchers.h"
#include "coordinator/cluster_state_test_fixture.h"
#include "coordinator/test_cluster.h"
#include "gtest/gtest.h"

namespace downpour::coordinator {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST_F(ClusterStateTest, PlacementWaitsForEveryPsThenCoversAllBlocks) {
  RegisterPs(0, "127.0.0.1:1");
  proto::GetPlacementResponse placement = state_->Placement();
  EXPECT_EQ(placement.epoch(), 0u);
  EXPECT_THAT(placement.waiting_for(), HasSubstr("ps 1"));
  RegisterPs(1, "127.0.0.1:2");
  placement = state_->Placement();
  EXPECT_EQ(placement.epoch(), 1u);
  ASSERT_EQ(placement.shards_size(), 2);
  EXPECT_GT(placement.shards(0).block_ids_size(), 0);
  EXPECT_GT(placement.shards(1).block_ids_size(), 0);
}

// docs/PYTHON.md's second example ran in the first one's folder: its
// coordinator restored the first job's state (another model, the same
// number of blocks) and served a placement of the wrong blocks; the pushes
// diverged. Another model's state file is refused, naming the fix.
TEST_F(ClusterStateTest, AnotherModelsStateFileIsRefused) {
  RegisterPs(0, "127.0.0.1:1");
  RegisterPs(1, "127.0.0.1:2");
  state_.reset();
  Config other = config_;
  other.model.layers = {4, 16, 3};
  auto refused = ClusterState::Create({other, &clock_, probe_});
  EXPECT_THAT(refused.status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("another model's"),
                             HasSubstr("coordinator.state_dir"))));
  Restart();  // the same model restores it
  EXPECT_EQ(state_->Placement().epoch(), 1u);
}

// A sparse model's placement gives each ps its hash buckets: every bucket
// once, bucket b to ps b % 2; a dense model's names none.
TEST_F(ClusterStateTest, ASparsePlacementGivesEachPsItsBuckets) {
  EXPECT_EQ(state_->Placement().shards_size(), 0);
  config_.model.type = ModelType::kSparseLinear;
  config_.model.task = Task::kBinary;
  config_.model.sparse_buckets = 10;
  Restart();
  RegisterPs(0, "127.0.0.1:1");
  RegisterPs(1, "127.0.0.1:2");
  const proto::GetPlacementResponse placement = state_->Placement();
  ASSERT_EQ(placement.shards_size(), 2);
  EXPECT_THAT(placement.shards(0).buckets(), ElementsAre(0, 2, 4, 6, 8));
  EXPECT_THAT(placement.shards(1).buckets(), ElementsAre(1, 3, 5, 7, 9));
}

TEST_F(ClusterStateTest, RestartedPsBumpsTheEpoch) {
  RegisterPs(0, "127.0.0.1:1");
  RegisterPs(1, "127.0.0.1:2");
  RegisterPs(1, "127.0.0.1:9");
  EXPECT_EQ(state_->Placement().epoch(), 2u);
  EXPECT_EQ(state_->Placement().shards(1).address(), "127.0.0.1:9");
  RegisterPs(1, "127.0.0.1:9");  // same address, new process: still a new epoch
  EXPECT_EQ(state_->Placement().epoch(), 3u);
}

TEST_F(ClusterStateTest, DeadWorkersPartsGoToTheLivingAndComeBackOnRejoin) {
  RegisterWorker(0);
  RegisterWorker(1);
  EXPECT_THAT(PartsOf(0), ElementsAre(0));
  clock_.Advance(absl::Seconds(2));
  PartsOf(0);  // worker 0 heartbeats, worker 1 falls silent
  clock_.Advance(absl::Seconds(2));
  EXPECT_EQ(state_->CheckLiveness(), 1);
  EXPECT_THAT(PartsOf(0), ElementsAre(0, 1));
  RegisterWorker(1);  // restarted with the same index
  EXPECT_THAT(PartsOf(1), ElementsAre(1));
  EXPECT_THAT(PartsOf(0), ElementsAre(0));
}

TEST_F(ClusterStateTest, PsHeartbeatListsTheWorkersAliveAndNotFinished) {
  RegisterPs(0, "127.0.0.1:1");
  auto active = [&] {
    auto response = Beat("ps", 0, NAN);
    EXPECT_THAT(response, IsOk());
    EXPECT_TRUE(response.ok() && response->active_workers_known());
    return response.ok() ? std::vector<int>(response->active_workers().begin(),
                                            response->active_workers().end())
                         : std::vector<int>{};
  };
  EXPECT_THAT(active(), ElementsAre());
  RegisterWorker(0);
  RegisterWorker(1);
  EXPECT_THAT(active(), ElementsAre(0, 1));
  clock_.Advance(absl::Seconds(2));
  PartsOf(0);  // worker 1 falls silent
  active();
  clock_.Advance(absl::Seconds(2));
  state_->CheckLiveness();
  EXPECT_THAT(active(), ElementsAre(0));
  proto::HeartbeatRequest done;
  done.set_role("worker");
  done.set_index(0);
  done.mutable_report()->set_finished(true);
  ASSERT_THAT(Heartbeat(done), IsOk());
  EXPECT_THAT(active(), ElementsAre());
  // A worker's own heartbeat reply does not carry the set.
  EXPECT_FALSE(Beat("worker", 0, NAN)->active_workers_known());
}

// Every registration gets a new incarnation, also after the coordinator
// restarts (it is kept in the state file): a restarted worker's push
// sequences must lie above its previous run's.
TEST_F(ClusterStateTest, IncarnationsNeverRepeatAcrossCoordinatorRestarts) {
  auto incarnation = [&](int index) {
    proto::RegisterWorkerRequest request;
    request.set_index(index);
    auto response = RegisterWorkerCall(request);
    EXPECT_THAT(response, IsOk());
    return response.ok() ? response->incarnation() : 0;
  };
  EXPECT_EQ(incarnation(0), 1u);
  EXPECT_EQ(incarnation(1), 2u);
  EXPECT_EQ(incarnation(0), 3u);  // worker 0 restarted
  Restart();
  EXPECT_EQ(incarnation(0), 4u);
}

// ssp: a worker that registers late, or again after a restart, starts its
// clock at the smallest clock of the others still training (finished and dead
// workers do not count), so nobody waits for it to redo their history.
TEST_F(ClusterStateTest, AWorkerRegisteringStartsItsClockAtThePack) {
  auto start = [&](int index) {
    proto::RegisterWorkerRequest request;
    request.set_index(index);
    auto response = RegisterWorkerCall(request);
    EXPECT_THAT(response, IsOk());
    return response.ok() ? response->start_clock() : 12345;
  };
  auto beat = [&](int index, uint64_t clock, bool finished) {
    proto::HeartbeatRequest request;
    request.set_role("worker");
    request.set_index(index);
    request.mutable_report()->set_clock(clock);
    request.mutable_report()->set_finished(finished);
    ASSERT_THAT(Heartbeat(request), IsOk());
  };
  EXPECT_EQ(start(0), 0u);  // a fresh job
  EXPECT_EQ(start(1), 0u);
  beat(0, 40, false);
  beat(1, 38, false);
  EXPECT_EQ(start(1), 40u);  // restarted: joins worker 0, not its own past
  beat(1, 41, false);
  beat(0, 50, true);        // finished: not waited for any more
  EXPECT_EQ(start(1), 0u);  // nobody else is training
  beat(0, 50, false);
  EXPECT_EQ(start(1), 50u);
}

TEST_F(ClusterStateTest,
       ADeadShardGoesToAStandbyAndTheOldPsIsToldItWasReplaced) {
  RegisterPs(0, "127.0.0.1:1");
  RegisterPs(1, "127.0.0.1:2");
  RegisterPs(0, "127.0.0.1:5", /*standby=*/true);
  ASSERT_EQ(state_->Placement().epoch(), 1u);
  clock_.Advance(absl::Seconds(2));
  for (auto [role, index] :
       {std::pair<const char*, int>{"ps", 0}, {"standby", 0}}) {
    proto::HeartbeatRequest beat;
    beat.set_role(role);
    beat.set_index(index);
    ASSERT_THAT(Heartbeat(beat), IsOk());
  }
  clock_.Advance(absl::Seconds(2));
  state_->CheckLiveness();  // ps 1 has been silent for 4 s
  EXPECT_EQ(state_->Placement().epoch(), 2u);
  EXPECT_EQ(state_->Placement().shards(1).address(), "127.0.0.1:5");
  proto::HeartbeatRequest standby;
  standby.set_role("standby");
  standby.set_index(0);
  auto reply = Heartbeat(standby);
  ASSERT_THAT(reply, IsOk());
  EXPECT_EQ(reply->take_over_index(), 1);
  // The old ps 1 wakes up (SIGCONT) and is told to stand down.
  proto::HeartbeatRequest old;
  old.set_role("ps");
  old.set_index(1);
  old.set_address("127.0.0.1:2");
  reply = Heartbeat(old);
  ASSERT_THAT(reply, IsOk());
  EXPECT_TRUE(reply->replaced());
}

TEST_F(ClusterStateTest, RestartedCoordinatorKeepsMembershipAndPlacement) {
  RegisterPs(0, "127.0.0.1:1");
  RegisterPs(1, "127.0.0.1:2");
  RegisterWorker(0);
  const std::string before = state_->Placement().DebugString();
  Restart();
  EXPECT_EQ(state_->Placement().DebugString(), before);
  proto::HeartbeatRequest beat;
  beat.set_role("worker");
  beat.set_index(0);
  EXPECT_THAT(Heartbeat(beat), IsOk()) << "no re-registration needed";
  EXPECT_THAT(PartsOf(0), ElementsAre(0));
}

TEST_F(ClusterStateTest, UnknownIndexIsRejected) {
  proto::RegisterServerRequest request;
  request.set_index(5);
  request.set_address("127.0.0.1:9");
  EXPECT_THAT(
      RegisterServer(request),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("index 5")));
  EXPECT_THAT(Beat("worker", 0, NAN),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("not registered")));
  EXPECT_THAT(Beat("janitor", 0, NAN),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(ClusterStateTest, SilentMembersAreMarkedDeadAfterTheTimeout) {
  RegisterPs(0, "127.0.0.1:1");
  proto::RegisterWorkerRequest worker;
  worker.set_index(1);
  auto registered = RegisterWorkerCall(worker);
  ASSERT_THAT(registered, IsOk());
  EXPECT_EQ(registered->partition().part(), 1);
  EXPECT_EQ(registered->partition().num_parts(), 2);
  clock_.Advance(absl::Seconds(2));
  ASSERT_THAT(Beat("worker", 1, NAN), IsOk());
  clock_.Advance(absl::Seconds(2));
  EXPECT_EQ(state_->CheckLiveness(), 1);  // ps 0: 4 s silent; worker 1: 2 s
  proto::ClusterStatusResponse status = state_->Status();
  for (const auto& m : status.members()) {
    if (m.role() == "ps" && m.index() == 0) {
      EXPECT_FALSE(m.alive());
    }
    if (m.role() == "worker" && m.index() == 1) {
      EXPECT_TRUE(m.alive());
    }
  }
}

// Attack: one heartbeat claiming accuracy 1.0, from a process that took a
// free worker slot, stopped the job. A claim counts only once a ps holds
// pushes of the claiming process, and a second evaluation confirms it: the
// claimant's next one when no other worker evaluates.
TEST_F(ClusterStateTest, JobStopsWhenAWorkerReachesTheTarget) {
  RegisterPs(0, "127.0.0.1:1");
  RegisterPs(1, "127.0.0.1:2");
  RegisterWorker(0);
  auto beat = Evaluated(0, 0.5, 1);
  ASSERT_THAT(beat, IsOk());
  EXPECT_FALSE(beat->stop());
  beat = Evaluated(0, 0.93, 2);
  ASSERT_THAT(beat, IsOk());
  EXPECT_FALSE(beat->stop()) << "no ps holds a push of this process";
  beat = Evaluated(0, 0.93, 3);
  EXPECT_FALSE(beat->stop()) << "no ps holds a push of this process";
  PsHolds(1, {0});
  beat = Evaluated(0, 0.93, 3);
  EXPECT_FALSE(beat->stop()) << "one evaluation claims it";
  beat = Evaluated(0, 0.94, 4);
  ASSERT_THAT(beat, IsOk());
  EXPECT_TRUE(beat->stop());
  EXPECT_THAT(beat->stop_reason(),
              HasSubstr("0.9400 >= target 0.9000 at step 0 (confirmed by "
                        "its next evaluation)"));
}

// The status says when a report first met the target, however briefly: a
// value that drops again at the next evaluation (which a launcher polling
// every few seconds would miss) still counts, from a worker whose pushes a
// ps holds; the first time stays.
TEST_F(ClusterStateTest, StatusSaysWhenTheTargetWasFirstMet) {
  RegisterPs(0, "127.0.0.1:1");
  RegisterPs(1, "127.0.0.1:2");
  RegisterWorker(0);
  RegisterWorker(1);
  PsHolds(0, {0});
  EXPECT_EQ(state_->Status().target_reached_seconds(), -1);
  clock_.Advance(absl::Seconds(3));
  ASSERT_THAT(Evaluated(1, 0.95, 1), IsOk());
  EXPECT_EQ(state_->Status().target_reached_seconds(), -1)
      << "no ps holds a push of worker 1";
  clock_.Advance(absl::Seconds(2));
  PsHolds(0, {0, 1});  // its report counts from now on
  clock_.Advance(absl::Seconds(1));
  ASSERT_THAT(Evaluated(1, 0.5, 3), IsOk());
  ASSERT_THAT(Evaluated(0, 0.96, 3), IsOk());
  const proto::ClusterStatusResponse status = state_->Status();
  EXPECT_DOUBLE_EQ(status.target_reached_seconds(), 5.0);
  EXPECT_EQ(status.target_reached_by(), 1);
  EXPECT_DOUBLE_EQ(status.target_reached_value(), 0.95);
}

// While another worker evaluates, a claim waits for that worker's: one
// process alone (a buggy one, or one in a slot taken in plaintext) cannot end
// the job, however often it claims.
TEST_F(ClusterStateTest, AClaimIsConfirmedByAnotherWorkersEvaluation) {
  RegisterPs(0, "127.0.0.1:1");
  RegisterPs(1, "127.0.0.1:2");
  RegisterWorker(0);
  RegisterWorker(1);
  PsHolds(0, {0, 1});
  for (uint64_t e = 1; e <= 5; ++e) {
    auto beat = Evaluated(1, 1.0, e);
    ASSERT_THAT(beat, IsOk());
    EXPECT_FALSE(beat->stop()) << e;
    EXPECT_FALSE(Evaluated(0, 0.5, e)->stop());
  }
  auto beat = Evaluated(0, 0.92, 6);
  ASSERT_THAT(beat, IsOk());
  EXPECT_TRUE(beat->stop());
  EXPECT_THAT(beat->stop_reason(), HasSubstr("(confirmed by worker 1)"));
}

// A restarted worker (a new process) claims nothing until its own pushes
// are held: the ps's report of the old process's pushes does not count.
TEST_F(ClusterStateTest, AClaimCountsOnlyForTheProcessWhosePushesAreHeld) {
  RegisterPs(0, "127.0.0.1:1");
  RegisterPs(1, "127.0.0.1:2");
  RegisterWorker(0);
  PsHolds(0, {0});
  proto::RegisterWorkerRequest again;
  again.set_index(0);
  again.set_address("127.0.0.1:77");  // a new process in the same slot
  ASSERT_THAT(RegisterWorkerCall(again), IsOk());
  for (uint64_t e = 1; e <= 3; ++e) {
    EXPECT_FALSE(Evaluated(0, 1.0, e)->stop()) << e;
  }
  PsHolds(0, {0});
  EXPECT_FALSE(state_->Status().stop()) << "its last evaluation claims it";
  EXPECT_TRUE(Evaluated(0, 1.0, 4)->stop()) << "its next one confirms it";
}

// A regression job aims at a test rmse at most its target, from the
// metrics a worker reports.
TEST_F(ClusterStateTest, JobStopsWhenAWorkerReachesALowerIsBetterTarget) {
  config_.model.task = Task::kRegression;
  config_.model.layers = {784, 1};
  config_.training.target_accuracy = 0;
  config_.training.target_value = 50;
  Restart();
  proto::RegisterWorkerRequest worker;
  worker.set_index(0);
  ASSERT_THAT(RegisterWorkerCall(worker), IsOk());
  RegisterPs(0, "127.0.0.1:1");
  PsHolds(0, {0});
  proto::HeartbeatRequest request;
  request.set_role("worker");
  request.set_index(0);
  request.mutable_report()->set_accuracy(NAN);
  (*request.mutable_report()->mutable_metrics())["rmse"] = 61.5;
  auto beat = Heartbeat(request);
  ASSERT_THAT(beat, IsOk());
  EXPECT_FALSE(beat->stop());
  (*request.mutable_report()->mutable_metrics())["rmse"] = 49.25;
  request.mutable_report()->set_evaluations(1);
  EXPECT_FALSE(Heartbeat(request)->stop()) << "not confirmed yet";
  request.mutable_report()->set_evaluations(2);
  beat = Heartbeat(request);
  ASSERT_THAT(beat, IsOk());
  EXPECT_TRUE(beat->stop());
  EXPECT_THAT(beat->stop_reason(),
              HasSubstr("reached test rmse 49.2500 <= target 50.0000"));
}

}  // namespace
}  // namespace downpour::coordinator

namespace downpour::coordinator {
namespace {

TEST_F(ClusterStateTest, AFinishedJobStaysFinishedAcrossARestart) {
  RegisterPs(0, "127.0.0.1:1");
  RegisterPs(1, "127.0.0.1:2");
  RegisterWorker(0);
  PsHolds(0, {0});
  ASSERT_FALSE(Evaluated(0, 0.95, 1)->stop());
  ASSERT_TRUE(Evaluated(0, 0.95, 2)->stop());  // target 0.9: the job stops
  Restart();
  EXPECT_TRUE(state_->Status().stop()) << "the job's end is durable";
  EXPECT_THAT(state_->Status().stop_reason(), HasSubstr("0.95"));
  // A worker that comes back is told at once.
  proto::HeartbeatRequest late;
  late.set_role("worker");
  late.set_index(0);
  ASSERT_TRUE(Heartbeat(late)->stop());
}

}  // namespace
}  // namespace downpour::coordinator

namespace downpour::coordinator {
namespace {

TEST(RoleTest, NamesRoundTripAndOthersAreRejected) {
  for (MemberRole role :
       {MemberRole::kPs, MemberRole::kWorker, MemberRole::kStandby}) {
    EXPECT_EQ(ParseMemberRole(MemberRoleName(role)), role)
        << MemberRoleName(role);
  }
  EXPECT_EQ(ParseMemberRole("janitor"), std::nullopt);
  EXPECT_EQ(ParseMemberRole(""), std::nullopt);
  EXPECT_EQ(ParseMemberRole("PS"), std::nullopt);
}

TEST(StateFilePathTest, IsInTheStateDirOrEmpty) {
  EXPECT_EQ(StateFilePath("/var/lib/downpour"),
            "/var/lib/downpour/coordinator.state");
  EXPECT_EQ(StateFilePath(""), "");
}

TEST_F(ClusterStateTest, NoStateFileIsAFirstStart) {
  ASSERT_FALSE(
      std::filesystem::exists(StateFilePath(config_.coordinator.state_dir)));
  EXPECT_EQ(state_->Placement().epoch(), 0u);
  RegisterPs(0, "127.0.0.1:1");
  EXPECT_TRUE(
      std::filesystem::exists(StateFilePath(config_.coordinator.state_dir)));
}

TEST_F(ClusterStateTest, AStateFileThatCannotBeReadRefusesToStart) {
  state_.reset();
  // A folder where the file should be: it exists, but reading it fails.
  const std::string path = StateFilePath(config_.coordinator.state_dir);
  std::filesystem::create_directories(path);
  auto state = ClusterState::Create({config_, &clock_});
  EXPECT_THAT(state, StatusIs(absl::StatusCode::kFailedPrecondition,
                              HasSubstr("'" + path + "'")));
  EXPECT_THAT(state.status().message(), HasSubstr("move it away"));
}

TEST_F(ClusterStateTest, AStateFileOfAnotherFormatRefusesToStart) {
  state_.reset();
  std::filesystem::create_directories(config_.coordinator.state_dir);
  const std::string path = StateFilePath(config_.coordinator.state_dir);
  { std::ofstream(path) << "not a proto"; }
  EXPECT_THAT(ClusterState::Create({config_, &clock_}),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr(path)));
}

TEST_F(ClusterStateTest, TheLastChangeIsWhatARestartSees) {
  RegisterPs(0, "127.0.0.1:1");
  RegisterPs(1, "127.0.0.1:2");
  RegisterPs(1, "127.0.0.1:7");  // epoch 2, saved after the lock is released
  Restart();
  EXPECT_EQ(state_->Placement().epoch(), 2u);
  EXPECT_EQ(state_->Placement().shards(1).address(), "127.0.0.1:7");
}

}  // namespace
}  // namespace downpour::coordinator

namespace downpour::coordinator {
namespace {

TEST_F(ClusterStateTest, AStandbyBacksAShardUpAndTakesItOverFromItsReplica) {
  RegisterPs(0, "127.0.0.1:1");
  RegisterPs(1, "127.0.0.1:2");
  RegisterPs(0, "127.0.0.1:5", /*standby=*/true);
  // The one standby backs up shard 0; shard 1 runs unreplicated.
  auto beat0 = Heartbeat(PsBeat(0, "127.0.0.1:1", 500));
  ASSERT_THAT(beat0, IsOk());
  EXPECT_EQ(beat0->backup_address(), "127.0.0.1:5");
  EXPECT_EQ(beat0->backup_standby(), 0);
  EXPECT_EQ(Heartbeat(PsBeat(1, "127.0.0.1:2", 70))->backup_address(), "");
  auto standby = Heartbeat(StandbyBeat(0, 0));
  ASSERT_THAT(standby, IsOk());
  EXPECT_EQ(standby->replica_of(), 0);
  EXPECT_EQ(standby->take_over_index(), -1);

  // ps 0 goes silent; the others keep beating.
  clock_.Advance(absl::Seconds(4));
  ASSERT_THAT(Heartbeat(PsBeat(1, "127.0.0.1:2", 80)), IsOk());
  ASSERT_THAT(Heartbeat(StandbyBeat(0, 0)), IsOk());
  EXPECT_EQ(state_->CheckLiveness(), 1);
  standby = Heartbeat(StandbyBeat(0, 0));
  EXPECT_EQ(standby->take_over_index(), 0);
  EXPECT_EQ(state_->Placement().shards(0).address(), "127.0.0.1:5");

  // The standby serves shard 0 now, with every update the old ps reported.
  ASSERT_THAT(Heartbeat(PsBeat(0, "127.0.0.1:5", 500)), IsOk());
  const proto::ClusterStatusResponse status = state_->Status();
  ASSERT_EQ(status.recoveries_size(), 1);
  EXPECT_EQ(status.recoveries(0).source(), "replica");
  EXPECT_TRUE(status.recoveries(0).settled());
  EXPECT_EQ(status.recoveries(0).applied_before(), 500u);
  EXPECT_EQ(status.recoveries(0).lost(), 0u);
  EXPECT_EQ(status.updates_lost(), 0u);
  for (const proto::MemberStatus& m : status.members()) {
    if (m.role() != "standby") continue;
    EXPECT_TRUE(m.alive()) << "a standby serving a shard is alive";
    EXPECT_EQ(m.serving_index(), 0);
    EXPECT_EQ(m.replica_of(), -1);
  }
  // The old ps, back from a pause, is told it was replaced.
  EXPECT_TRUE(Heartbeat(PsBeat(0, "127.0.0.1:1", 510))->replaced());
}

TEST_F(ClusterStateTest, ATakeOverFromACheckpointCountsWhatWasLost) {
  config_.cluster.replication = 1;
  Restart();
  RegisterPs(0, "127.0.0.1:1");
  RegisterPs(1, "127.0.0.1:2");
  RegisterPs(0, "127.0.0.1:5", /*standby=*/true);
  EXPECT_EQ(Heartbeat(PsBeat(0, "127.0.0.1:1", 500))->backup_address(), "")
      << "replication 1: no backups";
  clock_.Advance(absl::Seconds(4));
  ASSERT_THAT(Heartbeat(PsBeat(1, "127.0.0.1:2", 80)), IsOk());
  ASSERT_THAT(Heartbeat(StandbyBeat(0, -1)), IsOk());
  state_->CheckLiveness();
  ASSERT_EQ(Heartbeat(StandbyBeat(0, -1))->take_over_index(), 0);
  EXPECT_FALSE(state_->Status().recoveries(0).settled());
  ASSERT_THAT(Heartbeat(PsBeat(0, "127.0.0.1:5", 320)), IsOk());
  const proto::ClusterStatusResponse status = state_->Status();
  EXPECT_EQ(status.recoveries(0).source(), "checkpoint");
  EXPECT_EQ(status.recoveries(0).lost(), 180u);
  EXPECT_EQ(status.updates_lost(), 180u);
  Restart();
  EXPECT_EQ(state_->Status().updates_lost(), 180u) << "kept in the state file";
}

TEST_F(ClusterStateTest,
       ARestartWithFewerUpdatesThanTheBackupLetsTheBackupTakeOver) {
  RegisterPs(0, "127.0.0.1:1");
  RegisterPs(1, "127.0.0.1:2");
  RegisterPs(0, "127.0.0.1:5", /*standby=*/true);
  ASSERT_THAT(Heartbeat(PsBeat(0, "127.0.0.1:1", 500)), IsOk());
  ASSERT_THAT(Heartbeat(StandbyBeat(0, 0)), IsOk());
  // ps 0 was SIGKILLed and restarted at once (before it was declared dead)
  // on the same port, from a checkpoint holding 300 of the 500 updates.
  proto::RegisterServerRequest restart;
  restart.set_index(0);
  restart.set_address("127.0.0.1:1");
  restart.set_applied_total(300);
  EXPECT_THAT(RegisterServer(restart),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       HasSubstr("serves the shard now")));
  EXPECT_EQ(state_->Placement().shards(0).address(), "127.0.0.1:5");
  EXPECT_EQ(Heartbeat(StandbyBeat(0, 0))->take_over_index(), 0);
  ASSERT_THAT(Heartbeat(PsBeat(0, "127.0.0.1:5", 500)), IsOk());
  EXPECT_EQ(state_->Status().recoveries(0).source(), "replica");
  EXPECT_EQ(state_->Status().updates_lost(), 0u);
  // Without a backup in sync the restart is let in, and its loss counted.
  RegisterPs(1, "127.0.0.1:2");
  ASSERT_THAT(Heartbeat(PsBeat(1, "127.0.0.1:2", 40)), IsOk());
  proto::RegisterServerRequest restart1;
  restart1.set_index(1);
  restart1.set_address("127.0.0.1:2");
  restart1.set_applied_total(10);
  ASSERT_THAT(RegisterServer(restart1), IsOk());
  EXPECT_EQ(state_->Status().updates_lost(), 30u);
}

TEST_F(ClusterStateTest, ASecondDaemonCannotTakeALiveShard) {
  // ps 0 heartbeats; ps 1 died (silent).
  RegisterPs(0, "127.0.0.1:1");
  RegisterPs(1, "127.0.0.1:2");
  ASSERT_THAT(Heartbeat(PsBeat(1, "127.0.0.1:2", 90)), IsOk());
  ASSERT_THAT(Heartbeat(PsBeat(0, "127.0.0.1:1", 40)), IsOk());
  proto::RegisterServerRequest second;
  second.set_index(0);
  second.set_address("127.0.0.1:9");
  EXPECT_THAT(state_->RegisterServer(second),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       HasSubstr("ps 0's place is held by the process "
                                 "registered from 127.0.0.1:1")));
  second.set_address("10.9.9.9:7001");  // from another host
  EXPECT_THAT(state_->RegisterServer(second),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       HasSubstr("rejoins as a spare")));
  EXPECT_EQ(state_->Placement().shards(0).address(), "127.0.0.1:1");
  // ps 1's lease runs out while ps 0 goes on heartbeating: ps 1's restart
  // is let in, and what it lost is recorded; ps 0 keeps its place.
  clock_.Advance(absl::Seconds(2));
  ASSERT_THAT(Heartbeat(PsBeat(0, "127.0.0.1:1", 40)), IsOk());
  clock_.Advance(absl::Seconds(1.5));
  ASSERT_THAT(Heartbeat(PsBeat(0, "127.0.0.1:1", 40)), IsOk());
  second.set_address("127.0.0.1:9");
  EXPECT_THAT(state_->RegisterServer(second),
              StatusIs(absl::StatusCode::kAlreadyExists));
  proto::RegisterServerRequest restart;
  restart.set_index(1);
  restart.set_address("127.0.0.1:8");
  restart.set_applied_total(0);
  ASSERT_THAT(state_->RegisterServer(restart), IsOk());
  const proto::ClusterStatusResponse status = state_->Status();
  ASSERT_EQ(status.recoveries_size(), 1);
  EXPECT_EQ(status.recoveries(0).source(), "restart");
  EXPECT_EQ(status.recoveries(0).lost(), 90u)
      << "restarted from initial values: everything is lost";
}

// Issue 42 attack 2: a stranger took a heartbeating worker's place because
// the coordinator's probe of the worker's address, starved by a flood of
// idle connections, got no answer. Liveness is the member's lease now: as
// long as the worker heartbeats within heartbeat.timeout_s, no registration
// without its key takes its place, however long the stranger keeps trying,
// from its own address or the worker's. Only a daemon answering at the
// worker's own address as another process (restarted in place) ends the
// lease early; silence never does.
TEST_F(ClusterStateTest, AHeartbeatingWorkerKeepsItsPlaceWhateverAProbeSays) {
  std::optional<uint64_t> answer;  // nothing answers: a flooded port
  int probed = 0;
  probe_ = [&](const std::string&) -> std::optional<uint64_t> {
    ++probed;
    return answer;
  };
  Restart();
  RegisterWorker(0);
  const uint64_t incarnation = worker_incarnations_[0];
  proto::RegisterWorkerRequest stranger;
  stranger.set_index(0);
  for (int i = 0; i < 10; ++i) {  // 10 s: more than three leases
    clock_.Advance(absl::Seconds(1));
    ASSERT_THAT(Beat("worker", 0, NAN), IsOk());
    for (const char* address : {"127.0.0.1:6", "127.0.0.1:3"}) {
      stranger.set_address(address);
      EXPECT_THAT(state_->RegisterWorker(stranger),
                  StatusIs(absl::StatusCode::kUnavailable,
                           HasSubstr("worker 0's place is held")))
          << address;
    }
  }
  EXPECT_EQ(probed, 10) << "asked only for the worker's own address";
  // The worker itself answering there: still its place.
  answer = incarnation;
  EXPECT_THAT(state_->RegisterWorker(stranger),
              StatusIs(absl::StatusCode::kUnavailable));
  auto beat = Beat("worker", 0, NAN);
  ASSERT_THAT(beat, IsOk());
  EXPECT_FALSE(beat->replaced());
  // Restarted in place: a new process answers at the worker's address (no
  // incarnation yet), so the old one lost its port; let in at once, with a
  // new incarnation that fences the old one (told `replaced`).
  answer = 0;
  auto restarted = state_->RegisterWorker(stranger);
  ASSERT_THAT(restarted, IsOk());
  EXPECT_GT(restarted->incarnation(), incarnation);
  beat = Beat("worker", 0, NAN);
  ASSERT_THAT(beat, IsOk());
  EXPECT_TRUE(beat->replaced());
  // From another address, once silent for the lease.
  Remember("worker", 0, "127.0.0.1:3", restarted->member_key(),
           restarted->incarnation());
  answer.reset();
  clock_.Advance(absl::Seconds(3));
  stranger.set_address("127.0.0.1:6");
  auto taken = state_->RegisterWorker(stranger);
  ASSERT_THAT(taken, IsOk());
  EXPECT_GT(taken->incarnation(), restarted->incarnation());
}

// A coordinator killed while its members run restores them with a lease
// (they may still be serving); one stopped in order (the launcher stops it
// last; --resume starts everything again) restores them without, so the new
// processes register at once, and one heard again holds its place.
TEST_F(ClusterStateTest, ARestoredMemberHoldsALeaseOnlyAfterACrash) {
  RegisterPs(0, "127.0.0.1:1");
  RegisterPs(1, "127.0.0.1:2");
  RegisterWorker(0);
  RegisterWorker(1);
  Restart();  // killed: nothing saved at the end
  proto::RegisterWorkerRequest stranger;
  stranger.set_index(0);
  stranger.set_address("127.0.0.1:7");
  EXPECT_THAT(state_->RegisterWorker(stranger),
              StatusIs(absl::StatusCode::kUnavailable));
  state_->SaveNow();  // stopped in order
  Restart();
  proto::RegisterWorkerRequest restarted;
  restarted.set_index(0);
  restarted.set_address("127.0.0.1:7");
  EXPECT_THAT(state_->RegisterWorker(restarted), IsOk());
  proto::RegisterServerRequest ps;
  ps.set_index(0);
  ps.set_address("127.0.0.1:8");
  EXPECT_THAT(state_->RegisterServer(ps), IsOk());
  // Worker 1's old process heartbeats to the restarted coordinator: its
  // lease holds again.
  ASSERT_THAT(Beat("worker", 1, NAN), IsOk());
  restarted.set_index(1);
  EXPECT_THAT(state_->RegisterWorker(restarted),
              StatusIs(absl::StatusCode::kUnavailable));
}

// A shard served from another host (a standby took it over) whose server
// heartbeats: the old ps, restarted on its own host, rejoins as a spare
// instead of taking the live shard from its checkpoint. Once the server is
// declared dead, the shard's ps may restart.
TEST_F(ClusterStateTest, AServerThatHeartbeatsFromAnotherHostKeepsItsShard) {
  config_.cluster.ps = {"10.0.0.1:7001", "10.0.0.2:7001"};
  Restart();
  RegisterPs(0, "10.0.0.3:7001");  // ps 0's shard, served by another host
  RegisterPs(1, "10.0.0.2:7001");
  ASSERT_THAT(Heartbeat(PsBeat(0, "10.0.0.3:7001", 40)), IsOk());
  proto::RegisterServerRequest restart;
  restart.set_index(0);
  restart.set_address("10.0.0.1:7001");
  restart.set_applied_total(10);
  EXPECT_THAT(state_->RegisterServer(restart),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       HasSubstr("registered from 10.0.0.3:7001, which "
                                 "heartbeated 0.0 s ago")));
  EXPECT_EQ(state_->Placement().shards(0).address(), "10.0.0.3:7001");
  EXPECT_EQ(state_->Status().recoveries_size(), 0);
  // Silent past the timeout: dead, and the restart is let in.
  clock_.Advance(absl::Seconds(4));
  ASSERT_THAT(Heartbeat(PsBeat(1, "10.0.0.2:7001", 40)), IsOk());
  state_->CheckLiveness();
  ASSERT_THAT(RegisterServer(restart), IsOk());
  EXPECT_EQ(state_->Placement().shards(0).address(), "10.0.0.1:7001");
}

// Invalid registrations are refused before anything changes: the real ps 0
// keeps its place and its key (attack: an empty RegisterServer{} made it
// stand down).
TEST_F(ClusterStateTest, InvalidRegistrationsChangeNothing) {
  RegisterPs(0, "127.0.0.1:1");
  RegisterPs(1, "127.0.0.1:2");
  RegisterWorker(0);
  const std::string before = state_->Status().DebugString();
  struct Case {
    const char* name;
    proto::RegisterServerRequest request;
    const char* message;
  };
  std::vector<Case> cases(6);
  cases[0] = {"empty", {}, "address is empty"};
  cases[1].name = "index out of range";
  cases[1].request.set_index(2);
  cases[1].request.set_address("127.0.0.1:9");
  cases[1].message = "valid indices are 0 to 1";
  cases[2].name = "negative index";
  cases[2].request.set_index(-1);
  cases[2].request.set_address("127.0.0.1:9");
  cases[2].message = "ps index -1 is not in the config";
  cases[3].name = "standby out of range";
  cases[3].request.set_index(1);
  cases[3].request.set_standby(true);
  cases[3].request.set_address("127.0.0.1:9");
  cases[3].message = "cluster.standby_ps";
  cases[4].name = "long address";
  cases[4].request.set_address(std::string(257, 'a'));
  cases[4].message = "address is 257 bytes, over the limit of 256";
  cases[5].name = "long key";
  cases[5].request.set_address("127.0.0.1:9");
  cases[5].request.set_member_key(std::string(65, 'k'));
  cases[5].message = "member_key is 65 bytes";
  for (const Case& c : cases) {
    EXPECT_THAT(
        state_->RegisterServer(c.request),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.name;
  }
  proto::RegisterWorkerRequest worker;
  worker.set_index(0);
  EXPECT_THAT(state_->RegisterWorker(worker),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("address is empty")));
  worker.set_index(7);
  worker.set_address("127.0.0.1:9");
  EXPECT_THAT(state_->RegisterWorker(worker),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("cluster.workers")));
  EXPECT_EQ(state_->Status().DebugString(), before);
  auto beat = Heartbeat(PsBeat(0, "127.0.0.1:1", 0));
  ASSERT_THAT(beat, IsOk());
  EXPECT_FALSE(beat->replaced());
}

// A heartbeat counts only with the member's key: a forged one (attack: one
// report of accuracy >= target stopped the job) is PermissionDenied and
// changes nothing: no stop, no figures, no liveness.
TEST_F(ClusterStateTest, AHeartbeatWithoutTheMembersKeyChangesNothing) {
  RegisterPs(0, "127.0.0.1:1");
  RegisterPs(1, "127.0.0.1:2");
  RegisterWorker(0);
  RegisterWorker(1);
  clock_.Advance(absl::Seconds(2));
  ASSERT_THAT(Beat("worker", 0, 0.5), IsOk());
  const std::string before = state_->Status().DebugString();
  for (const std::string& key : std::vector<std::string>{
           "", "0123456789abcdef0123456789abcdef", keys_["worker:1"]}) {
    proto::HeartbeatRequest forged;
    forged.set_role("worker");
    forged.set_index(0);
    forged.set_member_key(key);
    forged.mutable_report()->set_accuracy(0.99);
    forged.mutable_report()->set_finished(true);
    forged.mutable_report()->set_diverged("forged");
    EXPECT_THAT(state_->Heartbeat(forged),
                StatusIs(absl::StatusCode::kPermissionDenied,
                         HasSubstr("heartbeat for worker 0 is not from its "
                                   "registered process")))
        << "key '" << key << "'";
  }
  EXPECT_EQ(state_->Status().DebugString(), before);
  clock_.Advance(absl::Seconds(2));
  // The forged beats kept nobody alive: worker 0's last real beat was 2 s
  // ago, and the others' 4 s ago.
  EXPECT_EQ(state_->CheckLiveness(), 3) << "ps 0, ps 1 and worker 1";
  EXPECT_FALSE(state_->Status().stop());
  PsHolds(0, {0, 1});
  ASSERT_FALSE(Evaluated(0, 0.95, 1)->stop());
  auto real = Evaluated(1, 0.95, 1);
  ASSERT_THAT(real, IsOk());
  EXPECT_TRUE(real->stop()) << "the real workers' reports still count";
}

TEST_F(ClusterStateTest, OversizedReportsAreRefusedBeforeStoring) {
  RegisterWorker(0);
  const std::string before = state_->Status().DebugString();
  proto::HeartbeatRequest beat;
  beat.set_role("worker");
  beat.set_index(0);
  beat.mutable_report()->set_device(std::string(257, 'd'));
  EXPECT_THAT(Heartbeat(beat),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("report.device is 257 bytes")));
  beat.mutable_report()->clear_device();
  beat.mutable_report()->set_diverged(std::string(4097, 'x'));
  EXPECT_THAT(Heartbeat(beat), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("report.diverged")));
  beat.mutable_report()->clear_diverged();
  beat.set_role(std::string(1000, 'r'));
  EXPECT_THAT(Heartbeat(beat), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("role is 1000 bytes")));
  EXPECT_EQ(state_->Status().DebugString(), before);
}

// A live member's place is taken only by its own process (its key) or once
// its process let its lease run out; a replaced process, and only it, is
// told `replaced`.
TEST_F(ClusterStateTest, ALiveMembersPlaceNeedsItsKey) {
  RegisterPs(0, "127.0.0.1:1");
  RegisterPs(1, "127.0.0.1:2");
  RegisterPs(0, "127.0.0.1:5", /*standby=*/true);
  RegisterWorker(0);
  const std::string ps0_key = keys_["ps:0"];
  const uint64_t epoch = state_->Placement().epoch();
  // A stranger, at its own address or claiming ps 0's.
  for (const std::string& address :
       std::vector<std::string>{"127.0.0.1:6", "127.0.0.1:1"}) {
    for (const bool standby : {false, true}) {
      proto::RegisterServerRequest stranger;
      stranger.set_index(0);
      stranger.set_address(address);
      stranger.set_standby(standby);
      EXPECT_THAT(state_->RegisterServer(stranger),
                  StatusIs(standby ? absl::StatusCode::kUnavailable
                                   : absl::StatusCode::kAlreadyExists,
                           HasSubstr("'s place is held by the process")))
          << address << (standby ? " standby" : " ps");
    }
  }
  proto::RegisterWorkerRequest worker;
  worker.set_index(0);
  worker.set_address("127.0.0.1:6");
  EXPECT_THAT(state_->RegisterWorker(worker),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("worker 0's place is held by the process")));
  EXPECT_EQ(state_->Placement().epoch(), epoch);
  EXPECT_EQ(state_->Placement().shards(0).address(), "127.0.0.1:1");
  auto beat = Heartbeat(PsBeat(0, "127.0.0.1:1", 0));
  ASSERT_THAT(beat, IsOk());
  EXPECT_FALSE(beat->replaced()) << "the real ps 0 keeps serving";
  // Its own process registering again keeps its key.
  proto::RegisterServerRequest again;
  again.set_index(0);
  again.set_address("127.0.0.1:1");
  again.set_member_key(ps0_key);
  auto registered = state_->RegisterServer(again);
  ASSERT_THAT(registered, IsOk());
  EXPECT_EQ(registered->member_key(), ps0_key);
  // A new process in the old one's place, once the old one stayed silent
  // for its lease, is let in, and the old key is only told `replaced`.
  RegisterPs(0, "127.0.0.1:1");
  EXPECT_NE(keys_["ps:0"], ps0_key);
  proto::HeartbeatRequest old = PsBeat(0, "127.0.0.1:1", 0);
  old.set_member_key(ps0_key);
  beat = state_->Heartbeat(old);
  ASSERT_THAT(beat, IsOk());
  EXPECT_TRUE(beat->replaced());
  old.set_member_key("");
  EXPECT_THAT(state_->Heartbeat(old),
              StatusIs(absl::StatusCode::kPermissionDenied));
  // Keys and retired keys survive a coordinator restart; no key is shown.
  Restart();
  ASSERT_THAT(Heartbeat(PsBeat(0, "127.0.0.1:1", 0)), IsOk());
  old.set_member_key(ps0_key);
  EXPECT_TRUE(state_->Heartbeat(old)->replaced());
  const std::string status = state_->Status().DebugString();
  EXPECT_EQ(status.find(ps0_key), std::string::npos);
  EXPECT_EQ(status.find(keys_["ps:0"]), std::string::npos);
}

// A ps learns every registered worker's incarnation, from its registration
// and every heartbeat.
TEST_F(ClusterStateTest, PsLearnsTheWorkersIncarnations) {
  RegisterPs(0, "127.0.0.1:1");
  RegisterWorker(1);
  RegisterWorker(0);
  auto beat = Heartbeat(PsBeat(0, "127.0.0.1:1", 0));
  ASSERT_THAT(beat, IsOk());
  ASSERT_EQ(beat->worker_incarnations_size(), 2);
  EXPECT_EQ(beat->worker_incarnations(0).worker(), 0);
  EXPECT_EQ(beat->worker_incarnations(0).incarnation(),
            incarnations_["127.0.0.1:3"]);
  EXPECT_EQ(beat->worker_incarnations(1).worker(), 1);
  EXPECT_EQ(beat->worker_incarnations(1).incarnation(),
            incarnations_["127.0.0.1:4"]);
  proto::RegisterServerRequest ps1;
  ps1.set_index(1);
  ps1.set_address("127.0.0.1:2");
  auto registered = RegisterServer(ps1);
  ASSERT_THAT(registered, IsOk());
  EXPECT_EQ(registered->worker_incarnations_size(), 2);
  EXPECT_GT(registered->incarnation(),
            beat->worker_incarnations(1).incarnation());
}

// Issue 42 attack 1: a ps that registered as a spare standby was told every
// worker's incarnation and push key, and pushed as them. A ps is told only
// each key's digest (which pushes nothing), and a standby nothing until it
// backs a shard up.
TEST_F(ClusterStateTest, NoReplyCarriesAWorkersPushKey) {
  config_.cluster.replication = 1;  // the standby stays idle
  Restart();
  RegisterPs(0, "127.0.0.1:1");
  RegisterPs(1, "127.0.0.1:2");
  proto::RegisterWorkerRequest request;
  request.set_index(0);
  auto worker = RegisterWorkerCall(request);
  ASSERT_THAT(worker, IsOk());
  ASSERT_NE(worker->push_key(), 0u);
  auto beat = Heartbeat(PsBeat(0, "127.0.0.1:1", 0));
  ASSERT_THAT(beat, IsOk());
  ASSERT_EQ(beat->worker_incarnations_size(), 1);
  EXPECT_EQ(beat->worker_incarnations(0).push_key_digest(),
            PushKeyDigest(0, worker->incarnation(), worker->push_key()));
  const uint64_t key = worker->push_key();
  EXPECT_EQ(beat->SerializeAsString().find(
                std::string(reinterpret_cast<const char*>(&key), 8)),
            std::string::npos);
  proto::RegisterServerRequest standby;
  standby.set_index(0);
  standby.set_address("127.0.0.1:5");
  standby.set_standby(true);
  auto registered = RegisterServer(standby);
  ASSERT_THAT(registered, IsOk());
  EXPECT_EQ(registered->worker_incarnations_size(), 0);
  auto standby_beat = Heartbeat(StandbyBeat(0, -1));
  ASSERT_THAT(standby_beat, IsOk());
  EXPECT_EQ(standby_beat->worker_incarnations_size(), 0);
  // Made a shard's backup (replication 2), it learns the digests.
  config_.cluster.replication = 2;
  Restart();
  standby_beat = Heartbeat(StandbyBeat(0, -1));
  ASSERT_THAT(standby_beat, IsOk());
  ASSERT_GE(standby_beat->replica_of(), 0);
  EXPECT_EQ(standby_beat->worker_incarnations_size(), 1);
}

TEST_F(ClusterStateTest, AStalledCoordinatorGivesGraceInsteadOfJudging) {
  RegisterPs(0, "127.0.0.1:1");
  RegisterPs(1, "127.0.0.1:2");
  RegisterWorker(0);
  clock_.Advance(absl::Seconds(20));  // the coordinator was stopped
  state_->GiveGrace(absl::Seconds(20));
  EXPECT_EQ(state_->CheckLiveness(), 0) << "nobody dead for its own pause";
  clock_.Advance(absl::Seconds(4));  // but silence after the grace counts
  EXPECT_EQ(state_->CheckLiveness(), 3);
}

}  // namespace
}  // namespace downpour::coordinator
