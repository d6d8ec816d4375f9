#include "server/shard.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace downpour::server {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;

class ShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::string(std::getenv("TEST_TMPDIR")) + "/" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    config_.model.layers = {6, 4, 3};
    config_.model.block_size = 8;
    config_.optimizer.type = "sgd";
    config_.optimizer.learning_rate = 1.0;
    config_.checkpoint.dir = dir_;
    auto spec = ModelSpec::Create(config_.model);
    ASSERT_TRUE(spec.ok());
    num_blocks_ = spec->blocks().size();
    spec_ = std::make_unique<ModelSpec>(*spec);
  }

  std::unique_ptr<Shard> MakeShard() {
    auto shard = Shard::Create(config_, 0, &counters_);
    EXPECT_THAT(shard, IsOk());
    return shard.ok() ? *std::move(shard) : nullptr;
  }

  std::vector<uint32_t> AllBlocks() const {
    std::vector<uint32_t> ids;
    for (uint32_t i = 0; i < num_blocks_; ++i) ids.push_back(i);
    return ids;
  }

  proto::PushRequest OnesPush(uint32_t block, uint64_t sequence) const {
    proto::PushRequest request;
    request.set_placement_epoch(1);
    request.set_worker_id(3);
    request.set_sequence(sequence);
    proto::BlockData* data = request.add_blocks();
    data->set_block_id(block);
    const int64_t length =
        block < spec_->blocks().size() ? spec_->blocks()[block].length : 8;
    std::vector<float> ones(length, 1.0f);
    data->set_data(ones.data(), ones.size() * 4);
    return request;
  }

  std::string dir_;
  Config config_;
  Counters counters_;
  size_t num_blocks_ = 0;
  std::unique_ptr<ModelSpec> spec_;
};

TEST_F(ShardTest, RefusesRequestsBeforePlacementAndFromOtherEpochs) {
  auto shard = MakeShard();
  proto::PullRequest pull;
  pull.set_placement_epoch(1);
  pull.add_block_ids(0);
  proto::PullResponse response;
  EXPECT_THAT(shard->Pull(pull, &response),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("no blocks yet")));
  ASSERT_THAT(shard->Assign(2, AllBlocks()), IsOk());
  EXPECT_THAT(shard->Pull(pull, &response),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("stale placement epoch 1")));
  pull.set_placement_epoch(3);
  EXPECT_THAT(shard->Pull(pull, &response), StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(ShardTest, RejectedPushChangesNothing) {
  auto shard = MakeShard();
  ASSERT_THAT(shard->Assign(1, {0, 1}), IsOk());
  const proto::ChecksumResponse before = shard->Checksums();
  proto::PushRequest request = OnesPush(0, 1);
  // Second block poisoned: the whole request is refused, block 0 included.
  proto::BlockData* bad = request.add_blocks();
  bad->set_block_id(1);
  std::vector<float> values(spec_->blocks()[1].length, 0.0f);
  values[2] = NAN;
  bad->set_data(values.data(), values.size() * 4);
  proto::PushResponse response;
  EXPECT_THAT(shard->Push(request, &response),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("NaN")));
  EXPECT_EQ(shard->Checksums().DebugString(), before.DebugString());
  request = OnesPush(num_blocks_ + 1, 2);
  EXPECT_THAT(shard->Push(request, &response),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("unknown block")));
}

TEST_F(ShardTest, RetriedPushIsAppliedOnce) {
  auto shard = MakeShard();
  ASSERT_THAT(shard->Assign(1, {0}), IsOk());
  proto::PushResponse first, retry;
  ASSERT_THAT(shard->Push(OnesPush(0, 10), &first), IsOk());
  ASSERT_THAT(shard->Push(OnesPush(0, 10), &retry), IsOk());
  EXPECT_FALSE(first.duplicate());
  EXPECT_TRUE(retry.duplicate());
  EXPECT_EQ(first.versions(0), 1u);
  EXPECT_EQ(counters_.Get("duplicate_pushes"), 1);
}

TEST_F(ShardTest, CheckpointRoundTripKeepsValuesVersionsAndSequences) {
  proto::ChecksumResponse before;
  {
    auto shard = MakeShard();
    ASSERT_THAT(shard->Assign(1, AllBlocks()), IsOk());
    proto::PushResponse response;
    ASSERT_THAT(shard->Push(OnesPush(1, 5), &response), IsOk());
    ASSERT_THAT(shard->WriteCheckpoint(), IsOk());
    before = shard->Checksums();
  }
  auto restarted = MakeShard();
  ASSERT_THAT(restarted->Assign(1, AllBlocks()), IsOk());
  EXPECT_EQ(restarted->Checksums().DebugString(), before.DebugString());
  proto::PushResponse response;
  ASSERT_THAT(restarted->Push(OnesPush(1, 5), &response), IsOk());
  EXPECT_TRUE(response.duplicate()) << "sequence 5 was applied before the restart";
}

TEST_F(ShardTest, CorruptCheckpointIsRefusedAtStart) {
  {
    auto shard = MakeShard();
    ASSERT_THAT(shard->Assign(1, AllBlocks()), IsOk());
    ASSERT_THAT(shard->WriteCheckpoint(), IsOk());
  }
  const std::string path = CheckpointPath(dir_, 0);
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  std::fseek(f, 40, SEEK_SET);
  std::fputc(0x5a, f);
  std::fclose(f);
  EXPECT_THAT(Shard::Create(config_, 0, &counters_),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr(path)));
}

