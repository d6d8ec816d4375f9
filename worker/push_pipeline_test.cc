#include "worker/push_pipeline.h"

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/testing/poll.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace downpour::worker {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::downpour::testing::WaitUntil;

// A ps under the test's control: each push waits at a gate until Release
// lets it through, then fails if its grad[0] is negative and records one
// staleness value of grad[1].
class GatedPs {
 public:
  PushPipeline::Send send() {
    return [this](const float* grad, const std::vector<uint64_t>&,
                  PushReport* report) {
      absl::MutexLock lock(&mu_);
      threads_.insert(std::this_thread::get_id());
      max_concurrent_ = std::max(max_concurrent_, ++concurrent_);
      ++waiting_;
      mu_.Await(absl::Condition(
          +[](int* allowed) { return *allowed > 0; }, &allowed_));
      --allowed_;
      --waiting_;
      --concurrent_;
      ++sent_;
      if (grad[0] < 0)
        return absl::InvalidArgumentError("push: gradient has NaN");
      report->staleness.Record(static_cast<uint64_t>(grad[1]));
      return absl::OkStatus();
    };
  }
  void Release(int n) {
    absl::MutexLock lock(&mu_);
    allowed_ += n;
  }
  int waiting() const {
    absl::MutexLock lock(&mu_);
    return waiting_;
  }
  int sent() const {
    absl::MutexLock lock(&mu_);
    return sent_;
  }
  int max_concurrent() const {
    absl::MutexLock lock(&mu_);
    return max_concurrent_;
  }
  size_t threads() const {
    absl::MutexLock lock(&mu_);
    return threads_.size();
  }

 private:
  mutable absl::Mutex mu_;
  int allowed_ ABSL_GUARDED_BY(mu_) = 0;
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;
  int concurrent_ ABSL_GUARDED_BY(mu_) = 0;
  int max_concurrent_ ABSL_GUARDED_BY(mu_) = 0;
  int sent_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<std::thread::id> threads_ ABSL_GUARDED_BY(mu_);
};

std::vector<float> Grad(float first, float staleness) {
  return {first, staleness, 0.0f};
}

TEST(PushPipelineTest, WaitReturnsEachPushesStatusStalenessAndBuffer) {
  GatedPs ps;
  PushPipeline pushes(2, ps.send());
  std::vector<float> good = Grad(1, 7);
  const float* good_data = good.data();
  auto a = pushes.Start(std::move(good), {0});
  auto b = pushes.Start(Grad(-1, 3), {0});
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  EXPECT_NE(*a, *b);
  EXPECT_FALSE(pushes.Done(*a));
  ps.Release(2);
  PushReport report;
  const StalenessHistogram& staleness = report.staleness;
  std::vector<float> back;
  EXPECT_THAT(pushes.Wait(*b, &report, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(staleness.count(), 0u) << "a failed push recorded staleness";
  ASSERT_THAT(pushes.Wait(*a, &report, &back), IsOk());
  EXPECT_EQ(staleness.count(), 1u);
  EXPECT_EQ(staleness.max(), 7u);
  EXPECT_EQ(back.data(), good_data) << "the buffer was copied, not handed back";
  EXPECT_EQ(pushes.in_flight(), 0);
  // Waited for once.
  EXPECT_THAT(pushes.Wait(*a, nullptr, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_FALSE(pushes.Done(*a));
}

// Start returns only once a push in flight has ended: the sends completed
// when the third Start returned are at least one.
TEST(PushPipelineTest, StartBlocksWhileMaxPushesAreInFlight) {
  GatedPs ps;
  PushPipeline pushes(2, ps.send());
  ASSERT_THAT(pushes.Start(Grad(1, 0), {0}), IsOk());
  ASSERT_THAT(pushes.Start(Grad(1, 0), {0}), IsOk());
  ASSERT_TRUE(WaitUntil([&] { return ps.waiting() == 2; }, absl::Seconds(30)));
  std::atomic<bool> calling{false};
  std::atomic<int> sent_when_started{-1};
  std::thread third([&] {
    calling = true;
    ASSERT_THAT(pushes.Start(Grad(1, 0), {0}), IsOk());
    sent_when_started = ps.sent();
  });
  ASSERT_TRUE(WaitUntil([&] { return calling.load(); }, absl::Seconds(30)));
  EXPECT_EQ(pushes.in_flight(), 2);
  EXPECT_EQ(sent_when_started.load(), -1);
  ps.Release(1);
  third.join();
  EXPECT_GE(sent_when_started.load(), 1)
      << "Start returned while max_in_flight pushes were in flight";
  ps.Release(2);
  ASSERT_TRUE(
      WaitUntil([&] { return pushes.in_flight() == 0; }, absl::Seconds(30)));
  EXPECT_EQ(ps.max_concurrent(), 2);
}

TEST(PushPipelineTest, RunTakesItsTurnAmongThePushesInFlight) {
  GatedPs ps;
  PushPipeline pushes(1, ps.send());
  ASSERT_THAT(pushes.Start(Grad(1, 0), {0}), IsOk());
  ASSERT_TRUE(WaitUntil([&] { return ps.waiting() == 1; }, absl::Seconds(30)));
  std::atomic<int> sent_when_run{-1};
  std::thread runner([&] {
    const std::vector<float> grad = Grad(1, 0);
    PushReport report;
    const int sent_before = ps.sent();
    ASSERT_THAT(pushes.Run(grad.data(), {0}, &report), IsOk());
    // Run's own send counts one; the held push must have gone first.
    sent_when_run = ps.sent() - sent_before;
  });
  ASSERT_TRUE(WaitUntil([&] { return ps.waiting() == 1; }, absl::Seconds(30)));
  ps.Release(2);
  runner.join();
  EXPECT_EQ(ps.max_concurrent(), 1) << "Run sent beside a push in flight";
}

TEST(PushPipelineTest, StartAfterAnUnseenFailureReturnsItAndSendsNothing) {
  GatedPs ps;
  PushPipeline pushes(1, ps.send());
  auto failing = pushes.Start(Grad(-1, 0), {0});
  ASSERT_THAT(failing, IsOk());
  ps.Release(1);
  ASSERT_TRUE(
      WaitUntil([&] { return pushes.Done(*failing); }, absl::Seconds(30)));
  EXPECT_THAT(pushes.Start(Grad(1, 0), {0}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(ps.sent(), 1);
  EXPECT_EQ(pushes.in_flight(), 0);
  // Once the caller has seen it, pushes go on.
  EXPECT_THAT(pushes.Wait(*failing, nullptr, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
  auto next = pushes.Start(Grad(1, 0), {0});
  ASSERT_THAT(next, IsOk());
  ps.Release(1);
  EXPECT_THAT(pushes.Wait(*next, nullptr, nullptr), IsOk());
}

TEST(PushPipelineTest, ThreadsNeverOutnumberMaxInFlight) {
  GatedPs ps;
  ps.Release(1000);
  PushPipeline pushes(3, ps.send());
  std::vector<PushTicket> tickets;
  for (int i = 0; i < 100; ++i) {
    auto ticket = pushes.Start(Grad(1, 0), {0});
    ASSERT_THAT(ticket, IsOk());
    tickets.push_back(*ticket);
  }
  for (PushTicket t : tickets)
    EXPECT_THAT(pushes.Wait(t, nullptr, nullptr), IsOk());
  EXPECT_EQ(ps.sent(), 100);
  EXPECT_LE(ps.threads(), 3u);
  EXPECT_LE(ps.max_concurrent(), 3);
}

}  // namespace
}  // namespace downpour::worker
