#include "worker/sparse_step_pipeline.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace downpour::worker {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;

// Each prepared input carries its number in keys[0]; `last` inputs, then no
// more.
StepPrefetcher::Prepare Numbered(std::atomic<int>* calls, int last) {
  return [calls, last](SparseStepInput* in) -> absl::StatusOr<bool> {
    const int n = ++*calls;
    if (n > last) return false;
    in->keys.assign(1, static_cast<uint64_t>(n));
    return true;
  };
}

TEST(StepPrefetcherTest, ForegroundPreparesInsideTake) {
  std::atomic<int> calls{0};
  StepPrefetcher prefetch(/*background=*/false, Numbered(&calls, 2));
  EXPECT_EQ(calls.load(), 0);
  SparseStepInput in;
  absl::Duration waited;
  for (uint64_t want = 1; want <= 2; ++want) {
    ASSERT_THAT(prefetch.Take(&in, &waited).status(), IsOk());
    EXPECT_EQ(in.keys[0], want);
    EXPECT_EQ(calls.load(), static_cast<int>(want));
  }
  EXPECT_FALSE(*prefetch.Take(&in, &waited));
}

// The overlap itself: while the caller holds step 1, step 2 is prepared
// without another Take.
TEST(StepPrefetcherTest, BackgroundPreparesTheNextStepWhileTheCallerWorks) {
  std::atomic<int> calls{0};
  StepPrefetcher prefetch(/*background=*/true, Numbered(&calls, 3));
  SparseStepInput in;
  absl::Duration waited;
  ASSERT_TRUE(*prefetch.Take(&in, &waited));
  EXPECT_EQ(in.keys[0], 1u);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (calls.load() < 2 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(calls.load(), 2) << "step 2 was not prepared ahead";
  ASSERT_TRUE(*prefetch.Take(&in, &waited));
  EXPECT_EQ(in.keys[0], 2u);
  ASSERT_TRUE(*prefetch.Take(&in, &waited));
  EXPECT_EQ(in.keys[0], 3u);
  EXPECT_FALSE(*prefetch.Take(&in, &waited));
  EXPECT_FALSE(*prefetch.Take(&in, &waited)) << "the end stays the answer";
}

TEST(StepPrefetcherTest, AnErrorIsTheAnswerFromThenOn) {
  std::atomic<int> calls{0};
  StepPrefetcher prefetch(
      /*background=*/true, [&calls](SparseStepInput*) -> absl::StatusOr<bool> {
        if (++calls == 2) return absl::UnavailableError("ps 1 is down");
        return true;
      });
  SparseStepInput in;
  absl::Duration waited;
  ASSERT_TRUE(*prefetch.Take(&in, &waited));
  EXPECT_THAT(prefetch.Take(&in, &waited).status(),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(prefetch.Take(&in, &waited).status(),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(calls.load(), 2);
}

// A push whose send waits for `release`; records the order pushes were sent
// and acknowledged (examples numbers them).
struct Recorder {
  absl::Mutex mu;
  std::vector<int64_t> sent, done;
  absl::Notification release;
  absl::Status fail_on_second;

  StepPusher::Send send() {
    return [this](SparseStepPush* p, PushReport*) -> absl::Status {
      {
        absl::MutexLock lock(&mu);
        sent.push_back(p->examples);
      }
      release.WaitForNotification();
      if (p->examples == 2) return fail_on_second;
      return absl::OkStatus();
    };
  }
  StepPusher::Done done_fn() {
    return [this](const SparseStepPush& p, const PushReport&) {
      absl::MutexLock lock(&mu);
      done.push_back(p.examples);
    };
  }
  size_t sent_count() {
    absl::MutexLock lock(&mu);
    return sent.size();
  }
};

TEST(StepPusherTest, BackgroundStartReturnsBeforeTheAcknowledgement) {
  Recorder r;
  StepPusher pushes(/*background=*/true, 1, r.send(), r.done_fn());
  absl::Duration waited;
  auto first = pushes.Acquire();
  ASSERT_THAT(first.status(), IsOk());
  (*first)->examples = 1;
  ASSERT_THAT(pushes.Start(*first, &waited), IsOk());  // not yet acked
  auto second = pushes.Acquire();
  ASSERT_THAT(second.status(), IsOk());
  EXPECT_NE(*second, *first) << "a push in flight keeps its buffers";
  (*second)->examples = 3;
  // Backpressure: the second Start waits for room (max_in_flight 1).
  std::atomic<bool> started{false};
  std::thread starter([&] {
    absl::Duration w;
    EXPECT_THAT(pushes.Start(*second, &w), IsOk());
    started = true;
  });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(started.load());
  r.release.Notify();
  starter.join();
  ASSERT_THAT(pushes.Drain(), IsOk());
  absl::MutexLock lock(&r.mu);
  EXPECT_EQ(r.sent, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(r.done, (std::vector<int64_t>{1, 3}));
}

TEST(StepPusherTest, AFailedPushStopsLaterOnesAndIsReported) {
  Recorder r;
  r.fail_on_second = absl::DeadlineExceededError("ps 0 did not answer");
  r.release.Notify();
  StepPusher pushes(/*background=*/true, 1, r.send(), r.done_fn());
  absl::Duration waited;
  for (int64_t n = 1; n <= 2; ++n) {
    auto p = pushes.Acquire();
    ASSERT_THAT(p.status(), IsOk());
    (*p)->examples = n;
    ASSERT_THAT(pushes.Start(*p, &waited), IsOk());
  }
  EXPECT_THAT(pushes.Drain(), StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(pushes.Acquire().status(),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  absl::MutexLock lock(&r.mu);
  EXPECT_EQ(r.done, (std::vector<int64_t>{1})) << "only acked pushes count";
}

TEST(StepPusherTest, ForegroundSendsInsideStart) {
  Recorder r;
  r.fail_on_second = absl::DeadlineExceededError("ps 0 did not answer");
  r.release.Notify();
  StepPusher pushes(/*background=*/false, 1, r.send(), r.done_fn());
  absl::Duration waited;
  auto p = pushes.Acquire();
  (*p)->examples = 1;
  ASSERT_THAT(pushes.Start(*p, &waited), IsOk());
  EXPECT_EQ(r.sent_count(), 1u);
  p = pushes.Acquire();
  EXPECT_EQ((*p)->examples, 1) << "the buffers are reused";
  (*p)->examples = 2;
  EXPECT_THAT(pushes.Start(*p, &waited),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
}

}  // namespace
}  // namespace downpour::worker
