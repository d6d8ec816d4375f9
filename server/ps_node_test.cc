// PsNode in one process against a fake coordinator (proto only, no coordinator
// code): start, placement, slow placements off the heartbeat thread, take-over,
// replacement, final checkpoint, and clean start failures.
#include "server/ps_node.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/config.h"
#include "common/testing/poll.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/server_util.h"
#include "server/checkpoint.h"

namespace downpour::server {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;

// Answers RegisterServer, Heartbeat and GetPlacement from a state the test
// sets. GetPlacement can be held (its reactor kept) until Release(), to stand
// for a slow coordinator without blocking a gRPC thread.
class FakeCoordinator final : public proto::Coordinator::CallbackService {
 public:
  FakeCoordinator() { reply_.set_take_over_index(-1); }

  grpc::ServerUnaryReactor* RegisterServer(
      grpc::CallbackServerContext* context, const proto::RegisterServerRequest*,
      proto::RegisterServerResponse* response) override {
    absl::MutexLock lock(&mu_);
    response->set_placement_epoch(placement_.epoch());
    return Finish(context);
  }

  grpc::ServerUnaryReactor* Heartbeat(
      grpc::CallbackServerContext* context,
      const proto::HeartbeatRequest* request,
      proto::HeartbeatResponse* response) override {
    absl::MutexLock lock(&mu_);
    ++heartbeats_;
    last_identity_ = absl::StrCat(request->role(), " ", request->index());
    *response = reply_;
    response->set_placement_epoch(placement_.epoch());
    return Finish(context);
  }

  grpc::ServerUnaryReactor* GetPlacement(
      grpc::CallbackServerContext* context, const proto::GetPlacementRequest*,
      proto::GetPlacementResponse* response) override {
    absl::MutexLock lock(&mu_);
    if (hold_) {
      held_.push_back({context->DefaultReactor(), response});
      return held_.back().reactor;
    }
    *response = placement_;
    return Finish(context);
  }

  // Shard 0 holds `blocks` from placement `epoch` on.
  void SetPlacement(uint64_t epoch, std::vector<uint32_t> blocks) {
    absl::MutexLock lock(&mu_);
    placement_.set_epoch(epoch);
    placement_.clear_shards();
    proto::ShardInfo* shard = placement_.add_shards();
    shard->set_index(0);
    for (uint32_t id : blocks) shard->add_block_ids(id);
  }
  void SetReply(proto::HeartbeatResponse reply) {
    absl::MutexLock lock(&mu_);
    reply_ = std::move(reply);
  }
  void Hold() {
    absl::MutexLock lock(&mu_);
    hold_ = true;
  }
  // Answers the held GetPlacement calls with the current placement.
  void Release() {
    absl::MutexLock lock(&mu_);
    hold_ = false;
    for (Held& h : held_) {
      *h.response = placement_;
      h.reactor->Finish(grpc::Status::OK);
    }
    held_.clear();
  }

  int heartbeats() const {
    absl::MutexLock lock(&mu_);
    return heartbeats_;
  }
  int held() const {
    absl::MutexLock lock(&mu_);
    return held_.size();
  }
  std::string last_identity() const {
    absl::MutexLock lock(&mu_);
    return last_identity_;
  }

 private:
  struct Held {
    grpc::ServerUnaryReactor* reactor;
    proto::GetPlacementResponse* response;
  };

  static grpc::ServerUnaryReactor* Finish(
      grpc::CallbackServerContext* context) {
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  mutable absl::Mutex mu_;
  proto::GetPlacementResponse placement_ ABSL_GUARDED_BY(mu_);
  proto::HeartbeatResponse reply_ ABSL_GUARDED_BY(mu_);
  bool hold_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Held> held_ ABSL_GUARDED_BY(mu_);
  int heartbeats_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_identity_ ABSL_GUARDED_BY(mu_);
};

// Polls `done` until it holds or 20 s pass (observable state, not a sleep).
bool Eventually(const std::function<bool()>& done) {
  return ::downpour::testing::WaitUntil(done, absl::Seconds(20));
}

class PsNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::string(std::getenv("TEST_TMPDIR")) + "/" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(&coordinator_);
    coordinator_server_ = builder.BuildAndStart();
    ASSERT_NE(coordinator_server_, nullptr);

