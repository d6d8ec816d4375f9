// PsService through a real in-process gRPC server (no port): each call reaches
// the Shard and its status comes back as the matching gRPC code.
#include "server/ps_service.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/config.h"
#include "common/counters.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/ps.grpc.pb.h"
#include "server/shard.h"

namespace downpour::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class PsServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // [6, 4, 3] in blocks of 8: 24 weights -> blocks 0-2, then 4 biases -> 3,
    // ...
    config_.model.layers = {6, 4, 3};
    config_.model.block_size = 8;
    config_.cluster.workers.assign(4, "127.0.0.1:0");  // worker ids 0 to 3
    config_.optimizer.type = OptimizerType::kSgd;
    config_.optimizer.learning_rate = 1.0;
    config_.checkpoint.dir = "";
    auto shard = Shard::Create(config_, 0, &counters_);
    ASSERT_TRUE(shard.ok()) << shard.status();
    shard_ = *std::move(shard);
    service_.set_shard(shard_.get());
    grpc::ServerBuilder builder;
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = proto::ParameterServer::NewStub(
        server_->InProcessChannel(grpc::ChannelArguments()));
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  grpc::Status Pull(uint64_t epoch, std::vector<uint32_t> ids,
                    proto::PullResponse* response) {
    proto::PullRequest request;
    request.set_placement_epoch(epoch);
    for (uint32_t id : ids) request.add_block_ids(id);
    grpc::ClientContext context;
    return stub_->Pull(&context, request, response);
  }

  grpc::Status Push(uint64_t epoch, uint32_t id, const std::vector<float>& grad,
                    proto::PushResponse* response) {
    proto::PushRequest request;
    request.set_placement_epoch(epoch);
    request.set_worker_id(2);
    proto::BlockData* block = request.add_blocks();
    block->set_block_id(id);
    block->set_data(grad.data(), grad.size() * sizeof(float));
    grpc::ClientContext context;
    return stub_->Push(&context, request, response);
  }

  grpc::Status Checksums(proto::ChecksumResponse* response) {
    grpc::ClientContext context;
    return stub_->Checksums(&context, proto::ChecksumRequest(), response);
  }

  static std::vector<float> Floats(const std::string& bytes) {
    std::vector<float> floats(bytes.size() / sizeof(float));
    std::memcpy(floats.data(), bytes.data(), bytes.size());
    return floats;
  }

  Config config_;
  Counters counters_;
  std::unique_ptr<Shard> shard_;
  PsService service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<proto::ParameterServer::Stub> stub_;
};

TEST_F(PsServiceTest, PushThenPullRoundTrip) {
  ASSERT_TRUE(shard_->Assign(1, {0, 3}).ok());
  proto::PullResponse before;
  ASSERT_TRUE(Pull(1, {3}, &before).ok());
  ASSERT_EQ(before.blocks_size(), 1);
  EXPECT_EQ(before.blocks(0).block_id(), 3u);
  EXPECT_EQ(before.blocks(0).version(), 0u);
  const std::vector<float> initial = Floats(before.blocks(0).data());
  ASSERT_EQ(initial.size(), 4u);

  proto::PushResponse pushed;
  const grpc::Status status = Push(1, 3, {1, 2, 3, 4}, &pushed);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(pushed.versions(), ElementsAre(1u));
  EXPECT_FALSE(pushed.duplicate());

  proto::PullResponse after;
  ASSERT_TRUE(Pull(1, {0, 3}, &after).ok());
  ASSERT_EQ(after.blocks_size(), 2);
  EXPECT_EQ(after.blocks(0).version(), 0u);
  EXPECT_EQ(after.blocks(1).version(), 1u);
  EXPECT_THAT(Floats(after.blocks(1).data()),
              ElementsAre(initial[0] - 1, initial[1] - 2, initial[2] - 3,
                          initial[3] - 4));
}

