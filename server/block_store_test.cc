#include "server/block_store.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/checksum.h"
#include "common/counters.h"
#include "common/testing/status_matchers.h"
#include "common/wire_encoding.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::server {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

std::unique_ptr<Optimizer> MakeOptimizer(const std::string& type, double lr) {
  OptimizerSection section;
  section.type = ParseOptimizerType(type).value();
  section.learning_rate = lr;
  return Optimizer::Create(section).value();
}

std::unique_ptr<Optimizer> MakeOptimizer(const OptimizerSection& section) {
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer =
      Optimizer::Create(section);
  EXPECT_THAT(optimizer, IsOk());
  return std::move(optimizer).value();
}

OptimizerSection Section(const std::string& type, double lr) {
  OptimizerSection section;
  section.type = ParseOptimizerType(type).value();
  section.learning_rate = lr;
  return section;
}

std::string Bytes(const std::vector<float>& floats) {
  return std::string(reinterpret_cast<const char*>(floats.data()),
                     floats.size() * sizeof(float));
}

std::vector<float> Floats(const std::string& bytes) {
  std::vector<float> floats(bytes.size() / sizeof(float));
  std::memcpy(floats.data(), bytes.data(), floats.size() * sizeof(float));
  return floats;
}

std::vector<float> PullFloats(const BlockStore& store, uint32_t id) {
  std::string bytes;
  EXPECT_THAT(store.Pull(id, &bytes), IsOk());
  return Floats(bytes);
}

TEST(BlockStoreTest, AddBlockCountsBlocksAndFloats) {
  BlockStore store(MakeOptimizer("sgd", 1.0));
  ASSERT_THAT(store.AddBlock(5, {1, 2, 3}), IsOk());
  ASSERT_THAT(store.AddBlock(2, {4, 5}), IsOk());
  EXPECT_TRUE(store.Has(5));
  EXPECT_FALSE(store.Has(3));
  EXPECT_EQ(store.num_blocks(), 2u);
  EXPECT_EQ(store.num_floats(), 5);
  EXPECT_THAT(store.block_ids(), ElementsAre(2, 5));
  ASSERT_THAT(store.AddBlock(5, {7}, /*version=*/4), IsOk());  // replaces
  EXPECT_EQ(store.num_floats(), 3);
  std::string bytes;
  EXPECT_EQ(store.Pull(5, &bytes).value(), 4u);
  EXPECT_THAT(Floats(bytes), ElementsAre(7.0f));
}

TEST(BlockStoreTest, AddBlockRejectsEmptyValuesAndWrongStateSize) {
  BlockStore store(MakeOptimizer("adam", 0.1));
  EXPECT_THAT(
      store.AddBlock(1, {}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("add block 1")));
  EXPECT_THAT(
      store.AddBlock(1, {1, 2}, 0, {0, 0, 0}),
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          HasSubstr("optimizer adam needs 2 x 2 = 4 state floats, got 3")));
  EXPECT_EQ(store.num_blocks(), 0u);
}

TEST(BlockStoreTest, PullReturnsLittleEndianBytesAndVersion) {
  BlockStore store(MakeOptimizer("sgd", 1.0));
  ASSERT_THAT(store.AddBlock(0, {1.5f, -2.0f}, /*version=*/9), IsOk());
  std::string bytes = "stale contents of a reused buffer";
  auto version = store.Pull(0, &bytes);
  ASSERT_THAT(version, IsOk());
  EXPECT_EQ(*version, 9u);
  ASSERT_EQ(bytes.size(), 8u);
  // 1.5f is 0x3FC00000: little-endian bytes 00 00 C0 3F.
  EXPECT_EQ(bytes.substr(0, 4), std::string("\x00\x00\xC0\x3F", 4));
  EXPECT_THAT(Floats(bytes), ElementsAre(1.5f, -2.0f));
}

TEST(BlockStoreTest, PullOfUnknownBlockIsNotFoundAndListsHeldBlocks) {
  BlockStore store(MakeOptimizer("sgd", 1.0));
  std::string bytes = "untouched";
  EXPECT_THAT(store.Pull(17, &bytes),
              StatusIs(absl::StatusCode::kNotFound,
                       "pull: unknown block 17 (this ps holds no blocks)"));
  for (uint32_t id : {0, 1, 2, 3, 4, 5, 9})
    ASSERT_THAT(store.AddBlock(id, {0}), IsOk());
  EXPECT_THAT(store.Pull(17, &bytes),
              StatusIs(absl::StatusCode::kNotFound,
                       "pull: unknown block 17 (this ps holds blocks 0-5, 9)"));
  EXPECT_EQ(bytes, "untouched");
}

TEST(BlockStoreTest, UnknownBlockMessageStaysShortForManyRanges) {
  BlockStore store(MakeOptimizer("sgd", 1.0));
  for (uint32_t id = 0; id < 100; id += 2)
    ASSERT_THAT(store.AddBlock(id, {0}), IsOk());
  std::string bytes;
  EXPECT_THAT(
      store.Pull(1, &bytes),
      StatusIs(absl::StatusCode::kNotFound,
               "pull: unknown block 1 (this ps holds blocks 0, 2, 4, 6, 8, "
               "10, 12, 14, ... (50 blocks in all))"));
}

TEST(BlockStoreTest, PushOfUnknownBlockIsNotFound) {
  BlockStore store(MakeOptimizer("sgd", 1.0));
  ASSERT_THAT(store.AddBlock(4, {0}), IsOk());
  std::string g = Bytes({1});
  EXPECT_THAT(store.Push(3, g.data(), g.size(), 0),
              StatusIs(absl::StatusCode::kNotFound,
                       "push: unknown block 3 (this ps holds block 4)"));
  EXPECT_THAT(store.ValidatePush(3, g.data(), g.size()),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST(BlockStoreTest, PushOfWrongSizeIsInvalidArgumentAndChangesNothing) {
  BlockStore store(MakeOptimizer("sgd", 1.0));
  ASSERT_THAT(store.AddBlock(17, std::vector<float>(65536, 1.0f)), IsOk());
  std::string g(1000, '\0');
  EXPECT_THAT(
      store.Push(17, g.data(), g.size(), 0),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "push: block 17 expects 65536 floats (262144 bytes), got 1000 "
               "bytes"));
  std::string odd(262143, '\0');
  EXPECT_THAT(
      store.Push(17, odd.data(), odd.size(), 0),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("got 262143")));
  std::string bytes;
  EXPECT_EQ(store.Pull(17, &bytes).value(), 0u);
  EXPECT_EQ(Floats(bytes), std::vector<float>(65536, 1.0f));
}

