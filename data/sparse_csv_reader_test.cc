#include "data/sparse_csv_reader.h"

#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "data/feature_hash.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::data {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

using Row = std::map<uint64_t, float>;

// Row r of `d` as key -> value (the dataset's order is checked separately by
// ValidateSparseDataset).
Row RowOf(const SparseDataset& d, int64_t r) {
  Row row;
  for (int64_t e = d.offsets[r]; e < d.offsets[r + 1]; ++e) {
    row[d.keys[e]] = d.values[e];
  }
  return row;
}

SparseColumn Column(const std::string& name, SparseColumnKind kind) {
  SparseColumn c;
  c.name = name;
  c.kind = kind;
  return c;
}

SparseCsvOptions MixedOptions() {
  SparseCsvOptions options;
  options.csv.label_column = "Class";
  options.csv.classes = {"good", "bad"};
  options.columns = {Column("id", SparseColumnKind::kIgnore),
                     Column("color", SparseColumnKind::kCategorical),
                     Column("notes", SparseColumnKind::kText),
                     Column("amount", SparseColumnKind::kNumeric),
                     Column("size", SparseColumnKind::kNumeric)};
  options.columns[4].boundaries = {5, 8};
  return options;
}

const char kMixed[] =
    "id,color,notes,amount,size,Class\n"
    "1,red,\"Corn, corn and WHEAT\",2.5,10,bad\n"
    "2, blue ,,0,3,good\n"
    "3,NA,corn,,7,good\n"
    "4,Red,?,-1e3,5,bad\n";

TEST(ParseCsvSparseTest, EachKindGivesItsKeys) {
  absl::StatusOr<SparseDataset> d =
      ParseCsvSparse(kMixed, "m.csv", MixedOptions());
  ASSERT_THAT(d, IsOk());
  ASSERT_THAT(ValidateSparseDataset(*d), IsOk());
  ASSERT_EQ(d->rows(), 4);
  EXPECT_THAT(d->y, ElementsAre(1, 0, 0, 1));
  EXPECT_THAT(d->class_names, ElementsAre("good", "bad"));
  EXPECT_EQ(RowOf(*d, 0), (Row{{FeatureKey("color", "red"), 1},
                               {FeatureKey("notes", "corn"), 2},
                               {FeatureKey("notes", "and"), 1},
                               {FeatureKey("notes", "wheat"), 1},
                               {FieldKey("amount"), 2.5f},
                               {FeatureKey("size", "b2"), 1}}));
  // " blue " is trimmed; an empty text and an amount of 0 add nothing.
  EXPECT_EQ(RowOf(*d, 1), (Row{{FeatureKey("color", "blue"), 1},
                               {FeatureKey("size", "b0"), 1}}));
  // NA and an empty number are missing: no entry.
  EXPECT_EQ(RowOf(*d, 2), (Row{{FeatureKey("notes", "corn"), 1},
                               {FeatureKey("size", "b1"), 1}}));
  // Categorical values keep their case; a value on a boundary goes above it.
  EXPECT_EQ(RowOf(*d, 3), (Row{{FeatureKey("color", "Red"), 1},
                               {FieldKey("amount"), -1000},
                               {FeatureKey("size", "b1"), 1}}));
}

// Row r of `d` as key -> field.
std::map<uint64_t, int> FieldsOf(const SparseDataset& d, int64_t r) {
  std::map<uint64_t, int> fields;
  for (int64_t e = d.offsets[r]; e < d.offsets[r + 1]; ++e) {
    fields[d.keys[e]] = d.fields[e];
  }
  return fields;
}

