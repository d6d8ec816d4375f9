#include "data/libsvm_parser.h"

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::data::internal {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;

TEST(LibsvmParserTest, LinesCountFromOneByDefault) {
  LibsvmRules rules;
  rules.sparse = true;
  LibsvmRows rows;
  EXPECT_THAT(
      ParseLibsvmRows("+1 1:2\n-1 x:1\n", "a.svm", rules, &rows),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("a.svm:2:")));
}

TEST(LibsvmParserTest, FirstLineNumbersMessagesAndLastLine) {
  LibsvmRules rules;
  rules.sparse = true;
  rules.first_line = 41;
  LibsvmRows rows;
  EXPECT_THAT(
      ParseLibsvmRows("+1 1:2\n-1 x:1\n", "a.svm", rules, &rows),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("a.svm:42:")));
  LibsvmRows good;
  ASSERT_THAT(ParseLibsvmRows("+1 1:2\n-1 3:1\n", "a.svm", rules, &good),
              IsOk());
  EXPECT_EQ(good.last_line, 42);
}

}  // namespace
}  // namespace downpour::data::internal
