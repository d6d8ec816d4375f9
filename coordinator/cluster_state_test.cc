#include "coordinator/cluster_state.h"

#include <cmath>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace downpour::coordinator {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;

class ClusterStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Config config;
    config.cluster.ps = {"127.0.0.1:1", "127.0.0.1:2"};
    config.cluster.workers = {"127.0.0.1:3", "127.0.0.1:4"};
    config.training.target_accuracy = 0.9;
    config.heartbeat.timeout_s = 3;
    auto state = ClusterState::Create({config, [this] { return now_; }});
    ASSERT_TRUE(state.ok()) << state.status();
    state_ = *std::move(state);
  }

  void RegisterPs(int index, const std::string& address) {
    proto::RegisterServerRequest request;
    request.set_index(index);
    request.set_address(address);
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

  absl::Time now_ = absl::FromUnixSeconds(1000);
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

TEST_F(ClusterStateTest, PsMovingToANewAddressBumpsTheEpoch) {
  RegisterPs(0, "127.0.0.1:1");
  RegisterPs(1, "127.0.0.1:2");
  RegisterPs(1, "127.0.0.1:9");
  EXPECT_EQ(state_->Placement().epoch(), 2u);
  EXPECT_EQ(state_->Placement().shards(1).address(), "127.0.0.1:9");
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
  now_ += absl::Seconds(2);
  ASSERT_THAT(Beat("worker", 1, NAN), IsOk());
  now_ += absl::Seconds(2);
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