// A push with reply_values is answered with the pushed blocks' values right
// after it was applied (training.fetch layerwise), in a reply any protobuf
// client reads.
TEST_F(PsServiceTest, APushAskingForValuesGetsThemAfterItsUpdate) {
  ASSERT_TRUE(shard_->Assign(1, {0, 3}).ok());
  proto::PullResponse before;
  ASSERT_TRUE(Pull(1, {0, 3}, &before).ok());
  const std::vector<float> initial = Floats(before.blocks(1).data());
  proto::PushRequest request;
  request.set_placement_epoch(1);
  request.set_worker_id(2);
  request.set_reply_values(true);
  proto::BlockData* block = request.add_blocks();
  block->set_block_id(3);
  const std::vector<float> grad = {1, 2, 3, 4};
  block->set_data(grad.data(), grad.size() * sizeof(float));
  proto::PushResponse pushed;
  grpc::ClientContext context;
  const grpc::Status status = stub_->Push(&context, request, &pushed);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(pushed.versions(), ElementsAre(1u));
  ASSERT_EQ(pushed.blocks_size(), 1) << "only the block pushed";
  EXPECT_EQ(pushed.blocks(0).block_id(), 3u);
  EXPECT_EQ(pushed.blocks(0).version(), 1u);
  EXPECT_THAT(Floats(pushed.blocks(0).data()),
              ElementsAre(initial[0] - 1, initial[1] - 2, initial[2] - 3,
                          initial[3] - 4));
  // Without it, none.
  proto::PushResponse plain;
  ASSERT_TRUE(Push(1, 3, grad, &plain).ok());
  EXPECT_EQ(plain.blocks_size(), 0);
}

TEST_F(PsServiceTest, ChecksumsListEveryBlockWithItsVersion) {
  ASSERT_TRUE(shard_->Assign(1, {3, 0}).ok());
  proto::PushResponse pushed;
  ASSERT_TRUE(Push(1, 3, {1, 1, 1, 1}, &pushed).ok());
  proto::ChecksumResponse sums;
  ASSERT_TRUE(Checksums(&sums).ok());
  EXPECT_EQ(sums.DebugString(), shard_->Checksums().DebugString());
  ASSERT_EQ(sums.blocks_size(), 2);
  EXPECT_EQ(sums.blocks(0).block_id(), 0u);
  EXPECT_EQ(sums.blocks(0).version(), 0u);
  EXPECT_EQ(sums.blocks(1).block_id(), 3u);
  EXPECT_EQ(sums.blocks(1).version(), 1u);
}

struct ErrorCase {
  const char* name;
  uint64_t epoch;
  uint32_t block;
  size_t floats;  // gradient length (push) ; block 3 holds 4
  grpc::StatusCode pull_code;
  grpc::StatusCode push_code;
  const char* message;
};

TEST_F(PsServiceTest, EachShardErrorSurfacesAsItsGrpcCode) {
  ASSERT_TRUE(shard_->Assign(2, {3}).ok());
  const ErrorCase cases[] = {
      {"unknown block", 2, 5, 4, grpc::StatusCode::NOT_FOUND,
       grpc::StatusCode::NOT_FOUND, "unknown block 5 (this ps holds block 3)"},
      {"wrong size", 2, 3, 3, grpc::StatusCode::OK,
       grpc::StatusCode::INVALID_ARGUMENT,
       "expects 4 floats (16 bytes), got 12"},
      {"stale epoch", 1, 3, 4, grpc::StatusCode::FAILED_PRECONDITION,
       grpc::StatusCode::FAILED_PRECONDITION, "stale placement epoch 1"},
      {"newer epoch", 3, 3, 4, grpc::StatusCode::UNAVAILABLE,
       grpc::StatusCode::UNAVAILABLE, "behind the request's 3"},
  };
  for (const ErrorCase& c : cases) {
    SCOPED_TRACE(c.name);
    proto::PullResponse pulled;
    const grpc::Status pull = Pull(c.epoch, {c.block}, &pulled);
    EXPECT_EQ(pull.error_code(), c.pull_code) << pull.error_message();
    if (c.pull_code != grpc::StatusCode::OK) {
      EXPECT_THAT(pull.error_message(), HasSubstr(c.message));
    }
    proto::PushResponse pushed;
    const grpc::Status push =
        Push(c.epoch, c.block, std::vector<float>(c.floats, 1.0f), &pushed);
    EXPECT_EQ(push.error_code(), c.push_code) << push.error_message();
    EXPECT_THAT(push.error_message(), HasSubstr(c.message));
  }
  proto::ChecksumResponse sums;
  ASSERT_TRUE(Checksums(&sums).ok());
  EXPECT_EQ(sums.blocks(0).version(), 0u) << "no rejected push was applied";
}

