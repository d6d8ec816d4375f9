// LrScale: warmup, then the configured decay.
#include "server/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace downpour::server {

double LrScale(const OptimizerSection& s, uint64_t global_step) {
  const uint64_t warmup =
      static_cast<uint64_t>(std::max<int64_t>(0, s.warmup_updates));
  if (global_step < warmup) {
    return static_cast<double>(global_step + 1) / static_cast<double>(warmup);
  }
  if (s.decay_updates <= 0) return 1.0;
  const uint64_t u = global_step - warmup;
  const uint64_t d = static_cast<uint64_t>(s.decay_updates);
  if (s.schedule == LrScheduleType::kStep) {
    return std::pow(s.decay_factor, static_cast<double>(u / d));
  }
  if (s.schedule == LrScheduleType::kCosine) {
    const double progress =
        std::min(1.0, static_cast<double>(u) / static_cast<double>(d));
    const double f = s.min_lr_fraction;
    return f + (1.0 - f) * 0.5 * (1.0 + std::cos(M_PI * progress));
  }
  return 1.0;
}

}  // namespace downpour::server