TEST(ParseCsvSparseTest, EachEntryHasItsColumnsFieldInOptionsOrder) {
  // The options' order, not the header's, numbers the fields, and ignored
  // columns take no number: size 0, notes 1, color 2, amount 3.
  SparseCsvOptions options = MixedOptions();
  options.columns = {options.columns[4], options.columns[0], options.columns[2],
                     options.columns[1], options.columns[3]};
  absl::StatusOr<SparseDataset> d = ParseCsvSparse(kMixed, "m.csv", options);
  ASSERT_THAT(d, IsOk());
  ASSERT_THAT(ValidateSparseDataset(*d), IsOk());
  ASSERT_EQ(d->fields.size(), d->keys.size());
  EXPECT_EQ(FieldsOf(*d, 0),
            (std::map<uint64_t, int>{{FeatureKey("color", "red"), 2},
                                     {FeatureKey("notes", "corn"), 1},
                                     {FeatureKey("notes", "and"), 1},
                                     {FeatureKey("notes", "wheat"), 1},
                                     {FieldKey("amount"), 3},
                                     {FeatureKey("size", "b2"), 0}}));
  EXPECT_EQ(FieldsOf(*d, 1),
            (std::map<uint64_t, int>{{FeatureKey("color", "blue"), 2},
                                     {FeatureKey("size", "b0"), 0}}));
  EXPECT_EQ(FieldsOf(*d, 3),
            (std::map<uint64_t, int>{{FeatureKey("color", "Red"), 2},
                                     {FieldKey("amount"), 3},
                                     {FeatureKey("size", "b1"), 0}}));
  // Quantile buckets are a numeric column's field like any other.
  options.columns[0].boundaries.clear();
  options.columns[0].quantile_buckets = 2;
  d = ParseCsvSparse(kMixed, "m.csv", options);
  ASSERT_THAT(d, IsOk());
  EXPECT_EQ(FieldsOf(*d, 1),
            (std::map<uint64_t, int>{{FeatureKey("color", "blue"), 2},
                                     {FeatureKey("size", "b0"), 0}}));
}

TEST(ParseCsvSparseTest, AtMost65535ColumnsAreFields) {
  SparseCsvOptions options;
  for (int i = 0; i <= kMaxSparseCsvFields; ++i) {
    options.columns.push_back(
        Column(absl::StrCat("c", i), SparseColumnKind::kCategorical));
  }
  EXPECT_THAT(ParseCsvSparse("c0,y\na,1\n", "w.csv", options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("w.csv:1:1: 65536 columns are categorical, "
                                 "text or numeric; at most 65535")));
  // Ignored columns are no fields: the file's own errors come next.
  options.columns.back().kind = SparseColumnKind::kIgnore;
  EXPECT_THAT(ParseCsvSparse("c0,y\na,1\n", "w.csv", options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("column 'c1' of the options is not in "
                                 "the header")));
}

TEST(ParseCsvSparseTest, QuantileBucketsAreReturnedForPredict) {
  SparseCsvOptions options;
  options.columns = {Column("x", SparseColumnKind::kNumeric),
                     Column("same", SparseColumnKind::kNumeric)};
  options.columns[0].quantile_buckets = 4;
  options.columns[1].quantile_buckets = 3;
  std::string text = "x,same,y\n";
  for (int i = 10; i >= 1; --i) absl::StrAppend(&text, i, ",5,", i % 2, "\n");
  absl::StrAppend(&text, "NA,,1\n");
  std::vector<SparseColumn> applied;
  absl::StatusOr<SparseDataset> d =
      ParseCsvSparse(text, "q.csv", options, &applied);
  ASSERT_THAT(d, IsOk());
  // 10 values: boundaries at sorted ranks 2, 5, 7 -> 3, 6, 8; all-equal
  // values give one boundary.
  ASSERT_EQ(applied.size(), 2u);
  EXPECT_THAT(applied[0].boundaries, ElementsAre(3, 6, 8));
  EXPECT_EQ(applied[0].quantile_buckets, 0);
  EXPECT_THAT(applied[1].boundaries, ElementsAre(5));
  EXPECT_EQ(applied[0].name, "x");
  const uint64_t b1 = FeatureKey("same", "b1");
  EXPECT_EQ(RowOf(*d, 0), (Row{{FeatureKey("x", "b3"), 1}, {b1, 1}}));  // 10
  EXPECT_EQ(RowOf(*d, 7), (Row{{FeatureKey("x", "b1"), 1}, {b1, 1}}));  // 3
  EXPECT_EQ(RowOf(*d, 9), (Row{{FeatureKey("x", "b0"), 1}, {b1, 1}}));  // 1
  EXPECT_EQ(RowOf(*d, 10), Row());  // both missing
  // Reading with the applied columns gives the same keys.
  SparseCsvOptions again = options;
  again.columns = applied;
  absl::StatusOr<SparseDataset> e = ParseCsvSparse(text, "q.csv", again);
  ASSERT_THAT(e, IsOk());
  EXPECT_EQ(e->keys, d->keys);
  EXPECT_EQ(e->offsets, d->offsets);
}

