#include "server/moved_blocks.h"

#include <set>
#include <vector>

#include "common/sparse_keys.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::server {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;

BlockStore::BlockSnapshot Block(uint32_t id, uint64_t version, size_t n) {
  return {id, version, std::vector<float>(n, 0.5f * (id + 1)),
          std::vector<float>(n, 1.0f)};
}

TEST(MovedBlocksTest, AParkedBlockIsRefusedAsMovedAndOthersPass) {
  MovedBlocks moved(1);
  EXPECT_TRUE(moved.empty());
  moved.Park(Block(3, 7, 4));
  EXPECT_FALSE(moved.empty());
  EXPECT_THAT(moved.Check("push", 2), IsOk());
  EXPECT_THAT(moved.Check("push", 3),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr(kBucketMovedMessage)));
  EXPECT_THAT(moved.Check("pull", 3),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("pull: block 3 moved to another ps")));
  moved.Returned(3);  // the placement gave it back
  EXPECT_THAT(moved.Check("push", 3), IsOk());
  EXPECT_TRUE(moved.empty());
}

TEST(MovedBlocksTest, CopyAnswersTheBlocksAsParkedWithinTheByteBound) {
  MovedBlocks moved(0);
  moved.Park(Block(1, 5, 10));  // 80 bytes with its state
  moved.Park(Block(4, 9, 10));
  proto::CopyBlocksResponse all;
  ASSERT_THAT(moved.Copy({1, 4}, 1 << 20, &all), IsOk());
  ASSERT_EQ(all.blocks_size(), 2);
  EXPECT_EQ(all.blocks(0).id(), 1u);
  EXPECT_EQ(all.blocks(0).version(), 5u);
  EXPECT_EQ(all.blocks(0).values().size(), 40u);
  EXPECT_EQ(all.blocks(1).id(), 4u);
  EXPECT_EQ(all.blocks(1).version(), 9u);
  // A bound below one block still answers one: the caller asks again.
  proto::CopyBlocksResponse first;
  ASSERT_THAT(moved.Copy({4, 1}, 100, &first), IsOk());
  ASSERT_EQ(first.blocks_size(), 1);
  EXPECT_EQ(first.blocks(0).id(), 4u);
}

TEST(MovedBlocksTest, ReleasedCopiesAreRefusedToCopyButStillMoved) {
  MovedBlocks moved(2);
  moved.Park(Block(1, 5, 2));
  moved.Park(Block(2, 6, 2));
  EXPECT_EQ(moved.Release(std::set<uint32_t>{2}), 1);  // 2 still switching
  proto::CopyBlocksResponse response;
  EXPECT_THAT(
      moved.Copy({1}, 1 << 20, &response),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("released")));
  EXPECT_THAT(moved.Copy({7}, 1 << 20, &response),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("did not move it away")));
  EXPECT_THAT(moved.Copy({2}, 1 << 20, &response), IsOk());
  EXPECT_THAT(moved.Check("push", 1),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(moved.Release({}), 1);
  EXPECT_EQ(moved.Release({}), 0);
}

}  // namespace
}  // namespace downpour::server
