// CheckpointChain: full cuts and deltas, tombstones, and what a shard
// restores from.
#include "server/checkpoint_chain.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/push_view.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/optimizer.h"

namespace downpour::server {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class CheckpointChainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.model.type = ModelType::kSparseLinear;
    config_.model.task = Task::kBinary;
    config_.model.sparse_buckets = 64;
    config_.cluster.workers.assign(1, "127.0.0.1:0");
    config_.cluster.ps.assign(1, "127.0.0.1:0");
    config_.optimizer.type = OptimizerType::kSgd;
    config_.checkpoint.dir = "/nonexistent/checkpoints";  // never written
    config_.checkpoint.incremental = true;
    config_.checkpoint.full_every = 2;
    absl::StatusOr<ModelSpec> spec = ModelSpec::Create(config_.model);
    ASSERT_THAT(spec, IsOk());
    spec_ = std::make_unique<ModelSpec>(*std::move(spec));
    auto tables = SparseTables::Create(config_, 0, *spec_, nullptr, &counters_);
    ASSERT_THAT(tables, IsOk());
    tables_ = *std::move(tables);
    auto optimizer = Optimizer::Create(config_.optimizer);
    ASSERT_THAT(optimizer, IsOk());
    store_ = std::make_unique<BlockStore>(*std::move(optimizer));
  }

  // Pushes gradient 1 to `keys` of table 0.
  void Push(const std::vector<uint64_t>& keys) {
    proto::PushRequest request;
    proto::SparseRows* rows = request.add_sparse();
    rows->set_keys(keys.data(), keys.size() * sizeof(uint64_t));
    const std::vector<float> grads(keys.size(), 1.0f);
    rows->set_values(grads.data(), grads.size() * sizeof(float));
    std::vector<SparseTables::DecodedRows> decoded;
    ASSERT_THAT(tables_->DecodePush(wire::ViewOf(request), &decoded), IsOk());
    tables_->Apply(decoded);
  }

  static ShardCheckpoints::Written WrittenAs(uint64_t generation) {
    ShardCheckpoints::Written written;
    written.generation = generation;
    written.path = "shard-0/" + std::to_string(generation);
    return written;
  }

  Config config_;
  Counters counters_;
  std::unique_ptr<ModelSpec> spec_;
  std::unique_ptr<SparseTables> tables_;
  std::unique_ptr<BlockStore> store_;
};

TEST_F(CheckpointChainTest, AFullCutThenDeltasUntilFullEvery) {
  CheckpointChain chain(config_, 0, tables_->size(), RestoredShard());
  Push({1, 2});
  CheckpointChain::Cut cut = chain.TakeCut(Checkpoint(), *store_, *tables_);
  EXPECT_FALSE(cut.delta);
  EXPECT_EQ(cut.checkpoint.kind, CheckpointKind::kFull);
  EXPECT_EQ(cut.rows, 2u);
  chain.Written(cut, WrittenAs(5));

  Push({3});
  cut = chain.TakeCut(Checkpoint(), *store_, *tables_);
  ASSERT_TRUE(cut.delta);
  EXPECT_EQ(cut.checkpoint.kind, CheckpointKind::kDelta);
  EXPECT_EQ(cut.checkpoint.base_generation, 5u);
  EXPECT_EQ(cut.checkpoint.parent_generation, 5u);
  ASSERT_EQ(cut.checkpoint.sparse_tables.size(), 1u);
  EXPECT_THAT(cut.checkpoint.sparse_tables[0].second.keys, ElementsAre(3));
  chain.Written(cut, WrittenAs(6));

  cut = chain.TakeCut(Checkpoint(), *store_, *tables_);
  ASSERT_TRUE(cut.delta);
  EXPECT_EQ(cut.checkpoint.parent_generation, 6u);
  EXPECT_EQ(cut.rows, 0u);
  chain.Written(cut, WrittenAs(7));
  // checkpoint.full_every 2: two deltas, then a full cut again.
  EXPECT_FALSE(chain.TakeCut(Checkpoint(), *store_, *tables_).delta);
}