TEST(ParseCsvSparseTest, BinaryLabelsLayoutAndNoLabel) {
  SparseCsvOptions options;
  options.csv.delimiter = '\t';
  options.csv.label_column = "0";
  options.columns = {Column("w", SparseColumnKind::kText)};
  absl::StatusOr<SparseDataset> d = ParseCsvSparse(
      "\xef\xbb\xbfy\tw\r\n+1\t\"say \"\"hi\"\"\"\r\n\r\n-1\tHi\r\n", "t.tsv",
      options);
  ASSERT_THAT(d, IsOk());
  EXPECT_THAT(d->y, ElementsAre(1, 0));
  EXPECT_THAT(d->class_names, ElementsAre("-1", "+1"));
  EXPECT_EQ(RowOf(*d, 0),
            (Row{{FeatureKey("w", "say"), 1}, {FeatureKey("w", "hi"), 1}}));
  EXPECT_EQ(RowOf(*d, 1), (Row{{FeatureKey("w", "hi"), 1}}));

  options.csv.delimiter = ',';
  options.csv.has_label = false;
  options.columns = {Column("a", SparseColumnKind::kCategorical),
                     Column("b", SparseColumnKind::kIgnore)};
  d = ParseCsvSparse("a,b\nx,1\n", "p.csv", options);
  ASSERT_THAT(d, IsOk());
  ASSERT_EQ(d->rows(), 1);
  EXPECT_TRUE(std::isnan(d->y[0]));
  EXPECT_TRUE(d->class_names.empty());
}

TEST(ParseCsvSparseTest, Errors) {
  const auto with = [](void (*change)(SparseCsvOptions*)) {
    SparseCsvOptions options = MixedOptions();
    change(&options);
    return options;
  };
  const std::string header = "id,color,notes,amount,size,Class\n";
  const struct {
    const char* what;
    std::string text;
    SparseCsvOptions options;
    std::string prefix;
    std::vector<std::string> words;
  } cases[] = {
      {"unknown column",
       header + "1,a,b,1,1,bad\n",
       with([](SparseCsvOptions* o) { o->columns[1].name = "colour"; }),
       "m.csv:1:1: ",
       {"column 'colour' of the options is not in the header",
        "'id', 'color', 'notes'"}},
      {"column listed twice",
       header + "1,a,b,1,1,bad\n",
       with([](SparseCsvOptions* o) {
         o->columns.push_back(Column("notes", SparseColumnKind::kIgnore));
       }),
       "m.csv:1:1: ",
       {"'notes' is given a kind twice", "once"}},
      {"label listed",
       header + "1,a,b,1,1,bad\n",
       with([](SparseCsvOptions* o) {
         o->columns.push_back(Column("Class", SparseColumnKind::kCategorical));
       }),
       "m.csv:1:1: ",
       {"'Class' is the label column"}},
      {"column left out",
       header + "1,a,b,1,1,bad\n",
       with([](SparseCsvOptions* o) { o->columns.erase(o->columns.begin()); }),
       "m.csv:1:1: ",
       {"column 'id' has no kind", "ignore"}},
      {"header repeats a name",
       "id,color,notes,amount,size,color,Class\n",
       MixedOptions(),
       "m.csv:1:1: ",
       {"names column 'color' twice (columns 1 and 5"}},
      {"header name with 0x1f",
       "id,color,no\x1fte,amount,size,Class\n1,a,b,1,1,bad\n",
       MixedOptions(),
       "m.csv:1:1: ",
       {"0x1f"}},
      {"numeric not a number",
       header + "1,a,b,1,1,bad\n2,a,b,12O,1,good\n",
       MixedOptions(),
       "m.csv:3:7: ",
       {"field '12O' in numeric column 'amount' is not a number",
        "categorical"}},
      {"numeric NaN",
       header + "2,a,b,-nan,1,good\n",
       MixedOptions(),
       "m.csv:2:7: ",
       {"is NaN"}},
      {"numeric Inf",
       header + "2,a,b,1,1e40,good\n",
       MixedOptions(),
       "m.csv:2:9: ",
       {"'1e40' in column 'size' is infinite"}},
      {"missing label",
       header + "2,a,b,1,1,\n",
       MixedOptions(),
       "m.csv:2:11: ",
       {"missing label"}},
      {"label outside classes",
       header + "2,a,b,1,1,ugly\n",
       MixedOptions(),
       "m.csv:2:11: ",
       {"not one of the classes"}},
      {"too few columns",
       header + "2,a,b,1,1\n",
       MixedOptions(),
       "m.csv:2:10: ",
       {"expected 6 columns as in the header, got 5"}},
      {"invalid UTF-8 in a categorical value",
       header + "2,\xc3\x28,b,1,1,bad\n",
       MixedOptions(),
       "m.csv:2:3: ",
       {"looks binary"}},
      {"binary garbage",
       std::string("id,color\0\x01\x02", 11),
       MixedOptions(),
       "m.csv:1:9: ",
       {"looks binary"}},
      {"empty file", "", MixedOptions(), "m.csv:1:1: ", {"empty"}},
      {"header only", header, MixedOptions(), "m.csv:2:1: ", {"no data rows"}},
      {"no header",
       "1,a\n",
       with([](SparseCsvOptions* o) { o->csv.header = false; }),
       "m.csv:1:1: ",
       {"needs a header"}},
      {"boundaries not ascending",
       header,
       with([](SparseCsvOptions* o) {
         o->columns[4].boundaries = {8, 5};
       }),
       "m.csv:1:1: ",
       {"'size': boundaries must be finite and strictly ascending"}},
      {"NaN boundary",
       header,
       with([](SparseCsvOptions* o) {
         o->columns[4].boundaries = {std::nan("")};
       }),
       "m.csv:1:1: ",
       {"boundaries must be finite"}},
      {"one quantile bucket",
       header,
       with([](SparseCsvOptions* o) { o->columns[3].quantile_buckets = 1; }),
       "m.csv:1:1: ",
       {"quantile_buckets 1 must be at least 2"}},
      {"both boundaries and quantiles",
       header,
       with([](SparseCsvOptions* o) { o->columns[4].quantile_buckets = 4; }),
       "m.csv:1:1: ",
       {"both boundaries and quantile_buckets"}},
      {"boundaries on a categorical column",
       header,
       with([](SparseCsvOptions* o) { o->columns[1].boundaries = {1}; }),
       "m.csv:1:1: ",
       {"'color' is categorical", "numeric columns only"}},
      {"quantiles without values",
       header + "1,a,b,,1,bad\n2,a,b,NA,1,bad\n",
       with([](SparseCsvOptions* o) { o->columns[3].quantile_buckets = 4; }),
       "m.csv:1:1: ",
       {"'amount' has no values to compute quantile buckets"}},
      {"quantile column not a number (first pass)",
       header + "1,a,b,x,1,bad\n",
       with([](SparseCsvOptions* o) { o->columns[3].quantile_buckets = 4; }),
       "m.csv:2:7: ",
       {"'x' in numeric column 'amount' is not a number"}},
  };
  for (const auto& c : cases) {
    absl::StatusOr<SparseDataset> d =
        ParseCsvSparse(c.text, "m.csv", c.options);
    EXPECT_THAT(
        d, StatusIs(absl::StatusCode::kInvalidArgument, StartsWith(c.prefix)))
        << c.what;
    for (const std::string& w : c.words) {
      EXPECT_THAT(d, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(w)))
          << c.what;
    }
  }
}

