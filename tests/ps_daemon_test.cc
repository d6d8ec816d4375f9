// A real coordinator and ps_server on loopback: every rejection path answers
// with the right gRPC code and a message that names the block and the expected
// value, the ps keeps serving afterwards, and checkpoints survive a restart.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/exit_codes.h"
#include "common/file_util.h"
#include "common/model_spec.h"
#include "common/push_sequence.h"
#include "common/subprocess.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "membership/coordinator_client.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/server_util.h"
#include "tests/daemon_harness.h"

namespace downpour {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class PsDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TestDir();
    config_path_ = testing::WriteConfig(
        "ps.yaml",
        testing::LoopbackConfig(
            1, 1,
            absl::StrCat(
                "model:\n  layers: [4, 3]\n  type: softmax\n  block_size: 8\n"
                "data:\n  source: synthetic\n"
                "optimizer:\n  type: sgd\n  learning_rate: 1\n"
                "checkpoint:\n  dir: ",
                dir_, "/ckpt\n  interval_s: 0\n")));
    auto coordinator = testing::StartDaemon(
        "coordinator", "coordinator/coordinator",
        {"--config", config_path_, "--port_file", dir_ + "/coordinator.port"});
    ASSERT_TRUE(coordinator.ok()) << coordinator.status();
    coordinator_ = *std::move(coordinator);
    auto address =
        testing::WaitForPort(*coordinator_, dir_ + "/coordinator.port");
    ASSERT_TRUE(address.ok()) << address.status();
    coordinator_address_ = *address;
    StartPs();
  }

  void StartPs() {
    std::filesystem::remove(dir_ + "/ps.port");
    auto ps = testing::StartDaemon(
        "ps-0", "server/ps_server",
        {"--config", config_path_, "--index", "0", "--coordinator",
         coordinator_address_, "--port_file", dir_ + "/ps.port"});
    ASSERT_TRUE(ps.ok()) << ps.status();
    ps_ = *std::move(ps);
    auto address = testing::WaitForPort(*ps_, dir_ + "/ps.port");
    ASSERT_TRUE(address.ok()) << address.status();
    stub_ = proto::ParameterServer::NewStub(MakeChannel(*address));
    // A restarted ps comes back on a new port, so the placement epoch moves on:
    // take the coordinator's current epoch, then wait until the ps serves it.
    RpcSection rpc;
    membership::CoordinatorClient client(coordinator_address_, rpc, "test");
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline) {
      auto placement = client.GetPlacement();
      if (placement.ok() && placement->shards_size() == 1 &&
          placement->shards(0).address() == *address) {
        epoch_ = placement->epoch();
        if (Pull({0}).ok()) return;
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
    FAIL() << "ps did not start serving placement epoch " << epoch_;
  }

  grpc::Status Pull(std::vector<uint32_t> ids,
                    proto::PullResponse* response = nullptr) {
    proto::PullRequest request;
    request.set_placement_epoch(epoch_);
    for (uint32_t id : ids) request.add_block_ids(id);
    proto::PullResponse ignored;
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(5));
    return stub_->Pull(&context, request, response ? response : &ignored);
  }

  // Sequence n of worker 0's incarnation, registered with the coordinator on
  // first use (the ps takes only sequences of incarnations the coordinator
  // issued, with the push key issued with it).
  uint64_t Sequence(uint64_t n) {
    if (incarnation_ == 0) {
      RpcSection rpc;
      membership::CoordinatorClient client(coordinator_address_, rpc, "test");
      auto registered = client.RegisterWorker(0, "127.0.0.1:1");
      EXPECT_TRUE(registered.ok()) << registered.status();
      if (registered.ok()) {
        incarnation_ = registered->incarnation();
        push_key_ = registered->push_key();
      }
    }
    return MakeSequence(incarnation_, n);
  }

  grpc::Status PushTracked(uint32_t id, std::vector<float> gradient,
                           uint64_t n) {
    return Push(id, std::move(gradient), 0, n);
  }

  // A push as worker 0: push n of its incarnation (0: the next unused),
  // retried while the ps has not heard of the incarnation yet (until its
  // next heartbeat). epoch 0 stands for "the current one".
  grpc::Status Push(uint32_t id, std::vector<float> gradient,
                    uint64_t epoch = 0, uint64_t n = 0, int encoding = 0) {
    proto::PushRequest request;
    request.set_placement_epoch(epoch == 0 ? epoch_ : epoch);
    request.set_worker_id(0);
    request.set_sequence(Sequence(n == 0 ? ++next_n_ : n));
    request.set_push_key(push_key_);
    proto::BlockData* block = request.add_blocks();
    block->set_block_id(id);
    block->set_data(gradient.data(), gradient.size() * sizeof(float));
    block->set_encoding(static_cast<proto::Encoding>(encoding));
    grpc::Status status;
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    do {
      proto::PushResponse response;
      grpc::ClientContext context;
      context.set_deadline(DeadlineIn(5));
      status = stub_->Push(&context, request, &response);
      if (status.error_code() != grpc::StatusCode::UNAVAILABLE ||
          status.error_message().find("has not heard of") ==
              std::string::npos) {
        break;
      }
      absl::SleepFor(absl::Milliseconds(50));
    } while (absl::Now() < deadline);
    return status;
  }

  proto::ChecksumResponse Checksums() {
    proto::ChecksumResponse response;
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(5));
    EXPECT_TRUE(
        stub_->Checksums(&context, proto::ChecksumRequest(), &response).ok());
    return response;
  }

  std::string dir_, config_path_, coordinator_address_;
  std::unique_ptr<Subprocess> coordinator_, ps_;
  std::unique_ptr<proto::ParameterServer::Stub> stub_;
  uint64_t epoch_ = 0;
  uint64_t incarnation_ = 0;
  uint64_t push_key_ = 0;
  uint64_t next_n_ = 0;  // the last push n Push chose
};