TEST_F(CheckpointChainTest, AFailedWriteMakesTheNextAFullCut) {
  CheckpointChain chain(config_, 0, tables_->size(), RestoredShard());
  chain.Written(chain.TakeCut(Checkpoint(), *store_, *tables_), WrittenAs(1));
  EXPECT_TRUE(chain.TakeCut(Checkpoint(), *store_, *tables_).delta);
  chain.Failed();
  EXPECT_FALSE(chain.TakeCut(Checkpoint(), *store_, *tables_).delta);
}

TEST_F(CheckpointChainTest, TombstonesGoInTheNextDeltaOnce) {
  CheckpointChain chain(config_, 0, tables_->size(), RestoredShard());
  chain.Written(chain.TakeCut(Checkpoint(), *store_, *tables_), WrittenAs(1));
  chain.Evicted(0, {9, 4});
  chain.Evicted(0, {4});
  CheckpointChain::Cut cut = chain.TakeCut(Checkpoint(), *store_, *tables_);
  ASSERT_TRUE(cut.delta);
  EXPECT_THAT(cut.checkpoint.sparse_tables[0].second.evicted_keys,
              ElementsAre(4, 9));
  EXPECT_EQ(cut.evicted_keys, 2u);
  chain.Evicted(0, {11});  // after the cut: kept for the next one
  chain.Written(cut, WrittenAs(2));
  cut = chain.TakeCut(Checkpoint(), *store_, *tables_);
  EXPECT_THAT(cut.checkpoint.sparse_tables[0].second.evicted_keys,
              ElementsAre(11));
}

// A flood's evictions do not pile up as tombstones: beyond the bound they
// go, and the next cut is a full one (also when a full cut taken before
// the drop is written after it).
TEST_F(CheckpointChainTest, TombstonesBeyondTheBoundMakeTheNextCutFull) {
  CheckpointChain chain(config_, 0, tables_->size(), RestoredShard());
  chain.Written(chain.TakeCut(Checkpoint(), *store_, *tables_), WrittenAs(1));
  std::vector<uint64_t> keys(CheckpointChain::kMaxTombstones);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i;
  chain.Evicted(0, keys);
  EXPECT_TRUE(chain.TakeCut(Checkpoint(), *store_, *tables_).delta)
      << "at the bound";
  chain.Evicted(0, {1u << 30});
  CheckpointChain::Cut cut = chain.TakeCut(Checkpoint(), *store_, *tables_);
  EXPECT_FALSE(cut.delta);
  EXPECT_EQ(cut.evicted_keys, 0u) << "dropped";
  chain.Evicted(0, keys);  // while that cut is written
  chain.Evicted(0, {7});
  chain.Written(cut, WrittenAs(2));
  EXPECT_FALSE(chain.TakeCut(Checkpoint(), *store_, *tables_).delta)
      << "the tombstones since that cut were dropped too";
}

TEST_F(CheckpointChainTest, NoTombstonesWithoutACheckpointDir) {
  config_.checkpoint.dir.clear();
  CheckpointChain chain(config_, 0, tables_->size(), RestoredShard());
  chain.Written(chain.TakeCut(Checkpoint(), *store_, *tables_), WrittenAs(1));
  chain.Evicted(0, {4});
  EXPECT_THAT(chain.TakeCut(Checkpoint(), *store_, *tables_)
                  .checkpoint.sparse_tables[0]
                  .second.evicted_keys,
              IsEmpty());
}

