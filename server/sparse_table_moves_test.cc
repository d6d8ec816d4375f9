// SparseTable's part in live bucket moves: the rows of moved buckets listed
// once and dropped in batches by key while pushes go on (Shard::
// DropUnheldRows), with and without the replication record's row keys.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/sparse_keys.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/sparse_table.h"

namespace downpour::server {
namespace {

using ::downpour::testing::IsOk;
using ::testing::ElementsAreArray;
using ::testing::IsEmpty;

constexpr uint32_t kBuckets = 64;

std::unique_ptr<SparseTable> MakeTable(bool track_changes) {
  SparseTable::Options options;
  options.dim = 2;
  options.optimizer.type = SparseOptimizerType::kSgd;
  options.optimizer.learning_rate = 0.5;
  options.track_changes = track_changes;
  auto table = SparseTable::Create(options);
  EXPECT_THAT(table.status(), IsOk());
  return std::move(table).value();
}

// A gradient per key, so that every row's values are its own.
void Push(SparseTable* table, const std::vector<uint64_t>& keys) {
  std::vector<float> grads;
  for (uint64_t k : keys) {
    grads.push_back(static_cast<float>(k % 1000));
    grads.push_back(-static_cast<float>(k % 777));
  }
  table->Apply(keys.data(), static_cast<int64_t>(keys.size()), grads.data());
}

bool Moved(uint64_t key) { return BucketOf(key, kBuckets) % 2 == 0; }

class DropMovedKeysTest : public ::testing::TestWithParam<bool> {};

// Every row not moved keeps its values and version, wherever compaction put
// it: the table ends equal to one that never held the moved rows.
TEST_P(DropMovedKeysTest, DropsTheMovedRowsInBatchesAndKeepsTheRestIntact) {
  const bool tracked = GetParam();
  auto table = MakeTable(tracked);
  auto reference = MakeTable(tracked);
  // Four chunks of rows, a third of them updated twice.
  std::vector<uint64_t> keys, twice, kept;
  for (uint64_t k = 1; k <= 3 * SparseTable::kRowsPerChunk + 100; ++k) {
    keys.push_back(k * 2654435761u);
    if (k % 3 == 0) twice.push_back(keys.back());
    if (!Moved(keys.back())) kept.push_back(keys.back());
  }
  Push(table.get(), keys);
  Push(table.get(), twice);
  Push(reference.get(), kept);
  std::vector<uint64_t> kept_twice;
  for (uint64_t k : twice) {
    if (!Moved(k)) kept_twice.push_back(k);
  }
  Push(reference.get(), kept_twice);
  if (tracked) table->TakeChanges();

  std::vector<char> flagged(kBuckets, 0);
  for (uint32_t b = 0; b < kBuckets; b += 2) flagged[b] = 1;
  std::vector<uint64_t> moved = table->KeysInBuckets(flagged, kBuckets);
  std::vector<uint64_t> expected;
  for (uint64_t k : keys) {
    if (Moved(k)) expected.push_back(k);
  }
  std::sort(moved.begin(), moved.end());
  std::sort(expected.begin(), expected.end());
  ASSERT_THAT(moved, ElementsAreArray(expected));

  // In batches, pushes to the kept buckets between them: rows updated and
  // rows created at the arena's end.
  table->KeepRowKeys(true);
  std::vector<uint64_t> dropped;
  uint64_t fresh = 1;
  for (size_t from = 0; from < moved.size(); from += 10000) {
    const int64_t n = std::min<int64_t>(10000, moved.size() - from);
    const std::vector<uint64_t> batch =
        table->DropMovedKeys(moved.data() + from, n);
    dropped.insert(dropped.end(), batch.begin(), batch.end());
    std::vector<uint64_t> pushed = {kept[from % kept.size()]};
    while (Moved(fresh)) ++fresh;
    pushed.push_back(fresh++);
    Push(table.get(), pushed);
    Push(reference.get(), pushed);
  }
  // Listed twice: the second time holds nothing.
  EXPECT_THAT(table->DropMovedKeys(moved.data(), 100), IsEmpty());
  table->KeepRowKeys(false);
  std::sort(dropped.begin(), dropped.end());
  EXPECT_THAT(dropped, ElementsAreArray(expected));

  const SparseTable::Rows got = table->Snapshot();
  const SparseTable::Rows want = reference->Snapshot();
  ASSERT_THAT(got.keys, ElementsAreArray(want.keys));
  EXPECT_EQ(got.data, want.data) << "a row's values followed another key";
  EXPECT_EQ(got.versions, want.versions);
  EXPECT_EQ(table->version_sum(), reference->version_sum())
      << "the moved rows' versions left with them, not counted evicted";
  EXPECT_EQ(table->evicted_versions(), 0u);
  EXPECT_THAT(table->KeysInBuckets(flagged, kBuckets), IsEmpty());
  if (tracked) {
    const SparseTable::Rows changes = table->TakeChanges();
    EXPECT_THAT(changes.evicted_keys, ElementsAreArray(expected))
        << "tombstones for the backup";
  }
  // The keys kept for the drop are given back without the replication
  // record, which keeps its own.
  EXPECT_EQ(table->row_bytes(), reference->row_bytes());
}

INSTANTIATE_TEST_SUITE_P(WithAndWithoutReplication, DropMovedKeysTest,
                         ::testing::Bool());

}  // namespace
}  // namespace downpour::server
