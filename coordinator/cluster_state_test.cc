#include "coordinator/cluster_state.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/testing/fake_clock.h"
#include "common/testing/status_matchers.h"
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

  // A new ClusterState over the same state_dir: what a restarted coordinator sees.
  void Restart() {
    state_.reset();
    auto state = ClusterState::Create({config_, &clock_});
    ASSERT_TRUE(state.ok()) << state.status();
    state_ = *std::move(state);
  }

  void RegisterWorker(int index) {
    proto::RegisterWorkerRequest request;
    request.set_index(index);
    ASSERT_THAT(state_->RegisterWorker(request), IsOk());
  }

  std::vector<int> PartsOf(int worker) {
    proto::HeartbeatRequest request;
    request.set_role("worker");
    request.set_index(worker);
    auto response = state_->Heartbeat(request);
    EXPECT_THAT(response, IsOk());
    if (!response.ok()) return {};
    return {response->partition().parts().begin(), response->partition().parts().end()};
  }

  void RegisterPs(int index, const std::string& address, bool standby = false) {
    proto::RegisterServerRequest request;
    request.set_index(index);
    request.set_address(address);
    request.set_standby(standby);
    ASSERT_THAT(state_->RegisterServer(request), IsOk());
  }

  absl::StatusOr<proto::HeartbeatResponse> Beat(const std::string& role,
                                                int index, double accuracy) {
    proto::HeartbeatRequest request;
    request.set_role(role);
    request.set_index(index);
    request.mutable_report()->set_accuracy(accuracy);
    return state_->Heartbeat(request);
  }

  FakeClock clock_{absl::FromUnixSeconds(1000)};
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
  ASSERT_THAT(state_->Heartbeat(done), IsOk());
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
    auto response = state_->RegisterWorker(request);
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
    auto response = state_->RegisterWorker(request);
    EXPECT_THAT(response, IsOk());
    return response.ok() ? response->start_clock() : 12345;
  };
  auto beat = [&](int index, uint64_t clock, bool finished) {
    proto::HeartbeatRequest request;
    request.set_role("worker");
    request.set_index(index);
    request.mutable_report()->set_clock(clock);
    request.mutable_report()->set_finished(finished);
    ASSERT_THAT(state_->Heartbeat(request), IsOk());
  };
  EXPECT_EQ(start(0), 0u);  // a fresh job
  EXPECT_EQ(start(1), 0u);
  beat(0, 40, false);
  beat(1, 38, false);
  EXPECT_EQ(start(1), 40u);  // restarted: joins worker 0, not its own past
  beat(1, 41, false);
  beat(0, 50, true);  // finished: not waited for any more
  EXPECT_EQ(start(1), 0u);  // nobody else is training
  beat(0, 50, false);
  EXPECT_EQ(start(1), 50u);
}

TEST_F(ClusterStateTest, ADeadShardGoesToAStandbyAndTheOldPsIsToldItWasReplaced) {
  RegisterPs(0, "127.0.0.1:1");
  RegisterPs(1, "127.0.0.1:2");
  RegisterPs(0, "127.0.0.1:5", /*standby=*/true);
  ASSERT_EQ(state_->Placement().epoch(), 1u);
  clock_.Advance(absl::Seconds(2));
  for (auto [role, index] : {std::pair<const char*, int>{"ps", 0}, {"standby", 0}}) {
    proto::HeartbeatRequest beat;
    beat.set_role(role);
    beat.set_index(index);
    ASSERT_THAT(state_->Heartbeat(beat), IsOk());
  }
  clock_.Advance(absl::Seconds(2));
  state_->CheckLiveness();  // ps 1 has been silent for 4 s
  EXPECT_EQ(state_->Placement().epoch(), 2u);
  EXPECT_EQ(state_->Placement().shards(1).address(), "127.0.0.1:5");
  proto::HeartbeatRequest standby;
  standby.set_role("standby");
  standby.set_index(0);
  auto reply = state_->Heartbeat(standby);
  ASSERT_THAT(reply, IsOk());
  EXPECT_EQ(reply->take_over_index(), 1);
  // The old ps 1 wakes up (SIGCONT) and is told to stand down.
  proto::HeartbeatRequest old;
  old.set_role("ps");
  old.set_index(1);
  old.set_address("127.0.0.1:2");
  reply = state_->Heartbeat(old);
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
  EXPECT_THAT(state_->Heartbeat(beat), IsOk()) << "no re-registration needed";
  EXPECT_THAT(PartsOf(0), ElementsAre(0));
}

