// The Coordinator service adapter through an in-process channel: each RPC
// reaches ClusterState, MetricsHistory or the model, and errors keep their
// code.
#include "coordinator/coordinator_service.h"

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "coordinator/test_cluster.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace downpour::coordinator {
namespace {

using ::testing::HasSubstr;

Config TestConfig() { return TestClusterConfig(); }

// A CoordinatorService with or without its history and model, served
// in-process.
class Served {
 public:
  explicit Served(bool complete, const Config& config = TestConfig()) {
    state_ = *ClusterState::Create({config});
    model_ = *ModelSpec::Create(TestConfig().model);
    service_ = std::make_unique<CoordinatorService>(
        state_.get(), complete ? &history_ : nullptr,
        complete ? &*model_ : nullptr);
    grpc::ServerBuilder builder;
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    stub_ = proto::Coordinator::NewStub(
        server_->InProcessChannel(grpc::ChannelArguments()));
  }
  ~Served() { server_->Shutdown(); }

  proto::Coordinator::Stub* stub() { return stub_.get(); }
  ClusterState* state() { return state_.get(); }

 private:
  std::unique_ptr<ClusterState> state_;
  std::optional<ModelSpec> model_;
  MetricsHistory history_{{/*capacity=*/10}};
  std::unique_ptr<CoordinatorService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<proto::Coordinator::Stub> stub_;
};

TEST(CoordinatorServiceTest, RegistrationAndPlacementReachTheState) {
  Served served(/*complete=*/true);
  grpc::ClientContext register_context;
  proto::RegisterServerRequest request;
  request.set_index(0);
  request.set_address("127.0.0.1:1");
  proto::RegisterServerResponse registered;
  ASSERT_TRUE(served.stub()
                  ->RegisterServer(&register_context, request, &registered)
                  .ok());
  EXPECT_EQ(registered.placement_epoch(), 1u);

  grpc::ClientContext worker_context;
  proto::RegisterWorkerRequest worker;
  worker.set_index(0);
  worker.set_address("127.0.0.1:3");
  proto::RegisterWorkerResponse partition;
  ASSERT_TRUE(
      served.stub()->RegisterWorker(&worker_context, worker, &partition).ok());
  EXPECT_EQ(partition.partition().num_parts(), 1);

  grpc::ClientContext beat_context;
  proto::HeartbeatRequest beat;
  beat.set_role("worker");
  beat.set_index(0);
  beat.set_member_key(partition.member_key());
  beat.mutable_report()->set_step(3);
  proto::HeartbeatResponse reply;
  ASSERT_TRUE(served.stub()->Heartbeat(&beat_context, beat, &reply).ok());
  EXPECT_EQ(reply.placement_epoch(), 1u);

  grpc::ClientContext placement_context;
  proto::GetPlacementResponse placement;
  ASSERT_TRUE(
      served.stub()->GetPlacement(&placement_context, {}, &placement).ok());
  EXPECT_EQ(placement.DebugString(), served.state()->Placement().DebugString());

  grpc::ClientContext status_context;
  proto::ClusterStatusResponse status;
  ASSERT_TRUE(served.stub()->ClusterStatus(&status_context, {}, &status).ok());
  EXPECT_EQ(status.placement_epoch(), 1u);
  EXPECT_EQ(status.members_size(), 2);
}

TEST(CoordinatorServiceTest, CoreErrorsKeepTheirCodeAndMessage) {
  Served served(/*complete=*/true);
  grpc::ClientContext context;
  proto::RegisterServerRequest request;
  request.set_index(4);
  request.set_address("127.0.0.1:9");
  proto::RegisterServerResponse response;
  const grpc::Status status =
      served.stub()->RegisterServer(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("ps index 4 is not in the config"));

  grpc::ClientContext beat_context;
  proto::HeartbeatRequest beat;
  beat.set_role("worker");
  proto::HeartbeatResponse reply;
  EXPECT_EQ(served.stub()->Heartbeat(&beat_context, beat, &reply).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
}

TEST(CoordinatorServiceTest, DrainWorkerHandsThePartsOnOrSaysWhyNot) {
  Served served(/*complete=*/true, TestClusterConfig(1, 2));
  for (int i = 0; i < 2; ++i) {
    grpc::ClientContext context;
    proto::RegisterWorkerRequest worker;
    worker.set_index(i);
    worker.set_address(absl::StrCat("127.0.0.1:", 10 + i));
    proto::RegisterWorkerResponse registered;
    ASSERT_TRUE(
        served.stub()->RegisterWorker(&context, worker, &registered).ok());
  }
  grpc::ClientContext unknown_context;
  proto::DrainWorkerRequest request;
  request.set_index(5);
  proto::DrainWorkerResponse response;
  grpc::Status status =
      served.stub()->DrainWorker(&unknown_context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("valid indices are 0 to 1"));

  grpc::ClientContext context;
  request.set_index(1);
  ASSERT_TRUE(served.stub()->DrainWorker(&context, request, &response).ok());
  ASSERT_EQ(response.handed_size(), 1);
  EXPECT_EQ(response.handed(0).part(), 1);
  EXPECT_EQ(response.handed(0).to(), 0);
  EXPECT_THAT(response.message(), HasSubstr("worker 1 drained"));

  grpc::ClientContext last_context;
  request.set_index(0);
  status = served.stub()->DrainWorker(&last_context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("the last one training"));
}

TEST(CoordinatorServiceTest, HistoryAndModelWhenItHasThem) {
  Served served(/*complete=*/true);
  grpc::ClientContext history_context;
  proto::GetHistoryRequest since;
  proto::GetHistoryResponse history;
  ASSERT_TRUE(
      served.stub()->GetHistory(&history_context, since, &history).ok());
  EXPECT_EQ(history.capacity(), 10);
  EXPECT_EQ(history.samples_size(), 1) << "the current figures are appended";

  grpc::ClientContext model_context;
  proto::DescribeModelResponse model;
  ASSERT_TRUE(served.stub()->DescribeModel(&model_context, {}, &model).ok());
  const ModelSpec spec = *ModelSpec::Create(TestConfig().model);
  EXPECT_EQ(model.num_params(), static_cast<uint64_t>(spec.num_params()));
  ASSERT_EQ(model.blocks_size(), static_cast<int>(spec.blocks().size()));
  EXPECT_EQ(model.blocks(0).tensor(), spec.tensors()[0].name);
}

TEST(CoordinatorServiceTest, HistoryAndModelAreUnavailableWithoutThem) {
  Served served(/*complete=*/false);
  grpc::ClientContext history_context;
  proto::GetHistoryResponse history;
  const grpc::Status no_history =
      served.stub()->GetHistory(&history_context, {}, &history);
  EXPECT_EQ(no_history.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(no_history.error_message(), HasSubstr("keeps no history"));

  grpc::ClientContext model_context;
  proto::DescribeModelResponse model;
  const grpc::Status no_model =
      served.stub()->DescribeModel(&model_context, {}, &model);
  EXPECT_EQ(no_model.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(no_model.error_message(), HasSubstr("has no model"));
}

}  // namespace
}  // namespace downpour::coordinator
