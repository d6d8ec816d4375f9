#include "data/csv_reader.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::data {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::StartsWith;

CsvOptions NoHeader() {
  CsvOptions options;
  options.header = false;
  return options;
}

TEST(ParseCsvTest, HeaderNamesFeaturesAndLastColumnIsLabel) {
  absl::StatusOr<Table> t =
      ParseCsv("a,b,label\n1,2,x\n3.5,-4,y\n", "d.csv", CsvOptions());
  ASSERT_THAT(t, IsOk());
  EXPECT_EQ(t->dim, 2);
  EXPECT_EQ(t->rows(), 2);
  EXPECT_THAT(t->x, ElementsAre(1, 2, 3.5f, -4));
  EXPECT_THAT(t->y, ElementsAre(0, 1));
  EXPECT_THAT(t->feature_names, ElementsAre("a", "b"));
  EXPECT_THAT(t->class_names, ElementsAre("x", "y"));
}

TEST(ParseCsvTest, WithoutALabelColumnEveryColumnIsAFeature) {
  CsvOptions options;
  options.has_label = false;
  absl::StatusOr<Table> t = ParseCsv("a,b\n1,2\n3,4\n", "p.csv", options);
  ASSERT_THAT(t, IsOk());
  EXPECT_EQ(t->dim, 2);
  EXPECT_THAT(t->feature_names, ElementsAre("a", "b"));
  EXPECT_THAT(t->x, ElementsAre(1, 2, 3, 4));
  ASSERT_EQ(t->rows(), 2);
  EXPECT_TRUE(std::isnan(t->y[0]) && std::isnan(t->y[1]));
  EXPECT_TRUE(t->class_names.empty());
}

