// The restart rules, one row per case.
#include "deploy/restart_policy.h"

#include <vector>

#include "common/exit_codes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour {
namespace {

using ::testing::HasSubstr;

DaemonExit Exited(int status) { return {status, 0, false}; }
DaemonExit Killed(int signal) { return {128 + signal, signal, false}; }

struct Case {
  const char* name;
  LauncherSection policy;
  DaemonKind kind;
  DaemonExit exit;
  int restarts;
  bool free_standby_slot;
  RestartAction action;
  const char* reason;  // substring of the reason
};

TEST(RestartPolicyTest, EachRule) {
  const LauncherSection on_failure;  // on-failure, 3 restarts
  LauncherSection never;
  never.restart = RestartMode::kNever;
  LauncherSection none;
  none.max_restarts = 0;
  const DaemonExit diverged = {1, 0, true};
  const std::vector<Case> cases = {
      {"worker done", on_failure, DaemonKind::kWorker, Exited(0), 0, false,
       RestartAction::kFinished, ""},
      {"worker diverged", on_failure, DaemonKind::kWorker, diverged, 0, false,
       RestartAction::kDiverged, "diverged"},
      {"worker crashed", on_failure, DaemonKind::kWorker, Exited(1), 0, false,
       RestartAction::kRestart, ""},
      {"ps kill -9", on_failure, DaemonKind::kPs, Killed(9), 2, false,
       RestartAction::kRestart, ""},
      {"standby crashed", on_failure, DaemonKind::kStandby, Exited(1), 0, false,
       RestartAction::kRestart, ""},
      {"coordinator kill -9", on_failure, DaemonKind::kCoordinator, Killed(9), 0,
       false, RestartAction::kRestart, ""},
      {"limit reached", on_failure, DaemonKind::kPs, Killed(9), 3, false,
       RestartAction::kGiveUp, "gave up after 3 restarts (launcher.max_restarts is 3)"},
      {"no restarts allowed", none, DaemonKind::kWorker, Exited(1), 0, false,
       RestartAction::kGiveUp, "gave up after 0 restarts"},
      {"never", never, DaemonKind::kPs, Killed(9), 0, false,
       RestartAction::kGiveUp, "launcher.restart is never"},
      {"config error", on_failure, DaemonKind::kWorker, Exited(kExitConfig), 0,
       false, RestartAction::kGiveUp, "bad config"},
      {"replaced, slot free", on_failure, DaemonKind::kPs, Exited(kExitReplaced),
       0, true, RestartAction::kRestartAsStandby, "serves its shard"},
      {"replaced, no slot", on_failure, DaemonKind::kPs, Exited(kExitReplaced), 0,
       false, RestartAction::kLeaveDown, "no standby slot"},
      {"replaced under never", never, DaemonKind::kPs, Exited(kExitReplaced),
       0, true, RestartAction::kLeaveDown, "left down"},
      {"worker exit 3 is a crash", on_failure, DaemonKind::kWorker,
       Exited(kExitReplaced), 0, true, RestartAction::kRestart, ""},
      {"ps stood down", on_failure, DaemonKind::kPs, Exited(0), 0, false,
       RestartAction::kLeaveDown, "stood down"},
      {"standby stopped", on_failure, DaemonKind::kStandby, Exited(0), 0, false,
       RestartAction::kLeaveDown, "left down"},
      {"coordinator stopped", on_failure, DaemonKind::kCoordinator, Exited(0), 0,
       false, RestartAction::kGiveUp, "stopped from outside"},
  };
  for (const Case& c : cases) {
    const RestartDecision d =
        DecideRestart(c.policy, c.kind, c.exit, c.restarts, c.free_standby_slot);
    EXPECT_EQ(d.action, c.action) << c.name;
    EXPECT_THAT(d.reason, HasSubstr(c.reason)) << c.name;
  }
}

TEST(RestartPolicyTest, DescribeExitNamesStatusOrSignal) {
  EXPECT_EQ(DescribeExit(Exited(1)), "exited with status 1");
  EXPECT_EQ(DescribeExit(Killed(9)), "killed by signal 9 (Killed)");
}

}  // namespace
}  // namespace downpour