// Blocks of [4, 3] with block_size 8: weight 12 floats -> blocks 0 (8) and 1
// (4), bias 3 floats -> block 2.
TEST_F(PsDaemonTest, RejectsBadPushesAndKeepsServing) {
  ASSERT_TRUE(Pull({0, 1, 2}).ok());
  struct Case {
    const char* what;
    grpc::Status status;
    grpc::StatusCode code;
    const char* message;
  } cases[] = {
      {"wrong length", Push(0, std::vector<float>(5, 1.0f)),
       grpc::StatusCode::INVALID_ARGUMENT, "block 0 expects 8 floats"},
      {"NaN", Push(1, {1, NAN, 1, 1}), grpc::StatusCode::INVALID_ARGUMENT,
       "NaN at index 1"},
      {"Inf", Push(2, {1, 1, INFINITY}), grpc::StatusCode::INVALID_ARGUMENT,
       "block 2"},
      // Issue 12: finite is not enough (optimizer.max_gradient_value 1e6).
      {"huge", Push(1, {1, 1e38f, 1, 1}), grpc::StatusCode::INVALID_ARGUMENT,
       "block 1 gradient element 1 (of 4) is 1e+38, beyond "
       "optimizer.max_gradient_value 1e+06"},
      {"unknown encoding", Push(2, {1, 1, 1}, 0, 0, /*encoding=*/7),
       grpc::StatusCode::INVALID_ARGUMENT, "unknown encoding 7"},
      {"unknown block", Push(42, {1, 2, 3}), grpc::StatusCode::NOT_FOUND,
       "unknown block 42"},
      {"stale epoch", Push(2, {1, 1, 1}, /*epoch=*/epoch_ + 5),
       grpc::StatusCode::UNAVAILABLE, "behind the request's"},
      {"pull unknown", Pull({7}), grpc::StatusCode::NOT_FOUND,
       "unknown block 7"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.status.error_code(), c.code)
        << c.what << ": " << c.status.error_message();
    EXPECT_THAT(c.status.error_message(), HasSubstr(c.message)) << c.what;
  }
  // Nothing was applied, and the daemon still serves.
  proto::PullResponse response;
  ASSERT_TRUE(Pull({0, 1, 2}, &response).ok());
  for (const auto& block : response.blocks()) EXPECT_EQ(block.version(), 0u);
  EXPECT_TRUE(Push(2, {1, 1, 1}).ok());
  EXPECT_FALSE(ps_->Poll().has_value()) << ps_->LogTail(20);
}

TEST_F(PsDaemonTest, CheckpointOnSigtermSurvivesARestart) {
  ASSERT_TRUE(PushTracked(0, std::vector<float>(8, 0.5f), 7).ok());
  ASSERT_TRUE(PushTracked(2, {1, 2, 3}, 8).ok());
  const std::string before = Checksums().DebugString();
  EXPECT_EQ(ps_->Stop(absl::Seconds(10)), 0) << ps_->LogTail(20);
  EXPECT_THAT(ps_->LogTail(5), HasSubstr("checkpoint written"));
  const uint64_t old_epoch = epoch_;
  StartPs();
  EXPECT_GT(epoch_, old_epoch) << "the ps moved, so the placement epoch rises";
  EXPECT_EQ(Checksums().DebugString(), before);
  // The applied sequence came back too: a retry of push 8 is not applied again.
  ASSERT_TRUE(PushTracked(2, {1, 2, 3}, 8).ok());
  // And a request from the old epoch is now refused as stale.
  const grpc::Status stale = Push(2, {1, 2, 3}, old_epoch);
  EXPECT_EQ(stale.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(stale.error_message(), HasSubstr("stale placement epoch"));
  EXPECT_EQ(Checksums().DebugString(), before);
}

TEST_F(PsDaemonTest, CorruptCheckpointIsRefusedWithAClearMessage) {
  ASSERT_TRUE(Push(0, std::vector<float>(8, 0.5f)).ok());
  EXPECT_EQ(ps_->Stop(absl::Seconds(10)), 0);
  // Every generation is corrupted, so there is nothing older to fall back
  // on; the newest is named.
  std::string path;
  for (const auto& entry :
       std::filesystem::directory_iterator(dir_ + "/ckpt/ps-0")) {
    std::FILE* f = std::fopen(entry.path().c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    std::fseek(f, 50, SEEK_SET);
    std::fputc(0x7f, f);
    std::fclose(f);
    path = std::max(path, entry.path().string());
  }
  ASSERT_FALSE(path.empty()) << "no checkpoint in " << dir_ << "/ckpt/ps-0";
  const std::string reason_file = dir_ + "/ps-0.reason";
  auto ps = testing::StartDaemon(
      "ps-0-corrupt", "server/ps_server",
      {"--config", config_path_, "--index", "0", "--coordinator",
       coordinator_address_, "--exit_reason_file", reason_file});
  ASSERT_TRUE(ps.ok());
  const std::optional<int> status = (*ps)->Wait(absl::Seconds(20));
  ASSERT_TRUE(status.has_value())
      << "a ps with a corrupt checkpoint kept running";
  EXPECT_EQ(*status, kExitConfig) << "documented: a restart cannot cure it";
  EXPECT_THAT((*ps)->LogTail(5), HasSubstr("is corrupt"));
  EXPECT_THAT((*ps)->LogTail(5), HasSubstr(path));
  // The same message, for a launcher to report.
  const std::string reason = ReadFile(reason_file).value_or("(no reason file)");
  EXPECT_THAT(reason, HasSubstr("checkpoint '" + path + "' is corrupt ("));
  EXPECT_THAT(reason, Not(HasSubstr("ps 0: "))) << "the bare message";
}

}  // namespace
}  // namespace downpour

