// ModelUpdates: a push's blocks and rows applied and noted for the replica,
// and bsp rounds applied as the mean, their pushes marked applied.
#include "server/model_updates.h"

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "common/config.h"
#include "common/model_spec.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/optimizer.h"

namespace downpour::server {
namespace {

using ::downpour::testing::IsOk;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::FloatEq;

class ModelUpdatesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.model.type = ModelType::kSparseLinear;
    config_.model.task = Task::kBinary;
    config_.model.sparse_buckets = 64;
    config_.cluster.workers.assign(2, "127.0.0.1:0");
    config_.cluster.ps.assign(1, "127.0.0.1:0");
    config_.optimizer.type = OptimizerType::kSgd;
    config_.optimizer.learning_rate = 1;
    config_.training.consistency = ConsistencyMode::kBsp;
    absl::StatusOr<ModelSpec> spec = ModelSpec::Create(config_.model);
    ASSERT_THAT(spec, IsOk());
    spec_ = std::make_unique<ModelSpec>(*std::move(spec));
    auto tables = SparseTables::Create(config_, 0, *spec_, nullptr, &counters_);
    ASSERT_THAT(tables, IsOk());
    tables_ = *std::move(tables);
    auto optimizer = Optimizer::Create(config_.optimizer);
    ASSERT_THAT(optimizer, IsOk());
    store_ = std::make_unique<BlockStore>(*std::move(optimizer));
    length_ = spec_->blocks()[0].length;
    ASSERT_THAT(store_->AddBlock(0, std::vector<float>(length_, 0.0f)), IsOk());
    log_ = std::make_unique<ReplicaLog>(spec_->blocks().size(),
                                        store_->optimizer().state_slots());
    updates_ = std::make_unique<ModelUpdates>(
        0, &counters_,
        ModelUpdates::Parts{store_.get(), tables_.get(), &admission_, &guard_,
                            log_.get()});
  }

  // A push of `worker` (sequence 1) of gradient `g` to block 0.
  proto::PushRequest DensePush(int32_t worker, float g) {
    proto::PushRequest request;
    request.set_worker_id(worker);
    request.set_sequence(1);
    proto::BlockData* block = request.add_blocks();
    block->set_block_id(0);
    const std::vector<float> grad(length_, g);
    block->set_data(grad.data(), grad.size() * sizeof(float));
    return request;
  }

  std::vector<float> Values() const { return store_->Snapshot()[0].values; }

  Config config_;
  Counters counters_;
  std::unique_ptr<ModelSpec> spec_;
  std::unique_ptr<SparseTables> tables_;
  std::unique_ptr<BlockStore> store_;
  int64_t length_ = 0;
  PushAdmission admission_{{/*num_workers=*/2, /*shard_index=*/0, &counters_}};
  PushGuard guard_{{/*num_workers=*/2, /*num_blocks=*/1}};
  std::unique_ptr<ReplicaLog> log_;
  std::unique_ptr<ModelUpdates> updates_;
};

TEST_F(ModelUpdatesTest, ApplyBlocksAppliesEachBlockAndNotesItForTheReplica) {
  const uint64_t generation = log_->generation();
  const proto::PushRequest request = DensePush(0, 2.0f);
  const wire::PushView view = wire::ViewOf(request);
  CheckedBlocks checked;
  ASSERT_THAT(ValidateDensePush(view, *store_, &guard_, &checked), IsOk());
  proto::PushResponse response;
  absl::StatusOr<int64_t> bytes =
      updates_->ApplyBlocks(view, checked, &response);
  ASSERT_THAT(bytes, IsOk());
  EXPECT_EQ(*bytes, length_ * static_cast<int64_t>(sizeof(float)));
  EXPECT_THAT(response.versions(), ElementsAre(1));
  EXPECT_THAT(Values(), Each(FloatEq(-2.0f)));
  // Not logging by gradient: the block goes whole in the next cut.
  EXPECT_THAT(log_->SortedDirty(), ElementsAre(0));
  EXPECT_EQ(log_->generation(), generation + 1);
}

TEST_F(ModelUpdatesTest, ABspRoundAppliesTheMeanAndMarksItsPushesApplied) {
  ConsistencyGate gate(config_, 0, &counters_);
  gate.SetActiveWorkers({0, 1});
  const proto::PushRequest first = DensePush(0, 2.0f);
  const proto::PushRequest second = DensePush(1, 4.0f);
  for (const proto::PushRequest* request : {&first, &second}) {
    const wire::PushView view = wire::ViewOf(*request);
    int64_t bytes = 0;
    std::vector<SparseTables::DecodedRows> rows;
    EXPECT_EQ(gate.Contribute(view, ConsistencyGate::BspGradients(view, &bytes),
                              &rows),
              Consistency::Contribution::kAdded);
  }
  const uint64_t generation = gate.generation();
  const uint64_t changes = log_->generation();
  updates_->ApplyCompleteRounds(&gate);
  EXPECT_THAT(Values(), Each(FloatEq(-3.0f)));
  EXPECT_EQ(gate.RoundVersion(0), 1u);
  EXPECT_GT(gate.generation(), generation);
  EXPECT_TRUE(admission_.Applied(0, 1));
  EXPECT_TRUE(admission_.Applied(1, 1));
  // The block and the two windows.
  EXPECT_EQ(log_->generation(), changes + 3);
  EXPECT_THAT(log_->SortedDirty(), ElementsAre(0));
  // Nothing left: a second call applies nothing.
  updates_->ApplyCompleteRounds(&gate);
  EXPECT_THAT(Values(), Each(FloatEq(-3.0f)));
}

TEST_F(ModelUpdatesTest, ApplyRowsCountsAChangeForTheReplica) {
  proto::PushRequest request;
  proto::SparseRows* rows = request.add_sparse();
  const std::vector<uint64_t> keys = {1, 2};
  rows->set_keys(keys.data(), keys.size() * sizeof(uint64_t));
  const std::vector<float> grads(keys.size(), 1.0f);
  rows->set_values(grads.data(), grads.size() * sizeof(float));
  std::vector<SparseTables::DecodedRows> decoded;
  ASSERT_THAT(tables_->DecodePush(wire::ViewOf(request), &decoded), IsOk());
  const uint64_t generation = log_->generation();
  EXPECT_EQ(updates_->ApplyRows(decoded), 2);
  EXPECT_EQ(log_->generation(), generation + 1);
  EXPECT_EQ(updates_->ApplyRows({}), 0);
  EXPECT_EQ(log_->generation(), generation + 1);
}

}  // namespace
}  // namespace downpour::server
