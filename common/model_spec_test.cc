#include "common/model_spec.h"

#include <numeric>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace downpour {
namespace {

using ::downpour::testing::StatusIs;

TEST(ModelSpecTest, MlpTensorsAndBlocksCoverTheFlatVector) {
  ModelSection model;
  model.layers = {784, 256, 128, 10};
  model.block_size = 65536;
  auto spec = ModelSpec::Create(model);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->num_params(),
            784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
  ASSERT_EQ(spec->tensors().size(), 6u);
  EXPECT_EQ(spec->tensors()[0].name, "fc1.weight");
  int64_t next = 0;
  for (const BlockSpec& block : spec->blocks()) {
    EXPECT_EQ(block.offset, next);
    EXPECT_LE(block.length, model.block_size);
    next += block.length;
  }
  EXPECT_EQ(next, spec->num_params());
}

// wide_deep: the MLP of fields * dim inputs is the dense part, beside the
// weights and embeddings tables.
TEST(ModelSpecTest, WideDeepIsAnMlpOverPooledFieldsAndTwoTables) {
  ModelSection model;
  model.type = ModelType::kWideDeep;
  model.task = Task::kBinary;
  model.wide_deep.fields = 3;
  model.wide_deep.dim = 4;
  model.wide_deep.hidden = {5};
  model.block_size = 16;
  auto spec = ModelSpec::Create(model);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->layers(), (std::vector<int>{12, 5, 1}));
  EXPECT_EQ(spec->num_params(), 12 * 5 + 5 + 5 + 1);
  ASSERT_EQ(spec->tensors().size(), 4u);
  EXPECT_EQ(spec->tensors()[2].name, "fc2.weight");
  ASSERT_EQ(spec->sparse_tables().size(), 2u);
  EXPECT_EQ(spec->sparse_tables()[0].dim, 1);
  EXPECT_EQ(spec->sparse_tables()[1].dim, 4);
  EXPECT_EQ(spec->blocks().back().offset + spec->blocks().back().length,
            spec->num_params());
  model.wide_deep.hidden = {};
  spec = ModelSpec::Create(model);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->layers(), (std::vector<int>{12, 1}));
}

// Found by tools/fuzz/config_fuzzer: two 10^9-wide layers at block_size 4
// made Create build a table of ~2.5e17 blocks (out of memory).
TEST(ModelSpecTest, HugeModelIsRefusedBeforeAllocating) {
  ModelSection model;
  model.layers = {1000000000, 1000000000, 10};
  model.block_size = 4;
  EXPECT_THAT(
      ModelSpec::Create(model).status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               ::testing::HasSubstr("parameters, the most a model may "
                                    "have: use narrower or fewer layers")));
  model.layers = {4096, 4096, 10};
  model.block_size = 1;
  EXPECT_THAT(
      ModelSpec::Create(model).status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               ::testing::HasSubstr("blocks, the most a model may have: "
                                    "raise model.block_size")));
  model.block_size = 65536;
  EXPECT_TRUE(ModelSpec::Create(model).ok());
}

TEST(ModelSpecTest, InitialValuesDoNotDependOnBlockSize) {
  ModelSection small, large;
  small.layers = large.layers = {20, 7, 3};
  small.block_size = 5;
  large.block_size = 1000;
  auto a = ModelSpec::Create(small), b = ModelSpec::Create(large);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->InitAll(3), b->InitAll(3));
  EXPECT_NE(a->InitAll(3), a->InitAll(4));
}

uint64_t FingerprintOf(std::vector<int> layers, int64_t block_size,
                       uint64_t init_seed = 1) {
  ModelSection model;
  model.layers = std::move(layers);
  model.block_size = block_size;
  model.init_seed = init_seed;
  return ModelSpec::Create(model).value().Fingerprint();
}

TEST(ModelSpecTest, FingerprintNamesTheBlockLayout) {
  const uint64_t base = FingerprintOf({784, 32, 10}, 8192);
  EXPECT_NE(base, 0u);
  // The same layout, whatever else the config says.
  EXPECT_EQ(FingerprintOf({784, 32, 10}, 8192, /*init_seed=*/99), base);
  // Another layout: widths, depth, or how tensors are cut into blocks.
  EXPECT_NE(FingerprintOf({784, 33, 10}, 8192), base);
  EXPECT_NE(FingerprintOf({784, 32, 10, 10}, 8192), base);
  EXPECT_NE(FingerprintOf({784, 32, 10}, 4096), base);
  EXPECT_NE(FingerprintOf({32, 784, 10}, 8192), base);
  // Pinned: the value is stored in checkpoints, so it must not change between
  // builds (a change makes every existing checkpoint unreadable).
  EXPECT_EQ(base, 0xcf49000195456ba6ull);
}

TEST(ModelSpecTest, RejectsImpossibleModels) {
  ModelSection model;
  model.layers = {784};
  EXPECT_THAT(ModelSpec::Create(model),
              StatusIs(absl::StatusCode::kInvalidArgument));
  model.layers = {784, 100, 10};
  model.type = ModelType::kSoftmax;
  EXPECT_THAT(ModelSpec::Create(model),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(PlaceBlocksTest, BalancesBytesAcrossShards) {
  ModelSection model;
  model.layers = {784, 256, 128, 10};
  model.block_size = 16384;
  auto spec = ModelSpec::Create(model);
  ASSERT_TRUE(spec.ok());
  auto shards = PlaceBlocks(*spec, 2);
  ASSERT_EQ(shards.size(), 2u);
  int64_t load[2] = {0, 0};
  size_t count = 0;
  for (int s = 0; s < 2; ++s) {
    for (uint32_t id : shards[s]) load[s] += spec->blocks()[id].length;
    count += shards[s].size();
  }
  EXPECT_EQ(count, spec->blocks().size());
  EXPECT_LE(std::abs(load[0] - load[1]), model.block_size);
}

}  // namespace
}  // namespace downpour
