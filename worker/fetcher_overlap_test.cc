#include "worker/fetcher_overlap.h"

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
using ::downpour::testing::WaitUntil;

// The fetch thread pulls when asked (every n_fetch steps), and the values it
// brought are swapped in only at the next step boundary.
TEST_F(FetcherTest, OverlapSwapsFetchedParametersInAtAStepBoundary) {
  training_.n_push = 1000;  // no pushes: the ps holds its first values
  training_.n_fetch = 10;
  OverlapFetcher fetcher(context());
  fetcher.Start();
  const std::vector<float> fresh = ps_->params();
  std::fill(buffers_.params.begin(), buffers_.params.end(), 0.0f);  // stale
  ASSERT_THAT(fetcher.BeforeStep(9), IsOk());                       // not due
  ASSERT_THAT(fetcher.BeforeStep(10), IsOk());  // due: asks the fetch thread
  ASSERT_TRUE(WaitUntil([&] { return ps_->pulls() == 2; }, absl::Seconds(20)));
  EXPECT_EQ(buffers_.params,
            std::vector<float>(fresh.size(), 0.0f));  // not yet
  EXPECT_EQ(stats_.stats().pulls, 0);
  ASSERT_TRUE(WaitUntil(
      [&] {
        EXPECT_THAT(fetcher.BeforeStep(11), IsOk());
        return stats_.stats().pulls == 1;
      },
      absl::Seconds(20)));
  EXPECT_EQ(buffers_.params, fresh);
  EXPECT_EQ(ps_->pulls(), 2);  // one fetch a request
  EXPECT_THAT(fetcher.Flush(), IsOk());
}

// Pushes go every n_push steps, summed at full weight; the flush sends what
// is owed and stops the fetch thread.
TEST_F(FetcherTest, OverlapPushesEveryNPushStepsAndFlushesTheRest) {
  training_.n_push = 3;
  OverlapFetcher fetcher(context());
  fetcher.Start();
  std::string bad;
  for (int64_t step = 0; step < 7; ++step) {
    ASSERT_THAT(RunStep(&fetcher, step, 100, &bad), IsOk());
  }
  EXPECT_THAT(fetcher.Flush(), IsOk());
  EXPECT_EQ(ps_->pushes(), 3);
  EXPECT_EQ(ps_->pushed_sum(), 7);
  const WorkerStats stats = stats_.stats();
  EXPECT_EQ(stats.pushes, 3);
  EXPECT_EQ(stats.pushed_steps, 7);
  EXPECT_EQ(stats.examples, 7 * 4);
}

}  // namespace
}  // namespace downpour::worker
