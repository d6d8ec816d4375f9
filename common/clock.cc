// The real clock.
#include "common/clock.h"

namespace downpour {
namespace {

class RealClock final : public Clock {
 public:
  absl::Time Now() override { return absl::Now(); }
  void SleepFor(absl::Duration duration) override { absl::SleepFor(duration); }
  bool WaitForNotificationWithTimeout(absl::Notification* notification,
                                      absl::Duration timeout) override {
    return notification->WaitForNotificationWithTimeout(timeout);
  }
};

}  // namespace

Clock* Clock::Real() {
  static RealClock* const clock = new RealClock;
  return clock;
}

}  // namespace downpour
