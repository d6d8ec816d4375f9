#include "data/libsvm_reader.h"

#include <unistd.h>
#include <zlib.h>

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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
using ::testing::StartsWith;

TEST(ParseLibsvmTest, DenseRowsFromSparseLines) {
  absl::StatusOr<Table> t =
      ParseLibsvm("+1 1:0.5 3:2\n-1 2:-1\r\n+1\n", "d.svm", LibsvmOptions());
  ASSERT_THAT(t, IsOk());
  EXPECT_EQ(t->dim, 3);
  EXPECT_EQ(t->rows(), 3);
  EXPECT_THAT(t->x, ElementsAre(0.5f, 0, 2, 0, -1, 0, 0, 0, 0));
  EXPECT_THAT(t->y, ElementsAre(1, 0, 1));
  EXPECT_THAT(t->class_names, ElementsAre("-1", "+1"));
  EXPECT_THAT(t->feature_names, ElementsAre("1", "2", "3"));
}

TEST(ParseLibsvmTest, ZeroBasedAndExplicitDim) {
  LibsvmOptions options;
  options.zero_based = true;
  options.dim = 4;
  absl::StatusOr<Table> t =
      ParseLibsvm("1 0:1 2:3\n2 1:2\n3\n", "d.svm", options);
  ASSERT_THAT(t, IsOk());
  EXPECT_EQ(t->dim, 4);
  EXPECT_THAT(t->x, ElementsAre(1, 0, 3, 0, 0, 2, 0, 0, 0, 0, 0, 0));
  EXPECT_THAT(t->y, ElementsAre(0, 1, 2));
  EXPECT_THAT(t->feature_names, ElementsAre("0", "1", "2", "3"));
}

TEST(ParseLibsvmTest, CommentsQidTabsAndBlankLines) {
  absl::StatusOr<Table> t = ParseLibsvm(
      "# a comment line\n3 qid:7 1:1\t2:2  # trailing\n\n1 2:5\n  \n", "d.svm",
      LibsvmOptions());
  ASSERT_THAT(t, IsOk());
  EXPECT_THAT(t->x, ElementsAre(1, 2, 0, 5));
  EXPECT_THAT(t->y, ElementsAre(1, 0));
  EXPECT_THAT(t->class_names, ElementsAre("1", "3"));
}

TEST(ParseLibsvmTest, RealLabelsAndExplicitClasses) {
  LibsvmOptions options;
  options.labels = LabelMode::kReal;
  absl::StatusOr<Table> t = ParseLibsvm("2.5 1:1\n-3 1:2\n", "d.svm", options);
  ASSERT_THAT(t, IsOk());
  EXPECT_THAT(t->y, ElementsAre(2.5f, -3.0f));
  options.labels = LabelMode::kClass;
  options.classes = {"1", "-1"};
  t = ParseLibsvm("+1 1:1\n-1 1:2\n", "d.svm", options);
  ASSERT_THAT(t, IsOk());
  EXPECT_THAT(t->y, ElementsAre(0, 1));
  EXPECT_THAT(t->class_names, ElementsAre("1", "-1"));
}