// Random bytes after a valid header: an error with a location or a valid
// dataset, never a crash.
TEST(ParseCsvSparseTest, GarbageIsRefusedOrValid) {
  std::mt19937 rng(11);
  const std::string alphabet = "ab1.-e,\"\n \t?\x80\xff\0N";
  SparseCsvOptions options = MixedOptions();
  options.csv.classes.clear();
  options.columns[3].quantile_buckets = 2;
  for (int i = 0; i < 2000; ++i) {
    std::string text = "id,color,notes,amount,size,Class\n";
    const int n = rng() % 60;
    for (int k = 0; k < n; ++k) text += alphabet[rng() % alphabet.size()];
    absl::StatusOr<SparseDataset> d = ParseCsvSparse(text, "g.csv", options);
    if (d.ok()) {
      EXPECT_THAT(ValidateSparseDataset(*d), IsOk()) << text;
    } else {
      EXPECT_THAT(
          d, StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("g.csv:")))
          << text;
    }
  }
}

TEST(ReadCsvSparseTest, ReadsGzipAndReportsMissingFiles) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/m.csv.gz");
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, kMixed, sizeof(kMixed) - 1),
            static_cast<int>(sizeof(kMixed) - 1));
  ASSERT_EQ(gzclose(f), Z_OK);
  absl::StatusOr<SparseDataset> d = ReadCsvSparse(path, MixedOptions());
  ASSERT_THAT(d, IsOk());
  EXPECT_EQ(d->rows(), 4);
  EXPECT_THAT(ReadCsvSparse(path + ".missing", MixedOptions()),
              StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace downpour::data