TEST(BlockStoreTest, PushWithNaNOrInfIsRejectedAndTheBlockIsUnchanged) {
  const float kNaN = std::numeric_limits<float>::quiet_NaN();
  const float kInf = std::numeric_limits<float>::infinity();
  struct Case {
    int64_t index;
    float value;
    std::string what;
  };
  for (const Case& c : std::vector<Case>{{12, kNaN, "NaN"},
                                         {0, kInf, "Inf"},
                                         {65535, -kInf, "Inf"},
                                         {4096, -kNaN, "NaN"}}) {
    BlockStore store(MakeOptimizer("momentum", 0.5));
    std::vector<float> initial(65536);
    for (int i = 0; i < 65536; ++i) initial[i] = 0.25f * (i % 7);
    ASSERT_THAT(store.AddBlock(3, initial, /*version=*/2), IsOk());
    std::vector<float> g(65536, 1.0f);
    g[c.index] = c.value;
    std::string bytes = Bytes(g);
    const std::string message =
        "push: block 3 gradient has " + c.what + " at index " +
        std::to_string(c.index) +
        " (of 65536); the worker's gradient diverged, lower "
        "optimizer.learning_rate";
    EXPECT_THAT(store.ValidatePush(3, bytes.data(), bytes.size()),
                StatusIs(absl::StatusCode::kInvalidArgument, message));
    EXPECT_THAT(store.Push(3, bytes.data(), bytes.size(), 2),
                StatusIs(absl::StatusCode::kInvalidArgument, message));
    std::string pulled;
    EXPECT_EQ(store.Pull(3, &pulled).value(), 2u);
    EXPECT_EQ(Floats(pulled), initial);
    std::vector<BlockStore::BlockSnapshot> snapshot = store.Snapshot();
    EXPECT_EQ(snapshot[0].state,
              std::vector<float>(65536, 0.0f));  // momentum untouched
  }
}

TEST(BlockStoreTest, ValidatePushAcceptsAGoodGradientWithoutApplyingIt) {
  BlockStore store(MakeOptimizer("sgd", 1.0));
  ASSERT_THAT(store.AddBlock(0, {1, 2}), IsOk());
  std::string g = Bytes({5, 5});
  EXPECT_THAT(store.ValidatePush(0, g.data(), g.size()), IsOk());
  EXPECT_THAT(PullFloats(store, 0), ElementsAre(1.0f, 2.0f));
}

TEST(BlockStoreTest, PushAppliesTheOptimizerAndCountsVersionsAndStaleness) {
  BlockStore store(MakeOptimizer("sgd", 0.5));
  ASSERT_THAT(store.AddBlock(1, {10, 20}), IsOk());
  std::string g = Bytes({2, 4});
  auto first = store.Push(1, g.data(), g.size(), /*base_version=*/0);
  ASSERT_THAT(first, IsOk());
  EXPECT_EQ(first->version, 1u);
  EXPECT_EQ(first->staleness, 0u);
  EXPECT_THAT(PullFloats(store, 1), ElementsAre(9.0f, 18.0f));
  // Two more pushes computed from version 0: the block was at 1, then 2.
  auto second = store.Push(1, g.data(), g.size(), 0);
  auto third = store.Push(1, g.data(), g.size(), 0);
  EXPECT_EQ(second->version, 2u);
  EXPECT_EQ(second->staleness, 1u);
  EXPECT_EQ(third->version, 3u);
  EXPECT_EQ(third->staleness, 2u);
  // A base version from the future (e.g. after a restore) counts as fresh.
  auto fourth = store.Push(1, g.data(), g.size(), 100);
  EXPECT_EQ(fourth->version, 4u);
  EXPECT_EQ(fourth->staleness, 0u);
  uint64_t version = 0;
  store.BlockCrc32c(1, &version);
  EXPECT_EQ(version, 4u);
}

TEST(BlockStoreTest, PushOfUnalignedBytesIsApplied) {
  BlockStore store(MakeOptimizer("sgd", 1.0));
  ASSERT_THAT(store.AddBlock(0, {0, 0, 0}), IsOk());
  std::string buffer = "x" + Bytes({1, 2, 3});
  const char* unaligned = buffer.data() + 1;
  ASSERT_THAT(store.Push(0, unaligned, 12, 0), IsOk());
  EXPECT_THAT(PullFloats(store, 0), ElementsAre(-1.0f, -2.0f, -3.0f));
}

TEST(BlockStoreTest, AdamUsesTheBlockVersionForBiasCorrection) {
  // g = 2, zero state: a fresh block takes Adam's first step, w = 1 - lr = 0.9.
  // A block restored at version 1000 takes step t = 1001: m = 0.2, v = 0.004,
  //   w = 1 - 0.1 * (0.2 / (1 - 0.9^1001)) / sqrt(0.004 / (1 - 0.999^1001))
  //     = 0.748470
  BlockStore fresh(MakeOptimizer("adam", 0.1));
  BlockStore restored(MakeOptimizer("adam", 0.1));
  ASSERT_THAT(fresh.AddBlock(0, {1}), IsOk());
  ASSERT_THAT(restored.AddBlock(0, {1}, /*version=*/1000), IsOk());
  std::string g = Bytes({2});
  ASSERT_THAT(fresh.Push(0, g.data(), g.size(), 0), IsOk());
  ASSERT_THAT(restored.Push(0, g.data(), g.size(), 1000), IsOk());
  EXPECT_NEAR(PullFloats(fresh, 0)[0], 0.9f, 1e-6);
  EXPECT_NEAR(PullFloats(restored, 0)[0], 0.748470f, 1e-5);
}

