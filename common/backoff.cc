// Backoff with jitter so that many workers retrying at once spread out.
#include "common/backoff.h"

#include <algorithm>

namespace downpour {

Backoff::Backoff(absl::Duration initial, absl::Duration max, uint64_t seed)
    : initial_(initial),
      max_(max),
      current_(initial),
      rng_(seed != 0 ? seed : std::random_device{}()) {}

absl::Duration Backoff::Next() {
  ++attempts_;
  const absl::Duration d = current_;
  current_ = std::min(current_ * 2, max_);
  std::uniform_real_distribution<double> jitter(0.5, 1.0);
  return d * jitter(rng_);
}

void Backoff::Reset() {
  current_ = initial_;
  attempts_ = 0;
}

}  // namespace downpour
