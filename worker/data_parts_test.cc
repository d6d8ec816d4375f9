#include "worker/data_parts.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::worker {
namespace {

using ::testing::ElementsAre;

// Nine examples of one feature whose value is the example's index.
Dataset Nine() {
  Dataset data;
  data.dim = 1;
  data.classes = 3;
  for (int i = 0; i < 9; ++i) {
    data.x.push_back(i);
    data.y.push_back(i % 3);
  }
  return data;
}

TEST(DataPartsTest, StartsWithTheGivenParts) {
  const Dataset all = Nine();
  DataParts parts(&all, {1}, 3);
  EXPECT_THAT(parts.parts(), ElementsAre(1));
  EXPECT_THAT(parts.train()->x, ElementsAre(1, 4, 7));
}

TEST(DataPartsTest, NewPartsMakeANewTrainingSet) {
  const Dataset all = Nine();
  DataParts parts(&all, {1}, 3);
  std::shared_ptr<const Dataset> train = parts.Update({1, 2}, 3);
  ASSERT_NE(train, nullptr);
  EXPECT_THAT(train->x, ElementsAre(1, 2, 4, 5, 7, 8));
  EXPECT_THAT(parts.parts(), ElementsAre(1, 2));
  EXPECT_EQ(parts.train(), train);
  // Handing the adopted part back.
  train = parts.Update({1}, 3);
  ASSERT_NE(train, nullptr);
  EXPECT_THAT(train->x, ElementsAre(1, 4, 7));
}

TEST(DataPartsTest, SameOrNoPartsChangeNothing) {
  const Dataset all = Nine();
  DataParts parts(&all, {0, 2}, 3);
  const std::shared_ptr<const Dataset> before = parts.train();
  EXPECT_EQ(parts.Update({0, 2}, 3), nullptr);
  EXPECT_EQ(parts.Update({}, 0), nullptr) << "a response without a partition";
  EXPECT_THAT(parts.parts(), ElementsAre(0, 2));
  EXPECT_EQ(parts.train(), before);
}

}  // namespace
}  // namespace downpour::worker
