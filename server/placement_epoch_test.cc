// PlacementEpoch: which request epochs a shard serves, and what it says to
// the others.
#include "server/placement_epoch.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::server {
namespace {

using ::testing::HasSubstr;

TEST(PlacementEpochTest, NothingIsServedBeforeThePlacement) {
  const PlacementEpoch epoch(2);
  EXPECT_FALSE(epoch.placed());
  const absl::Status status = epoch.Check("pull", 0);
  EXPECT_TRUE(absl::IsUnavailable(status));
  EXPECT_THAT(status.message(), HasSubstr("pull: ps 2 holds no blocks yet"));
}

TEST(PlacementEpochTest, OnlyTheServedEpochPasses) {
  PlacementEpoch epoch(0);
  epoch.Set(5);
  EXPECT_TRUE(epoch.placed());
  EXPECT_EQ(epoch.value(), 5u);
  EXPECT_TRUE(epoch.Check("push", 5).ok());
  const absl::Status stale = epoch.Check("push", 4);
  EXPECT_TRUE(absl::IsFailedPrecondition(stale));
  EXPECT_THAT(stale.message(), HasSubstr("stale placement epoch 4"));
  const absl::Status ahead = epoch.Check("push", 6);
  EXPECT_TRUE(absl::IsUnavailable(ahead));
  EXPECT_THAT(ahead.message(), HasSubstr("behind the request's 6"));
}

}  // namespace
}  // namespace downpour::server