TEST(ParseCsvTest, WithoutHeaderNamesAreX0ToXn) {
  absl::StatusOr<Table> t = ParseCsv("1,2,0\n3,4,1", "d.csv", NoHeader());
  ASSERT_THAT(t, IsOk());
  EXPECT_THAT(t->feature_names, ElementsAre("x0", "x1"));
  EXPECT_THAT(t->x, ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(t->y, ElementsAre(0, 1));
}

TEST(ParseCsvTest, LabelColumnByNameAndByIndex) {
  const std::string text = "y,a,b\n1,2,3\n0,5,6\n";
  for (const char* column : {"y", "0"}) {
    CsvOptions options;
    options.label_column = column;
    absl::StatusOr<Table> t = ParseCsv(text, "d.csv", options);
    ASSERT_THAT(t, IsOk()) << column;
    EXPECT_THAT(t->feature_names, ElementsAre("a", "b"));
    EXPECT_THAT(t->x, ElementsAre(2, 3, 5, 6));
    EXPECT_THAT(t->y, ElementsAre(1, 0));
  }
  CsvOptions options = NoHeader();
  options.label_column = "1";
  absl::StatusOr<Table> t = ParseCsv("2,1,3\n5,0,6\n", "d.csv", options);
  ASSERT_THAT(t, IsOk());
  EXPECT_THAT(t->x, ElementsAre(2, 3, 5, 6));
  EXPECT_THAT(t->feature_names, ElementsAre("x0", "x1"));
}

TEST(ParseCsvTest, TabAndSemicolonDelimiters) {
  for (char d : {'\t', ';'}) {
    CsvOptions options;
    options.delimiter = d;
    const std::string text =
        absl::StrCat("a", std::string(1, d), "b\n1.5", std::string(1, d),
                     "1\n2", std::string(1, d), "0\n");
    absl::StatusOr<Table> t = ParseCsv(text, "d.csv", options);
    ASSERT_THAT(t, IsOk()) << int{d};
    EXPECT_THAT(t->x, ElementsAre(1.5f, 2));
  }
  // "1,5" is not a number when ';' separates fields.
  CsvOptions options;
  options.delimiter = ';';
  EXPECT_THAT(ParseCsv("a;b\n1,5;1\n", "d.csv", options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       StartsWith("d.csv:2:1: field '1,5'")));
}

TEST(ParseCsvTest, SkipLinesLikeScikitLearn) {
  CsvOptions options = NoHeader();
  options.skip_lines = 1;
  absl::StatusOr<Table> t = ParseCsv(
      "150,4,setosa,versicolor,virginica\n5.1,3.5,1.4,0.2,0\n"
      "7.0,3.2,4.7,1.4,1\n",
      "iris.csv", options);
  ASSERT_THAT(t, IsOk());
  EXPECT_EQ(t->dim, 4);
  EXPECT_EQ(t->rows(), 2);
  EXPECT_THAT(t->y, ElementsAre(0, 1));
}

TEST(ParseCsvTest, LineEndingsBlankLinesSpacesQuotesAndBom) {
  absl::StatusOr<Table> t = ParseCsv(
      "\xef\xbb\xbf\"a\", b ,\"class\"\r\n 1 , +2 ,\"Iris, setosa\"\r\n\r\n"
      "3,4,\"say \"\"hi\"\"\"\r\n\n  \n",
      "d.csv", CsvOptions());
  ASSERT_THAT(t, IsOk());
  EXPECT_THAT(t->feature_names, ElementsAre("a", "b"));
  EXPECT_THAT(t->x, ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(t->class_names, ElementsAre("Iris, setosa", "say \"hi\""));
}

TEST(ParseCsvTest, LabelMapping) {
  const struct {
    const char* labels;
    std::vector<std::string> classes;
    std::vector<float> y;
    std::vector<std::string> names;
  } cases[] = {
      {"+1 -1 +1", {}, {1, 0, 1}, {"-1", "+1"}},
      {"1 0 0", {}, {1, 0, 0}, {"0", "1"}},
      {"3 1 2", {}, {2, 0, 1}, {"1", "2", "3"}},
      {"cat dog cat", {}, {0, 1, 0}, {"cat", "dog"}},
      {"cat dog cat", {"dog", "cat"}, {1, 0, 1}, {"dog", "cat"}},
  };
  for (const auto& c : cases) {
    std::string text = "f,label\n";
    std::vector<std::string> labels = absl::StrSplit(c.labels, ' ');
    for (const std::string& l : labels) absl::StrAppend(&text, "0,", l, "\n");
    CsvOptions options;
    options.classes = c.classes;
    absl::StatusOr<Table> t = ParseCsv(text, "d.csv", options);
    ASSERT_THAT(t, IsOk()) << c.labels;
    EXPECT_THAT(t->y, ElementsAreArray(c.y)) << c.labels;
    EXPECT_THAT(t->class_names, ElementsAreArray(c.names)) << c.labels;
  }
}

TEST(ParseCsvTest, RealLabels) {
  CsvOptions options;
  options.labels = LabelMode::kReal;
  absl::StatusOr<Table> t =
      ParseCsv("f,price\n1,2.5\n2,-1e2\n", "d.csv", options);
  ASSERT_THAT(t, IsOk());
  EXPECT_THAT(t->y, ElementsAre(2.5f, -100.0f));
  EXPECT_TRUE(t->class_names.empty());
}

TEST(ParseCsvTest, MissingPolicies) {
  const std::string text = "a,b,y\n1,,0\n3,NA,1\n,4,0\n?,8,1\n";
  CsvOptions options;
  options.missing = Missing::kZero;
  absl::StatusOr<Table> t = ParseCsv(text, "d.csv", options);
  ASSERT_THAT(t, IsOk());
  EXPECT_THAT(t->x, ElementsAre(1, 0, 3, 0, 0, 4, 0, 8));
  options.missing = Missing::kMean;
  t = ParseCsv(text, "d.csv", options);
  ASSERT_THAT(t, IsOk());
  EXPECT_THAT(t->x, ElementsAre(1, 6, 3, 6, 2, 4, 2, 8));
  options.missing = Missing::kError;
  EXPECT_THAT(
      ParseCsv(text, "d.csv", options),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(StartsWith("d.csv:2:3: missing value"),
                     HasSubstr("column 'b'"), HasSubstr("data.missing"))));
}

TEST(ParseCsvTest, MeanOfAnAllMissingColumnIsAnError) {
  CsvOptions options;
  options.missing = Missing::kMean;
  EXPECT_THAT(ParseCsv("a,b,y\n1,,0\n2,,1\n", "d.csv", options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(StartsWith("d.csv:1:1: "), HasSubstr("'b'"),
                             HasSubstr("no values"))));
}

// Every error names file:line:column and says what to do.
TEST(ParseCsvTest, Errors) {
  const struct {
    const char* what;
    std::string text;
    CsvOptions options;
    std::string prefix;
    std::vector<std::string> words;
  } cases[] = {
      {"too few columns",
       "a,b,c,d,y\n1,2,3,4,0\n1,2,3,0\n",
       CsvOptions(),
       "d.csv:3:8: ",
       {"expected 5 columns as in the header, got 4"}},
      {"too many columns",
       "a,b\n1,0\n1,2,3\n",
       CsvOptions(),
       "d.csv:3:5: ",
       {"expected 2 columns as in the header, got 3"}},
      {"too many without header",
       "1,0\n1,2,0\n",
       NoHeader(),
       "d.csv:2:5: ",
       {"expected 2 columns as in line 1, got 3"}},
      {"trailing delimiter",
       "a,b\n1,0,\n",
       CsvOptions(),
       "d.csv:2:5: ",
       {"got 3", "trailing delimiter"}},
      {"not a number",
       "a,b\nhello world,0\n",
       CsvOptions(),
       "d.csv:2:1: ",
       {"field 'hello world' in column 'a' is not a number"}},
      {"long field is cut",
       "a,b\n" + std::string(60, 'z') + ",0\n",
       CsvOptions(),
       "d.csv:2:1: ",
       {"'" + std::string(40, 'z') + "...'"}},
      {"header without data.header",
       "a,b\n1,0\n",
       NoHeader(),
       "d.csv:1:1: ",
       {"'a'", "data.header: true"}},
      {"inf value",
       "a,b\n1,0\ninf,1\n",
       CsvOptions(),
       "d.csv:3:1: ",
       {"'inf'", "infinite"}},
      {"too large value",
       "a,b\n1e39,1\n",
       CsvOptions(),
       "d.csv:2:1: ",
       {"'1e39'", "too large"}},
      {"nan value", "a,b\n-nan,1\n", CsvOptions(), "d.csv:2:1: ", {"NaN"}},
      {"nan label",
       "a,b\n1,0\n2,nan\n",
       CsvOptions(),
       "d.csv:3:3: ",
       {"missing label"}},
      {"inf label",
       "a,b\n1,0\n2,-inf\n",
       CsvOptions(),
       "d.csv:3:3: ",
       {"label '-inf' is infinite"}},
      {"empty file", "", CsvOptions(), "d.csv:1:1: ", {"empty"}},
      {"blank file", "\n \r\n", CsvOptions(), "d.csv:3:1: ", {"empty"}},
      {"header only", "a,b\n\n", CsvOptions(), "d.csv:3:1: ", {"no data rows"}},
      {"skip past the end",
       "a,b\n",
       [] {
         CsvOptions o;
         o.skip_lines = 3;
         return o;
       }(),
       "d.csv:1:1: ",
       {"data.skip_lines"}},
      {"label outside classes",
       "a,b\n1,cat\n2,emu\n",
       [] {
         CsvOptions o;
         o.classes = {"cat", "dog"};
         return o;
       }(),
       "d.csv:3:3: ",
       {"label 'emu' is not one of the classes ['cat', 'dog']",
        "add it to data.classes"}},
      {"label column not in header",
       "a,b,c\n1,2,3\n",
       [] {
         CsvOptions o;
         o.label_column = "species";
         return o;
       }(),
       "d.csv:1:1: ",
       {"'species' is not in the header", "'a', 'b', 'c'"}},
      {"label index too large",
       "a,b,c\n1,2,3\n",
       [] {
         CsvOptions o;
         o.label_column = "3";
         return o;
       }(),
       "d.csv:1:1: ",
       {"beyond the last column", "0 to 2"}},
      {"label name without header",
       "1,2,3\n",
       [] {
         CsvOptions o = NoHeader();
         o.label_column = "y";
         return o;
       }(),
       "d.csv:1:1: ",
       {"no header"}},
      {"one column",
       "a\n1\n",
       CsvOptions(),
       "d.csv:1:1: ",
       {"one column", "data.delimiter"}},
      {"one column, wrong delimiter",
       "a;b;c\n1;2;3\n",
       CsvOptions(),
       "d.csv:1:1: ",
       {"one column", "';'"}},
      {"NUL byte",
       std::string("a,b\n1,\0\n", 8),
       CsvOptions(),
       "d.csv:2:3: ",
       {"looks binary"}},
      {"invalid UTF-8",
       "a,b\n1,0\n\xff\xfe,1\n",
       CsvOptions(),
       "d.csv:3:1: ",
       {"looks binary"}},
      {"gzip data", "\x1f\x8b\x08\x00", CsvOptions(), "d.csv:1:1: ", {"gzip"}},
      {"long line",
       "a,b\n1," + std::string(100, '1') + "\n",
       [] {
         CsvOptions o;
         o.max_line_bytes = 50;
         return o;
       }(),
       "d.csv:2:51: ",
       {"longer than 50 bytes"}},
      {"unterminated quote",
       "a,b\n1,\"cat\n",
       CsvOptions(),
       "d.csv:2:3: ",
       {"unterminated quote"}},
      {"junk after quote",
       "a,b\n1,\"cat\"x\n",
       CsvOptions(),
       "d.csv:2:8: ",
       {"after a closing quote"}},
      {"bad delimiter",
       "a b\n",
       [] {
         CsvOptions o;
         o.delimiter = ' ';
         return o;
       }(),
       "d.csv:1:1: ",
       {"data.delimiter"}},
  };
  for (const auto& c : cases) {
    absl::StatusOr<Table> t = ParseCsv(c.text, "d.csv", c.options);
    EXPECT_THAT(
        t, StatusIs(absl::StatusCode::kInvalidArgument, StartsWith(c.prefix)))
        << c.what;
    for (const std::string& w : c.words) {
      EXPECT_THAT(t, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(w)))
          << c.what;
    }
  }
}