TEST(ParseLibsvmTest, Errors) {
  LibsvmOptions dim3;
  dim3.dim = 3;
  LibsvmOptions zero_dim3 = dim3;
  zero_dim3.zero_based = true;
  LibsvmOptions classes;
  classes.classes = {"1", "2"};
  LibsvmOptions short_lines;
  short_lines.max_line_bytes = 10;
  LibsvmOptions small;
  small.max_dense_bytes = 1000;
  const struct {
    const char* what;
    std::string text;
    LibsvmOptions options;
    std::string prefix;
    std::vector<std::string> words;
  } cases[] = {
      {"index 0 when 1-based",
       "1 1:1\n1 0:1 2:1\n",
       LibsvmOptions(),
       "d.svm:2:3: ",
       {"index 0", "set data.zero_based: true"}},
      {"out of order",
       "1 3:1 2:1\n",
       LibsvmOptions(),
       "d.svm:1:7: ",
       {"index 2 comes after 3", "increase"}},
      {"repeated",
       "1 2:1 2:1\n",
       LibsvmOptions(),
       "d.svm:1:7: ",
       {"index 2 is repeated"}},
      {"beyond dim",
       "1 1:1\n1 4:1\n",
       dim3,
       "d.svm:2:3: ",
       {"index 4 is beyond data.features: 3", "1 to 3"}},
      {"beyond dim zero-based",
       "1 3:1\n",
       zero_dim3,
       "d.svm:1:3: ",
       {"index 3 is beyond data.features: 3", "0 to 2"}},
      {"not index:value",
       "1 1:1 abc\n",
       LibsvmOptions(),
       "d.svm:1:7: ",
       {"'abc' is not index:value"}},
      {"negative index",
       "1 -1:1\n",
       LibsvmOptions(),
       "d.svm:1:3: ",
       {"'-1:1' is not index:value"}},
      {"huge index",
       "1 99999999999:1\n",
       LibsvmOptions(),
       "d.svm:1:3: ",
       {"too large"}},
      {"value not a number",
       "1 1:x\n",
       LibsvmOptions(),
       "d.svm:1:5: ",
       {"value 'x' is not a number"}},
      {"empty value",
       "1 1: 2:1\n",
       LibsvmOptions(),
       "d.svm:1:5: ",
       {"missing value"}},
      {"nan value", "1 1:nan\n", LibsvmOptions(), "d.svm:1:5: ", {"NaN"}},
      {"inf value",
       "1 1:1\n1 1:-inf\n",
       LibsvmOptions(),
       "d.svm:2:5: ",
       {"infinite"}},
      {"nan label", "nan 1:1\n", LibsvmOptions(), "d.svm:1:1: ", {"NaN"}},
      {"label outside classes",
       "1 1:1\n3 1:1\n",
       classes,
       "d.svm:2:1: ",
       {"label '3' is not one of the classes ['1', '2']", "data.classes"}},
      {"multi-label",
       "1,3 1:1\n",
       LibsvmOptions(),
       "d.svm:1:1: ",
       {"multi-label"}},
      {"no label",
       "1:1 2:1\n",
       LibsvmOptions(),
       "d.svm:1:1: ",
       {"not a label"}},
      {"empty file", "", LibsvmOptions(), "d.svm:1:1: ", {"no data rows"}},
      {"only comments",
       "# x\n\n",
       LibsvmOptions(),
       "d.svm:3:1: ",
       {"no data rows"}},
      {"no features",
       "1\n2\n",
       LibsvmOptions(),
       "d.svm:2:1: ",
       {"no line has a feature"}},
      {"NUL byte",
       std::string("1 1:1\n1 1:\0\n", 12),
       LibsvmOptions(),
       "d.svm:2:5: ",
       {"looks binary"}},
      {"invalid UTF-8 label",
       "1 1:1\n\xc3\x28 1:1\n",
       LibsvmOptions(),
       "d.svm:2:1: ",
       {"looks binary"}},
      {"long line",
       "1 1:1\n1 1:1 2:1 3:1\n",
       short_lines,
       "d.svm:2:11: ",
       {"longer than 10 bytes"}},
      {"too big when dense",
       "1 1:1\n1 1000:1\n",
       small,
       "d.svm:2:1: ",
       {"max_dense_bytes", "dense"}},
  };
  for (const auto& c : cases) {
    absl::StatusOr<Table> t = ParseLibsvm(c.text, "d.svm", c.options);
    EXPECT_THAT(
        t, StatusIs(absl::StatusCode::kInvalidArgument, StartsWith(c.prefix)))
        << c.what;
    for (const std::string& w : c.words) {
      EXPECT_THAT(t, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(w)))
          << c.what;
    }
  }
}

TEST(ReadLibsvmTest, ReadsGzip) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/a.svm");
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  const std::string text = "1 1:1\n2 2:2\n";
  ASSERT_EQ(gzwrite(f, text.data(), text.size()),
            static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
  absl::StatusOr<Table> t = ReadLibsvm(path, LibsvmOptions());
  ASSERT_THAT(t, IsOk());
  EXPECT_THAT(t->x, ElementsAre(1, 0, 0, 2));
}

