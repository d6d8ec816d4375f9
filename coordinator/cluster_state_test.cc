#include "coordinator/cluster_state.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/testing/fake_clock.h"
#include "common/testing/status_matchers.h"
#include "coordinator/test_cluster.h"
#include "gtest/gtest.h"

namespace downpour::coordinator {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ClusterStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Config config;
    config.cluster.ps = {"127.0.0.1:1", "127.0.0.1:2"};
    config.cluster.workers = {"127.0.0.1:3", "127.0.0.1:4"};
    config.training.target_accuracy = 0.9;
    config.cluster.standby_ps = {"127.0.0.1:5"};
    config.heartbeat.timeout_s = 3;
    config.coordinator.state_dir =
        std::string(std::getenv("TEST_TMPDIR")) + "/" +
        ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(config.coordinator.state_dir);
    config_ = config;
    Restart();
  }

  // A new ClusterState over the same state_dir: what a restarted coordinator
  // sees.
  void Restart() {
    state_.reset();
    auto state = ClusterState::Create({config_, &clock_, probe_});
    ASSERT_TRUE(state.ok()) << state.status();
    state_ = *std::move(state);
  }

  void RegisterWorker(int index) {
    proto::RegisterWorkerRequest request;
    request.set_index(index);
    ASSERT_THAT(RegisterWorkerCall(request), IsOk());
  }

  std::vector<int> PartsOf(int worker) {
    proto::HeartbeatRequest request;
    request.set_role("worker");
    request.set_index(worker);
    auto response = Heartbeat(request);
    EXPECT_THAT(response, IsOk());
    if (!response.ok()) return {};
    return {response->partition().parts().begin(),
            response->partition().parts().end()};
  }

  void RegisterPs(int index, const std::string& address, bool standby = false) {
    proto::RegisterServerRequest request;
    request.set_index(index);
    request.set_address(address);
    request.set_standby(standby);
    ASSERT_THAT(RegisterServer(request), IsOk());
  }

  // Ps `ps` reports holding pushes of these workers' registered processes.
  void PsHolds(int ps, const std::vector<int>& workers) {
    proto::HeartbeatRequest request;
    request.set_role("ps");
    request.set_index(ps);
    for (int w : workers) {
      proto::WorkerIncarnation* from =
          request.mutable_report()->add_applied_from();
      from->set_worker(w);
      from->set_incarnation(worker_incarnations_[w]);
    }
    ASSERT_THAT(Heartbeat(request), IsOk());
  }

  // Worker `index` reports its `evaluations`th test accuracy.
  absl::StatusOr<proto::HeartbeatResponse> Evaluated(int index, double accuracy,
                                                     uint64_t evaluations) {
    proto::HeartbeatRequest request;
    request.set_role("worker");
    request.set_index(index);
    request.mutable_report()->set_accuracy(accuracy);
    request.mutable_report()->set_evaluations(evaluations);
    return Heartbeat(request);
  }

  absl::StatusOr<proto::HeartbeatResponse> Beat(const std::string& role,
                                                int index, double accuracy) {
    proto::HeartbeatRequest request;
    request.set_role(role);
    request.set_index(index);
    request.mutable_report()->set_accuracy(accuracy);
    return Heartbeat(request);
  }

  // The calls as the members make them: registrations carry no key (a new
  // process) and the key each got is remembered by address and by member;
  // heartbeats carry the key of their address's process (else their
  // member's). A worker registers at its config address unless told one.
  absl::StatusOr<proto::RegisterServerResponse> RegisterServer(
      const proto::RegisterServerRequest& request) {
    auto response = state_->RegisterServer(request);
    if (response.ok()) {
      Remember(request.standby() ? "standby" : "ps", request.index(),
               request.address(), response->member_key(),
               response->incarnation());
    }
    return response;
  }
  absl::StatusOr<proto::RegisterWorkerResponse> RegisterWorkerCall(
      proto::RegisterWorkerRequest request) {
    if (request.address().empty() && request.index() >= 0 &&
        request.index() < static_cast<int>(config_.cluster.workers.size())) {
      request.set_address(config_.cluster.workers[request.index()]);
    }
    auto response = state_->RegisterWorker(request);
    if (response.ok()) {
      Remember("worker", request.index(), request.address(),
               response->member_key(), response->incarnation());
    }
    return response;
  }
  absl::StatusOr<proto::HeartbeatResponse> Heartbeat(
      proto::HeartbeatRequest request) {
    if (request.member_key().empty()) {
      auto it = keys_.find(request.address());
      if (request.address().empty() || it == keys_.end()) {
        it = keys_.find(absl::StrCat(request.role(), ":", request.index()));
      }
      if (it != keys_.end()) request.set_member_key(it->second);
    }
    return state_->Heartbeat(request);
  }
  void Remember(const std::string& role, int index, const std::string& address,
                const std::string& key, uint64_t incarnation) {
    EXPECT_EQ(key.size(), 32u);
    keys_[absl::StrCat(role, ":", index)] = key;
    if (role == "worker") worker_incarnations_[index] = incarnation;
    if (!address.empty()) {
      keys_[address] = key;
      incarnations_[address] = incarnation;
    }
  }

  FakeClock clock_{absl::FromUnixSeconds(1000)};
  // The probe of a member's address (nullptr: nobody answers).
  std::function<std::optional<uint64_t>(const std::string&)> probe_;
  std::map<std::string, std::string> keys_;       // by address and "role:index"
  std::map<std::string, uint64_t> incarnations_;  // by address
  std::map<int, uint64_t> worker_incarnations_;   // by worker index
  Config config_;
  std::unique_ptr<ClusterState> state_;
};

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

