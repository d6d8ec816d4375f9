// What the launcher does when a daemon it runs ends: the restart policy
// (launcher.restart, launcher.max_restarts) as a plain function of the daemon's
// kind, how it ended and how often it was restarted, so that every rule has a
// test without processes.
//
//   RestartDecision d = DecideRestart(config.launcher, DaemonKind::kPs,
//                                     {.status = 137, .signal = 9}, restarts,
//                                     free_standby_slot);
//   if (d.action == RestartAction::kRestart) ...
#ifndef DOWNPOUR_DEPLOY_RESTART_POLICY_H_
#define DOWNPOUR_DEPLOY_RESTART_POLICY_H_

#include <string>

#include "common/config.h"

namespace downpour {

enum class DaemonKind { kCoordinator, kPs, kStandby, kWorker };

// How a daemon ended.
struct DaemonExit {
  int status = 0;  // exit status; 128 + signal when a signal killed it
  int signal = 0;  // the signal that killed it, 0 when it exited
  // A worker that reported (to the coordinator) that its training diverged.
  bool diverged = false;
};

enum class RestartAction {
  kFinished,          // a worker that exited 0: its training is done
  kDiverged,          // a worker whose training diverged: the job failed
  kRestart,           // start it again with the same role, index and flags
  kRestartAsStandby,  // a replaced ps: start it again as a free standby
  kLeaveDown,         // the job goes on without it (recorded as a fault)
  kGiveUp,            // the job ends as failed
};

struct RestartDecision {
  RestartAction action = RestartAction::kGiveUp;
  // Why, in words for the progress line and the summary ("launcher.restart is
  // never"); "" for kFinished and kRestart.
  std::string reason;
};

// "exited with status 1", "killed by signal 9 (Killed)".
std::string DescribeExit(const DaemonExit& exit);

// The rules, in order (docs/OPERATIONS.md, "When a daemon dies"):
// a worker that exits 0 is finished, one that diverged is not restarted; exit
// status 2 (kExitConfig: bad config, data or flags) gives up, a restart would
// fail the same way; a ps that exits 3 (kExitReplaced: its index is served by
// another daemon) is restarted as a standby when `free_standby_slot` and the
// policy allows another restart, else left down; a ps or standby that exits 0 (it stood down, or someone stopped
// it) is left down; a coordinator that exits 0 was stopped from outside and
// gives up; anything else (non-zero, or a signal) is restarted, unless
// policy.restart is "never" or `restarts` (done so far for this daemon) has
// reached policy.max_restarts, which give up.
RestartDecision DecideRestart(const LauncherSection& policy, DaemonKind kind,
                              const DaemonExit& exit, int restarts,
                              bool free_standby_slot);

}  // namespace downpour

#endif  // DOWNPOUR_DEPLOY_RESTART_POLICY_H_