TEST(BlockStoreTest, ValidatePushResolvesTheBlockThatApplyUpdates) {
  BlockStore store(MakeOptimizer("sgd", 1.0));
  ASSERT_THAT(store.AddBlock(0, {1, 1}), IsOk());
  ASSERT_THAT(store.AddBlock(1, {5, 5, 5}), IsOk());
  const std::string g = Bytes({1, 2, 3});
  absl::StatusOr<BlockStore::Block*> block =
      store.ValidatePush(1, g.data(), g.size());
  ASSERT_THAT(block, IsOk());
  EXPECT_THAT(PullFloats(store, 1), ElementsAre(5, 5, 5)) << "validated only";
  absl::StatusOr<BlockStore::PushResult> result =
      store.Apply(*block, g.data(), 0, /*worker_id=*/-1);
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(result->version, 1u);
  EXPECT_THAT(PullFloats(store, 1), ElementsAre(4, 3, 2));
  EXPECT_THAT(PullFloats(store, 0), ElementsAre(1, 1));
}

// The block's version is the global step: warmup 2 gives update 1 half the lr.
// sgd lr 1, g = 1: w = 0 - 0.5 = -0.5, then -0.5 - 1 = -1.5.
TEST(BlockStoreTest, ScheduleFollowsTheBlockVersion) {
  OptimizerSection section = Section("sgd", 1.0);
  section.warmup_updates = 2;
  Counters counters;
  BlockStore store(MakeOptimizer(section), {0, &counters});
  ASSERT_THAT(store.AddBlock(0, {0}), IsOk());
  const std::string g = Bytes({1});
  ASSERT_THAT(store.Push(0, g.data(), g.size(), 0), IsOk());
  EXPECT_THAT(PullFloats(store, 0), ElementsAre(-0.5f));
  EXPECT_DOUBLE_EQ(counters.Get("lr_scale"), 0.5);
  ASSERT_THAT(store.Push(0, g.data(), g.size(), 1), IsOk());
  EXPECT_THAT(PullFloats(store, 0), ElementsAre(-1.5f));
  EXPECT_DOUBLE_EQ(counters.Get("lr_scale"), 1.0);
}

// sgd lr 0.6, staleness_lr: the block is at version 5 and the push was
// computed on version 2 (staleness 3): w = 1 - 0.6 * 1 / 3 = 0.8. A fresh
// push then takes the full step: 0.8 - 0.6 = 0.2.
TEST(BlockStoreTest, StalenessLrDividesTheStepByTheStaleness) {
  OptimizerSection section = Section("sgd", 0.6);
  section.staleness_lr = true;
  Counters counters;
  BlockStore store(MakeOptimizer(section), {0, &counters});
  ASSERT_THAT(store.AddBlock(0, {1}, /*version=*/5), IsOk());
  const std::string g = Bytes({1});
  auto stale = store.Push(0, g.data(), g.size(), /*base_version=*/2);
  ASSERT_THAT(stale, IsOk());
  EXPECT_EQ(stale->staleness, 3u);
  EXPECT_NEAR(PullFloats(store, 0)[0], 0.8f, 1e-6);
  EXPECT_NEAR(counters.Get("lr_scale"), 1.0 / 3, 1e-12);
  ASSERT_THAT(store.Push(0, g.data(), g.size(), 6), IsOk());
  EXPECT_NEAR(PullFloats(store, 0)[0], 0.2f, 1e-6);
  EXPECT_DOUBLE_EQ(counters.Get("lr_scale"), 1.0);
}

// momentum lr 0.1, mu 0.9, async_momentum auto, w = 0, g = 1 each push; the
// block starts at version 20:
//   push 1, base 0 (staleness 20): s = 0.05 * 20 = 1 -> mu_e = 1 - 0.1 * 2
//     = 0.8; v = 1, w = -0.1;
//   push 2, base 21 (staleness 0): s = 0.95 -> mu_e = 1 - 0.1 * 1.95 = 0.805;
//     v = 0.805 + 1 = 1.805, w = -0.1 - 0.1805 = -0.2805.
// With async_momentum off push 2 gives v = 1.9, w = -0.29.
TEST(BlockStoreTest, AsyncMomentumLowersMomentumByTheMeanStaleness) {
  OptimizerSection section = Section("momentum", 0.1);
  section.momentum = 0.9;
  Counters counters;
  BlockStore store(MakeOptimizer(section), {0, &counters});
  ASSERT_THAT(store.AddBlock(0, {0}, /*version=*/20), IsOk());
  const std::string g = Bytes({1});
  ASSERT_THAT(store.Push(0, g.data(), g.size(), 0), IsOk());
  EXPECT_DOUBLE_EQ(store.MeanStaleness(0), 1.0);
  // 1 - (1 - 0.9) * (1 + 1.0 / 2)
  EXPECT_NEAR(counters.Get("momentum_applied"), 0.85, 1e-12);
  EXPECT_NEAR(PullFloats(store, 0)[0], -0.1f, 1e-6);
  ASSERT_THAT(store.Push(0, g.data(), g.size(), 21), IsOk());
  EXPECT_NEAR(store.MeanStaleness(0), 0.95, 1e-12);
  // 1 - 0.1 * (1 + 0.95 / 2); v = 0.8525 * 1 + 1; w = -0.1 - 0.1 * v
  EXPECT_NEAR(counters.Get("momentum_applied"), 0.8525, 1e-12);
  EXPECT_NEAR(store.Snapshot()[0].state[0], 1.8525f, 1e-6);
  EXPECT_NEAR(PullFloats(store, 0)[0], -0.28525f, 1e-6);

  section.async_momentum = AsyncMomentum::kOff;
  BlockStore off(MakeOptimizer(section));
  ASSERT_THAT(off.AddBlock(0, {0}, /*version=*/20), IsOk());
  ASSERT_THAT(off.Push(0, g.data(), g.size(), 0), IsOk());
  ASSERT_THAT(off.Push(0, g.data(), g.size(), 21), IsOk());
  EXPECT_NEAR(PullFloats(off, 0)[0], -0.29f, 1e-6);
}