TEST_F(ClusterStateTest, UnknownIndexIsRejected) {
  proto::RegisterServerRequest request;
  request.set_index(5);
  EXPECT_THAT(state_->RegisterServer(request),
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
  auto registered = state_->RegisterWorker(worker);
  ASSERT_THAT(registered, IsOk());
  EXPECT_EQ(registered->partition().part(), 1);
  EXPECT_EQ(registered->partition().num_parts(), 2);
  clock_.Advance(absl::Seconds(2));
  ASSERT_THAT(Beat("worker", 1, NAN), IsOk());
  clock_.Advance(absl::Seconds(2));
  EXPECT_EQ(state_->CheckLiveness(), 1);  // ps 0: 4 s silent; worker 1: 2 s
  proto::ClusterStatusResponse status = state_->Status();
  for (const auto& m : status.members()) {
    if (m.role() == "ps" && m.index() == 0) EXPECT_FALSE(m.alive());
    if (m.role() == "worker" && m.index() == 1) EXPECT_TRUE(m.alive());
  }
}

TEST_F(ClusterStateTest, JobStopsWhenAWorkerReachesTheTarget) {
  proto::RegisterWorkerRequest worker;
  worker.set_index(0);
  ASSERT_THAT(state_->RegisterWorker(worker), IsOk());
  auto beat = Beat("worker", 0, 0.5);
  ASSERT_THAT(beat, IsOk());
  EXPECT_FALSE(beat->stop());
  beat = Beat("worker", 0, 0.93);
  ASSERT_THAT(beat, IsOk());
  EXPECT_TRUE(beat->stop());
  EXPECT_THAT(beat->stop_reason(), HasSubstr("0.93"));
}

}  // namespace
}  // namespace downpour::coordinator

namespace downpour::coordinator {
namespace {

TEST_F(ClusterStateTest, AFinishedJobIsNotRestored) {
  RegisterPs(0, "127.0.0.1:1");
  RegisterPs(1, "127.0.0.1:2");
  RegisterWorker(0);
  proto::HeartbeatRequest beat;
  beat.set_role("worker");
  beat.set_index(0);
  beat.mutable_report()->set_accuracy(0.95);  // target 0.9: the job stops
  ASSERT_TRUE(state_->Heartbeat(beat)->stop());
  Restart();
  EXPECT_EQ(state_->Placement().epoch(), 0u) << "a new job starts unplaced";
  EXPECT_FALSE(state_->Status().stop());
}

}  // namespace
}  // namespace downpour::coordinator

namespace downpour::coordinator {
namespace {

TEST(RoleTest, NamesRoundTripAndOthersAreRejected) {
  for (Role role : {Role::kPs, Role::kWorker, Role::kStandby}) {
    EXPECT_EQ(ParseRole(RoleName(role)), role) << RoleName(role);
  }
  EXPECT_EQ(ParseRole("janitor"), std::nullopt);
  EXPECT_EQ(ParseRole(""), std::nullopt);
  EXPECT_EQ(ParseRole("PS"), std::nullopt);
}

TEST(StateFilePathTest, IsInTheStateDirOrEmpty) {
  EXPECT_EQ(StateFilePath("/var/lib/downpour"),
            "/var/lib/downpour/coordinator.state");
  EXPECT_EQ(StateFilePath(""), "");
}

TEST_F(ClusterStateTest, NoStateFileIsAFirstStart) {
  ASSERT_FALSE(std::filesystem::exists(
      StateFilePath(config_.coordinator.state_dir)));
  EXPECT_EQ(state_->Placement().epoch(), 0u);
  RegisterPs(0, "127.0.0.1:1");
  EXPECT_TRUE(std::filesystem::exists(
      StateFilePath(config_.coordinator.state_dir)));
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
