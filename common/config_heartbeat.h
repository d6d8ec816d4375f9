// The `heartbeat` section of the config: how often members report to the
// coordinator, and how long a silent one lives.
#ifndef DOWNPOUR_COMMON_CONFIG_HEARTBEAT_H_
#define DOWNPOUR_COMMON_CONFIG_HEARTBEAT_H_

#include <vector>

#include "absl/status/status.h"

namespace downpour {

struct HeartbeatSection {
  double interval_s = 0.5;  // > 0
  double timeout_s = 3.0;   // > interval_s: a member silent this long is dead
};

// Internal to the config loader (common/config.cc).
namespace config_internal {
struct ConfigField;
// The section's keys bound to `heartbeat`, in docs/CONFIG.md's order.
std::vector<ConfigField> HeartbeatKeys(HeartbeatSection* heartbeat);
// InvalidArgument unless timeout_s > interval_s.
absl::Status CheckHeartbeat(const HeartbeatSection& heartbeat);
}  // namespace config_internal

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_CONFIG_HEARTBEAT_H_
