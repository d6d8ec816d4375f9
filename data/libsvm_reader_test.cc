#include "data/libsvm_reader.h"

#include <unistd.h>
#include <zlib.h>

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

}  // namespace
}  // namespace downpour::data
