// The `robustness` section's keys and their rules.
#include "common/config_robustness.h"

#include "absl/strings/str_cat.h"
#include "common/config_field.h"
#include "common/status_macros.h"

namespace downpour::config_internal {
namespace {

// A factor in (0, 1) would act on the typical honest push itself.
absl::Status CheckFactor(const char* key, double factor, const char* what) {
  if (factor == 0 || factor >= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      key, " (", factor, ") must be 0 (off) or >= 1: below 1 it would ", what,
      " the typical honest push"));
}

}  // namespace

std::vector<ConfigField> RobustnessKeys(RobustnessSection* r) {
  return {DoubleField("robustness.norm_clip_factor", &r->norm_clip_factor,
                      NonNegativeAtMost(1e12)),
          DoubleField("robustness.norm_refuse_factor", &r->norm_refuse_factor,
                      NonNegativeAtMost(1e12)),
          IntField("robustness.warmup_pushes", &r->warmup_pushes,
                   Between(1, 1'000'000)),
          DoubleField("robustness.rate_factor", &r->rate_factor,
                      NonNegativeAtMost(1e6)),
          DoubleField("robustness.rate_window_s", &r->rate_window_s,
                      {0.1, false, 3600, true})};
}

absl::Status CheckRobustness(const RobustnessSection& robustness) {
  RETURN_IF_ERROR(CheckFactor("robustness.norm_clip_factor",
                              robustness.norm_clip_factor, "clip"));
  RETURN_IF_ERROR(CheckFactor("robustness.norm_refuse_factor",
                              robustness.norm_refuse_factor, "refuse"));
  RETURN_IF_ERROR(CheckFactor("robustness.rate_factor", robustness.rate_factor,
                              "rate-limit"));
  if (robustness.norm_clip_factor > 0 && robustness.norm_refuse_factor > 0 &&
      robustness.norm_refuse_factor < robustness.norm_clip_factor) {
    return absl::InvalidArgumentError(absl::StrCat(
        "robustness.norm_refuse_factor (", robustness.norm_refuse_factor,
        ") must be >= robustness.norm_clip_factor (",
        robustness.norm_clip_factor,
        "): a push is clipped before it is refused (0 turns either off)"));
  }
  return absl::OkStatus();
}

}  // namespace downpour::config_internal