// One worker never pushes stale gradients: the mean staleness stays 0 and
// auto momentum equals the configured one, bit for bit.
TEST(BlockStoreTest, AsyncMomentumChangesNothingWithoutStaleness) {
  OptimizerSection section = Section("momentum", 0.1);
  BlockStore auto_store(MakeOptimizer(section));
  section.async_momentum = AsyncMomentum::kOff;
  BlockStore off_store(MakeOptimizer(section));
  const std::string g = Bytes({1, -2, 0.5f});
  for (BlockStore* store : {&auto_store, &off_store}) {
    ASSERT_THAT(store->AddBlock(0, {1, 2, 3}), IsOk());
    for (uint64_t v = 0; v < 5; ++v) {
      ASSERT_THAT(store->Push(0, g.data(), g.size(), v), IsOk());
    }
  }
  EXPECT_EQ(auto_store.MeanStaleness(0), 0.0);
  EXPECT_THAT(PullFloats(auto_store, 0),
              ElementsAreArray(PullFloats(off_store, 0)));
}

// DC-ASGD, sgd lr 0.5, lambda 0.5, workers 0 and 1 both pull version 0,
// w_bak = {1, 2}. Worker 1 pushes g = {1, 1} fresh: w = {0.5, 1.5}. Worker 0
// then pushes g = {2, -1} on version 0 (staleness 1), compensated with
// w_now - w_bak = {-0.5, -0.5}:
//   g' = {2 + 0.5 * 4 * -0.5, -1 + 0.5 * 1 * -0.5} = {1, -1.25}
//   w  = {0.5 - 0.5 * 1, 1.5 + 0.5 * 1.25} = {0, 2.125}.
TEST(BlockStoreTest, DelayCompensationUsesTheValuesTheWorkerPulled) {
  OptimizerSection section = Section("sgd", 0.5);
  section.delay_compensation = 0.5;
  Counters counters;
  BlockStore store(MakeOptimizer(section), {2, &counters});
  ASSERT_THAT(store.AddBlock(3, {1, 2}), IsOk());
  std::string bytes;
  ASSERT_THAT(store.Pull(3, &bytes, /*worker_id=*/0), IsOk());
  ASSERT_THAT(store.Pull(3, &bytes, /*worker_id=*/1), IsOk());
  EXPECT_EQ(store.num_served_floats(), 4);
  const std::string g1 = Bytes({1, 1}), g0 = Bytes({2, -1});
  ASSERT_THAT(store.Push(3, g1.data(), g1.size(), 0, /*worker_id=*/1), IsOk());
  EXPECT_THAT(PullFloats(store, 3), ElementsAre(0.5f, 1.5f));
  ASSERT_THAT(store.Push(3, g0.data(), g0.size(), 0, /*worker_id=*/0), IsOk());
  EXPECT_THAT(PullFloats(store, 3), ElementsAre(0.0f, 2.125f));
  EXPECT_EQ(counters.Get("dc_misses"), 0);
}

// A stale push whose base version was never served to its worker is applied
// as is and counted: worker 1 pulled version 0 only, pushes on version 1.
// sgd lr 0.5: w = {1, 2} -> {0.5, 1.5} (worker 0, fresh) -> {0, 1} (worker 1,
// base 1, staleness 0: nothing to compensate, no miss) -> {-0.5, 0.5}
// (worker 1, base 1 at version 2: miss) -> {-1, 0} (a tool, id -1: miss).
TEST(BlockStoreTest, DelayCompensationMissesAreAppliedUncompensated) {
  OptimizerSection section = Section("sgd", 0.5);
  section.delay_compensation = 0.5;
  Counters counters;
  BlockStore store(MakeOptimizer(section), {2, &counters});
  ASSERT_THAT(store.AddBlock(3, {1, 2}), IsOk());
  std::string bytes;
  ASSERT_THAT(store.Pull(3, &bytes, 1), IsOk());
  const std::string g = Bytes({1, 1});
  ASSERT_THAT(store.Push(3, g.data(), g.size(), 0, 0), IsOk());
  ASSERT_THAT(store.Push(3, g.data(), g.size(), 1, 1), IsOk());
  EXPECT_EQ(counters.Get("dc_misses"), 0);
  ASSERT_THAT(store.Push(3, g.data(), g.size(), 1, 1), IsOk());
  EXPECT_EQ(counters.Get("dc_misses"), 1);
  EXPECT_THAT(PullFloats(store, 3), ElementsAre(-0.5f, 0.5f));
  ASSERT_THAT(store.Push(3, g.data(), g.size(), 0, -1), IsOk());
  EXPECT_EQ(counters.Get("dc_misses"), 2);
  EXPECT_THAT(PullFloats(store, 3), ElementsAre(-1.0f, 0.0f));
}

TEST(BlockStoreTest, PullsAreNotRememberedWithoutDelayCompensation) {
  BlockStore store(MakeOptimizer("sgd", 0.5), {4, nullptr});
  ASSERT_THAT(store.AddBlock(0, {1, 2}), IsOk());
  std::string bytes;
  ASSERT_THAT(store.Pull(0, &bytes, 0), IsOk());
  EXPECT_EQ(store.num_served_floats(), 0);
}

