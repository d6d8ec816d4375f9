// Capped exponential backoff with full jitter, for retrying RPCs.
//
//   Backoff backoff(absl::Milliseconds(50), absl::Seconds(2));
//   while (!(status = Call()).ok() && IsRetryable(status))
//   clock->SleepFor(backoff.Next());
//
// Which errors are retryable, and the bounded retry loop built on this, live in
// common/retry.h.
#ifndef DOWNPOUR_COMMON_BACKOFF_H_
#define DOWNPOUR_COMMON_BACKOFF_H_

#include <cstdint>
#include <random>

#include "absl/time/time.h"

namespace downpour {

// Not thread-safe; one per retry loop.
class Backoff {
 public:
  Backoff(absl::Duration initial, absl::Duration max, uint64_t seed = 0);

  // The next wait: uniform in [d/2, d] where d doubles from `initial` up to
  // `max`.
  absl::Duration Next();
  void Reset();
  int attempts() const { return attempts_; }

 private:
  const absl::Duration initial_;
  const absl::Duration max_;
  absl::Duration current_;
  int attempts_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_BACKOFF_H_