TEST_F(CheckpointChainTest,
       RestoredBlocksServeAssignsAndStayInCutsUntilPlaced) {
  Checkpoint state;
  state.shard_index = 0;
  state.optimizer = "sgd";
  state.blocks.push_back({3, 7, {1.0f, 2.0f}, {}});
  state.blocks.push_back({4, 2, {1.0f}, {}});
  absl::StatusOr<RestoredShard> restored =
      RestoreShardFrom(Config(), 0, *spec_, "sgd", state);
  ASSERT_THAT(restored, IsOk());
  CheckpointChain chain(config_, 0, tables_->size(), *std::move(restored));
  EXPECT_NE(chain.RestoredBlock(3, 2), nullptr);
  EXPECT_EQ(chain.RestoredBlock(3, 5), nullptr);  // another length
  EXPECT_EQ(chain.RestoredBlock(8, 2), nullptr);
  EXPECT_EQ(chain.UnplacedVersions(*store_), 9u);
  ASSERT_THAT(store_->AddBlock(3, {1.0f, 2.0f}, 7), IsOk());
  EXPECT_EQ(chain.UnplacedVersions(*store_), 2u);
  const CheckpointChain::Cut cut =
      chain.TakeCut(Checkpoint(), *store_, *tables_);
  ASSERT_EQ(cut.checkpoint.blocks.size(), 1u);
  EXPECT_EQ(cut.checkpoint.blocks[0].id, 4u);
  EXPECT_EQ(cut.blocks, 1u);
}

TEST_F(CheckpointChainTest, AddBlockTakesTheRestoredBlockElseInitialValues) {
  const int64_t length = spec_->blocks()[0].length;
  Checkpoint state;
  state.shard_index = 0;
  state.optimizer = "sgd";
  state.blocks.push_back({0, 5, std::vector<float>(length, 0.5f), {}});
  absl::StatusOr<RestoredShard> restored =
      RestoreShardFrom(Config(), 0, *spec_, "sgd", state);
  ASSERT_THAT(restored, IsOk());
  CheckpointChain chain(config_, 0, tables_->size(), *std::move(restored));
  absl::StatusOr<bool> added = chain.AddBlock(0, *spec_, 1, store_.get());
  ASSERT_THAT(added, IsOk());
  EXPECT_TRUE(*added);
  ASSERT_EQ(store_->Snapshot().size(), 1u);
  EXPECT_EQ(store_->Snapshot()[0].version, 5u);
  EXPECT_THAT(store_->Snapshot()[0].values, ::testing::Each(0.5f));
  EXPECT_THAT(chain.AddBlock(1, *spec_, 1, store_.get()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("placement assigns block 1 but the model "
                                 "has 1 blocks")));

  CheckpointChain empty(config_, 0, tables_->size(), RestoredShard());
  auto optimizer = Optimizer::Create(config_.optimizer);
  ASSERT_THAT(optimizer, IsOk());
  BlockStore fresh(*std::move(optimizer));
  added = empty.AddBlock(0, *spec_, 1, &fresh);
  ASSERT_THAT(added, IsOk());
  EXPECT_FALSE(*added);
  EXPECT_EQ(fresh.Snapshot()[0].version, 0u);
}

TEST_F(CheckpointChainTest, ACutIsAtTheServedEpochOrTheFloor) {
  RestoredShard restored;
  restored.epoch_floor = 7;
  CheckpointChain chain(config_, 0, tables_->size(), std::move(restored));
  EXPECT_EQ(chain.TakeCut(3, {}, *store_, *tables_).checkpoint.placement_epoch,
            7u);
  const CheckpointChain::Cut cut = chain.TakeCut(9, {}, *store_, *tables_);
  EXPECT_EQ(cut.checkpoint.placement_epoch, 9u);
  EXPECT_EQ(cut.checkpoint.optimizer, "sgd");
}

TEST_F(CheckpointChainTest, RestoreFromRefusesAnotherShardsReplica) {
  Checkpoint state;
  state.shard_index = 1;
  state.optimizer = "sgd";
  EXPECT_THAT(RestoreShardFrom(Config(), 0, *spec_, "sgd", state),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("the replica held is of shard 1 (optimizer "
                                 "sgd), not of shard 0 (optimizer sgd)")));
}

TEST_F(CheckpointChainTest, RestoreWithoutACheckpointDirReadsNothing) {
  absl::StatusOr<RestoredShard> restored =
      RestoreShard(Config(), 0, *spec_, "sgd", &counters_);
  ASSERT_THAT(restored, IsOk());
  EXPECT_FALSE(restored->checkpoint.has_value());
  EXPECT_EQ(restored->epoch_floor, 0u);
}

}  // namespace
}  // namespace downpour::server
