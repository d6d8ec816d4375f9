#include "common/model_spec.h"

#include <cmath>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
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

// model.type tensors: the declared tensors in order, PyTorch's shapes, the
// fan-in of a weight its dimensions after the first, a 1-D tensor zeros.
TEST(ModelSpecTest, TensorsModelLaysOutTheDeclaredTensors) {
  ModelSection model;
  model.type = ModelType::kTensors;
  model.tensors = {"conv1.weight 4x1x3x3", "conv1.bias 4", "fc.weight 10x64",
                   "fc.bias 10"};
  model.block_size = 32;
  auto spec = ModelSpec::Create(model);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->type(), ModelType::kTensors);
  ASSERT_EQ(spec->tensors().size(), 4u);
  EXPECT_EQ(spec->tensors()[0].shape, (std::vector<int64_t>{4, 1, 3, 3}));
  EXPECT_EQ(spec->tensors()[0].fan_in, 9);
  EXPECT_EQ(spec->tensors()[1].fan_in, 0);
  EXPECT_EQ(spec->tensors()[2].fan_in, 64);
  EXPECT_EQ(spec->tensors()[2].offset, 40);
  EXPECT_EQ(spec->num_params(), 36 + 4 + 640 + 10);
  EXPECT_EQ(spec->blocks().size(), 2u + 1u + 20u + 1u);
  EXPECT_TRUE(spec->sparse_tables().empty());
  const std::vector<float> init = spec->InitAll(1);
  const float limit = std::sqrt(6.0f / 9);
  for (int i = 0; i < 36; ++i) EXPECT_LE(std::fabs(init[i]), limit);
  for (int i = 36; i < 40; ++i) EXPECT_EQ(init[i], 0.0f);
  EXPECT_NE(spec->Fingerprint(),
            ModelSpec::Create(ModelSection())->Fingerprint());
}

TEST(ModelSpecTest, TensorsModelRefusesBadDeclarations) {
  ModelSection model;
  model.type = ModelType::kTensors;
  for (const auto& [tensors, error] :
       std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{}, "model.type tensors needs model.tensors"},
           {{"w"}, "'w': expected a name and a shape"},
           {{"w 3x0"}, "dimension '0' is not a number >= 1"},
           {{"w 3xa"}, "dimension 'a' is not a number >= 1"},
           {{"w/x 3"}, "a name has letters, digits"},
           {{"w 3", "w 4"}, "names 'w' twice"},
           {{"w 100000x100000x100"}, "parameters, the most a model may have"},
       }) {
    model.tensors = tensors;
    EXPECT_THAT(ModelSpec::Create(model),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         ::testing::HasSubstr(error)));
  }
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