// SGD with lr 1 and gradients of ones is exact in float, so any lost or torn
// update shows up as a wrong value; the checkpoints taken meanwhile must each
// pair a block's version with the sequence of the push that made it.
// The shard tells the store who pulled and who pushed, so DC-ASGD finds the
// values a stale push was computed on. sgd lr 1, lambda 0.5, g = 1: worker 1's
// fresh push moves w by -1; worker 0's push on the same version 0 is
// compensated to 1 + 0.5 * 1 * (w_now - w_pulled) = 1 + 0.5 * -1 = 0.5.
TEST_F(ShardTest, DelayCompensationKnowsWhichWorkerPulled) {
  config_.cluster.workers = {"127.0.0.1:0", "127.0.0.1:0"};
  config_.optimizer.delay_compensation = 0.5;
  auto shard = MakeShard();
  ASSERT_THAT(shard->Assign(1, {0}), IsOk());
  float w0 = 0;
  for (int32_t worker : {0, 1}) {
    proto::PullRequest pull;
    pull.set_placement_epoch(1);
    pull.set_worker_id(worker);
    pull.add_block_ids(0);
    proto::PullResponse pulled;
    ASSERT_THAT(shard->Pull(pull, &pulled), IsOk());
    std::memcpy(&w0, pulled.blocks(0).data().data(), sizeof(w0));
  }
  for (int32_t worker : {1, 0}) {
    proto::PushRequest push = OnesPush(0, 0);
    push.set_worker_id(worker);
    push.mutable_blocks(0)->set_version(0);
    proto::PushResponse response;
    ASSERT_THAT(shard->Push(push, &response), IsOk());
  }
  proto::PullRequest pull;
  pull.set_placement_epoch(1);
  pull.add_block_ids(0);
  proto::PullResponse after;
  ASSERT_THAT(shard->Pull(pull, &after), IsOk());
  float w = 0;
  std::memcpy(&w, after.blocks(0).data().data(), sizeof(w));
  EXPECT_FLOAT_EQ(w, w0 - 1.5f);
  EXPECT_EQ(counters_.Get("dc_misses"), 0);
}

TEST_F(ShardTest, ConcurrentPushesPullsAndCheckpointsAgree) {
  constexpr int kThreads = 4;
  constexpr int kPushesPerThread = 200;
  auto shard = MakeShard();
  ASSERT_THAT(shard->Assign(1, AllBlocks()), IsOk());
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 1; k <= kPushesPerThread; ++k) {
        // Thread t alone pushes block 1 + t (with its sequence); all share block 0.
        proto::PushRequest own = OnesPush(1 + t, k);
        own.set_worker_id(t);
        proto::PushRequest shared = OnesPush(0, 0);
        proto::PushResponse response;
        EXPECT_THAT(shard->Push(own, &response), IsOk());
        EXPECT_THAT(shard->Push(shared, &response), IsOk());
        proto::PullRequest pull;
        pull.set_placement_epoch(1);
        pull.add_block_ids(0);
        proto::PullResponse pulled;
        EXPECT_THAT(shard->Pull(pull, &pulled), IsOk());
      }
    });
  }
  for (int c = 0; c < 5; ++c) {
    ASSERT_THAT(shard->WriteCheckpoint(), IsOk());
    absl::StatusOr<Checkpoint> checkpoint = ReadCheckpoint(CheckpointPath(dir_, 0));
    ASSERT_THAT(checkpoint, IsOk());
    for (const BlockStore::BlockSnapshot& block : checkpoint->blocks) {
      if (block.id < 1 || block.id > kThreads) continue;
      const int worker = block.id - 1;
      const auto it = checkpoint->last_sequence.find(worker);
      const uint64_t sequence =
          it == checkpoint->last_sequence.end() ? 0 : it->second;
      EXPECT_EQ(block.version, sequence) << "block " << block.id;
    }
  }
  for (std::thread& thread : threads) thread.join();

  proto::PullRequest pull;
  pull.set_placement_epoch(1);
  for (uint32_t id = 0; id <= kThreads; ++id) pull.add_block_ids(id);
  proto::PullResponse pulled;
  ASSERT_THAT(shard->Pull(pull, &pulled), IsOk());
  std::vector<float> initial(spec_->blocks()[0].length);
  for (uint32_t id = 0; id <= kThreads; ++id) {
    const proto::BlockData& block = pulled.blocks(id);
    const int pushes = id == 0 ? kThreads * kPushesPerThread : kPushesPerThread;
    EXPECT_EQ(block.version(), static_cast<uint64_t>(pushes)) << "block " << id;
    const BlockSpec& spec = spec_->blocks()[id];
    initial.resize(spec.length);
    spec_->InitBlock(spec, config_.model.init_seed, initial.data());
    std::vector<float> values(spec.length);
    std::memcpy(values.data(), block.data().data(), block.data().size());
    for (int64_t i = 0; i < spec.length; ++i) {
      float expected = initial[i];
      for (int k = 0; k < pushes; ++k) expected -= 1.0f;
      ASSERT_EQ(values[i], expected) << "block " << id << " index " << i;
    }
  }
}

}  // namespace
}  // namespace downpour::server
