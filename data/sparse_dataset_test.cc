#include "data/sparse_dataset.h"

#include <cmath>
#include <limits>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::data {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(SparseRowWriterTest, SortsSumsDuplicatesAndDropsZeros) {
  SparseDataset d;
  SparseRowWriter writer(&d);
  writer.Add(9, 1);
  writer.Add(3, 2);
  writer.Add(9, 0.5f);
  writer.Add(~uint64_t{0}, -1);
  writer.Add(5, 1);
  writer.Add(5, -1);  // sums to 0: dropped
  writer.Add(0, 0);   // an explicit 0: dropped
  ASSERT_THAT(writer.EndRow(1), IsOk());
  ASSERT_THAT(writer.EndRow(0), IsOk());  // an empty row
  writer.Add(2, 4);
  ASSERT_THAT(writer.EndRow(1), IsOk());
  EXPECT_EQ(d.rows(), 3);
  EXPECT_EQ(d.entries(), 4);
  EXPECT_THAT(d.offsets, ElementsAre(0, 3, 3, 4));
  EXPECT_THAT(d.keys, ElementsAre(3, 9, ~uint64_t{0}, 2));
  EXPECT_THAT(d.values, ElementsAre(2, 1.5f, -1, 4));
  EXPECT_THAT(d.y, ElementsAre(1, 0, 1));
  EXPECT_THAT(ValidateSparseDataset(d), IsOk());
}

TEST(SparseRowWriterTest, AscendingRowKeepsItsOrderAndDropsZeros) {
  SparseDataset d;
  SparseRowWriter writer(&d);
  writer.Add(1, 1);
  writer.Add(2, 0);
  writer.Add(5, -3);
  ASSERT_THAT(writer.EndRow(0), IsOk());
  writer.Add(4, 2);
  ASSERT_THAT(writer.EndRow(1), IsOk());
  EXPECT_THAT(d.offsets, ElementsAre(0, 2, 3));
  EXPECT_THAT(d.keys, ElementsAre(1, 5, 4));
  EXPECT_THAT(d.values, ElementsAre(1, -3, 2));
  EXPECT_THAT(d.y, ElementsAre(0, 1));
}

TEST(SparseRowWriterTest, OverflowingSumDropsTheRowAndKeepsTheDataset) {
  SparseDataset d;
  SparseRowWriter writer(&d);
  writer.Add(1, 1);
  ASSERT_THAT(writer.EndRow(0), IsOk());
  const float big = std::numeric_limits<float>::max();
  writer.Add(0, 1);  // appended before the bad key is reached, then undone
  writer.Add(7, big);
  writer.Add(7, big);
  EXPECT_THAT(writer.EndRow(1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("values of key 7 in this row sum to")));
  EXPECT_THAT(ValidateSparseDataset(d), IsOk());
  EXPECT_EQ(d.rows(), 1);
  writer.Add(2, 2);
  ASSERT_THAT(writer.EndRow(1), IsOk());
  EXPECT_THAT(d.keys, ElementsAre(1, 2));
  EXPECT_THAT(d.offsets, ElementsAre(0, 1, 2));
}

TEST(ValidateSparseDatasetTest, NamesTheFirstBrokenInvariant) {
  const auto base = [] {
    SparseDataset d;
    d.offsets = {0, 2, 3};
    d.keys = {1, 5, 2};
    d.values = {1, 2, 3};
    d.y = {0, 1};
    return d;
  };
  EXPECT_THAT(ValidateSparseDataset(base()), IsOk());
  EXPECT_THAT(ValidateSparseDataset(SparseDataset()), IsOk());
  struct Case {
    void (*breakit)(SparseDataset*);
    const char* message;
  };
  const Case cases[] = {
      {[](SparseDataset* d) { d->y.push_back(0); }, "3 rows (y) but 3 offsets"},
      {[](SparseDataset* d) { d->values.pop_back(); }, "3 keys but 2 values"},
      {[](SparseDataset* d) { d->offsets.back() = 2; },
       "offsets run from 0 to 2"},
      {[](SparseDataset* d) { d->offsets[1] = 4; }, "row 1: offsets decrease"},
      {[](SparseDataset* d) { d->keys[1] = 1; }, "row 0: key 1 after key 1"},
      {[](SparseDataset* d) { d->keys[0] = 9; }, "row 0: key 5 after key 9"},
      {[](SparseDataset* d) { d->values[2] = 0; }, "row 1: key 2 has value 0"},
      {[](SparseDataset* d) { d->values[0] = std::nanf(""); },
       "row 0: key 1 has value nan"},
  };
  for (const Case& c : cases) {
    SparseDataset d = base();
    c.breakit(&d);
    EXPECT_THAT(
        ValidateSparseDataset(d),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)));
  }
}

}  // namespace
}  // namespace downpour::data
