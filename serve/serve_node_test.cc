// The daemon handle over a real loopback gRPC server: readiness follows the
// first snapshot, statuses cross the wire with their codes, a taken port is
// an Unavailable error.
#include "serve/serve_node.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/config.h"
#include "common/file_util.h"
#include "common/testing/poll.h"
#include "common/testing/status_matchers.h"
#include "common/testing/temp_path.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "model/sparse_model.h"
#include "proto/health.grpc.pb.h"
#include "proto/serve.grpc.pb.h"
#include "rpc/health.h"
#include "rpc/server_util.h"

namespace downpour::serve {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::downpour::testing::TempPath;
using ::testing::HasSubstr;

model::SparseModel TwoKeys(float w) {
  Config config;
  config.model.task = Task::kBinary;
  config.model.type = ModelType::kSparseLinear;
  config.model.sparse_buckets = 16;
  config.data.source = DataSource::kLibsvm;
  model::SparseModel m;
  m.meta = model::MakeSparseMeta(config, {"-1", "+1"}, {});
  m.bias = 0.25f;
  m.keys = {7, 9};
  m.weights = {w, -1};
  return m;
}

proto::PredictRequest Request() {
  const std::vector<uint64_t> keys = {7, 9, 11};
  const std::vector<float> values = {2, 1, 5};
  const std::vector<uint32_t> offsets = {0, 2, 3};
  proto::PredictRequest r;
  r.set_keys(std::string(reinterpret_cast<const char*>(keys.data()), 24));
  r.set_values(std::string(reinterpret_cast<const char*>(values.data()), 12));
  r.set_offsets(std::string(reinterpret_cast<const char*>(offsets.data()), 12));
  return r;
}

std::string Health(const std::string& address, const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(MakeChannel(address));
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(5));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) return status.error_message();
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
      response.status());
}

TEST(ServeNodeTest, ReadinessFollowsTheFirstSnapshotAndCodesCrossTheWire) {
  const std::string path = TempPath("node.npz");
  std::remove(path.c_str());
  ServeNode::Options options;
  options.server.model_path = path;
  options.server.reload_interval = absl::Milliseconds(10);
  options.listen = "127.0.0.1:0";
  absl::StatusOr<std::unique_ptr<ServeNode>> node = ServeNode::Start(options);
  ASSERT_THAT(node, IsOk());
  const std::string address = (*node)->address();
  EXPECT_EQ(Health(address, ""), "NOT_SERVING");
  EXPECT_EQ(Health(address, kLivenessService), "SERVING");

  auto stub = proto::Predictor::NewStub(MakeChannel(address));
  {
    grpc::ClientContext context;
    proto::PredictResponse reply;
    const grpc::Status status = stub->Predict(&context, Request(), &reply);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_THAT(status.error_message(),
                HasSubstr("no snapshot loaded yet: waiting for " + path));
  }

  ASSERT_THAT(model::WriteSparseModel(path, TwoKeys(0.5f)), IsOk());
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return Health(address, "") == "SERVING"; }, absl::Seconds(20)));
  {
    grpc::ClientContext context;
    proto::PredictResponse reply;
    ASSERT_TRUE(stub->Predict(&context, Request(), &reply).ok());
    std::vector<float> margins(2);
    ASSERT_EQ(reply.margins().size(), 8u);
    std::memcpy(margins.data(), reply.margins().data(), 8);
    EXPECT_EQ(margins[0], 0.25f + 0.5f * 2 - 1);
    EXPECT_EQ(margins[1], 0.25f);  // key 11 misses
    EXPECT_EQ(reply.misses(), 1u);
    EXPECT_EQ(reply.probabilities().size(), 8u);
    EXPECT_EQ(reply.snapshot(), 1u);
  }
  {
    proto::PredictRequest bad = Request();
    bad.set_offsets(bad.offsets().substr(0, 8));
    grpc::ClientContext context;
    proto::PredictResponse reply;
    const grpc::Status status = stub->Predict(&context, bad, &reply);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("the last offset is 2"));
  }
  {
    grpc::ClientContext context;
    proto::ServeStatusResponse status;
    ASSERT_TRUE(
        stub->ServeStatus(&context, proto::ServeStatusRequest(), &status).ok());
    EXPECT_EQ(status.model_path(), path);
    EXPECT_EQ(status.requests(), 1u);
    EXPECT_EQ(status.rejected(), 1u);
    EXPECT_EQ(status.unavailable(), 1u);
    EXPECT_EQ(status.misses(), 1u);
    EXPECT_EQ(status.keys(), 3u);
  }

  // Another daemon on the same port: Unavailable, naming the address.
  options.listen = address;
  ASSERT_THAT(model::WriteSparseModel(path, TwoKeys(0.5f)), IsOk());
  EXPECT_THAT(ServeNode::Start(options),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr(address)));

  (*node)->Stop();
  (*node)->Stop();  // idempotent
}

TEST(ServeNodeTest, AnInvalidModelFailsTheStart) {
  const std::string path = TempPath("bad.npz");
  ASSERT_THAT(WriteFileAtomically(path, std::string("garbage")), IsOk());
  ServeNode::Options options;
  options.server.model_path = path;
  options.listen = "127.0.0.1:0";
  EXPECT_THAT(ServeNode::Start(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(path)));
}

}  // namespace
}  // namespace downpour::serve
