#include "server/checkpoint_health.h"

#include "gtest/gtest.h"

namespace downpour::server {
namespace {

using Logged = CheckpointHealth::Logged;

const absl::Time kStart = absl::FromUnixSeconds(1000);
const absl::Status kFull = absl::ResourceExhaustedError(
    "write checkpoint: cannot write 'x.tmp.1': No space left on device");
const absl::Status kDenied =
    absl::PermissionDeniedError("write checkpoint: cannot create 'x.tmp.1'");

TEST(CheckpointHealthTest, StartsCleanWithZeroCounters) {
  Counters counters;
  CheckpointHealth health(&counters);
  EXPECT_EQ(counters.Get("checkpoints_written"), 0);
  EXPECT_EQ(counters.Get("checkpoint_failures"), 0);
  EXPECT_EQ(health.last_error(), "");
  EXPECT_FALSE(health.age_seconds(kStart).has_value());
}

TEST(CheckpointHealthTest, FailureIsCountedAndKeptUntilTheNextSuccess) {
  Counters counters;
  CheckpointHealth health(&counters);
  health.Record(absl::OkStatus(), kStart);
  health.Record(kFull, kStart + absl::Seconds(3));
  EXPECT_EQ(counters.Get("checkpoints_written"), 1);
  EXPECT_EQ(counters.Get("checkpoint_failures"), 1);
  EXPECT_EQ(health.last_error(), kFull.message());
  // The age counts from the last good checkpoint, not the last attempt.
  EXPECT_DOUBLE_EQ(*health.age_seconds(kStart + absl::Seconds(10)), 10);
  EXPECT_EQ(health.Record(absl::OkStatus(), kStart + absl::Seconds(6)),
            Logged::kRecovered);
  EXPECT_EQ(health.last_error(), "");
  EXPECT_DOUBLE_EQ(*health.age_seconds(kStart + absl::Seconds(10)), 4);
}

TEST(CheckpointHealthTest, RepeatedFailureIsLoggedOnceThenCountedPerInterval) {
  Counters counters;
  CheckpointHealth health(&counters);
  // Every second for two and a half intervals: the same error.
  int errors = 0, summaries = 0;
  const int attempts = 150;
  for (int i = 0; i < attempts; ++i) {
    switch (health.Record(kFull, kStart + absl::Seconds(i))) {
      case Logged::kError:
        ++errors;
        break;
      case Logged::kSummary:
        ++summaries;
        break;
      default:
        break;
    }
  }
  EXPECT_EQ(errors, 1);
  EXPECT_EQ(summaries, 2);  // at 60 s and 120 s
  EXPECT_EQ(counters.Get("checkpoint_failures"), attempts);
  // Another cause is news: logged at once.
  EXPECT_EQ(health.Record(kDenied, kStart + absl::Seconds(attempts)),
            Logged::kError);
  // And after a success, the old cause is news again.
  EXPECT_EQ(health.Record(absl::OkStatus(), kStart + absl::Seconds(200)),
            Logged::kRecovered);
  EXPECT_EQ(health.Record(absl::OkStatus(), kStart + absl::Seconds(201)),
            Logged::kNothing);
  EXPECT_EQ(health.Record(kFull, kStart + absl::Seconds(202)), Logged::kError);
}

}  // namespace
}  // namespace downpour::server
