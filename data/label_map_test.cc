#include "data/label_map.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::data::internal {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

struct Mapped {
  std::vector<float> y;
  std::vector<std::string> names;
};

Mapped Map(LabelMode mode, const std::vector<std::string>& classes,
           const std::vector<std::string>& tokens) {
  LabelMap map(mode, classes);
  Mapped out;
  for (const std::string& t : tokens) {
    out.y.emplace_back();
    EXPECT_THAT(map.Add(t, &out.y.back()), IsOk()) << t;
  }
  map.Finish(&out.y, &out.names);
  return out;
}

TEST(LabelMapTest, Table) {
  const struct {
    const char* what;
    std::vector<std::string> classes;
    std::vector<std::string> tokens;
    std::vector<float> y;
    std::vector<std::string> names;
  } cases[] = {
      {"-1/+1", {}, {"+1", "-1", "+1"}, {1, 0, 1}, {"-1", "+1"}},
      {"0/1", {}, {"1", "0", "0"}, {1, 0, 0}, {"0", "1"}},
      {"1/2/3", {}, {"3", "1", "2", "1"}, {2, 0, 1, 0}, {"1", "2", "3"}},
      {"numeric order, not text",
       {},
       {"10", "9", "-2"},
       {2, 1, 0},
       {"-2", "9", "10"}},
      {"equal values are one class",
       {},
       {"1", "+1", "1.0", "0"},
       {1, 1, 1, 0},
       {"0", "1"}},
      {"strings: first appearance",
       {},
       {"setosa", "virginica", "setosa", "versicolor"},
       {0, 1, 0, 2},
       {"setosa", "virginica", "versicolor"}},
      {"mixed: first appearance",
       {},
       {"b", "1", "a"},
       {0, 1, 2},
       {"b", "1", "a"}},
      {"explicit",
       {"no", "yes"},
       {"yes", "no", "yes"},
       {1, 0, 1},
       {"no", "yes"}},
      {"explicit numeric match",
       {"-1", "1"},
       {"+1", "-1", "1.0"},
       {1, 0, 1},
       {"-1", "1"}},
  };
  for (const auto& c : cases) {
    const Mapped m = Map(LabelMode::kClass, c.classes, c.tokens);
    EXPECT_THAT(m.y, ElementsAreArray(c.y)) << c.what;
    EXPECT_THAT(m.names, ElementsAreArray(c.names)) << c.what;
  }
}

TEST(LabelMapTest, RealParsesFloats) {
  const Mapped m = Map(LabelMode::kReal, {}, {"1.5", "-2", "+3e2"});
  EXPECT_THAT(m.y, ElementsAre(1.5f, -2.0f, 300.0f));
  EXPECT_TRUE(m.names.empty());
}

TEST(LabelMapTest, Errors) {
  const struct {
    LabelMode mode;
    std::vector<std::string> classes;
    const char* token;
    std::vector<std::string> words;
  } cases[] = {
      {LabelMode::kClass,
       {"a", "b"},
       "c",
       {"'c' is not one of the classes ['a', 'b']", "add it to data.classes"}},
      {LabelMode::kReal, {}, "cat", {"'cat' is not a number", "regression"}},
      {LabelMode::kReal, {}, "nan", {"NaN"}},
      {LabelMode::kReal, {}, "inf", {"infinite"}},
      {LabelMode::kClass, {}, "inf", {"infinite"}},
      {LabelMode::kClass, {}, "nan", {"NaN"}},
  };
  for (const auto& c : cases) {
    LabelMap map(c.mode, c.classes);
    float y;
    const absl::Status status = map.Add(c.token, &y);
    for (const std::string& w : c.words) {
      EXPECT_THAT(status,
                  StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(w)))
          << c.token;
    }
  }
}

TEST(LabelMapTest, MoreThan1000ClassesLooksLikeRegression) {
  LabelMap map(LabelMode::kClass, {});
  float y;
  for (int i = 0; i < LabelMap::kMaxImplicitClasses; ++i) {
    ASSERT_THAT(map.Add(absl::StrCat(i * 0.5), &y), IsOk());
  }
  EXPECT_THAT(map.Add("9999.5", &y),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("use model.task: regression")));
  // A label already seen is still fine.
  EXPECT_THAT(map.Add("0", &y), IsOk());
}

}  // namespace
}  // namespace downpour::data::internal
