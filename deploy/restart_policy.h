// What the launcher does when a daemon it runs ends: the restart policy
// (launcher.restart, launcher.max_restarts) as a plain function of the daemon's
// kind, how it ended and how often it was restarted, and the backoff before a
// restart (launcher.restart_backoff_s, launcher.max_restart_backoff_s), so
// that every rule has a test without processes.
//
//   RestartDecision d = DecideRestart(config.launcher, DaemonKind::kPs,
//                                     {.status = 137, .signal = 9}, restarts);
//   if (d.action == RestartAction::kRestart) {
//     RestartBackoff b = NextRestartBackoff(config.launcher, streak, lived);
//     streak = b.streak;  // and start it again b.delay from now
//   }
#ifndef DOWNPOUR_DEPLOY_RESTART_POLICY_H_
#define DOWNPOUR_DEPLOY_RESTART_POLICY_H_

#include <string>

#include "absl/time/time.h"
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
  kFinished,   // a worker that exited 0: its training is done
  kDiverged,   // a worker whose training diverged: the job failed
  kRestart,    // start it again with the same role, index and flags
  kLeaveDown,  // the job goes on without it (recorded as a fault)
  kGiveUp,     // the job ends as failed
};

struct RestartDecision {
  RestartAction action = RestartAction::kGiveUp;
  // Why, in words for the progress line and the summary ("launcher.restart is
  // never"); "" for kFinished and for a plain kRestart.
  std::string reason;
};

// "exited with status 1", "killed by signal 9 (Killed)".
std::string DescribeExit(const DaemonExit& exit);

// The rules, in order (docs/OPERATIONS.md, "When a daemon dies"):
// a worker that exits 0 is finished, one that diverged is not restarted; exit
// status 2 (kExitConfig: a deterministic refusal, e.g. a bad config, flag or
// data, or a corrupt checkpoint) gives up at once, a restart would fail the
// same way; a ps that exits 3 (kExitReplaced: another daemon serves its shard
// now) is restarted with its own flags (it rejoins the cluster as a spare),
// counting against policy.max_restarts, and is left down (the job goes on: its
// shard is served) when policy.restart is "never" or the restarts are used up;
// a ps or standby that exits 0 (it stood down, or someone stopped it) is left
// down; a coordinator that exits 0 was stopped from outside and gives up;
// anything else (non-zero, or a signal) is restarted, unless policy.restart is
// "never" or `restarts` (done so far for this daemon) has reached
// policy.max_restarts, which give up.
RestartDecision DecideRestart(const LauncherSection& policy, DaemonKind kind,
                              const DaemonExit& exit, int restarts);

// A daemon that ran at least this long before it ended starts its backoff
// over (NextRestartBackoff): it was not failing in a loop.
inline constexpr absl::Duration kRestartBackoffResetAfter = absl::Seconds(30);

struct RestartBackoff {
  absl::Duration delay;  // how long after the exit to start it again
  int streak = 0;        // pass to the next call for the same daemon
};

// The wait before a restart that DecideRestart allowed: the launcher goes on
// watching the other daemons meanwhile. `streak` is what the previous call
// returned for this daemon (0 before its first restart); `lived` is how long
// it ran before it ended this time. The first restart of a streak is at
// once; the next waits policy.restart_backoff_s, doubled for each earlier
// restart in the streak, at most policy.max_restart_backoff_s (defaults: 0,
// 0.5, 1, 2, 4, 5, 5... s); a daemon that lived kRestartBackoffResetAfter or
// longer starts a new streak. restart_backoff_s 0 restarts at once, always.
RestartBackoff NextRestartBackoff(const LauncherSection& policy, int streak,
                                  absl::Duration lived);

}  // namespace downpour

#endif  // DOWNPOUR_DEPLOY_RESTART_POLICY_H_
