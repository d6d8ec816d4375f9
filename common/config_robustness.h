// The `robustness` section of the config: how a ps shard keeps any single
// worker, buggy or hostile, from ruining the model (server/push_guard.h).
#ifndef DOWNPOUR_COMMON_CONFIG_ROBUSTNESS_H_
#define DOWNPOUR_COMMON_CONFIG_ROBUSTNESS_H_

#include <vector>

#include "absl/status/status.h"

namespace downpour {

// How a ps shard keeps any single worker, buggy or hostile, from ruining the
// model (server/push_guard.h). On by default, with bounds loose enough that
// honest training never meets them.
struct RobustnessSection {
  // A block's gradient whose L2 norm exceeds norm_clip_factor times the
  // block's typical norm (the median over workers of each one's recent norms
  // to that block) is scaled down to that bound. 0 or >= 1; 0 = off.
  // Default 10.
  double norm_clip_factor = 10;
  // A push with a block's norm beyond norm_refuse_factor times the typical
  // norm is refused with InvalidArgument, nothing of it applied. 0 or >= 1
  // (and >= norm_clip_factor when both are on); 0 = off. Default 1000.
  double norm_refuse_factor = 1000;
  // A worker's norms to a block count towards the typical norm after this
  // many of its pushes to it; until some worker's do, only the optimizer's
  // absolute bounds apply. 1-1000000, default 20.
  int warmup_pushes = 20;
  // A worker's pushes applied by a shard over the last rate_window_s may be
  // at most rate_factor times the median active worker's (plus 16 pushes of
  // slack); pushes beyond are refused with Unavailable (retried by honest
  // clients). No limit with one active worker. 0 or >= 1; 0 = off.
  // Default 4.
  double rate_factor = 4;
  // The window of rate_factor, seconds: (0.1, 3600]. Default 5.
  double rate_window_s = 5;
};

// Internal to the config loader (common/config.cc).
namespace config_internal {
struct ConfigField;
// The section's keys bound to `robustness`, in docs/CONFIG.md's order.
std::vector<ConfigField> RobustnessKeys(RobustnessSection* robustness);
// Each factor 0 or >= 1, and norm_refuse_factor >= norm_clip_factor when both
// are on: InvalidArgument naming the keys.
absl::Status CheckRobustness(const RobustnessSection& robustness);
}  // namespace config_internal

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_CONFIG_ROBUSTNESS_H_
