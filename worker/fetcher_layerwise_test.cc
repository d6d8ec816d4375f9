#include "worker/fetcher_layerwise.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/testing/poll.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "worker/fetcher_testing.h"

namespace downpour::worker {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::downpour::testing::WaitUntil;

// A group per block: every block is pushed and pulled once a step, and a step
// is counted (pushed and pulled) once all of its groups came back.
TEST_F(FetcherTest, LayerwisePushesAndPullsEveryBlockOnceAStep) {
  LayerwiseFetcher fetcher(context());
  fetcher.Start();
  std::string bad;
  for (int64_t step = 0; step < 5; ++step) {
    ASSERT_THAT(RunStep(&fetcher, step, 5, &bad), IsOk());
    ASSERT_EQ(bad, "");
  }
  ASSERT_THAT(fetcher.AwaitParams(5), IsOk());
  EXPECT_EQ(buffers_.params, ps_->params());
  for (uint64_t version : ps_->versions()) EXPECT_EQ(version, 5u);
  EXPECT_EQ(buffers_.versions, ps_->versions());
  EXPECT_THAT(fetcher.Flush(), IsOk());
  const WorkerStats stats = stats_.stats();
  EXPECT_EQ(stats.pushes, 5);
  EXPECT_EQ(stats.pushed_steps, 5);
  EXPECT_EQ(stats.pulls, 5);
  EXPECT_EQ(stats.examples, 5 * 4);
  EXPECT_EQ(stats.staleness_max, 0);
}

// A bad block stops the step's hand-off: the blocks before it leave, it and
// the ones after it do not, and the step is never counted.
TEST_F(FetcherTest, LayerwiseSendsNothingFromABadBlockOn) {
  LayerwiseFetcher fetcher(context());
  fetcher.Start();
  backend_->value = std::numeric_limits<float>::quiet_NaN();
  std::string bad;
  // The default staged step reports the whole gradient at once, in block
  // order: the first block is already bad.
  ASSERT_THAT(RunStep(&fetcher, 0, 5, &bad), IsOk());
  EXPECT_EQ(bad, "gradient holds nan");
  EXPECT_THAT(fetcher.Flush(), IsOk());
  for (uint64_t version : ps_->versions()) EXPECT_EQ(version, 0u);
  EXPECT_EQ(stats_.stats().pushes, 0);
  EXPECT_EQ(std::string(fetcher.DivergedNote()),
            "; of this step only the blocks before the bad one were pushed "
            "(training.fetch "
            "layerwise)");
}

// Stop() while a step waits for blocks a held push has yet to bring back:
// Cancelled, and the flush still settles what was handed off.
TEST_F(FetcherTest, LayerwiseWaitIsCancelledByStop) {
  LayerwiseFetcher fetcher(context());
  fetcher.Start();
  ps_->HoldPushes();
  std::string bad;
  ASSERT_THAT(RunStep(&fetcher, 0, 5, &bad), IsOk());
  ASSERT_TRUE(ps_->AwaitBlockedPushes(1, absl::Seconds(20)));
  stop_.store(true);
  EXPECT_THAT(fetcher.AwaitParams(1),
              StatusIs(absl::StatusCode::kCancelled, "stopped"));
  ps_->AllowPushes(1000);
  EXPECT_THAT(fetcher.Flush(), IsOk());
  EXPECT_EQ(stats_.stats().pushes, 1);
}

TEST_F(FetcherTest, LayerwiseEndsWithTheFailedPushsError) {
  LayerwiseFetcher fetcher(context());
  fetcher.Start();
  ps_->FailPushes();
  std::string bad;
  ASSERT_THAT(RunStep(&fetcher, 0, 5, &bad), IsOk());
  EXPECT_THAT(
      fetcher.AwaitParams(1),
      StatusIs(absl::StatusCode::kInvalidArgument, "push: gradient has NaN"));
  EXPECT_THAT(fetcher.BeforeStep(1),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(fetcher.Flush(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(stats_.stats().pushes, 0);
}

}  // namespace
}  // namespace downpour::worker
