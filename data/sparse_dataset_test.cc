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
using ::testing::IsEmpty;

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

TEST(SparseRowWriterTest, WithoutFieldsRecordsNone) {
  SparseDataset d;
  SparseRowWriter writer(&d);
  writer.Add(9, 1, 4);  // the field is ignored
  writer.Add(3, 2, 5);
  ASSERT_THAT(writer.EndRow(1), IsOk());
  EXPECT_THAT(d.keys, ElementsAre(3, 9));
  EXPECT_THAT(d.fields, IsEmpty());
}

TEST(SparseRowWriterTest, FieldsFollowTheirEntriesThroughTheSort) {
  SparseDataset d;
  SparseRowWriter writer(&d, /*with_fields=*/true);
  writer.Add(9, 1, 1);
  writer.Add(3, 2, 2);
  writer.Add(9, 0.5f, 7);  // summed into key 9: keeps field 1, its first
  writer.Add(~uint64_t{0}, -1, 3);
  writer.Add(5, 1, 4);
  writer.Add(5, -1, 5);  // sums to 0: dropped with its field
  writer.Add(0, 0, 6);   // an explicit 0: dropped with its field
  writer.Add(3, 1, 8);   // key 3 keeps field 2
  ASSERT_THAT(writer.EndRow(1), IsOk());
  ASSERT_THAT(writer.EndRow(0), IsOk());  // an empty row
  // Ascending already (no sort): a zero is dropped with its field.
  writer.Add(2, 4, 9);
  writer.Add(4, 0, 10);
  writer.Add(6, 1);  // field 0 by default
  ASSERT_THAT(writer.EndRow(1), IsOk());
  EXPECT_THAT(d.offsets, ElementsAre(0, 3, 3, 5));
  EXPECT_THAT(d.keys, ElementsAre(3, 9, ~uint64_t{0}, 2, 6));
  EXPECT_THAT(d.values, ElementsAre(3, 1.5f, -1, 4, 1));
  EXPECT_THAT(d.fields, ElementsAre(2, 1, 3, 9, 0));
  EXPECT_THAT(ValidateSparseDataset(d), IsOk());
}

TEST(SparseRowWriterTest, FirstAddOfARepeatedKeyKeepsItsField) {
  // Many repeats, so that an unstable sort would be likely to reorder them.
  SparseDataset d;
  SparseRowWriter writer(&d, /*with_fields=*/true);
  for (int i = 0; i < 100; ++i) {
    writer.Add(static_cast<uint64_t>(100 - i) % 7, 1, static_cast<uint16_t>(i));
  }
  ASSERT_THAT(writer.EndRow(0), IsOk());
  // Key k is first added at i = (100 - k) % 7, i.e. i = 2 for key 0 ...
  EXPECT_THAT(d.keys, ElementsAre(0, 1, 2, 3, 4, 5, 6));
  EXPECT_THAT(d.fields, ElementsAre(2, 1, 0, 6, 5, 4, 3));
}

TEST(SparseRowWriterTest, OverflowingRowDropsItsFieldsToo) {
  SparseDataset d;
  SparseRowWriter writer(&d, /*with_fields=*/true);
  writer.Add(1, 1, 3);
  ASSERT_THAT(writer.EndRow(0), IsOk());
  const float big = std::numeric_limits<float>::max();
  writer.Add(0, 1, 4);  // appended before the bad key is reached, then undone
  writer.Add(7, big, 5);
  writer.Add(7, big, 5);
  EXPECT_THAT(writer.EndRow(1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("values of key 7 in this row sum to")));
  EXPECT_THAT(ValidateSparseDataset(d), IsOk());
  EXPECT_THAT(d.fields, ElementsAre(3));
  writer.Add(2, 2, 6);
  ASSERT_THAT(writer.EndRow(1), IsOk());
  EXPECT_THAT(d.keys, ElementsAre(1, 2));
  EXPECT_THAT(d.fields, ElementsAre(3, 6));
}

TEST(SparseRowWriterTest, FieldsStartAtZeroForEntriesWrittenWithout) {
  SparseDataset d;
  {
    SparseRowWriter writer(&d);
    writer.Add(1, 1, 3);
    ASSERT_THAT(writer.EndRow(0), IsOk());
  }
  SparseRowWriter writer(&d, /*with_fields=*/true);
  EXPECT_THAT(d.fields, ElementsAre(0));
  writer.Add(2, 1, 4);
  ASSERT_THAT(writer.EndRow(0), IsOk());
  EXPECT_THAT(d.fields, ElementsAre(0, 4));
  // A plain writer on a dataset with fields keeps them one per entry.
  SparseRowWriter plain(&d);
  plain.Add(5, 1, 7);
  ASSERT_THAT(plain.EndRow(0), IsOk());
  EXPECT_THAT(d.fields, ElementsAre(0, 4, 7));
  EXPECT_THAT(ValidateSparseDataset(d), IsOk());
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
  SparseDataset with_fields = base();
  with_fields.fields = {0, 65535, 2};
  EXPECT_THAT(ValidateSparseDataset(with_fields), IsOk());
  EXPECT_THAT(ValidateSparseDataset(SparseDataset()), IsOk());
  struct Case {
    void (*breakit)(SparseDataset*);
    const char* message;
  };
  const Case cases[] = {
      {[](SparseDataset* d) { d->y.push_back(0); }, "3 rows (y) but 3 offsets"},
      {[](SparseDataset* d) { d->values.pop_back(); }, "3 keys but 2 values"},
      {[](SparseDataset* d) { d->fields.assign(2, 1); },
       "2 fields but 3 entries"},
      {[](SparseDataset* d) { d->fields.assign(4, 1); },
       "4 fields but 3 entries"},
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
