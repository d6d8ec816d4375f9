// The `export` section of the config: psctl export's schedule
// (docs/OPERATIONS.md, "Serving while training").
#ifndef DOWNPOUR_COMMON_CONFIG_EXPORT_H_
#define DOWNPOUR_COMMON_CONFIG_EXPORT_H_

#include <vector>

namespace downpour {

// psctl export's schedule (docs/OPERATIONS.md, "Serving while training").
struct ExportSection {
  // Seconds between exports while the job trains; 0 (default): export once.
  double interval_s = 0;
};

// Internal to the config loader (common/config.cc).
namespace config_internal {
struct ConfigField;
// The section's keys bound to `exports`, in docs/CONFIG.md's order.
std::vector<ConfigField> ExportKeys(ExportSection* exports);
}  // namespace config_internal

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_CONFIG_EXPORT_H_
