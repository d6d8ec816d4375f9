// GrpcPsClient against a real coordinator and a real shard served over loopback
// gRPC in-process. The shard's service here acknowledges the first push only after
// the client's deadline, so the client retries a push the ps already applied:
// it must be applied exactly once.
#include "worker/ps_client.h"

#include <thread>

#include "common/counters.h"
#include "common/grpc_status.h"
#include "common/server_util.h"
#include "common/testing/status_matchers.h"
#include "coordinator/cluster_state.h"
#include "coordinator/coordinator_client.h"
#include "coordinator/coordinator_service.h"
#include "gtest/gtest.h"
#include "server/shard.h"

namespace downpour::worker {
namespace {

using ::downpour::testing::IsOk;

// Forwards to a Shard; the first Push is applied at once but answered late.
class SlowFirstAckService final : public proto::ParameterServer::CallbackService {
 public:
  explicit SlowFirstAckService(server::Shard* shard) : shard_(shard) {}
  ~SlowFirstAckService() override {
    for (std::thread& t : late_) t.join();
  }

  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* context,
                                 const proto::PullRequest* request,
                                 proto::PullResponse* response) override {
    auto* reactor = context->DefaultReactor();
    reactor->Finish(ToGrpcStatus(shard_->Pull(*request, response)));
    return reactor;
  }

  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* context,
                                 const proto::PushRequest* request,
                                 proto::PushResponse* response) override {
    auto* reactor = context->DefaultReactor();
    const grpc::Status status = ToGrpcStatus(shard_->Push(*request, response));
    if (slowed_++ == 0) {
      late_.emplace_back([reactor, status] {
        absl::SleepFor(absl::Milliseconds(800));  // past the client's deadline
        reactor->Finish(status);
      });
    } else {
      reactor->Finish(status);
    }
    return reactor;
  }

 private:
  server::Shard* const shard_;
  std::atomic<int> slowed_{0};
  std::vector<std::thread> late_;
};

TEST(GrpcPsClientTest, PushRetriedAfterATimeoutIsAppliedOnce) {
  Config config;
  config.model.layers = {6, 3};
  config.model.type = "softmax";
  config.optimizer.type = "sgd";
  config.optimizer.learning_rate = 1.0;
  config.checkpoint.dir = "";
  config.coordinator.state_dir = "";
  config.cluster.ps = {"127.0.0.1:0"};
  config.cluster.workers = {"127.0.0.1:0"};
  config.rpc.deadline_s = 0.3;
  config.rpc.connect_timeout_s = 10;
  auto spec = ModelSpec::Create(config.model);
  ASSERT_THAT(spec, IsOk());

  auto state = coordinator::ClusterState::Create({config});
  ASSERT_THAT(state, IsOk());
  coordinator::CoordinatorService coordinator_service(state->get());
  auto coordinator_server =
      StartServer("127.0.0.1:0", {&coordinator_service}, "coordinator");
  ASSERT_THAT(coordinator_server, IsOk());

  Counters ps_counters;
  auto shard = server::Shard::Create(config, 0, &ps_counters);
  ASSERT_THAT(shard, IsOk());
  SlowFirstAckService ps_service(shard->get());
  auto ps_server = StartServer("127.0.0.1:0", {&ps_service}, "ps 0");
  ASSERT_THAT(ps_server, IsOk());

  coordinator::CoordinatorClient coordinator(coordinator_server->address, config.rpc,
                                             "test");
  ASSERT_THAT(coordinator.RegisterServer(0, ps_server->address), IsOk());
  std::vector<uint32_t> all;
  for (const BlockSpec& b : spec->blocks()) all.push_back(b.id);
  ASSERT_THAT((*shard)->Assign(1, all), IsOk());

  Counters worker_counters;
  GrpcPsClient client(*spec, &coordinator, config.rpc, 0, &worker_counters);
  ASSERT_THAT(client.Connect(), IsOk());
  std::vector<float> params(spec->num_params());
  std::vector<uint64_t> versions;
  ASSERT_THAT(client.Pull(params.data(), &versions), IsOk());
  const std::vector<float> before = params;

  const std::vector<float> gradient(spec->num_params(), 1.0f);
  ASSERT_THAT(client.Push(gradient.data(), versions), IsOk());
  EXPECT_GE(worker_counters.Get("rpc_retries"), 1) << "the first ack came too late";
  EXPECT_EQ(ps_counters.Get("duplicate_pushes"), 1);

  ASSERT_THAT(client.Pull(params.data(), &versions), IsOk());
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_FLOAT_EQ(params[i], before[i] - 1.0f) << "parameter " << i;
  }
  for (uint64_t v : versions) EXPECT_EQ(v, 1u) << "applied more than once";
  ps_server->server->Shutdown(DeadlineIn(1));
  coordinator_server->server->Shutdown(DeadlineIn(1));
}

}  // namespace
}  // namespace downpour::worker
