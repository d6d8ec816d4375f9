#include "common/retry.h"

#include "common/testing/fake_clock.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::Eq;

RetryOptions OnClock(FakeClock* clock, absl::Duration timeout) {
  RetryOptions options;
  options.timeout = timeout;
  options.clock = clock;
  return options;
}

TEST(RetryForTest, GivesUpWithDeadlineExceededAfterTheTimeout) {
  FakeClock clock;
  int attempts = 0;
  const absl::Status status = RetryFor(
      "worker 0", "ps 1 at h:1", OnClock(&clock, absl::Seconds(10)), [&] {
        ++attempts;
        return absl::UnavailableError("connection refused");
      });
  EXPECT_THAT(
      status,
      StatusIs(absl::StatusCode::kDeadlineExceeded,
               Eq("worker 0: gave up waiting for ps 1 at h:1 after 10 s: "
                  "connection refused")));
  // The last sleep is cut to the timeout, so exactly the timeout was waited.
  EXPECT_EQ(clock.slept(), absl::Seconds(10));
  EXPECT_GT(attempts, 5);
}

TEST(RetryForTest, ReturnsANonRetryableErrorAtOnce) {
  FakeClock clock;
  int attempts = 0;
  const absl::Status status =
      RetryFor("worker 0", "ps 1", OnClock(&clock, absl::Seconds(10)), [&] {
        ++attempts;
        return absl::InvalidArgumentError("push: gradient has NaN");
      });
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("push: gradient has NaN")));
  EXPECT_EQ(attempts, 1);
  EXPECT_EQ(clock.slept(), absl::ZeroDuration());
}

TEST(RetryForTest, StopsWithCancelledWhenAskedTo) {
  FakeClock clock;
  int attempts = 0;
  RetryOptions options = OnClock(&clock, absl::Seconds(10));
  options.should_stop = [&] { return attempts >= 3; };
  const absl::Status status =
      RetryFor("worker 0", "the placement map", options, [&] {
        ++attempts;
        return absl::UnavailableError("no placement yet");
      });
  EXPECT_THAT(
      status,
      StatusIs(absl::StatusCode::kCancelled,
               Eq("worker 0: stopped while waiting for the placement map")));
  EXPECT_EQ(attempts, 3);
}

TEST(RetryForTest, ReturnsOkAfterAFewFailuresWithGrowingBackoff) {
  FakeClock clock;
  int attempts = 0;
  const absl::Status status = RetryFor(
      "ps 0", "the coordinator", OnClock(&clock, absl::Seconds(10)), [&] {
        return ++attempts <= 3 ? absl::UnavailableError("down")
                               : absl::OkStatus();
      });
  EXPECT_THAT(status, IsOk());
  EXPECT_EQ(attempts, 4);
  // Three sleeps of [25, 50], [50, 100] and [100, 200] ms.
  EXPECT_GE(clock.slept(), absl::Milliseconds(175));
  EXPECT_LE(clock.slept(), absl::Milliseconds(350));
}

TEST(RetryForTest, RealClockOverloadReturnsAtOnceOnSuccess) {
  int attempts = 0;
  EXPECT_THAT(RetryFor("ps 0", "the coordinator", absl::Seconds(1),
                       [&] {
                         ++attempts;
                         return absl::OkStatus();
                       }),
              IsOk());
  EXPECT_EQ(attempts, 1);
}

TEST(IsRetryableTest, RetryableCodes) {
  const struct {
    absl::Status status;
    bool retryable;
  } cases[] = {
      {absl::UnavailableError("down"), true},
      {absl::DeadlineExceededError("slow"), true},
      {absl::FailedPreconditionError("stale epoch"), true},
      {absl::AbortedError("aborted"), true},
      {absl::InvalidArgumentError("NaN"), false},
      {absl::NotFoundError("block"), false},
      {absl::InternalError("bug"), false},
      {absl::CancelledError("stopped"), false},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(IsRetryable(c.status), c.retryable) << c.status;
  }
}

}  // namespace
}  // namespace downpour