TEST(BlockStoreTest, SnapshotRestoresIntoANewStoreThatContinuesIdentically) {
  auto original = std::make_unique<BlockStore>(MakeOptimizer("momentum", 0.1));
  ASSERT_THAT(original->AddBlock(7, {1, 2, 3}), IsOk());
  ASSERT_THAT(original->AddBlock(2, {4, 5}), IsOk());
  std::string g7 = Bytes({1, -1, 0.5f}), g2 = Bytes({2, 2});
  for (int k = 0; k < 3; ++k) {
    ASSERT_THAT(original->Push(7, g7.data(), g7.size(), k), IsOk());
  }
  ASSERT_THAT(original->Push(2, g2.data(), g2.size(), 0), IsOk());

  std::vector<BlockStore::BlockSnapshot> snapshot = original->Snapshot();
  ASSERT_EQ(snapshot.size(), 2u);
  EXPECT_EQ(snapshot[0].id, 2u);
  EXPECT_EQ(snapshot[0].version, 1u);
  EXPECT_EQ(snapshot[1].id, 7u);
  EXPECT_EQ(snapshot[1].version, 3u);
  EXPECT_EQ(snapshot[1].state.size(), 3u);
  EXPECT_NE(snapshot[1].state[0], 0.0f);  // momentum carried

  BlockStore restored(MakeOptimizer("momentum", 0.1));
  for (const BlockStore::BlockSnapshot& s : snapshot) {
    ASSERT_THAT(restored.AddBlock(s.id, s.values, s.version, s.state), IsOk());
  }
  ASSERT_THAT(original->Push(7, g7.data(), g7.size(), 3), IsOk());
  ASSERT_THAT(restored.Push(7, g7.data(), g7.size(), 3), IsOk());
  uint64_t original_version = 0, restored_version = 0;
  EXPECT_EQ(original->BlockCrc32c(7, &original_version),
            restored.BlockCrc32c(7, &restored_version));
  EXPECT_EQ(original_version, 4u);
  EXPECT_EQ(restored_version, 4u);
  EXPECT_THAT(PullFloats(restored, 7),
              ElementsAreArray(PullFloats(*original, 7)));
  EXPECT_THAT(PullFloats(restored, 2),
              ElementsAreArray(PullFloats(*original, 2)));
}

TEST(BlockStoreTest, BlockCrc32cIsTheChecksumOfThePulledBytes) {
  BlockStore store(MakeOptimizer("sgd", 1.0));
  ASSERT_THAT(store.AddBlock(0, {1, 2, 3, 4}, 6), IsOk());
  std::string bytes;
  ASSERT_THAT(store.Pull(0, &bytes), IsOk());
  uint64_t version = 0;
  EXPECT_EQ(store.BlockCrc32c(0, &version), Crc32c(bytes.data(), bytes.size()));
  EXPECT_EQ(version, 6u);
  EXPECT_EQ(store.BlockCrc32c(99, &version), 0u);
  EXPECT_EQ(version, 0u);
}

// --- bf16 / fp16 on the wire ------------------------------------------------

// Little-endian bytes of 16-bit values, as they travel.
std::string Halves(const std::vector<uint16_t>& halves) {
  return std::string(reinterpret_cast<const char*>(halves.data()),
                     halves.size() * sizeof(uint16_t));
}

std::vector<uint16_t> HalvesOf(const std::string& bytes) {
  std::vector<uint16_t> halves(bytes.size() / sizeof(uint16_t));
  std::memcpy(halves.data(), bytes.data(), halves.size() * sizeof(uint16_t));
  return halves;
}

TEST(BlockStoreTest, EncodedPushAppliesTheDecodedGradient) {
  struct Case {
    WireEncoding encoding;
    std::vector<uint16_t> gradient;  // 2, 1, -3, 0.125
  };
  const Case cases[] = {
      {WireEncoding::kBf16, {0x4000, 0x3F80, 0xC040, 0x3E00}},
      {WireEncoding::kFp16, {0x4000, 0x3C00, 0xC200, 0x3000}},
  };
  for (const Case& c : cases) {
    BlockStore store(MakeOptimizer("sgd", 0.5));
    ASSERT_THAT(store.AddBlock(4, {10, 20, 30, 40}), IsOk());
    std::string buffer = "x" + Halves(c.gradient);
    const char* unaligned = buffer.data() + 1;
    auto result = store.Push(4, unaligned, 8, /*base_version=*/0,
                             /*worker_id=*/-1, c.encoding);
    ASSERT_THAT(result, IsOk()) << WireEncodingName(c.encoding);
    EXPECT_EQ(result->version, 1u);
    // sgd: w - 0.5 * g.
    EXPECT_THAT(PullFloats(store, 4), ElementsAre(9.0f, 19.5f, 31.5f, 39.9375f))
        << WireEncodingName(c.encoding);
  }
}

TEST(BlockStoreTest, EncodedPushOfWrongSizeIsRefusedAndChangesNothing) {
  for (WireEncoding encoding : {WireEncoding::kBf16, WireEncoding::kFp16}) {
    BlockStore store(MakeOptimizer("sgd", 1.0));
    ASSERT_THAT(store.AddBlock(17, std::vector<float>(65536, 1.0f)), IsOk());
    // A float32-sized gradient labelled bf16/fp16.
    std::string g = Bytes(std::vector<float>(65536, 1.0f));
    EXPECT_THAT(
        store.Push(17, g.data(), g.size(), 0, -1, encoding),
        StatusIs(absl::StatusCode::kInvalidArgument,
                 "push: block 17 expects 65536 " + WireEncodingName(encoding) +
                     " values (131072 bytes), got 262144 bytes"));
    std::string bytes;
    EXPECT_EQ(store.Pull(17, &bytes).value(), 0u);
    EXPECT_EQ(Floats(bytes), std::vector<float>(65536, 1.0f));
  }
}

