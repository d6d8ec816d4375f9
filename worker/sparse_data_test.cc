#include "worker/sparse_data.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "common/file_util.h"
#include "common/testing/status_matchers.h"
#include "common/testing/temp_path.h"
#include "data/sparse_csv_reader.h"
#include "data/sparse_dataset.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::worker {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::TempPath;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Rows {1: 1, 5: 2}, {}, {3: 3}, {2: 4, 4: 5, 9: 6} with labels 0..3; fields
// 10 + the entry's index when `fields`.
data::SparseDataset FourRows(bool fields) {
  data::SparseDataset d;
  d.offsets = {0, 2, 2, 3, 6};
  d.keys = {1, 5, 3, 2, 4, 9};
  d.values = {1, 2, 3, 4, 5, 6};
  d.y = {0, 1, 2, 3};
  d.class_names = {"a", "b", "c", "d"};
  if (fields) d.fields = {10, 11, 12, 13, 14, 15};
  return d;
}

TEST(SelectRowsTest, CarriesFieldsWithTheirRows) {
  const data::SparseDataset d = FourRows(true);
  const data::SparseDataset out = SelectRows(d, {3, 1, 0});
  ASSERT_THAT(data::ValidateSparseDataset(out), IsOk());
  EXPECT_THAT(out.offsets, ElementsAre(0, 3, 3, 5));
  EXPECT_THAT(out.keys, ElementsAre(2, 4, 9, 1, 5));
  EXPECT_THAT(out.values, ElementsAre(4, 5, 6, 1, 2));
  EXPECT_THAT(out.fields, ElementsAre(13, 14, 15, 10, 11));
  EXPECT_THAT(out.y, ElementsAre(3, 1, 0));
  EXPECT_THAT(out.class_names, ElementsAre("a", "b", "c", "d"));
  // Only empty rows, or none: no entries, so no fields.
  EXPECT_THAT(SelectRows(d, {1}).fields, IsEmpty());
  EXPECT_THAT(SelectRows(d, {}).fields, IsEmpty());
}

TEST(SelectRowsTest, WithoutFieldsRecordsNone) {
  const data::SparseDataset out = SelectRows(FourRows(false), {3, 0});
  ASSERT_THAT(data::ValidateSparseDataset(out), IsOk());
  EXPECT_THAT(out.keys, ElementsAre(2, 4, 9, 1, 5));
  EXPECT_THAT(out.fields, IsEmpty());
}

TEST(PartitionRowsTest, CarriesFieldsWithTheirRows) {
  const data::SparseDataset out = PartitionRows(FourRows(true), {0}, 2);
  ASSERT_THAT(data::ValidateSparseDataset(out), IsOk());
  EXPECT_THAT(out.y, ElementsAre(0, 2));
  EXPECT_THAT(out.keys, ElementsAre(1, 5, 3));
  EXPECT_THAT(out.fields, ElementsAre(10, 11, 12));
  const data::SparseDataset odd = PartitionRows(FourRows(true), {1}, 2);
  EXPECT_THAT(odd.keys, ElementsAre(2, 4, 9));
  EXPECT_THAT(odd.fields, ElementsAre(13, 14, 15));
}

// key -> field over all entries of `d`.
std::map<uint64_t, int> FieldOfKey(const data::SparseDataset& d) {
  std::map<uint64_t, int> out;
  for (size_t e = 0; e < d.keys.size(); ++e) out[d.keys[e]] = d.fields[e];
  return out;
}

// A CSV of 12 rows whose columns each give their own keys: c categorical
// (field 0), t text (1), n numeric (2), b bucketize (3), i ignored.
std::string WriteMixedCsv(const std::string& name) {
  std::string text = "i,t,b,c,n,y\n";
  for (int r = 0; r < 12; ++r) {
    absl::StrAppend(&text, r, ",word", r % 3, " w", r % 5, ",", r, ",v", r % 4,
                    ",", r + 1, ",", r % 2, "\n");
  }
  const std::string path = TempPath(name);
  EXPECT_THAT(WriteFileAtomically(path, text), IsOk());
  return path;
}

DataSection MixedSection(const std::string& path) {
  DataSection d;
  d.source = DataSource::kCsv;
  d.path = path;
  d.label_column = "y";
  d.categorical = {"c"};
  d.text = {"t"};
  d.numeric = {"n"};
  d.bucketize = {"b"};
  d.ignore = {"i"};
  d.quantile_buckets = 3;
  return d;
}

TEST(LoadSparseDataTest, TheSplitsKeepEachEntrysField) {
  const std::string path = WriteMixedCsv("sparse_split.csv");
  DataSection d = MixedSection(path);
  d.test_examples = 3;
  d.train_examples = 5;  // a second SelectRows, of the train rows
  absl::StatusOr<SparseSplit> split =
      LoadSparseData(d, /*seed=*/7, Task::kBinary);
  ASSERT_THAT(split, IsOk());
  EXPECT_EQ(split->train.rows(), 5);
  EXPECT_EQ(split->test.rows(), 3);
  // Each key's field as the reader gives it for the whole file.
  data::SparseCsvOptions options;
  options.csv.label_column = "y";
  options.columns = split->columns;
  absl::StatusOr<data::SparseDataset> all = data::ReadCsvSparse(path, options);
  ASSERT_THAT(all, IsOk());
  const std::map<uint64_t, int> field_of = FieldOfKey(*all);
  std::vector<int> used;
  for (const data::SparseDataset* part : {&split->train, &split->test}) {
    ASSERT_THAT(data::ValidateSparseDataset(*part), IsOk());
    ASSERT_EQ(part->fields.size(), part->keys.size());
    for (size_t e = 0; e < part->keys.size(); ++e) {
      EXPECT_EQ(part->fields[e], field_of.at(part->keys[e]))
          << "entry " << e << " key " << part->keys[e];
      used.push_back(part->fields[e]);
    }
  }
  std::sort(used.begin(), used.end());
  used.erase(std::unique(used.begin(), used.end()), used.end());
  EXPECT_THAT(used, ElementsAre(0, 1, 2, 3));

  // With a test file: the train rows are the file's, the test rows its.
  d.test_path = path;
  d.train_examples = 4;
  split = LoadSparseData(d, /*seed=*/7, Task::kBinary);
  ASSERT_THAT(split, IsOk());
  EXPECT_EQ(split->train.fields.size(), split->train.keys.size());
  EXPECT_EQ(split->test.fields, all->fields);
}

TEST(LoadSparseDataTest, LibsvmHasNoFields) {
  const std::string path = TempPath("sparse_libsvm.svm");
  ASSERT_THAT(
      WriteFileAtomically(path, "1 3:1 7:2\n0 2:1\n1 9:1\n0 1:1\n1 4:1\n"),
      IsOk());
  DataSection d;
  d.source = DataSource::kLibsvm;
  d.path = path;
  d.test_examples = 2;
  absl::StatusOr<SparseSplit> split =
      LoadSparseData(d, /*seed=*/7, Task::kBinary);
  ASSERT_THAT(split, IsOk());
  EXPECT_THAT(split->train.fields, IsEmpty());
  EXPECT_THAT(split->test.fields, IsEmpty());
}

}  // namespace
}  // namespace downpour::worker
