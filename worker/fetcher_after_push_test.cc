#include "worker/fetcher_after_push.h"

#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "worker/fetcher_testing.h"

namespace downpour::worker {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;

// n_push 2, n_fetch 4: a push of two steps' summed gradient every other step,
// and every fourth step (but the last) a pull that holds both pushes.
TEST_F(FetcherTest, AfterPushPullsOnlyOnceItsPushesAreApplied) {
  training_.n_push = 2;
  training_.n_fetch = 4;
  AfterPushFetcher fetcher(context());
  fetcher.Start();
  std::string bad;
  for (int64_t step = 0; step < 4; ++step) {
    ASSERT_THAT(RunStep(&fetcher, step, 8, &bad), IsOk());
    ASSERT_EQ(bad, "");
  }
  EXPECT_EQ(ps_->pushes(), 2);
  EXPECT_EQ(ps_->pushed_sum(), 4);  // four steps of ones, at full weight
  EXPECT_EQ(buffers_.params, ps_->params());
  for (uint64_t version : buffers_.versions) EXPECT_EQ(version, 2u);
  const WorkerStats stats = stats_.stats();
  EXPECT_EQ(stats.pushes, 2);
  EXPECT_EQ(stats.pushed_steps, 4);
  EXPECT_EQ(stats.examples, 4 * 4);
  EXPECT_EQ(stats.pulls, 1);
  EXPECT_EQ(stats.staleness_max,
            1);  // the second push's steps ran before the pull
  for (int64_t step = 4; step < 7; ++step) {
    ASSERT_THAT(RunStep(&fetcher, step, 8, &bad), IsOk());
  }
  // Step 7 is not run: the flush pushes step 6's gradient alone.
  EXPECT_THAT(fetcher.Flush(), IsOk());
  EXPECT_EQ(ps_->pushes(), 4);
  EXPECT_EQ(ps_->pushed_sum(), 7);
  EXPECT_EQ(stats_.stats().pulls, 1);  // step 7 was the last: no pull
  EXPECT_EQ(stats_.stats().pushed_steps, 7);
}

TEST_F(FetcherTest, AfterPushEndsWithTheFailedPushsError) {
  AfterPushFetcher fetcher(context());
  fetcher.Start();
  ps_->FailPushes();
  std::string bad;
  // The push fails on the client's thread: this step or the flush sees it.
  const absl::Status status = RunStep(&fetcher, 0, 8, &bad);
  EXPECT_TRUE(status.ok() || absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(fetcher.Flush(), StatusIs(absl::StatusCode::kInvalidArgument,
                                        "push: gradient has NaN"));
  EXPECT_THAT(fetcher.BeforeStep(1),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(stats_.stats().pushes, 0);
}

TEST_F(FetcherTest, AfterPushNamesTheBadValueOfAGradient) {
  AfterPushFetcher fetcher(context());
  fetcher.Start();
  backend_->value = 1e7f;  // past optimizer.max_gradient_value 1e6
  std::string bad;
  ASSERT_THAT(RunStep(&fetcher, 0, 8, &bad), IsOk());
  EXPECT_EQ(bad,
            "gradient holds 1e+07, beyond optimizer.max_gradient_value 1e+06");
  EXPECT_THAT(fetcher.Flush(), IsOk());
  EXPECT_EQ(ps_->pushes(), 0);
}

}  // namespace
}  // namespace downpour::worker