TEST(BlockStoreTest, EncodedPushWithNaNOrInfIsRefusedAndChangesNothing) {
  struct Case {
    WireEncoding encoding;
    uint16_t bad;
    std::string what;
  };
  const Case cases[] = {{WireEncoding::kBf16, 0x7FC0, "NaN"},
                        {WireEncoding::kBf16, 0xFF80, "Inf"},
                        {WireEncoding::kFp16, 0x7E00, "NaN"},
                        {WireEncoding::kFp16, 0x7C00, "Inf"}};
  for (const Case& c : cases) {
    BlockStore store(MakeOptimizer("sgd", 1.0));
    ASSERT_THAT(store.AddBlock(3, std::vector<float>(3000, 2.0f)), IsOk());
    std::vector<uint16_t> g(3000, 0x3F80);  // bf16 1.0; fp16 1.875
    g[2049] = c.bad;
    const std::string bytes = Halves(g);
    EXPECT_THAT(store.Push(3, bytes.data(), bytes.size(), 0, -1, c.encoding),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("push: block 3 gradient has " + c.what +
                                   " at index 2049 (of 3000)")));
    EXPECT_EQ(PullFloats(store, 3), std::vector<float>(3000, 2.0f));
  }
}

TEST(BlockStoreTest, UnknownEncodingIsRefusedAndChangesNothing) {
  BlockStore store(MakeOptimizer("sgd", 1.0));
  ASSERT_THAT(store.AddBlock(3, {1, 2}, /*version=*/5), IsOk());
  const auto seven = static_cast<WireEncoding>(7);
  const std::string g = Halves({0x3F80, 0x3F80});
  const std::string message =
      "push: block 3 has unknown encoding 7 (valid: 0 float32, 1 bf16, 2 "
      "fp16)";
  EXPECT_THAT(store.ValidatePush(3, g.data(), g.size(), seven),
              StatusIs(absl::StatusCode::kInvalidArgument, message));
  EXPECT_THAT(store.Push(3, g.data(), g.size(), 5, -1, seven),
              StatusIs(absl::StatusCode::kInvalidArgument, message));
  std::string bytes = "untouched";
  EXPECT_THAT(store.Pull(3, &bytes, -1, seven),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "pull: block 3 asked for in unknown encoding 7 (valid: "
                       "0 float32, 1 bf16, 2 fp16)"));
  EXPECT_EQ(bytes, "untouched");
  EXPECT_EQ(store.Pull(3, &bytes).value(), 5u);
  EXPECT_THAT(Floats(bytes), ElementsAre(1.0f, 2.0f));
}

TEST(BlockStoreTest, PullInBf16OrFp16ReturnsTheEncodedValues) {
  BlockStore store(MakeOptimizer("sgd", 1.0));
  // 1 + 2^-8 is a bf16 tie (to even: 1.0) and exact in fp16; 65520 rounds to
  // bf16 65536 and overflows fp16.
  ASSERT_THAT(store.AddBlock(0, {1.0f, -2.5f, 1.00390625f, 65520.0f}, 3),
              IsOk());
  std::string bytes;
  EXPECT_EQ(store.Pull(0, &bytes, -1, WireEncoding::kBf16).value(), 3u);
  EXPECT_THAT(HalvesOf(bytes), ElementsAre(0x3F80, 0xC020, 0x3F80, 0x4780));
  EXPECT_EQ(store.Pull(0, &bytes, -1, WireEncoding::kFp16).value(), 3u);
  EXPECT_THAT(HalvesOf(bytes), ElementsAre(0x3C00, 0xC100, 0x3C04, 0x7C00));
  // The store itself keeps float32.
  EXPECT_THAT(PullFloats(store, 0),
              ElementsAre(1.0f, -2.5f, 1.00390625f, 65520.0f));
}

// Issue 12: one push of 1e38 turned Adam's state into Inf for good.
TEST(BlockStoreTest,
     GradientBeyondMaxGradientValueIsRefusedNamingBlockAndValue) {
  for (const char* type : {"sgd", "momentum", "adagrad", "adam"}) {
    OptimizerSection section = Section(type, 0.1);  // max_gradient_value 1e6
    BlockStore store(MakeOptimizer(section));
    ASSERT_THAT(store.AddBlock(4, {1, 2, 3}), IsOk());
    const std::string g = Bytes({0.5f, -1e38f, 1});
    EXPECT_THAT(store.Push(4, g.data(), g.size(), 0),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("block 4 gradient element 1 (of 3)"),
                               HasSubstr("-1e+38"),
                               HasSubstr("max_gradient_value 1e+06"))))
        << type;
    EXPECT_THAT(PullFloats(store, 4), ElementsAre(1, 2, 3)) << type;
    EXPECT_EQ(*store.Version(4), 0u) << type;
    // Just inside the bound is applied.
    const std::string ok = Bytes({0.5f, -1e6f, 1});
    EXPECT_THAT(store.Push(4, ok.data(), ok.size(), 0), IsOk()) << type;
  }
}

TEST(BlockStoreTest, EncodedGradientBeyondMaxGradientValueIsRefused) {
  OptimizerSection section = Section("sgd", 0.1);
  section.max_gradient_value = 100;
  BlockStore store(MakeOptimizer(section));
  ASSERT_THAT(store.AddBlock(2, {1, 2}), IsOk());
  for (WireEncoding encoding : {WireEncoding::kBf16, WireEncoding::kFp16}) {
    const std::vector<float> g = {1, 1000};
    std::string bytes(2 * BytesPerElement(encoding), '\0');
    EncodeFloats(g.data(), 2, encoding, bytes.data());
    EXPECT_THAT(store.Push(2, bytes.data(), bytes.size(), 0, -1, encoding),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("gradient element 1 (of 2) is 1000")));
    EXPECT_THAT(PullFloats(store, 2), ElementsAre(1, 2));
  }
  // At the bound is applied; the next value past it is refused.
  for (WireEncoding encoding : {WireEncoding::kBf16, WireEncoding::kFp16}) {
    std::string bytes(2 * BytesPerElement(encoding), '\0');
    const std::vector<float> at = {100, -100};
    EncodeFloats(at.data(), 2, encoding, bytes.data());
    EXPECT_THAT(store.Push(2, bytes.data(), bytes.size(), 0, -1, encoding),
                IsOk());
    const std::vector<float> past = {
        0, encoding == WireEncoding::kFp16 ? -100.0625f : -100.5f};
    EncodeFloats(past.data(), 2, encoding, bytes.data());
    EXPECT_THAT(store.Push(2, bytes.data(), bytes.size(), 0, -1, encoding),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("gradient element 1 (of 2) is -100.")));
  }
}

