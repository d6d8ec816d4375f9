#include "worker/sparse_batches.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::worker {
namespace {

using ::testing::ElementsAreArray;

// n rows; row i holds key i (value i + 1, field i % 3) and target i.
data::SparseDataset Rows(int n) {
  data::SparseDataset d;
  for (int i = 0; i < n; ++i) {
    d.keys.push_back(static_cast<uint64_t>(i));
    d.values.push_back(static_cast<float>(i + 1));
    d.fields.push_back(static_cast<uint16_t>(i % 3));
    d.offsets.push_back(static_cast<int64_t>(d.keys.size()));
    d.y.push_back(static_cast<float>(i));
  }
  return d;
}

TEST(InMemoryBatchesTest, EveryEpochGivesEveryRowOnceInBatches) {
  auto data = std::make_shared<const data::SparseDataset>(Rows(10));
  // Batches of 3: 4 an epoch (3, 3, 3, 1 rows), so 12 make 3 epochs.
  InMemoryBatches batches(data, /*seed=*/7, /*total=*/12);
  EXPECT_EQ(batches.total_batches(), 12);
  EXPECT_EQ(batches.rows_per_epoch(), 10);
  std::vector<std::vector<float>> seen(3);
  data::SparseDataset batch;
  std::vector<int32_t> epochs;
  int given = 0;
  while (*batches.Next(3, &batch, &epochs)) {
    ++given;
    ASSERT_EQ(epochs.size(), batch.y.size());
    for (size_t i = 0; i < epochs.size(); ++i) {
      ASSERT_LT(epochs[i], 3);
      seen[epochs[i]].push_back(batch.y[i]);
      // The row's own entry came with it.
      EXPECT_EQ(batch.keys[i], static_cast<uint64_t>(batch.y[i]));
      EXPECT_EQ(batch.fields[i], static_cast<int>(batch.y[i]) % 3);
    }
  }
  EXPECT_EQ(given, 12);
  for (std::vector<float>& epoch : seen) {
    std::sort(epoch.begin(), epoch.end());
    EXPECT_THAT(epoch, ElementsAreArray({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  }
}

TEST(ShuffleWindowTest, EveryRowComesOutOnceInAnotherOrder) {
  const data::SparseDataset rows = Rows(5000);
  ShuffleWindow window(/*capacity=*/300, /*seed=*/1);
  data::SparseDataset out;
  std::vector<int32_t> epochs;
  for (int i = 0; i < rows.rows(); ++i) {
    window.Add(rows, i, /*epoch=*/i / 2500);
    if (window.Full(1)) epochs.push_back(window.Take(&out));
  }
  while (window.size() > 0) epochs.push_back(window.Take(&out));
  ASSERT_EQ(out.rows(), 5000);
  EXPECT_TRUE(ValidateSparseDataset(out).ok());
  std::vector<float> y = out.y;
  EXPECT_NE(y, rows.y);  // shuffled
  for (int i = 0; i < out.rows(); ++i) {
    EXPECT_EQ(out.keys[i], static_cast<uint64_t>(out.y[i]));
    EXPECT_EQ(epochs[i], static_cast<int>(out.y[i]) / 2500);
  }
  std::sort(y.begin(), y.end());
  EXPECT_EQ(y, rows.y);
}

TEST(ShuffleWindowTest, CapacityZeroKeepsFileOrder) {
  const data::SparseDataset rows = Rows(3000);
  ShuffleWindow window(/*capacity=*/0, /*seed=*/1);
  data::SparseDataset out;
  for (int i = 0; i < rows.rows(); ++i) {
    window.Add(rows, i, 0);
    if (i % 7 == 6) {
      while (window.size() > 0) window.Take(&out);
    }
  }
  while (window.size() > 0) window.Take(&out);
  EXPECT_EQ(out.y, rows.y);
  EXPECT_EQ(out.keys, rows.keys);
}

}  // namespace
}  // namespace downpour::worker
