// CoordinatorClient against an in-process coordinator, and against an address
// where nothing listens.
#include "membership/coordinator_client.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>

#include "common/testing/poll.h"
#include "common/testing/status_matchers.h"
#include "coordinator/coordinator_node.h"
#include "coordinator/test_cluster.h"
#include "gtest/gtest.h"

namespace downpour::membership {
namespace {

using coordinator::CoordinatorNode;
using coordinator::TestClusterConfig;

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;

Config TestConfig() {
  return TestClusterConfig(/*num_ps=*/2, /*num_workers=*/1);
}

class CoordinatorClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CoordinatorNode::Options options;
    options.config = TestConfig();
    options.listen = "127.0.0.1:0";
    auto node = CoordinatorNode::Start(std::move(options));
    ASSERT_THAT(node, IsOk());
    node_ = *std::move(node);
    client_ = std::make_unique<CoordinatorClient>(node_->address(),
                                                  TestConfig().rpc, "test");
  }

  std::unique_ptr<CoordinatorNode> node_;
  std::unique_ptr<CoordinatorClient> client_;
};

TEST_F(CoordinatorClientTest, EveryCallReachesTheCoordinator) {
  EXPECT_EQ(client_->address(), node_->address());
  auto ps = client_->RegisterServer(0, "127.0.0.1:1");
  ASSERT_THAT(ps, IsOk());
  EXPECT_EQ(ps->placement_epoch(), 0u) << "ps 1 is still missing";
  auto worker = client_->RegisterWorker(0, "127.0.0.1:3");
  ASSERT_THAT(worker, IsOk());
  EXPECT_EQ(worker->partition().part(), 0);

  auto placement = client_->GetPlacement();
  ASSERT_THAT(placement, IsOk());
  EXPECT_THAT(placement->waiting_for(), HasSubstr("ps 1"));

  ASSERT_THAT(client_->RegisterServer(1, "127.0.0.1:2"), IsOk());
  auto placed = client_->WaitForPlacement(1);
  ASSERT_THAT(placed, IsOk());
  EXPECT_EQ(placed->shards_size(), 2);

  proto::HeartbeatRequest beat;
  beat.set_role("worker");
  beat.set_index(0);
  // This one client registered as three members: it holds ps 1's key now.
  EXPECT_THAT(client_->Heartbeat(beat),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("heartbeat for worker 0 is not from its "
                                 "registered process")));
  beat.set_member_key(worker->member_key());
  ASSERT_THAT(client_->Heartbeat(beat), IsOk());
  auto status = client_->ClusterStatus();
  ASSERT_THAT(status, IsOk());
  EXPECT_EQ(status->placement_epoch(), 1u);
  EXPECT_THAT(client_->History(0), IsOk());
  auto model = client_->DescribeModel();
  ASSERT_THAT(model, IsOk());
  EXPECT_GT(model->num_params(), 0u);
}

TEST_F(CoordinatorClientTest, TheCoordinatorsErrorsComeBackWithTheirCode) {
  EXPECT_THAT(
      client_->RegisterServer(7, "127.0.0.1:9"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("index 7")));
  proto::HeartbeatRequest beat;
  beat.set_role("worker");
  beat.set_index(0);
  EXPECT_THAT(
      client_->Heartbeat(beat),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               HasSubstr("heartbeat to coordinator at " + node_->address())));
}

TEST_F(CoordinatorClientTest, WaitForPlacementStopsWhenAsked) {
  std::atomic<int> asked{0};
  EXPECT_THAT(client_->WaitForPlacement(1, [&] { return ++asked > 2; }),
              StatusIs(absl::StatusCode::kCancelled));
}

TEST(CoordinatorClientUnreachableTest, SingleCallsNameTheCoordinator) {
  const std::string address =
      "127.0.0.1:" + std::to_string(::downpour::testing::ClosedLoopbackPort());
  RpcSection rpc;
  rpc.deadline_s = 0.5;
  CoordinatorClient client(address, rpc, "test");
  EXPECT_THAT(
      client.ClusterStatus(),
      StatusIs(absl::StatusCode::kUnavailable,
               HasSubstr("cannot reach the coordinator at " + address)));
  EXPECT_THAT(client.GetPlacement().status().message(),
              HasSubstr("cannot read the placement from the coordinator at " +
                        address));
  EXPECT_THAT(
      client.History(0).status().message(),
      HasSubstr("cannot read the history from the coordinator at " + address));
  EXPECT_THAT(
      client.DescribeModel().status().message(),
      HasSubstr("cannot read the model from the coordinator at " + address));
  EXPECT_THAT(client.Heartbeat({}).status().message(),
              HasSubstr("heartbeat to coordinator at " + address));
}

TEST(CoordinatorClientUnreachableTest, RegisterGivesUpAfterTheConnectTimeout) {
  const std::string address =
      "127.0.0.1:" + std::to_string(::downpour::testing::ClosedLoopbackPort());
  RpcSection rpc;
  rpc.deadline_s = 0.2;
  rpc.connect_timeout_s = 0.5;
  CoordinatorClient client(address, rpc, "ps 3");
  EXPECT_THAT(
      client.RegisterServer(3, "127.0.0.1:9"),
      StatusIs(absl::StatusCode::kDeadlineExceeded,
               HasSubstr("ps 3: gave up waiting for the coordinator at " +
                         address)));
  EXPECT_THAT(client.RegisterWorker(3, "127.0.0.1:9"),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("the coordinator at " + address)));
}

}  // namespace
}  // namespace downpour::membership