TEST(BlockStoreTest, MaxGradientValueZeroLeavesOnlyTheFiniteCheck) {
  OptimizerSection section = Section("sgd", 1e-30);
  section.max_gradient_value = 0;
  BlockStore store(MakeOptimizer(section));
  ASSERT_THAT(store.AddBlock(0, {1}), IsOk());
  const std::string g = Bytes({1e38f});
  EXPECT_THAT(store.Push(0, g.data(), g.size(), 0), IsOk());
}

// With the bound off, an Adam push of 1e38 would square to Inf in v: the
// update is refused and values and state stay as they were.
TEST(BlockStoreTest, UpdateThatWouldOverflowTheStateIsRefusedAndUndone) {
  Counters counters;
  OptimizerSection section = Section("adam", 0.01);
  section.max_gradient_value = 0;
  BlockStore::Options options;
  options.counters = &counters;
  BlockStore store(MakeOptimizer(section), options);
  ASSERT_THAT(store.AddBlock(9, {1, 2, 3, 4}), IsOk());
  const std::string small = Bytes({0.1f, 0.2f, 0.3f, 0.4f});
  ASSERT_THAT(store.Push(9, small.data(), small.size(), 0), IsOk());
  EXPECT_EQ(store.guarded_applies_for_test(), 0) << "a sane push is unguarded";
  const std::vector<BlockStore::BlockSnapshot> before = store.Snapshot();
  const std::string huge = Bytes({0.1f, 1e38f, 0.3f, 0.4f});
  EXPECT_THAT(
      store.Push(9, huge.data(), huge.size(), 1),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("block 9 update would overflow the adam"),
                     HasSubstr("unchanged"))));
  const std::vector<BlockStore::BlockSnapshot> after = store.Snapshot();
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].version, before[0].version);
  EXPECT_EQ(after[0].values, before[0].values);
  EXPECT_EQ(after[0].state, before[0].state);
  EXPECT_EQ(counters.Get("refused_overflows"), 1);
  // The block still learns.
  ASSERT_THAT(store.Push(9, small.data(), small.size(), 1), IsOk());
  EXPECT_EQ(*store.Version(9), 2u);
  // (Held in a variable: a range-for over a member of the temporary
  // Snapshot() would read freed memory.)
  const std::vector<BlockStore::BlockSnapshot> learnt = store.Snapshot();
  for (float x : learnt[0].state) EXPECT_TRUE(std::isfinite(x));
}

// sgd lr 1, g = (3, 4), norm 5, clipped to norm 1: w -= (0.6, 0.8).
TEST(BlockStoreTest, MaxGradientNormClipsAndCounts) {
  Counters counters;
  OptimizerSection section = Section("sgd", 1.0);
  section.max_gradient_norm = 1.0;
  BlockStore::Options options;
  options.counters = &counters;
  BlockStore store(MakeOptimizer(section), options);
  ASSERT_THAT(store.AddBlock(0, {0, 0}), IsOk());
  const std::string g = Bytes({3, 4});
  ASSERT_THAT(store.Push(0, g.data(), g.size(), 0), IsOk());
  const std::vector<float> w = PullFloats(store, 0);
  EXPECT_NEAR(w[0], -0.6f, 1e-6);
  EXPECT_NEAR(w[1], -0.8f, 1e-6);
  EXPECT_EQ(counters.Get("clipped_gradients"), 1);
  const std::string small = Bytes({0.3f, 0.4f});  // norm 0.5: as is
  ASSERT_THAT(store.Push(0, small.data(), small.size(), 1), IsOk());
  EXPECT_NEAR(PullFloats(store, 0)[0], -0.9f, 1e-6);
  EXPECT_EQ(counters.Get("clipped_gradients"), 1);
}

// The overflow guard copies a block: it must stay rare for real jobs, Adam
// with weight decay included.
TEST(BlockStoreTest, RealisticUpdatesNeverTakeTheGuardedPath) {
  for (const char* type : {"sgd", "momentum", "adagrad", "adam"}) {
    OptimizerSection section = Section(type, 0.05);
    section.weight_decay = 1e-4;
    BlockStore store(MakeOptimizer(section));
    ASSERT_THAT(store.AddBlock(0, std::vector<float>(4096, 0.5f)), IsOk());
    std::vector<float> g(4096, 1e-3f);
    for (int i = 0; i < 2000; ++i) {
      g[i % g.size()] = i % 2 ? 1.0f : -1.0f;
      ASSERT_THAT(store.Push(0, g.data(), g.size() * 4, i), IsOk());
    }
    EXPECT_EQ(store.guarded_applies_for_test(), 0) << type;
  }
}

TEST(BlockStoreTest, ComputeNormsMeasuresEveryEncodingInTheOnePass) {
  // 37 elements: the lanes of the scan and a tail.
  std::vector<float> g(37);
  double sum_sq = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    g[i] = (i % 3 == 0 ? -0.5f : 0.25f) * static_cast<float>(i % 5);
    sum_sq += static_cast<double>(g[i]) * g[i];
  }
  BlockStore::Options options;
  options.compute_norms = true;
  for (WireEncoding encoding :
       {WireEncoding::kFloat32, WireEncoding::kBf16, WireEncoding::kFp16}) {
    BlockStore store(MakeOptimizer("sgd", 0.1), options);
    ASSERT_THAT(store.AddBlock(1, std::vector<float>(g.size(), 0)), IsOk());
    std::string bytes(g.size() * BytesPerElement(encoding), '\0');
    EncodeFloats(g.data(), g.size(), encoding, bytes.data());
    BlockStore::GradientStats stats;
    ASSERT_THAT(
        store.ValidatePush(1, bytes.data(), bytes.size(), encoding, &stats),
        IsOk());
    // These values are exact in every encoding.
    EXPECT_NEAR(stats.norm, std::sqrt(sum_sq), 1e-5)
        << WireEncodingName(encoding);
  }
  // Without compute_norms (and max_gradient_norm 0) no norm is measured.
  BlockStore plain(MakeOptimizer("sgd", 0.1));
  ASSERT_THAT(plain.AddBlock(1, std::vector<float>(g.size(), 0)), IsOk());
  BlockStore::GradientStats stats;
  ASSERT_THAT(plain.ValidatePush(1, g.data(), g.size() * 4,
                                 WireEncoding::kFloat32, &stats),
              IsOk());
  EXPECT_LT(stats.norm, 0);
}