TEST(ParseLibsvmSparseTest, KeysAreIndicesAsWrittenUpTo64Bits) {
  absl::StatusOr<SparseDataset> d =
      ParseLibsvmSparse("+1 3:1 18446744073709551615:1.5 0:2\n-1 7:-1\n+1\n",
                        "d.svm", LibsvmSparseOptions());
  ASSERT_THAT(d, IsOk());
  EXPECT_EQ(d->rows(), 3);
  EXPECT_THAT(d->offsets, ElementsAre(0, 3, 4, 4));
  EXPECT_THAT(d->keys, ElementsAre(0, 3, 18446744073709551615ULL, 7));
  EXPECT_THAT(d->values, ElementsAre(2, 1, 1.5f, -1));
  EXPECT_THAT(d->y, ElementsAre(1, 0, 1));
  EXPECT_THAT(d->class_names, ElementsAre("-1", "+1"));
  EXPECT_THAT(ValidateSparseDataset(*d), IsOk());
}

TEST(ParseLibsvmSparseTest, UnsortedAndRepeatedIndicesAreSortedAndSummed) {
  absl::StatusOr<SparseDataset> d =
      ParseLibsvmSparse("1 9:1 3:2 9:0.5 3:-2 5:0 1:1\n0 2:1 2:1 2:1\n",
                        "d.svm", LibsvmSparseOptions());
  ASSERT_THAT(d, IsOk());
  // 3 sums to 0 and 5 is an explicit 0: both left out.
  EXPECT_THAT(d->offsets, ElementsAre(0, 2, 3));
  EXPECT_THAT(d->keys, ElementsAre(1, 9, 2));
  EXPECT_THAT(d->values, ElementsAre(1, 1.5f, 3));
  EXPECT_THAT(d->y, ElementsAre(1, 0));
  EXPECT_THAT(d->class_names, ElementsAre("0", "1"));
  EXPECT_THAT(d->fields, IsEmpty());  // one field: every entry in field 0
}

TEST(ParseLibsvmSparseTest, CommentsQidRealLabelsAndExplicitClasses) {
  LibsvmSparseOptions options;
  options.labels = LabelMode::kReal;
  absl::StatusOr<SparseDataset> d = ParseLibsvmSparse(
      "# head\r\n2.5 qid:3 4:1 # tail\r\n\r\n-3 1:2\n", "d.svm", options);
  ASSERT_THAT(d, IsOk());
  EXPECT_THAT(d->y, ElementsAre(2.5f, -3.0f));
  EXPECT_THAT(d->keys, ElementsAre(4, 1));
  EXPECT_TRUE(d->class_names.empty());
  options.labels = LabelMode::kClass;
  options.classes = {"good", "bad"};
  d = ParseLibsvmSparse("bad 1:1\ngood 1:1\n", "d.svm", options);
  ASSERT_THAT(d, IsOk());
  EXPECT_THAT(d->y, ElementsAre(1, 0));
  EXPECT_THAT(d->class_names, ElementsAre("good", "bad"));
}

// The dense and the sparse reader read the same lines alike.
TEST(ParseLibsvmSparseTest, AgreesWithTheDenseReader) {
  const std::string text =
      "+1 1:0.708333 2:1 3:1 4:-0.320755 6:-1 13:-1 \n"
      "-1 1:0.583333 2:-1 3:0.333333 11:1 12:-1\n"
      "+1 3:1 7:1e-3\n";
  absl::StatusOr<Table> t = ParseLibsvm(text, "d.svm", LibsvmOptions());
  absl::StatusOr<SparseDataset> d =
      ParseLibsvmSparse(text, "d.svm", LibsvmSparseOptions());
  ASSERT_THAT(t, IsOk());
  ASSERT_THAT(d, IsOk());
  ASSERT_EQ(d->rows(), t->rows());
  EXPECT_EQ(d->y, t->y);
  EXPECT_EQ(d->class_names, t->class_names);
  std::vector<float> dense(t->x.size(), 0.0f);
  for (int64_t r = 0; r < d->rows(); ++r) {
    for (int64_t e = d->offsets[r]; e < d->offsets[r + 1]; ++e) {
      ASSERT_GE(d->keys[e], 1u);
      ASSERT_LE(d->keys[e], static_cast<uint64_t>(t->dim));
      dense[r * t->dim + d->keys[e] - 1] = d->values[e];
    }
  }
  EXPECT_EQ(dense, t->x);
}

