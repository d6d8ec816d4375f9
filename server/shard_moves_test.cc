// Shard and live moves of dense blocks (docs/OPERATIONS.md, "Growing and
// shrinking the ps set"): a block the placement moves away is refused
// "bucket moved" (nothing applied, the sequence not used up) and kept as it
// stood for the destination's last pass; the destination imports it with its
// version; an empty push within a worker's window fills its slot.
#include <memory>
#include <vector>

#include "common/push_key.h"
#include "common/push_sequence.h"
#include "common/sparse_keys.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/shard.h"
#include "server/sparse_rows_proto.h"

namespace downpour::server {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;

constexpr uint64_t kKey = 0xfeed;

class ShardMovesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.model.layers = {6, 4, 3};
    config_.model.block_size = 8;
    config_.cluster.workers.assign(4, "127.0.0.1:0");
    config_.optimizer.type = OptimizerType::kSgd;
    config_.optimizer.learning_rate = 1.0;
  }

  // Shard `index`, knowing worker 3's incarnation 1 (push key kKey).
  std::unique_ptr<Shard> MakeShard(int index) {
    auto shard = Shard::Create(config_, index, &counters_);
    EXPECT_THAT(shard, IsOk());
    if (!shard.ok()) return nullptr;
    (*shard)->LearnWorkerIncarnations({{3, 1, PushKeyDigest(3, 1, kKey)}});
    return *std::move(shard);
  }

  // Worker 3's push of ones to `blocks` (none: an empty push), push n `n`.
  absl::Status Push(Shard& shard, const std::vector<uint32_t>& blocks,
                    uint64_t n, uint64_t epoch, proto::PushResponse* response) {
    proto::PushRequest request;
    request.set_placement_epoch(epoch);
    request.set_worker_id(3);
    request.set_sequence(MakeSequence(1, n));
    request.set_push_key(kKey);
    for (uint32_t block : blocks) {
      proto::BlockData* data = request.add_blocks();
      data->set_block_id(block);
      const std::vector<float> ones(8, 1.0f);  // every block here has 8
      data->set_data(ones.data(), ones.size() * 4);
    }
    return shard.Push(request, response);
  }

  uint64_t VersionOf(const Shard& shard, uint32_t block) {
    const proto::ChecksumResponse sums = shard.Checksums();
    for (const proto::BlockChecksum& b : sums.blocks()) {
      if (b.block_id() == block) return b.version();
    }
    return 0;
  }

  Config config_;
  Counters counters_;
};

TEST_F(ShardMovesTest, AMovedBlockIsRefusedAndKeptForTheLastPass) {
  std::unique_ptr<Shard> source = MakeShard(0);
  ASSERT_THAT(source->Assign(1, {0, 1}), IsOk());
  proto::PushResponse response;
  ASSERT_THAT(Push(*source, {0, 1}, 1, 1, &response), IsOk());
  ASSERT_THAT(source->Assign(2, {1}), IsOk());  // block 0 moved away
  EXPECT_THAT(Push(*source, {0, 1}, 2, 2, &response),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr(kBucketMovedMessage)));
  proto::PullRequest pull;
  pull.set_placement_epoch(2);
  pull.add_block_ids(0);
  proto::PullResponse pulled;
  EXPECT_THAT(source->Pull(pull, &pulled),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("pull: block 0 moved to another ps")));
  // What stays goes back under the same sequence: it was not used up.
  ASSERT_THAT(Push(*source, {1}, 2, 2, &response), IsOk());
  EXPECT_FALSE(response.duplicate());
  EXPECT_EQ(VersionOf(*source, 1), 2u);
  EXPECT_EQ(source->Checksums().blocks_size(), 1) << "block 0 is not held";
  EXPECT_EQ(source->applied_total(), 2u);

  proto::CopyBlocksRequest copy;
  copy.add_blocks(0);
  copy.set_at_epoch(3);
  proto::CopyBlocksResponse copied;
  EXPECT_THAT(source->CopyBlocks(copy, &copied),
              StatusIs(absl::StatusCode::kUnavailable));
  copy.set_at_epoch(2);
  ASSERT_THAT(source->CopyBlocks(copy, &copied), IsOk());
  ASSERT_EQ(copied.blocks_size(), 1);
  EXPECT_EQ(copied.blocks(0).version(), 1u);

  // The destination holds it with its version before it serves it.
  std::unique_ptr<Shard> destination = MakeShard(1);
  ASSERT_THAT(destination->Assign(1, {}), IsOk());
  std::vector<BlockStore::BlockSnapshot> blocks(1);
  ASSERT_THAT(ToBlock(copied.blocks(0), "test", &blocks[0]), IsOk());
  ASSERT_THAT(destination->ImportMovedBlocks(std::move(blocks)), IsOk());
  ASSERT_THAT(destination->Assign(2, {0}), IsOk());
  ASSERT_THAT(Push(*destination, {0}, 1, 2, &response), IsOk());
  EXPECT_EQ(VersionOf(*destination, 0), 2u) << "1 moved + 1 applied here";

  EXPECT_EQ(source->ReleaseMovedBlocks({}), 1);
  EXPECT_THAT(
      source->CopyBlocks(copy, &copied),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("released")));
  EXPECT_THAT(Push(*source, {0}, 3, 2, &response),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr(kBucketMovedMessage)));
}

TEST_F(ShardMovesTest, AnEmptyPushWithinTheWindowFillsItsSlot) {
  std::unique_ptr<Shard> shard = MakeShard(0);
  ASSERT_THAT(shard->Assign(1, {0}), IsOk());
  proto::PushResponse response;
  ASSERT_THAT(Push(*shard, {}, 1, 1, &response), IsOk());
  EXPECT_FALSE(response.duplicate());
  ASSERT_THAT(Push(*shard, {0}, 2, 1, &response), IsOk());
  EXPECT_EQ(shard->push_holes(), 0u) << "sequence 1 left a hole";
  ASSERT_THAT(Push(*shard, {}, 1, 1, &response), IsOk());
  EXPECT_TRUE(response.duplicate());
  // Beyond the window it would move it: refused, nothing recorded.
  EXPECT_THAT(Push(*shard, {}, 1000, 1, &response),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("nothing recorded")));
  EXPECT_EQ(VersionOf(*shard, 0), 1u);
}

}  // namespace
}  // namespace downpour::server