TEST(BlockStoreTest, ApplyClipsToTheCallersNormBound) {
  BlockStore::Options options;
  options.compute_norms = true;
  Counters counters;
  options.counters = &counters;
  BlockStore store(MakeOptimizer("sgd", 1.0), options);
  ASSERT_THAT(store.AddBlock(2, {0, 0}), IsOk());
  const std::vector<float> g = {3, 4};  // norm 5
  BlockStore::GradientStats stats;
  auto block =
      store.ValidatePush(2, g.data(), 8, WireEncoding::kFloat32, &stats);
  ASSERT_THAT(block, IsOk());
  EXPECT_DOUBLE_EQ(stats.norm, 5.0);
  stats.clip_norm = 1.0;
  ASSERT_THAT(
      store.Apply(*block, g.data(), 0, -1, WireEncoding::kFloat32, &stats),
      IsOk());
  EXPECT_THAT(PullFloats(store, 2), ElementsAre(-0.6f, -0.8f));
  EXPECT_EQ(counters.Get("clipped_gradients"), 1);
}

// Replication by gradient: a store that restored another's snapshot (mean
// staleness not carried) and replays its updates holds the same floats after
// each: stale, bf16, clipped and plain pushes, Adam with staleness_lr and
// momentum with async_momentum auto (which reads the mean staleness).
TEST(BlockStoreTest, ReplayGivesTheFloatsApplyGave) {
  OptimizerSection adam = Section("adam", 0.01);
  adam.staleness_lr = true;
  OptimizerSection momentum = Section("momentum", 0.05);
  momentum.momentum = 0.9;
  for (const OptimizerSection& section : {adam, momentum}) {
    BlockStore primary(MakeOptimizer(section), {0, nullptr, true});
    std::vector<float> values(64);
    for (size_t i = 0; i < values.size(); ++i) values[i] = 0.01f * i - 0.3f;
    ASSERT_THAT(primary.AddBlock(4, values), IsOk());
    std::vector<float> g(64);
    auto gradient = [&](int k) {
      for (size_t i = 0; i < g.size(); ++i) {
        g[i] = std::sin(0.7f * i + k) * (k % 3 == 0 ? 40.0f : 1.0f);
      }
    };
    // Stale pushes before the snapshot: the mean staleness is not 0.
    for (int k = 0; k < 5; ++k) {
      gradient(k);
      ASSERT_THAT(primary.Push(4, g.data(), g.size() * 4, 0), IsOk());
    }
    BlockStore backup(MakeOptimizer(section), {0, nullptr, true});
    for (BlockStore::BlockSnapshot& s : primary.Snapshot()) {
      ASSERT_THAT(backup.AddBlock(s.id, s.values, s.version, s.state), IsOk());
    }
    for (int k = 5; k < 30; ++k) {
      gradient(k);
      BlockStore::Replayed u;
      u.id = 4;
      u.version = *primary.Version(4);
      u.base_version = k % 4 == 0 ? u.version - 3 : u.version;
      u.worker_id = k % 2;
      u.encoding = k % 5 == 0 ? WireEncoding::kBf16 : WireEncoding::kFloat32;
      u.mean_staleness = primary.MeanStaleness(4);
      u.clip_norm = k % 3 == 0 ? 2.0 : 0.0;
      std::string bytes(g.size() * BytesPerElement(u.encoding), '\0');
      EncodeFloats(g.data(), g.size(), u.encoding, bytes.data());
      BlockStore::GradientStats stats;
      auto block = primary.ValidatePush(4, bytes.data(), bytes.size(),
                                        u.encoding, &stats);
      ASSERT_THAT(block, IsOk());
      stats.clip_norm = u.clip_norm;
      ASSERT_THAT(primary.Apply(*block, bytes.data(), u.base_version,
                                u.worker_id, u.encoding, &stats),
                  IsOk());
      u.data = bytes.data();
      u.bytes = bytes.size();
      auto replayed = backup.Replay(u);
      ASSERT_THAT(replayed, IsOk()) << k;
      EXPECT_EQ(replayed->version, *primary.Version(4));
      EXPECT_THAT(PullFloats(backup, 4),
                  ElementsAreArray(PullFloats(primary, 4)))
          << OptimizerTypeName(section.type) << " after update " << k;
    }
    // An update of another version, or a gradient no push may carry, is
    // refused and changes nothing.
    const std::vector<float> before = PullFloats(backup, 4);
    BlockStore::Replayed stale;
    stale.id = 4;
    stale.version = *backup.Version(4) - 1;
    const std::string ones = Bytes(std::vector<float>(64, 1.0f));
    stale.data = ones.data();
    stale.bytes = ones.size();
    EXPECT_THAT(backup.Replay(stale),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         HasSubstr("block 4 is at version")));
    BlockStore::Replayed nan = stale;
    nan.version = *backup.Version(4);
    std::vector<float> bad(64, 1.0f);
    bad[9] = std::nanf("");
    const std::string bad_bytes = Bytes(bad);
    nan.data = bad_bytes.data();
    EXPECT_THAT(backup.Replay(nan),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("NaN")));
    EXPECT_THAT(PullFloats(backup, 4), ElementsAreArray(before));
  }
}

}  // namespace
}  // namespace downpour::server
