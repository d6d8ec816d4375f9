// The coordinator node in-process on 127.0.0.1:0, driven through
// CoordinatorClient as ps and workers drive it.
#include "coordinator/coordinator_node.h"

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "common/testing/fake_clock.h"
#include "common/testing/poll.h"
#include "common/testing/status_matchers.h"
#include "coordinator/test_cluster.h"
#include "gtest/gtest.h"
#include "membership/coordinator_client.h"

namespace downpour::coordinator {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::WaitUntil;
using ::testing::HasSubstr;

Config TestConfig() {
  Config config = TestClusterConfig();
  config.heartbeat.interval_s = 0.5;
  config.heartbeat.timeout_s = 3;
  return config;
}

class CoordinatorNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CoordinatorNode::Options options;
    options.config = TestConfig();
    options.listen = "127.0.0.1:0";
    options.clock = &clock_;
    auto node = CoordinatorNode::Start(std::move(options));
    ASSERT_THAT(node, IsOk());
    node_ = *std::move(node);
    client_ = std::make_unique<membership::CoordinatorClient>(
        node_->address(), TestConfig().rpc, "test");
  }

  FakeClock clock_;
  std::unique_ptr<CoordinatorNode> node_;
  std::unique_ptr<membership::CoordinatorClient> client_;
};

