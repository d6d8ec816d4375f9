// A Clock for tests: time moves only when the test (or a sleeper) moves it.
//
//   FakeClock clock;
//   RetryOptions options{.clock = &clock};
//   ... code under test calls clock.SleepFor(d): returns at once, time += d ...
//   EXPECT_EQ(clock.slept(), absl::Seconds(3));
#ifndef DOWNPOUR_COMMON_TESTING_FAKE_CLOCK_H_
#define DOWNPOUR_COMMON_TESTING_FAKE_CLOCK_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"

namespace downpour {

// Thread-safe. SleepFor advances the time by the duration and returns at once,
// so a retry loop runs through its whole schedule instantly and
// deterministically. WaitForNotificationWithTimeout returns true at once when
// the notification is already notified; otherwise it blocks until the
// notification is notified or another thread's Advance/SleepFor moves the time
// past its deadline.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::UnixEpoch() + absl::Hours(24))
      : now_(start) {}

  absl::Time Now() override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void SleepFor(absl::Duration duration) override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (duration > absl::ZeroDuration()) {
      now_ += duration;
      slept_ += duration;
    }
  }
  bool WaitForNotificationWithTimeout(absl::Notification* notification,
                                      absl::Duration timeout) override
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::Time deadline;
    {
      absl::MutexLock lock(&mu_);
      deadline = now_ + timeout;
      ++waits_;
    }
    // Poll the notification in short real-time slices while the fake time
    // has not reached the deadline.
    while (
        !notification->WaitForNotificationWithTimeout(absl::Milliseconds(1))) {
      if (Now() >= deadline) return false;
    }
    return true;
  }

  // Moves the time forward.
  void Advance(absl::Duration duration) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    now_ += duration;
  }
  // Total time passed in SleepFor.
  absl::Duration slept() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return slept_;
  }
  // Calls of WaitForNotificationWithTimeout so far, each counted once its
  // deadline is set. A test that moves the time one step at a time for a
  // thread that waits in a loop waits for this to grow after each step: the
  // thread has then seen that step (and done its work) before the next.
  int64_t waits() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return waits_;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
  absl::Duration slept_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  int64_t waits_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_TESTING_FAKE_CLOCK_H_
