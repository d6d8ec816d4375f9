// The launcher's restart rules.
#include "deploy/restart_policy.h"

#include <string.h>

#include <algorithm>

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
                              const DaemonExit& exit, int restarts) {
  const bool clean = exit.signal == 0 && exit.status == 0;
  if (kind == DaemonKind::kWorker && clean)
    return {RestartAction::kFinished, ""};
  if (kind == DaemonKind::kWorker && exit.diverged) {
    return {RestartAction::kDiverged,
            "its training diverged; a restart would diverge again"};
  }
  if (exit.signal == 0 && exit.status == kExitConfig) {
    return {RestartAction::kGiveUp,
            absl::StrCat("not restarted: status ", kExitConfig,
                         " is a deterministic refusal (a bad config, flag or "
                         "data, a corrupt checkpoint), which a restart cannot "
                         "fix")};
  }
  const bool may_restart =
      policy.restart != RestartMode::kNever && restarts < policy.max_restarts;
  if (kind == DaemonKind::kPs && exit.signal == 0 &&
      exit.status == kExitReplaced) {
    // Its shard is served: the job does not need it back, so running out of
    // restarts leaves it down rather than ending the job.
    if (may_restart) {
      return {RestartAction::kRestart,
              "another daemon serves its shard now; restarted with its own "
              "flags, it rejoins as a spare"};
    }
    return {RestartAction::kLeaveDown,
            policy.restart == RestartMode::kNever
                ? "another daemon serves its shard now and launcher.restart "
                  "is never; left down"
                : absl::StrCat("another daemon serves its shard now and it "
                               "was restarted ",
                               restarts, " times (launcher.max_restarts is ",
                               policy.max_restarts, "); left down")};
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

RestartBackoff NextRestartBackoff(const LauncherSection& policy, int streak,
                                  absl::Duration lived) {
  if (lived >= kRestartBackoffResetAfter) streak = 0;
  // The first death of a streak is restarted at once: a killed ps that comes
  // back quickly rejoins as its shard's backup sooner.
  if (streak == 0) return {absl::ZeroDuration(), 1};
  const absl::Duration max = absl::Seconds(policy.max_restart_backoff_s);
  absl::Duration delay = absl::Seconds(policy.restart_backoff_s);
  for (int i = 1; i < streak && delay < max; ++i) delay *= 2;
  return {std::min(delay, max), streak + 1};
}

}  // namespace downpour