namespace downpour {
namespace {

// Issue 42: plaintext listens on loopback only, unless the config says
// security.insecure_network: true (Redis's protected mode). A ps told to
// listen on the wildcard address in plaintext exits, naming the fixes.
TEST(PsAdvertiseTest, PlaintextRefusesToListenBeyondLoopback) {
  const std::string dir = testing::TestDir();
  const std::string config = testing::WriteConfig(
      "plain.yaml", testing::LoopbackConfig(2, 1,
                                            "data:\n  source: synthetic\n"
                                            "checkpoint:\n  dir: \"\"\n"));
  auto ps = testing::StartDaemon(
      "ps-0", "server/ps_server",
      {"--config", config, "--index", "0", "--coordinator", "127.0.0.1:1",
       "--listen", "0.0.0.0:0", "--port_file", dir + "/ps0.port"});
  ASSERT_TRUE(ps.ok()) << ps.status();
  const std::optional<int> rc = (*ps)->Wait(absl::Seconds(60));
  ASSERT_TRUE(rc.has_value()) << "the ps must exit, not serve";
  EXPECT_NE(*rc, 0);
  EXPECT_THAT((*ps)->LogTail(5),
              ::testing::HasSubstr("refusing to serve plaintext gRPC on "
                                   "0.0.0.0:0"));
  EXPECT_THAT((*ps)->LogTail(5),
              ::testing::HasSubstr("security.insecure_network: true"));
}

// A ps bound to the wildcard address registers an address peers can dial.
TEST(PsAdvertiseTest, WildcardListenRegistersTheAdvertisedOrHostName) {
  const std::string dir = testing::TestDir();
  const std::string config = testing::WriteConfig(
      "ps.yaml", testing::LoopbackConfig(2, 1,
                                         "data:\n  source: synthetic\n"
                                         "checkpoint:\n  dir: \"\"\n"
                                         "security:\n"
                                         "  insecure_network: true\n"));
  auto coordinator = testing::StartDaemon(
      "coordinator", "coordinator/coordinator",
      {"--config", config, "--port_file", dir + "/coordinator.port"});
  ASSERT_TRUE(coordinator.ok());
  auto address = testing::WaitForPort(**coordinator, dir + "/coordinator.port");
  ASSERT_TRUE(address.ok()) << address.status();
  auto advertised =
      testing::StartDaemon("ps-0", "server/ps_server",
                           {"--config", config, "--index", "0", "--coordinator",
                            *address, "--listen", "0.0.0.0:0", "--advertise",
                            "127.0.0.2:0", "--port_file", dir + "/ps0.port"});
  auto wildcard = testing::StartDaemon(
      "ps-1", "server/ps_server",
      {"--config", config, "--index", "1", "--coordinator", *address,
       "--listen", "0.0.0.0:0", "--port_file", dir + "/ps1.port"});
  ASSERT_TRUE(advertised.ok() && wildcard.ok());
  auto port0 = testing::WaitForPort(**advertised, dir + "/ps0.port");
  auto port1 = testing::WaitForPort(**wildcard, dir + "/ps1.port");
  ASSERT_TRUE(port0.ok() && port1.ok());
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  RpcSection rpc;
  membership::CoordinatorClient client(*address, rpc, "test");
  auto placement = client.WaitForPlacement(1);
  ASSERT_TRUE(placement.ok()) << placement.status();
  EXPECT_EQ(placement->shards(0).address(),
            "127.0.0.2:" + port0->substr(port0->rfind(':') + 1));
  EXPECT_EQ(placement->shards(1).address(),
            std::string(host) + ":" + port1->substr(port1->rfind(':') + 1));
}

}  // namespace
}  // namespace downpour
