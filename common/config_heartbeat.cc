// The `heartbeat` section's keys and their rule.
#include "common/config_heartbeat.h"

#include "absl/strings/str_cat.h"
#include "common/config_field.h"

namespace downpour::config_internal {

std::vector<ConfigField> HeartbeatKeys(HeartbeatSection* h) {
  return {DoubleField("heartbeat.interval_s", &h->interval_s,
                      {0.001, false, 3600, false}),
          DoubleField("heartbeat.timeout_s", &h->timeout_s,
                      PositiveAtMost(kMaxTimeoutSeconds))};
}

absl::Status CheckHeartbeat(const HeartbeatSection& heartbeat) {
  if (heartbeat.timeout_s > heartbeat.interval_s) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "heartbeat.timeout_s (", heartbeat.timeout_s,
      ") must be > heartbeat.interval_s (", heartbeat.interval_s, ")"));
}

}  // namespace downpour::config_internal