TEST_F(PsServiceTest, NaNGradientIsInvalidArgument) {
  ASSERT_TRUE(shard_->Assign(1, {3}).ok());
  proto::PushResponse pushed;
  const grpc::Status push = Push(1, 3, {0, NAN, 0, 0}, &pushed);
  EXPECT_EQ(push.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(push.error_message(), HasSubstr("NaN at index 1"));
}

TEST_F(PsServiceTest, BeforePlacementEveryCallIsUnavailable) {
  proto::PullResponse pulled;
  const grpc::Status pull = Pull(1, {0}, &pulled);
  EXPECT_EQ(pull.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(pull.error_message(), HasSubstr("holds no blocks yet"));
  proto::PushResponse pushed;
  EXPECT_EQ(Push(1, 0, std::vector<float>(8, 1.0f), &pushed).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(PsServiceTest, WithoutAShardEveryCallIsUnavailable) {
  ASSERT_TRUE(shard_->Assign(1, {0}).ok());
  service_.set_shard(nullptr);  // a standby, or a ps that was replaced
  proto::PullResponse pulled;
  const grpc::Status pull = Pull(1, {0}, &pulled);
  EXPECT_EQ(pull.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(pull.error_message(), HasSubstr("serves no shard"));
  proto::PushResponse pushed;
  EXPECT_EQ(Push(1, 0, std::vector<float>(8, 1.0f), &pushed).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  proto::ChecksumResponse sums;
  EXPECT_EQ(Checksums(&sums).error_code(), grpc::StatusCode::UNAVAILABLE);
}

// bsp, 8 workers, 3 threads for held pushes: a round's first pushes take the
// threads and wait; the ones after find them all taken and run without a hold
// (contributing, then refused UNAVAILABLE and retried, as the client does),
// until the last contribution applies the round. Every push completes well
// within its deadline, and no more threads start.
TEST(PsServiceHeldPushesTest, ManyHeldPushesShareBoundedThreadsAndAllComplete) {
  constexpr int kWorkers = 8, kThreads = 3, kRounds = 4;
  Config config;
  config.model.layers = {6, 4, 3};
  config.model.block_size = 8;
  config.cluster.workers.assign(kWorkers, "127.0.0.1:0");
  config.optimizer.type = OptimizerType::kSgd;
  config.optimizer.learning_rate = 1.0;
  config.checkpoint.dir = "";
  config.training.consistency = ConsistencyMode::kBsp;
  EXPECT_EQ(PsService::PushThreadsFor(config),
            kWorkers * kPushRequestsPerShard);
  Counters counters;
  auto shard = Shard::Create(config, 0, &counters);
  ASSERT_TRUE(shard.ok()) << shard.status();
  ASSERT_TRUE((*shard)->Assign(1, {3}).ok());
  (*shard)->SetActiveWorkers({0, 1, 2, 3, 4, 5, 6, 7});
  PsService service(shard->get(), kThreads);
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto stub = proto::ParameterServer::NewStub(
      server->InProcessChannel(grpc::ChannelArguments()));

  std::vector<grpc::Status> results(kWorkers);
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      for (int round = 1; round <= kRounds; ++round) {
        proto::PushRequest request;
        request.set_placement_epoch(1);
        request.set_worker_id(w);
        request.set_sequence(round);
        request.set_clock(round);
        proto::BlockData* block = request.add_blocks();
        block->set_block_id(3);
        const std::vector<float> grad(4, 1.0f);
        block->set_data(grad.data(), grad.size() * sizeof(float));
        for (;;) {
          grpc::ClientContext context;
          context.set_deadline(std::chrono::system_clock::now() +
                               std::chrono::seconds(5));
          proto::PushResponse response;
          results[w] = stub->Push(&context, request, &response);
          if (results[w].error_code() != grpc::StatusCode::UNAVAILABLE) break;
          absl::SleepFor(absl::Milliseconds(1));  // the client's backoff
        }
        if (!results[w].ok()) return;
      }
    });
  }
  for (std::thread& t : workers) t.join();
  for (int w = 0; w < kWorkers; ++w) {
    EXPECT_TRUE(results[w].ok())
        << "worker " << w << ": " << results[w].error_message();
  }
  EXPECT_LE(service.push_threads(), kThreads);
  EXPECT_GT(service.pushes_not_held(), 0);
  EXPECT_EQ(counters.Get("bsp_rounds"), kRounds);
  proto::PullRequest pull;
  pull.set_placement_epoch(1);
  pull.add_block_ids(3);
  proto::PullResponse pulled;
  grpc::ClientContext context;
  ASSERT_TRUE(stub->Pull(&context, pull, &pulled).ok());
  EXPECT_EQ(pulled.blocks(0).version(), uint64_t{kRounds});
  server->Shutdown();
}

}  // namespace
}  // namespace downpour::server
