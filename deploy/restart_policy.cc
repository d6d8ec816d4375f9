// The launcher's restart rules.
#include "deploy/restart_policy.h"

#include <string.h>

#include "absl/strings/str_cat.h"
#include "common/exit_codes.h"

namespace downpour {

std::string DescribeExit(const DaemonExit& exit) {
  if (exit.signal != 0) {
    return absl::StrCat("killed by signal ", exit.signal, " (",
                        strsignal(exit.signal), ")");
  }
  return absl::StrCat("exited with status ", exit.status);
}

RestartDecision DecideRestart(const LauncherSection& policy, DaemonKind kind,
                              const DaemonExit& exit, int restarts,
                              bool free_standby_slot) {
  const bool clean = exit.signal == 0 && exit.status == 0;
  if (kind == DaemonKind::kWorker && clean) return {RestartAction::kFinished, ""};
  if (kind == DaemonKind::kWorker && exit.diverged) {
    return {RestartAction::kDiverged,
            "its training diverged; a restart would diverge again"};
  }
  if (exit.signal == 0 && exit.status == kExitConfig) {
    return {RestartAction::kGiveUp,
            absl::StrCat("not restarted: status ", kExitConfig,
                         " means a bad config, flag or data, which a restart "
                         "cannot fix (see its log)")};
  }
  if (kind == DaemonKind::kPs && exit.signal == 0 && exit.status == kExitReplaced) {
    if (free_standby_slot && policy.restart != RestartMode::kNever &&
        restarts < policy.max_restarts) {
      return {RestartAction::kRestartAsStandby,
              "another daemon serves its shard now"};
    }
    return {RestartAction::kLeaveDown,
            free_standby_slot
                ? "another daemon serves its shard now and the restart "
                  "policy allows no more restarts; left down"
                : "another daemon serves its shard now and no standby slot "
                  "(cluster.standby_ps) is free; left down"};
  }
  if (clean && (kind == DaemonKind::kPs || kind == DaemonKind::kStandby)) {
    return {RestartAction::kLeaveDown,
            "it stood down or was stopped from outside; left down"};
  }
  if (clean) {
    return {RestartAction::kGiveUp,
            "the coordinator was stopped from outside while the job ran"};
  }
  if (policy.restart == RestartMode::kNever) {
    return {RestartAction::kGiveUp, "not restarted: launcher.restart is never"};
  }
  if (restarts >= policy.max_restarts) {
    return {RestartAction::kGiveUp,
            absl::StrCat("gave up after ", restarts,
                         " restarts (launcher.max_restarts is ",
                         policy.max_restarts, ")")};
  }
  return {RestartAction::kRestart, ""};
}

}  // namespace downpour
