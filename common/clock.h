// Time as a dependency: code that waits on time takes a Clock* (in its
// Options), so tests can run it on a FakeClock (common/testing/fake_clock.h)
// instead of sleeping on the wall clock, as tensorstore's
// CoordinatorServer::Options::clock and tcmalloc's huge_cache clock do.
//
//   Clock* clock = options.clock != nullptr ? options.clock : Clock::Real();
//   const absl::Time deadline = clock->Now() + timeout;
//   while (clock->Now() < deadline) { ...; clock->SleepFor(backoff.Next()); }
#ifndef DOWNPOUR_COMMON_CLOCK_H_
#define DOWNPOUR_COMMON_CLOCK_H_

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace downpour {

// Implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;

  // The process-wide real clock (absl::Now, absl::SleepFor). Never deleted.
  static Clock* Real();

  virtual absl::Time Now() = 0;
  virtual void SleepFor(absl::Duration duration) = 0;
  // Waits until `notification` is notified (returns true) or `timeout` has
  // passed on this clock (returns false).
  virtual bool WaitForNotificationWithTimeout(absl::Notification* notification,
                                              absl::Duration timeout) = 0;
};

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_CLOCK_H_
