#include "data/criteo_parser.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/testing/status_matchers.h"
#include "data/feature_hash.h"
#include "data/sparse_dataset.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::data {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

// A Criteo line from its 40 fields.
std::string Line(const std::vector<std::string>& fields) {
  return absl::StrJoin(fields, "\t");
}

// label, then I1..I13 = ints, C1..C26 = cats.
std::vector<std::string> Fields(const std::string& label,
                                std::vector<std::string> ints,
                                std::vector<std::string> cats) {
  ints.resize(13);
  cats.resize(26);
  std::vector<std::string> fields = {label};
  fields.insert(fields.end(), ints.begin(), ints.end());
  fields.insert(fields.end(), cats.begin(), cats.end());
  return fields;
}

// Row r's (key, field) pairs.
std::vector<std::pair<uint64_t, int>> RowEntries(const SparseDataset& d,
                                                 int r) {
  std::vector<std::pair<uint64_t, int>> entries;
  for (int64_t e = d.offsets[r]; e < d.offsets[r + 1]; ++e) {
    EXPECT_EQ(d.values[e], 1.0f);
    entries.push_back({d.keys[e], d.fields[e]});
  }
  return entries;
}

TEST(CriteoParserTest, FieldNames) {
  EXPECT_EQ(CriteoFieldName(0), "I1");
  EXPECT_EQ(CriteoFieldName(12), "I13");
  EXPECT_EQ(CriteoFieldName(13), "C1");
  EXPECT_EQ(CriteoFieldName(38), "C26");
}

TEST(CriteoParserTest, KeysAreFeatureKeysOfTheDefinedStrings) {
  // I1..I7 = 0, 1, 2, 3, 100, -5, 9223372036854775807; C1 and C26 set.
  std::vector<std::string> cats(26);
  cats[0] = "68fd1e64";
  cats[25] = "a b";
  const std::string text =
      Line(Fields("1", {"0", "1", "2", "3", "100", "-5", "9223372036854775807"},
                  cats)) +
      "\n";
  SparseDataset d;
  ASSERT_THAT(ParseCriteoRows(text, "t.txt", 1, &d), IsOk());
  ASSERT_EQ(d.rows(), 1);
  EXPECT_EQ(d.y[0], 1.0f);
  // floor(ln(3)^2) = 1, floor(ln(100)^2) = 21, floor(ln(2^63-1)^2) = 1906.
  std::vector<std::pair<uint64_t, int>> want = {
      {FeatureKey("I1", "0"), 0},    {FeatureKey("I2", "1"), 1},
      {FeatureKey("I3", "2"), 2},    {FeatureKey("I4", "1"), 3},
      {FeatureKey("I5", "21"), 4},   {FeatureKey("I6", "-5"), 5},
      {FeatureKey("I7", "1906"), 6}, {FeatureKey("C1", "68fd1e64"), 13},
      {FeatureKey("C26", "a b"), 38}};
  EXPECT_THAT(RowEntries(d, 0), UnorderedElementsAreArray(want));
  EXPECT_THAT(ValidateSparseDataset(d), IsOk());
}

TEST(CriteoParserTest, MissingFieldsCrlfAndBlankLines) {
  const std::string all_missing = Line(Fields("0", {}, {}));
  const std::string text = all_missing + "\r\n\r\n  \n" +
                           Line(Fields("1", {"", "", "7"}, {"", "x"})) +
                           "\r\n" +
                           Line(Fields("0", {}, {"", "", "z"}));  // no '\n'
  SparseDataset d;
  ASSERT_THAT(ParseCriteoRows(text, "t.txt", 1, &d), IsOk());
  ASSERT_EQ(d.rows(), 3);
  EXPECT_EQ(d.y, (std::vector<float>{0, 1, 0}));
  EXPECT_TRUE(RowEntries(d, 0).empty());
  EXPECT_THAT(RowEntries(d, 1),
              UnorderedElementsAreArray(std::vector<std::pair<uint64_t, int>>{
                  {FeatureKey("I3", "3"), 2},  // floor(ln(7)^2) = 3
                  {FeatureKey("C2", "x"), 14}}));
  EXPECT_THAT(RowEntries(d, 2),
              UnorderedElementsAreArray(std::vector<std::pair<uint64_t, int>>{
                  {FeatureKey("C3", "z"), 15}}));
}

TEST(CriteoParserTest, Errors) {
  const std::string good = Line(Fields("1", {"5"}, {"ab"}));
  struct Case {
    std::string line;
    std::string message;
  } cases[] = {
      {Line(Fields("x", {}, {})),
       "t.txt:7:1: label 'x' is not 0 or 1; Criteo lines start with a 0/1 "
       "click label"},
      {Line(Fields("", {}, {})), "t.txt:7:1: label '' is not 0 or 1"},
      {Line(Fields("2", {}, {})), "t.txt:7:1: label '2' is not 0 or 1"},
      {good.substr(0, good.rfind('\t')),
       "t.txt:7:1: has 39 fields; a Criteo line has 40 tab-separated fields "
       "(label, I1..I13, C1..C26)"},
      {good + "\textra", "t.txt:7:1: has 41 fields"},
      {"1 2 3", "t.txt:7:1: has 1 fields"},
      {Line(Fields("0", {"1", "2", "12a"}, {})),
       "t.txt:7:7: I3 '12a' is not an integer"},
      {Line(Fields("0", {"1.5"}, {})), "t.txt:7:3: I1 '1.5' is not an integer"},
      {Line(Fields("0", {"+1"}, {})), "I1 '+1' is not an integer"},
      {Line(Fields("0", {"99999999999999999999"}, {})),
       "I1 '99999999999999999999' is not an integer"},
  };
  for (const Case& c : cases) {
    SparseDataset d;
    EXPECT_THAT(
        ParseCriteoRows(c.line + "\n", "t.txt", 7, &d),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.line;
    EXPECT_EQ(d.rows(), 0);
    EXPECT_TRUE(d.keys.empty());
  }
}

TEST(CriteoParserTest, BadLineInTheMiddleKeepsTheRowsBefore) {
  const std::string good = Line(Fields("1", {"5"}, {"ab"}));
  const std::string bad = Line(Fields("0", {"1", "x"}, {"cd"}));
  const std::string text = good + "\n\n" + good + "\r\n" + bad + "\n" + good;
  SparseDataset d;
  EXPECT_THAT(ParseCriteoRows(text, "day_3", 100, &d),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("day_3:103:5: I2 'x' is not an integer")));
  EXPECT_EQ(d.rows(), 2);
  EXPECT_EQ(d.entries(), 4);
  EXPECT_EQ(d.fields.size(), 4u);
  EXPECT_THAT(ValidateSparseDataset(d), IsOk());
}

TEST(CriteoParserTest, AppendsToRowsAlreadyThere) {
  SparseDataset d;
  const std::string text = Line(Fields("1", {"5"}, {"ab"})) + "\n";
  ASSERT_THAT(ParseCriteoRows(text, "a", 1, &d), IsOk());
  ASSERT_THAT(ParseCriteoRows(text, "a", 2, &d), IsOk());
  EXPECT_EQ(d.rows(), 2);
  EXPECT_EQ(RowEntries(d, 0), RowEntries(d, 1));
  EXPECT_THAT(ValidateSparseDataset(d), IsOk());
}

}  // namespace
}  // namespace downpour::data