    // [4, 3] in blocks of 8: blocks 0 (8 weights), 1 (4 weights), 2 (3 biases).
    options_.config.model.layers = {4, 3};
    options_.config.model.block_size = 8;
    options_.config.optimizer.type = OptimizerType::kSgd;
    options_.config.optimizer.learning_rate = 1.0;
    options_.config.checkpoint.dir = dir_;
    options_.config.checkpoint.interval_s = 0;
    options_.config.heartbeat.interval_s = 0.02;
    options_.config.rpc.deadline_s = 10;
    options_.config.rpc.connect_timeout_s = 10;
    options_.config.cluster.coordinator = absl::StrCat("127.0.0.1:", port);
    options_.listen = "127.0.0.1:0";
  }

  void TearDown() override { coordinator_server_->Shutdown(); }

  grpc::Status Pull(const PsNode& node, uint64_t epoch) {
    auto stub = proto::ParameterServer::NewStub(MakeChannel(node.address()));
    proto::PullRequest request;
    request.set_placement_epoch(epoch);
    request.add_block_ids(0);
    proto::PullResponse response;
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(5));
    return stub->Pull(&context, request, &response);
  }

  std::string dir_;
  FakeCoordinator coordinator_;
  std::unique_ptr<grpc::Server> coordinator_server_;
  PsNode::Options options_;
};

TEST_F(PsNodeTest, ServesThePlacementAtStartAndCheckpointsOnStop) {
  coordinator_.SetPlacement(1, {0, 1, 2});
  auto node = PsNode::Start(options_);
  ASSERT_THAT(node, IsOk());
  EXPECT_GT((*node)->port(), 0);
  EXPECT_EQ((*node)->address(), absl::StrCat("127.0.0.1:", (*node)->port()));
  EXPECT_EQ((*node)->name(), "ps 0");
  EXPECT_TRUE(Pull(**node, 1).ok())
      << "placement applied before Start returned";
  EXPECT_FALSE((*node)->ended()->HasBeenNotified());
  EXPECT_THAT((*node)->Stop(), IsOk());
  EXPECT_THAT((*node)->Stop(), IsOk()) << "idempotent";
  EXPECT_THAT(ReadNewestCheckpoint(dir_, 0), IsOk());
}

