// WorkerNode against a coordinator and a ps shard served in-process on
// localhost:0, on synthetic data: it trains to the end and stops cleanly; and
// its start errors are told apart (bad input vs. the cluster).
#include "worker/worker_node.h"

#include <memory>

#include "common/testing/status_matchers.h"
#include "coordinator/cluster_state.h"
#include "coordinator/coordinator_service.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "membership/coordinator_client.h"
#include "rpc/server_util.h"
#include "server/ps_service.h"
#include "server/shard.h"

namespace downpour::worker {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::Eq;

Config SmallConfig() {
  Config config;
  config.model.layers = {kMnistDim, kMnistClasses};
  config.model.type = ModelType::kSoftmax;
  config.optimizer.type = OptimizerType::kSgd;
  config.optimizer.learning_rate = 0.1;
  config.data.source = DataSource::kSynthetic;
  config.data.train_examples = 200;
  config.data.test_examples = 50;
  config.compute.device = ComputeDevice::kCpu;
  config.training.batch_size = 10;
  config.training.steps = 20;
  config.heartbeat.interval_s = 0.1;
  config.checkpoint.dir = "";
  config.coordinator.state_dir = "";
  config.cluster.ps = {"127.0.0.1:0"};
  config.cluster.workers = {"127.0.0.1:0"};
  config.rpc.connect_timeout_s = 10;
  return config;
}

TEST(WorkerNodeTest, BadInputIsASetupError) {
  WorkerNode::Options options;
  options.config = SmallConfig();
  options.config.model.layers = {5, kMnistClasses};
  auto node = WorkerNode::Start(std::move(options));
  EXPECT_THAT(
      node,
      StatusIs(absl::StatusCode::kInvalidArgument,
               Eq("the data has 784 features but model.layers[0] is 5: set "
                  "model.layers to [784, ...]")));
  EXPECT_TRUE(IsSetupError(node.status()));
}

TEST(WorkerNodeTest, ListenFailureIsNotASetupError) {
  WorkerNode::Options options;
  options.config = SmallConfig();
  options.listen = "not-an-address";
  auto node = WorkerNode::Start(std::move(options));
  ASSERT_FALSE(node.ok());
  EXPECT_FALSE(IsSetupError(node.status())) << node.status();
}

TEST(WorkerNodeTest, TrainsToTheEndThenStops) {
  Config config = SmallConfig();
  auto state = coordinator::ClusterState::Create({config});
  ASSERT_THAT(state, IsOk());
  coordinator::CoordinatorService coordinator_service(state->get());
  auto coordinator_server =
      StartServer("127.0.0.1:0", {&coordinator_service}, "coordinator");
  ASSERT_THAT(coordinator_server, IsOk());
  config.cluster.coordinator = coordinator_server->address;

  Counters ps_counters;
  auto shard = server::Shard::Create(config, 0, &ps_counters);
  ASSERT_THAT(shard, IsOk());
  server::PsService ps_service(shard->get());
  auto ps_server = StartServer("127.0.0.1:0", {&ps_service}, "ps 0");
  ASSERT_THAT(ps_server, IsOk());
  membership::CoordinatorClient coordinator(coordinator_server->address,
                                            config.rpc, "test");
  ASSERT_THAT(coordinator.RegisterServer(0, ps_server->address), IsOk());
  auto placement = coordinator.WaitForPlacement(1);
  ASSERT_THAT(placement, IsOk());
  const auto& ids = placement->shards(0).block_ids();
  ASSERT_THAT((*shard)->Assign(placement->epoch(), {ids.begin(), ids.end()}),
              IsOk());

  WorkerNode::Options options;
  options.config = config;
  auto node = WorkerNode::Start(std::move(options));
  ASSERT_THAT(node, IsOk());
  EXPECT_GT((*node)->port(), 0);
  (*node)->Wait();
  EXPECT_TRUE((*node)->ended()->HasBeenNotified());
  EXPECT_THAT((*node)->Stop(), IsOk());
  EXPECT_THAT((*node)->Stop(), IsOk()) << "Stop is idempotent";
  const WorkerStats stats = (*node)->stats();
  EXPECT_TRUE(stats.finished);
  EXPECT_EQ(stats.step, 20);
  EXPECT_EQ(stats.pushed_steps, 20);
  EXPECT_GE(ps_counters.Get("pushes"), 1);
  // One worker, one ps: both measured the same block updates.
  const StalenessHistogram ps_staleness = ps_counters.Staleness();
  EXPECT_GT(ps_staleness.count(), 0u);
  EXPECT_EQ(stats.staleness_p50, ps_staleness.Quantile(0.5));
  EXPECT_EQ(stats.staleness_p99, ps_staleness.Quantile(0.99));
  EXPECT_EQ(stats.staleness_max, ps_staleness.max());
  EXPECT_DOUBLE_EQ(stats.mean_staleness, ps_staleness.mean());

  node->reset();
  ps_server->server->Shutdown(DeadlineIn(1));
  coordinator_server->server->Shutdown(DeadlineIn(1));
}

}  // namespace
}  // namespace downpour::worker