TEST_F(CoordinatorNodeTest, ServesRegistrationHeartbeatsPlacementAndStatus) {
  EXPECT_GT(node_->port(), 0);
  EXPECT_EQ(node_->address(), "127.0.0.1:" + std::to_string(node_->port()));

  ASSERT_THAT(client_->RegisterServer(0, "127.0.0.1:1"), IsOk());
  auto worker = client_->RegisterWorker(0, "127.0.0.1:2");
  ASSERT_THAT(worker, IsOk());
  EXPECT_EQ(worker->partition().num_parts(), 1);

  proto::HeartbeatRequest beat;
  beat.set_role("worker");
  beat.set_index(0);
  beat.mutable_report()->set_step(17);
  auto reply = client_->Heartbeat(beat);
  ASSERT_THAT(reply, IsOk());
  EXPECT_EQ(reply->placement_epoch(), 1u);

  auto placement = client_->GetPlacement();
  ASSERT_THAT(placement, IsOk());
  EXPECT_EQ(placement->epoch(), 1u);
  ASSERT_EQ(placement->shards_size(), 1);
  EXPECT_EQ(placement->shards(0).address(), "127.0.0.1:1");

  auto status = client_->ClusterStatus();
  ASSERT_THAT(status, IsOk());
  const proto::MemberStatus* w = FindMember(*status, "worker");
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->alive());
  EXPECT_EQ(w->report().step(), 17u);

  auto model = client_->DescribeModel();
  ASSERT_THAT(model, IsOk());
  EXPECT_GT(model->blocks_size(), 0);
  EXPECT_THAT(client_->History(0), IsOk());

  EXPECT_THAT(node_->Stop(), IsOk());
  EXPECT_THAT(node_->Stop(), IsOk()) << "idempotent";
  EXPECT_THAT(client_->ClusterStatus(),
              ::downpour::testing::StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(CoordinatorNodeTest,
       TheLivenessThreadDeclaresSilentMembersDeadOnTheClock) {
  ASSERT_THAT(client_->RegisterServer(0, "127.0.0.1:1"), IsOk());
  // The liveness thread checks every interval_s / 2 = 250 ms of fake time,
  // and takes a wake-up far later than that for its own stall (it then gives
  // every member a fresh timeout instead). So the time moves one period at a
  // time, and the next step waits until the thread has checked and waits
  // again: it sees every step, however slowly it is scheduled.
  auto thread_waits_for_more_than = [&](int64_t waits) {
    return WaitUntil([&] { return clock_.waits() > waits; }, absl::Seconds(30),
                     absl::Milliseconds(1));
  };
  ASSERT_TRUE(thread_waits_for_more_than(0))
      << "the liveness thread never waits";
  // Silent for 12 periods, heartbeat.timeout_s exactly: still alive; the 13th
  // is past it.
  for (int period = 1; period <= 13; ++period) {
    const int64_t waits = clock_.waits();
    clock_.Advance(absl::Milliseconds(250));
    ASSERT_TRUE(thread_waits_for_more_than(waits)) << "period " << period;
    auto status = client_->ClusterStatus();
    ASSERT_THAT(status, IsOk());
    EXPECT_EQ(FindMember(*status, "ps")->alive(), period <= 12)
        << "ps 0 after " << period * 250 << " ms of silence";
  }
}

// Everyone silent at once (the coordinator's own link cut, as the chaos
// harness's network faults do): nobody is declared dead, however long it
// lasts; once a member is heard again, the rest are judged on the clock.
TEST_F(CoordinatorNodeTest, HearingNobodyItDeclaresNobodyDeadUntilItHearsOne) {
  ASSERT_THAT(client_->RegisterServer(0, "127.0.0.1:1"), IsOk());
  ASSERT_THAT(client_->RegisterWorker(0, "127.0.0.1:2"), IsOk());
  auto thread_waits_for_more_than = [&](int64_t waits) {
    return WaitUntil([&] { return clock_.waits() > waits; }, absl::Seconds(30),
                     absl::Milliseconds(1));
  };
  ASSERT_TRUE(thread_waits_for_more_than(0))
      << "the liveness thread never waits";
  auto period = [&](bool worker_beats) {
    const int64_t waits = clock_.waits();
    clock_.Advance(absl::Milliseconds(250));
    if (worker_beats) {
      proto::HeartbeatRequest beat;
      beat.set_role("worker");
      beat.set_index(0);
      ASSERT_THAT(client_->Heartbeat(beat), IsOk());
    }
    ASSERT_TRUE(thread_waits_for_more_than(waits));
  };
  auto alive = [&](const char* role) {
    auto status = client_->ClusterStatus();
    EXPECT_THAT(status, IsOk());
    return status.ok() && FindMember(*status, role)->alive();
  };
  // 5 s of silence from both, past the 3 s timeout.
  for (int p = 1; p <= 20; ++p) {
    period(false);
    ASSERT_TRUE(alive("ps") && alive("worker"))
        << "declared dead after " << p * 250 << " ms in which the "
        << "coordinator heard nobody";
  }
  // The worker is heard again, ps 0 is not: it gets about as long as the
  // silence lasted (5 s, TCP's backoff), then the 3 s timeout.
  int judged = 0;
  for (int p = 1; p <= 48 && judged == 0; ++p) {
    period(true);
    if (!alive("ps")) judged = p;
  }
  EXPECT_GE(judged, 20) << "ps 0 judged " << judged * 250
                        << " ms after the worker was heard again";
  EXPECT_LE(judged, 36) << "silent ps 0 never declared dead";
  EXPECT_TRUE(alive("worker"));
}

TEST_F(CoordinatorNodeTest, WaitReturnsOnceStopped) {
  std::thread stopper([&] { ASSERT_THAT(node_->Stop(), IsOk()); });
  node_->Wait();
  stopper.join();
  EXPECT_FALSE(node_->ended()->HasBeenNotified());
}

TEST(CoordinatorNodeStartTest, APortInUseIsUnavailable) {
  CoordinatorNode::Options options;
  options.config = TestConfig();
  options.listen = "127.0.0.1:0";
  auto first = CoordinatorNode::Start(options);
  ASSERT_THAT(first, IsOk());
  options.listen = (*first)->address();
  EXPECT_THAT(CoordinatorNode::Start(options),
              ::downpour::testing::StatusIs(absl::StatusCode::kUnavailable,
                                            HasSubstr("cannot listen on")));
}

TEST(CoordinatorNodeStartTest, AnUnreadableStateIsNotUnavailable) {
  CoordinatorNode::Options options;
  options.config = TestConfig();
  options.config.coordinator.state_dir =
      std::string(std::getenv("TEST_TMPDIR")) + "/unreadable";
  std::filesystem::create_directories(
      StateFilePath(options.config.coordinator.state_dir));
  options.listen = "127.0.0.1:0";
  auto node = CoordinatorNode::Start(options);
  ASSERT_FALSE(node.ok());
  EXPECT_FALSE(absl::IsUnavailable(node.status())) << node.status();
  EXPECT_THAT(node.status().message(), HasSubstr("coordinator.state"));
}

}  // namespace
}  // namespace downpour::coordinator