// A ps heartbeat from `address` reporting `applied` updates.
proto::HeartbeatRequest PsBeat(int index, const std::string& address,
                               uint64_t applied) {
  proto::HeartbeatRequest request;
  request.set_role("ps");
  request.set_index(index);
  request.set_address(address);
  request.mutable_report()->set_applied_total(applied);
  return request;
}

proto::HeartbeatRequest StandbyBeat(int index, int replica_shard) {
  proto::HeartbeatRequest request;
  request.set_role("standby");
  request.set_index(index);
  request.mutable_report()->set_has_replica(replica_shard >= 0);
  request.mutable_report()->set_replica_shard(replica_shard);
  return request;
}

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
  // ps 0's process answers at its address as itself; ps 1's died.
  probe_ = [this](const std::string& address) -> std::optional<uint64_t> {
    if (address != "127.0.0.1:1") return std::nullopt;
    return incarnations_[address];
  };
  Restart();
  RegisterPs(0, "127.0.0.1:1");
  RegisterPs(1, "127.0.0.1:2");
  ASSERT_THAT(Heartbeat(PsBeat(0, "127.0.0.1:1", 40)), IsOk());
  proto::RegisterServerRequest second;
  second.set_index(0);
  second.set_address("127.0.0.1:9");
  EXPECT_THAT(RegisterServer(second),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       HasSubstr("127.0.0.1:1, which is alive")));
  EXPECT_EQ(state_->Placement().shards(0).address(), "127.0.0.1:1");
  // ps 1's old address does not answer (it died): its restart is let in,
  // and what the restart lost is recorded.
  ASSERT_THAT(Heartbeat(PsBeat(1, "127.0.0.1:2", 90)), IsOk());
  proto::RegisterServerRequest restart;
  restart.set_index(1);
  restart.set_address("127.0.0.1:8");
  restart.set_applied_total(0);
  ASSERT_THAT(RegisterServer(restart), IsOk());
  const proto::ClusterStatusResponse status = state_->Status();
  ASSERT_EQ(status.recoveries_size(), 1);
  EXPECT_EQ(status.recoveries(0).source(), "restart");
  EXPECT_EQ(status.recoveries(0).lost(), 90u)
      << "restarted from initial values: everything is lost";
}

// A shard served from another host (a standby took it over) whose server
// heartbeats but does not answer the probe (the path from the coordinator
// still reconnecting after a partition): the old ps, restarted on its own
// host, rejoins as a spare instead of taking the live shard from its
// checkpoint. Once the server is declared dead, the shard's ps may restart.
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
  EXPECT_THAT(RegisterServer(restart),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       HasSubstr("10.0.0.3:7001, which heartbeats")));
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
// its process no longer answers at its address as itself; a replaced
// process, and only it, is told `replaced`.
TEST_F(ClusterStateTest, ALiveMembersPlaceNeedsItsKey) {
  probe_ = [this](const std::string& address) -> std::optional<uint64_t> {
    if (address == "127.0.0.1:9") return 0;  // someone not registered
    return incarnations_[address];
  };
  Restart();
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
      EXPECT_THAT(
          state_->RegisterServer(stranger),
          StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("is alive")))
          << address << (standby ? " standby" : " ps");
    }
  }
  proto::RegisterWorkerRequest worker;
  worker.set_index(0);
  worker.set_address("127.0.0.1:6");
  EXPECT_THAT(state_->RegisterWorker(worker),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       HasSubstr("worker 0 is registered to a live process")));
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
  // A new process in the old one's place (it holds the address now, so the
  // old one is gone) is let in, and the old key is only told `replaced`.
  incarnations_["127.0.0.1:1"] = 0;
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

namespace downpour::coordinator {
namespace {

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
    auto response = state_->RegisterServer(request);
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
