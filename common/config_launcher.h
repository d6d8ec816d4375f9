// The `launcher` section of the config: what the launcher does when a daemon
// it runs dies.
#ifndef DOWNPOUR_COMMON_CONFIG_LAUNCHER_H_
#define DOWNPOUR_COMMON_CONFIG_LAUNCHER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace downpour {

// launcher.restart (Name and Parse as config.h describes for every choice).
enum class RestartMode { kNever, kOnFailure };
const char* RestartModeName(RestartMode mode);
absl::StatusOr<RestartMode> ParseRestartMode(absl::string_view name);

struct LauncherSection {
  // What the launcher does when a daemon it runs dies: "on-failure" restarts a
  // ps, standby, worker or the coordinator that exits non-zero or is killed by
  // a signal (with the same role, index and flags); "never" ends the job
  // instead. Default kOnFailure.
  RestartMode restart = RestartMode::kOnFailure;
  // Restarts per daemon before the launcher gives up and ends the job, >= 0.
  // Default 3.
  int max_restarts = 3;
  // Seconds the launcher waits before restarting a daemon, doubling for each
  // restart in a row of one that lived less than 30 s, in [0, 3600]; 0 =
  // restart at once. Other daemons are watched meanwhile. Default 0.5.
  double restart_backoff_s = 0.5;
  // The most it waits, in [restart_backoff_s, 3600]. Default 5.
  double max_restart_backoff_s = 5;
  // The command the launcher runs for each worker slot instead of
  // worker/ps_worker (a Python worker: [/usr/bin/python3, train.py]), with
  // the flags it gives ps_worker appended. Empty (the default): ps_worker.
  // At most 64 entries; the first may not be empty.
  std::vector<std::string> worker_command;
};

// Internal to the config loader (common/config.cc).
namespace config_internal {
struct ConfigField;
// The section's keys bound to `launcher`, in docs/CONFIG.md's order.
std::vector<ConfigField> LauncherKeys(LauncherSection* launcher);
// InvalidArgument unless max_restart_backoff_s >= restart_backoff_s.
absl::Status CheckLauncher(const LauncherSection& launcher);
}  // namespace config_internal

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_CONFIG_LAUNCHER_H_