TEST(ParseLibsvmSparseTest, Errors) {
  LibsvmSparseOptions classes;
  classes.classes = {"1", "2"};
  LibsvmSparseOptions short_lines;
  short_lines.max_line_bytes = 10;
  LibsvmSparseOptions bad_options;
  bad_options.max_line_bytes = 0;
  const struct {
    const char* what;
    std::string text;
    LibsvmSparseOptions options;
    std::string prefix;
    std::vector<std::string> words;
  } cases[] = {
      {"index above 2^64-1",
       "1 1:1\n1 18446744073709551616:1\n",
       {},
       "d.svm:2:3: ",
       {"too large (at most 18446744073709551615)"}},
      {"negative index", "1 -1:1\n", {}, "d.svm:1:3: ", {"not index:value"}},
      {"not index:value", "1 1:1 x\n", {}, "d.svm:1:7: ", {"not index:value"}},
      {"nan value", "1 1:NaN\n", {}, "d.svm:1:5: ", {"is NaN"}},
      {"inf value", "1 1:1e39\n", {}, "d.svm:1:5: ", {"infinite"}},
      {"repeats sum past a float",
       "1 5:3e38 5:3e38\n",
       {},
       "d.svm:1:1: ",
       {"values of key 5", "too large for a float"}},
      {"nan label", "NaN 1:1\n", {}, "d.svm:1:1: ", {"NaN"}},
      {"label outside classes",
       "1 1:1\n3 1:1\n",
       classes,
       "d.svm:2:1: ",
       {"not one of the classes"}},
      {"empty file", "", {}, "d.svm:1:1: ", {"no data rows"}},
      {"only blank lines", "\n \n", {}, "d.svm:3:1: ", {"no data rows"}},
      {"binary garbage",
       std::string("\x7f"
                   "ELF\x02\x01\x01\0\0\0",
                   10),
       {},
       "d.svm:1:8: ",
       {"looks binary"}},
      {"gzip text", "\x1f\x8b\x08\x00", {}, "d.svm:1:1: ", {"gzip"}},
      {"long line", "1 1:1 2:1 3:1\n", short_lines, "d.svm:1:11: ", {"10"}},
      {"bad options",
       "1 1:1\n",
       bad_options,
       "d.svm:1:1: ",
       {"max_line_bytes"}},
  };
  for (const auto& c : cases) {
    absl::StatusOr<SparseDataset> d =
        ParseLibsvmSparse(c.text, "d.svm", c.options);
    EXPECT_THAT(
        d, StatusIs(absl::StatusCode::kInvalidArgument, StartsWith(c.prefix)))
        << c.what;
    for (const std::string& w : c.words) {
      EXPECT_THAT(d, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(w)))
          << c.what;
    }
  }
}

// Random bytes and mangled lines: an error or a valid dataset, never a crash.
TEST(ParseLibsvmSparseTest, GarbageIsRefusedOrValid) {
  std::mt19937 rng(7);
  const std::string alphabet = "0123456789:.-+ \t\n#eE\x80\xff\0q";
  for (int i = 0; i < 2000; ++i) {
    std::string text;
    const int n = rng() % 40;
    for (int k = 0; k < n; ++k) text += alphabet[rng() % alphabet.size()];
    if (i % 2 == 0) text = "1 " + text;
    absl::StatusOr<SparseDataset> d =
        ParseLibsvmSparse(text, "d.svm", LibsvmSparseOptions());
    if (d.ok()) {
      EXPECT_THAT(ValidateSparseDataset(*d), IsOk()) << text;
    } else {
      EXPECT_THAT(
          d, StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("d.svm:")))
          << text;
    }
  }
}

TEST(ReadLibsvmSparseTest, ReadsGzipAndReportsMissingFiles) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/s.svm");
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  const std::string text = "1 4294967296:1\n0 2:2\n";
  ASSERT_EQ(gzwrite(f, text.data(), text.size()),
            static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
  absl::StatusOr<SparseDataset> d = ReadLibsvmSparse(path, {});
  ASSERT_THAT(d, IsOk());
  EXPECT_THAT(d->keys, ElementsAre(4294967296ULL, 2));
  EXPECT_THAT(ReadLibsvmSparse(path + ".missing", {}),
              StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace downpour::data