TEST_F(PsNodeTest, SlowPlacementDoesNotStopHeartbeatsAndTheNewestIsApplied) {
  coordinator_.SetPlacement(1, {0, 1, 2});
  auto node = PsNode::Start(options_);
  ASSERT_THAT(node, IsOk());
  coordinator_.Hold();
  coordinator_.SetPlacement(2, {0, 1, 2});
  ASSERT_TRUE(Eventually([&] { return coordinator_.held() > 0; }));
  // The placement thread waits on the coordinator; heartbeats go on meanwhile.
  const int beats = coordinator_.heartbeats();
  ASSERT_TRUE(
      Eventually([&] { return coordinator_.heartbeats() >= beats + 3; }));
  coordinator_.SetPlacement(3, {0, 1, 2});
  ASSERT_TRUE(
      Eventually([&] { return coordinator_.heartbeats() >= beats + 6; }));
  EXPECT_TRUE(Pull(**node, 1).ok()) << "still serving epoch 1";
  coordinator_.Release();
  ASSERT_TRUE(Eventually([&] { return Pull(**node, 3).ok(); }));
  EXPECT_EQ(Pull(**node, 2).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT((*node)->Stop(), IsOk());
}

TEST_F(PsNodeTest, StandbyTakesOverAndHeartbeatsAsTheShard) {
  coordinator_.SetPlacement(1, {0, 1, 2});
  options_.standby = true;
  auto node = PsNode::Start(options_);
  ASSERT_THAT(node, IsOk());
  EXPECT_EQ((*node)->name(), "standby 0");
  EXPECT_EQ(Pull(**node, 1).error_code(), grpc::StatusCode::UNAVAILABLE);
  ASSERT_TRUE(
      Eventually([&] { return coordinator_.last_identity() == "standby 0"; }));

  coordinator_.SetPlacement(2, {0, 1, 2});
  ASSERT_EQ(Pull(**node, 2).error_code(), grpc::StatusCode::UNAVAILABLE);
  proto::HeartbeatResponse take_over;
  take_over.set_take_over_index(0);
  coordinator_.SetReply(take_over);
  ASSERT_TRUE(Eventually([&] { return Pull(**node, 2).ok(); }));
  EXPECT_EQ((*node)->name(), "ps 0");
  proto::HeartbeatResponse plain;
  plain.set_take_over_index(-1);
  coordinator_.SetReply(plain);
  ASSERT_TRUE(
      Eventually([&] { return coordinator_.last_identity() == "ps 0"; }));
  EXPECT_THAT((*node)->Stop(), IsOk());
  EXPECT_THAT(ReadNewestCheckpoint(dir_, 0), IsOk());
}

TEST_F(PsNodeTest, ReplacedNodeStandsDownEndsAndWritesNoCheckpoint) {
  coordinator_.SetPlacement(1, {0, 1, 2});
  auto node = PsNode::Start(options_);
  ASSERT_THAT(node, IsOk());
  ASSERT_TRUE(Pull(**node, 1).ok());
  proto::HeartbeatResponse replaced;
  replaced.set_replaced(true);
  replaced.set_take_over_index(-1);
  coordinator_.SetReply(replaced);
  (*node)->Wait();  // returns once ended() is notified
  EXPECT_TRUE((*node)->ended()->HasBeenNotified());
  EXPECT_EQ(Pull(**node, 1).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT((*node)->Stop(), IsOk());
  EXPECT_THAT(ReadNewestCheckpoint(dir_, 0),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(PsNodeTest, StartFailsCleanlyWhenTheCoordinatorIsUnreachable) {
  options_.config.cluster.coordinator =
      absl::StrCat("127.0.0.1:", ::downpour::testing::ClosedLoopbackPort());
  options_.config.rpc.connect_timeout_s = 0.3;
  options_.config.rpc.deadline_s = 0.3;
  for (bool standby : {false, true}) {
    options_.standby = standby;
    auto node = PsNode::Start(options_);
    EXPECT_THAT(node.status(),
                StatusIs(absl::StatusCode::kDeadlineExceeded,
                         HasSubstr("gave up waiting for the coordinator at " +
                                   options_.config.cluster.coordinator)));
  }
}

TEST_F(PsNodeTest, ACorruptCheckpointIsASetupErrorBeforeServing) {
  coordinator_.SetPlacement(1, {0, 1, 2});
  auto first = PsNode::Start(options_);
  ASSERT_THAT(first, IsOk());
  ASSERT_THAT((*first)->Stop(), IsOk());  // writes the final checkpoint
  first->reset();
  int corrupted = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(ShardCheckpointDir(dir_, 0))) {
    std::FILE* f = std::fopen(entry.path().c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    std::fseek(f, 50, SEEK_SET);
    std::fputc(0x7f, f);
    std::fclose(f);
    ++corrupted;
  }
  ASSERT_GT(corrupted, 0);
  auto node = PsNode::Start(options_);
  EXPECT_THAT(node.status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("is corrupt")));
  EXPECT_TRUE(IsSetupError(node.status())) << "ps_server exits 2 on it";
  // A model section that builds no model is one too.
  std::filesystem::remove_all(dir_);
  options_.config.model.layers = {};
  const absl::Status no_model = PsNode::Start(options_).status();
  EXPECT_FALSE(no_model.ok());
  EXPECT_TRUE(IsSetupError(no_model)) << no_model;
}

TEST_F(PsNodeTest, CoordinatorAndAddressErrorsAreNoSetupErrors) {
  coordinator_.SetPlacement(1, {0, 1, 2});
  auto first = PsNode::Start(options_);
  ASSERT_THAT(first, IsOk());
  options_.listen = (*first)->address();
  EXPECT_FALSE(IsSetupError(PsNode::Start(options_).status()));
  options_.listen = "127.0.0.1:0";
  options_.config.cluster.coordinator =
      absl::StrCat("127.0.0.1:", ::downpour::testing::ClosedLoopbackPort());
  options_.config.rpc.connect_timeout_s = 0.3;
  options_.config.rpc.deadline_s = 0.3;
  const absl::Status unreachable = PsNode::Start(options_).status();
  EXPECT_FALSE(unreachable.ok());
  EXPECT_FALSE(IsSetupError(unreachable)) << unreachable;
}

TEST_F(PsNodeTest, StartFailsWhenTheListenAddressIsTaken) {
  coordinator_.SetPlacement(1, {0, 1, 2});
  auto first = PsNode::Start(options_);
  ASSERT_THAT(first, IsOk());
  options_.listen = (*first)->address();
  auto second = PsNode::Start(options_);
  EXPECT_THAT(second.status(), StatusIs(absl::StatusCode::kUnavailable,
                                        HasSubstr("cannot listen on")));
}

}  // namespace
}  // namespace downpour::server
