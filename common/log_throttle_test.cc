// Tests for LogThrottle on a FakeClock.
#include "common/log_throttle.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

LogThrottle::Options Options(FakeClock* clock, int full = 2,
                             size_t max_keys = 64) {
  LogThrottle::Options options;
  options.full_per_interval = full;
  options.interval = absl::Seconds(10);
  options.max_keys = max_keys;
  options.clock = clock;
  return options;
}

TEST(LogThrottleTest, FirstFewInFullThenCountedThenOneSummary) {
  FakeClock clock;
  LogThrottle throttle(Options(&clock));
  EXPECT_THAT(throttle.Record("ps 0: pushes refused", "a"), ElementsAre("a"));
  EXPECT_THAT(throttle.Record("ps 0: pushes refused", "b"), ElementsAre("b"));
  for (int i = 0; i < 1000; ++i) {
    EXPECT_THAT(throttle.Record("ps 0: pushes refused", absl::StrCat("m", i)),
                IsEmpty());
  }
  clock.SleepFor(absl::Seconds(9));
  EXPECT_THAT(throttle.Record("ps 0: pushes refused", "late"), IsEmpty());
  clock.SleepFor(absl::Seconds(1));
  // A new interval: the summary of the last one, then the message in full.
  EXPECT_THAT(throttle.Record("ps 0: pushes refused", "next"),
              ElementsAre("ps 0: pushes refused: 1001 more in the last 10s "
                          "(last: late)",
                          "next"));
}

TEST(LogThrottleTest, KeysAreCountedApart) {
  FakeClock clock;
  LogThrottle throttle(Options(&clock, 1));
  EXPECT_THAT(throttle.Record("push", "p1"), ElementsAre("p1"));
  EXPECT_THAT(throttle.Record("pull", "q1"), ElementsAre("q1"));
  EXPECT_THAT(throttle.Record("push", "p2"), IsEmpty());
  EXPECT_THAT(throttle.Record("pull", "q2"), IsEmpty());
}

TEST(LogThrottleTest, QuietIntervalGivesNoSummary) {
  FakeClock clock;
  LogThrottle throttle(Options(&clock));
  EXPECT_THAT(throttle.Record("k", "a"), ElementsAre("a"));
  clock.SleepFor(absl::Seconds(30));
  EXPECT_THAT(throttle.Record("k", "b"), ElementsAre("b"));
  EXPECT_THAT(throttle.Flush(), IsEmpty());
}

TEST(LogThrottleTest, FlushReportsABurstThatStopped) {
  FakeClock clock;
  LogThrottle throttle(Options(&clock, 1));
  throttle.Record("k", "a");
  throttle.Record("k", "b");
  throttle.Record("k", "c");
  EXPECT_THAT(throttle.Flush(), IsEmpty()) << "interval not over yet";
  clock.SleepFor(absl::Seconds(10));
  EXPECT_THAT(throttle.Flush(),
              ElementsAre("k: 2 more in the last 10s (last: c)"));
  EXPECT_EQ(throttle.num_keys(), 0u);
  EXPECT_THAT(throttle.Flush(), IsEmpty());
}

TEST(LogThrottleTest, KeysAreBoundedAndTheRestShareOneKey) {
  FakeClock clock;
  LogThrottle throttle(Options(&clock, 1, /*max_keys=*/4));
  for (int i = 0; i < 10000; ++i) {
    throttle.Record(absl::StrCat("peer ", i), "x");
  }
  EXPECT_EQ(throttle.num_keys(), 5u) << "4 and the overflow key";
  // Keys whose interval ended make room for new ones.
  clock.SleepFor(absl::Seconds(10));
  const std::vector<std::string> lines = throttle.Record("fresh", "y");
  EXPECT_EQ(lines.back(), "y");
  EXPECT_THAT(lines,
              ::testing::Contains(
                  "other log lines: 9995 more in the last 10s (last: x)"));
  EXPECT_EQ(throttle.num_keys(), 1u);
}

TEST(LogThrottleTest, LongMessagesAreCut) {
  FakeClock clock;
  LogThrottle throttle(Options(&clock));
  const std::vector<std::string> lines =
      throttle.Record("k", std::string(100000, 'z'));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].size(), LogThrottle::kMaxMessageLength + 3);
}

TEST(LogThrottleTest, ConcurrentRecordsAreAllCounted) {
  FakeClock clock;
  LogThrottle throttle(Options(&clock, 5));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) throttle.Record("k", "m");
    });
  }
  for (std::thread& t : threads) t.join();
  clock.SleepFor(absl::Seconds(10));
  EXPECT_THAT(throttle.Flush(),
              ElementsAre("k: 3995 more in the last 10s (last: m)"));
}

}  // namespace
}  // namespace downpour
