// Tests of PullBlocks::Check and CheckUniqueBlocks: what a pull is refused
// for before any lock, and the reply's size (the visit is shard_test's).
#include "server/pull_blocks.h"

#include <vector>

#include "common/config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::server {
namespace {

using ::testing::HasSubstr;

ModelSpec Spec() {
  ModelSection model;
  model.layers = {6, 4, 3};
  model.block_size = 8;
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(model);
  EXPECT_TRUE(spec.ok());
  return *spec;
}

TEST(CheckUniqueBlocksTest, NamesTheFirstRepeatedBlock) {
  EXPECT_TRUE(
      CheckUniqueBlocks("push", std::vector<uint32_t>{2, 0, 1}, 3).ok());
  const absl::Status twice =
      CheckUniqueBlocks("pull", std::vector<uint32_t>{1, 2, 1}, 3);
  EXPECT_TRUE(absl::IsInvalidArgument(twice));
  EXPECT_THAT(twice.message(),
              HasSubstr("pull: block 1 appears more than once"));
  EXPECT_THAT(twice.message(), HasSubstr("(worker 3)"));
}

TEST(PullBlocksTest, ChecksReaderIdsAndEncodingAndSizesTheReply) {
  const ModelSpec spec = Spec();
  const PullBlocks pull(&spec, /*num_workers=*/2);
  EXPECT_TRUE(pull.CheckReader(-1).ok());
  EXPECT_TRUE(pull.CheckReader(1).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(pull.CheckReader(2)));
  EXPECT_TRUE(absl::IsInvalidArgument(pull.CheckReader(-2)));

  proto::PullRequest request;
  request.set_worker_id(0);
  request.add_block_ids(0);
  request.add_block_ids(1);
  request.set_encoding(static_cast<proto::Encoding>(1));  // bf16
  absl::StatusOr<PullBlocks::Plan> plan = pull.Check(request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->width, 2u);
  EXPECT_EQ(plan->payload_bytes, static_cast<size_t>(spec.blocks()[0].length +
                                                     spec.blocks()[1].length) *
                                     2);

  request.set_encoding(static_cast<proto::Encoding>(7));
  EXPECT_THAT(pull.Check(request).status().message(),
              HasSubstr("pull: unknown encoding 7"));
  request.set_encoding(static_cast<proto::Encoding>(0));
  request.add_block_ids(0);
  EXPECT_TRUE(absl::IsInvalidArgument(pull.Check(request).status()));
  request.clear_block_ids();
  request.set_worker_id(5);
  EXPECT_THAT(pull.Check(request).status().message(),
              HasSubstr("pull: worker_id 5 is not a configured worker"));
}

}  // namespace
}  // namespace downpour::server
