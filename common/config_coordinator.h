// The `coordinator` section of the config: what the coordinator keeps on disk
// and in memory about the cluster.
#ifndef DOWNPOUR_COMMON_CONFIG_COORDINATOR_H_
#define DOWNPOUR_COMMON_CONFIG_COORDINATOR_H_

#include <string>
#include <vector>

namespace downpour {

struct CoordinatorSection {
  // Folder where the coordinator keeps membership and placement (atomic
  // writes), reloaded when it restarts. "" = keep nothing. Default
  // "run/coordinator".
  std::string state_dir = "run/coordinator";
  // How many samples of the cluster's figures the coordinator keeps for
  // `psctl plot` and `psctl watch`, >= 1. Default 3600.
  int history_size = 3600;
  // Seconds between history samples, > 0. Default 1.
  double history_interval_s = 1.0;
};

// Internal to the config loader (common/config.cc).
namespace config_internal {
struct ConfigField;
// The section's keys bound to `coordinator`, in docs/CONFIG.md's order.
std::vector<ConfigField> CoordinatorKeys(CoordinatorSection* coordinator);
}  // namespace config_internal

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_CONFIG_COORDINATOR_H_
