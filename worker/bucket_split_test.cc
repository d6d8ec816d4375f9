#include "worker/bucket_split.h"

#include <cstring>
#include <vector>

#include "common/sparse_keys.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace downpour::worker {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;

ModelSpec FmSpec() {
  ModelSection model;
  model.type = ModelType::kFm;
  model.task = Task::kBinary;
  model.sparse_buckets = 16;
  model.fm.dim = 2;
  return ModelSpec::Create(model).value();
}

std::vector<uint64_t> KeysOf(const wire::SparseRef& ref) {
  std::vector<uint64_t> keys(ref.keys_size / 8);
  if (!keys.empty()) std::memcpy(keys.data(), ref.keys, ref.keys_size);
  return keys;
}

TEST(BucketSplitTest, GroupsKeysByOwnerKeepingTheirOrder) {
  std::vector<int> owners = BucketOwners(16, 2);
  std::vector<uint64_t> keys;
  for (uint64_t k = 1; k <= 40; ++k) keys.push_back(k * 7919);
  auto split = BucketSplit::Of(16, &owners, 2, keys);
  ASSERT_THAT(split.status(), IsOk());
  ASSERT_EQ(split->groups().size(), 2u);
  size_t total = 0;
  for (const BucketSplit::Group& g : split->groups()) {
    for (size_t j = 0; j < g.at.size(); ++j) {
      EXPECT_EQ(ShardOfKey(keys[g.at[j]], 16, 2), g.shard);
      if (j > 0) EXPECT_LT(g.at[j - 1], g.at[j]);
    }
    total += g.at.size();
  }
  EXPECT_EQ(total, keys.size());
  EXPECT_FALSE(split->AllOf(0));

  owners[BucketOf(keys[0], 16)] = -1;
  EXPECT_THAT(BucketSplit::Of(16, &owners, 2, keys).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

// Rows of two tables (fm's weights and embeddings) with counts: each piece
// holds its owner's rows, values and counts; the kept piece holds a ref per
// table even when every key moved.
TEST(BucketSplitTest, SplitRowsCopiesEachOwnersRowsOfEveryTable) {
  const ModelSpec spec = FmSpec();
  std::vector<uint64_t> keys = {11, 12, 13, 14, 15, 16, 17, 18};
  std::vector<float> weights, embeddings;
  std::vector<uint32_t> counts;
  for (size_t i = 0; i < keys.size(); ++i) {
    weights.push_back(static_cast<float>(i));
    embeddings.push_back(10.0f + i);
    embeddings.push_back(20.0f + i);
    counts.push_back(static_cast<uint32_t>(100 + i));
  }
  wire::SparseRef w{0,
                    reinterpret_cast<const char*>(keys.data()),
                    keys.size() * 8,
                    reinterpret_cast<const char*>(weights.data()),
                    weights.size() * 4,
                    reinterpret_cast<const char*>(counts.data()),
                    counts.size() * 4};
  wire::SparseRef v = w;
  v.table = 1;
  v.values = reinterpret_cast<const char*>(embeddings.data());
  v.values_size = embeddings.size() * 4;
  // Every key on ps 1 or 2; ps 0 (which answered "bucket moved") keeps none.
  std::vector<int> owners(16);
  for (int b = 0; b < 16; ++b) owners[b] = 1 + b % 2;
  auto rows = SplitRows::Make({w, v}, spec, &owners, 3, 0);
  ASSERT_THAT(rows.status(), IsOk());
  const auto& pieces = (*rows)->pieces();
  ASSERT_EQ(pieces[0].shard, 0);
  ASSERT_EQ(pieces[0].refs.size(), 2u);
  EXPECT_EQ(pieces[0].refs[0].keys_size, 0u);
  EXPECT_EQ(pieces[0].keys, 0);
  size_t seen = 0;
  for (size_t p = 1; p < pieces.size(); ++p) {
    ASSERT_EQ(pieces[p].refs.size(), 2u);
    const std::vector<uint64_t> mine = KeysOf(pieces[p].refs[0]);
    EXPECT_EQ(KeysOf(pieces[p].refs[1]), mine);
    EXPECT_EQ(pieces[p].keys, static_cast<int64_t>(mine.size()));
    const float* pw = reinterpret_cast<const float*>(pieces[p].refs[0].values);
    const float* pv = reinterpret_cast<const float*>(pieces[p].refs[1].values);
    const uint32_t* pc =
        reinterpret_cast<const uint32_t*>(pieces[p].refs[0].counts);
    for (size_t j = 0; j < mine.size(); ++j) {
      EXPECT_EQ(owners[BucketOf(mine[j], 16)], pieces[p].shard);
      if (j > 0) EXPECT_LT(mine[j - 1], mine[j]);
      const size_t i = mine[j] - 11;
      EXPECT_EQ(pw[j], weights[i]);
      EXPECT_EQ(pv[2 * j], embeddings[2 * i]);
      EXPECT_EQ(pv[2 * j + 1], embeddings[2 * i + 1]);
      EXPECT_EQ(pc[j], counts[i]);
    }
    seen += mine.size();
  }
  EXPECT_EQ(seen, keys.size());
}

TEST(BucketSplitTest, SplitRowsRefusesSizesThatDoNotFit) {
  const ModelSpec spec = FmSpec();
  std::vector<uint64_t> keys = {1, 2, 3};
  std::vector<float> values = {1, 2};
  wire::SparseRef ref{0,  reinterpret_cast<const char*>(keys.data()),
                      24, reinterpret_cast<const char*>(values.data()),
                      8,  nullptr,
                      0};
  EXPECT_THAT(SplitRows::Make({ref}, spec, nullptr, 2, 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  ref.table = 7;
  EXPECT_THAT(SplitRows::Make({ref}, spec, nullptr, 2, 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace downpour::worker