TEST(ParseCsvTest, MoreThan1000LabelsLooksLikeRegression) {
  std::string text = "a,price\n";
  for (int i = 0; i < 1001; ++i) absl::StrAppend(&text, "1,", i, ".5\n");
  EXPECT_THAT(ParseCsv(text, "d.csv", CsvOptions()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(StartsWith("d.csv:1002:3: "),
                             HasSubstr("use model.task: regression"))));
  CsvOptions options;
  options.labels = LabelMode::kReal;
  EXPECT_THAT(ParseCsv(text, "d.csv", options), IsOk());
}

// A gzip file in a temporary folder, written with zlib.
class ReadCsvTest : public ::testing::Test {
 protected:
  std::string WriteGzip(const std::string& name, const std::string& text) {
    const std::string path = absl::StrCat(::testing::TempDir(), "/", name);
    gzFile f = gzopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr);
    EXPECT_EQ(gzwrite(f, text.data(), text.size()),
              static_cast<int>(text.size()));
    EXPECT_EQ(gzclose(f), Z_OK);
    return path;
  }
};

TEST_F(ReadCsvTest, GunzipsWhateverTheName) {
  const std::string path = WriteGzip("plain_name.csv", "a,y\n1,0\n2,1\n");
  absl::StatusOr<Table> t = ReadCsv(path, CsvOptions());
  ASSERT_THAT(t, IsOk());
  EXPECT_THAT(t->x, ElementsAre(1, 2));
}

TEST_F(ReadCsvTest, TruncatedGzipIsRefused) {
  const std::string path = WriteGzip("cut.csv.gz", "a,y\n1,0\n2,1\n");
  ASSERT_EQ(truncate(path.c_str(), 20), 0);
  EXPECT_THAT(ReadCsv(path, CsvOptions()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(path), HasSubstr("truncated"))));
}

TEST_F(ReadCsvTest, MissingFileIsNotFound) {
  EXPECT_THAT(
      ReadCsv("/nonexistent/x.csv", CsvOptions()),
      StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nonexistent/x.csv")));
}

}  // namespace
}  // namespace downpour::data
