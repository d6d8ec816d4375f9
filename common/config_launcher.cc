// The `launcher` section: the restart mode names, the keys and their rule.
#include "common/config_launcher.h"

#include "absl/strings/str_cat.h"
#include "common/config_field.h"

namespace downpour {
namespace config_internal {
namespace {

// The spellings of launcher.restart, the first one the name.
constexpr Choice<RestartMode> kRestartModes[] = {
    {"never", RestartMode::kNever}, {"on-failure", RestartMode::kOnFailure}};

}  // namespace

std::vector<ConfigField> LauncherKeys(LauncherSection* l) {
  return {ChoiceField("launcher.restart", &l->restart, ParseRestartMode,
                      RestartModeName),
          IntField("launcher.max_restarts", &l->max_restarts, Between(0, 1000)),
          DoubleField("launcher.restart_backoff_s", &l->restart_backoff_s,
                      NonNegativeAtMost(3600)),
          DoubleField("launcher.max_restart_backoff_s",
                      &l->max_restart_backoff_s, NonNegativeAtMost(3600)),
          StringListField("launcher.worker_command", &l->worker_command, 64)};
}

absl::Status CheckLauncher(const LauncherSection& launcher) {
  if (!launcher.worker_command.empty() && launcher.worker_command[0].empty()) {
    return absl::InvalidArgumentError(
        "launcher.worker_command: its first entry is the program to run and "
        "may not be empty (e.g. [/usr/bin/python3, train.py])");
  }
  if (launcher.max_restart_backoff_s >= launcher.restart_backoff_s) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "launcher.max_restart_backoff_s (", launcher.max_restart_backoff_s,
      ") must be >= launcher.restart_backoff_s (", launcher.restart_backoff_s,
      "): it caps the wait that starts there"));
}

}  // namespace config_internal

const char* RestartModeName(RestartMode mode) {
  return config_internal::ChoiceName(config_internal::kRestartModes, mode);
}
absl::StatusOr<RestartMode> ParseRestartMode(absl::string_view name) {
  return config_internal::ParseChoice("launcher.restart",
                                      config_internal::kRestartModes, name);
}

}  // namespace downpour
