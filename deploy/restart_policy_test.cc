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
      {"worker done", on_failure, DaemonKind::kWorker, Exited(0), 0,
       RestartAction::kFinished, ""},
      {"worker diverged", on_failure, DaemonKind::kWorker, diverged, 0,
       RestartAction::kDiverged, "diverged"},
      {"worker crashed", on_failure, DaemonKind::kWorker, Exited(1), 0,
       RestartAction::kRestart, ""},
      {"ps kill -9", on_failure, DaemonKind::kPs, Killed(9), 2,
       RestartAction::kRestart, ""},
      {"standby crashed", on_failure, DaemonKind::kStandby, Exited(1), 0,
       RestartAction::kRestart, ""},
      {"coordinator kill -9", on_failure, DaemonKind::kCoordinator, Killed(9),
       0, RestartAction::kRestart, ""},
      {"limit reached", on_failure, DaemonKind::kPs, Killed(9), 3,
       RestartAction::kGiveUp,
       "gave up after 3 restarts (launcher.max_restarts is 3)"},
      {"no restarts allowed", none, DaemonKind::kWorker, Exited(1), 0,
       RestartAction::kGiveUp, "gave up after 0 restarts"},
      {"never", never, DaemonKind::kPs, Killed(9), 0, RestartAction::kGiveUp,
       "launcher.restart is never"},
      {"config error", on_failure, DaemonKind::kWorker, Exited(kExitConfig), 0,
       RestartAction::kGiveUp, "bad config"},
      {"corrupt checkpoint: deterministic, not even a first restart",
       on_failure, DaemonKind::kPs, Exited(kExitConfig), 0,
       RestartAction::kGiveUp, "deterministic refusal"},
      {"refusing coordinator", on_failure, DaemonKind::kCoordinator,
       Exited(kExitConfig), 0, RestartAction::kGiveUp, "cannot fix"},
      {"replaced: restarted with its own flags", on_failure, DaemonKind::kPs,
       Exited(kExitReplaced), 0, RestartAction::kRestart, "rejoins as a spare"},
      {"replaced, restarts used up", on_failure, DaemonKind::kPs,
       Exited(kExitReplaced), 3, RestartAction::kLeaveDown,
       "restarted 3 times (launcher.max_restarts is 3); left down"},
      {"replaced under never", never, DaemonKind::kPs, Exited(kExitReplaced), 0,
       RestartAction::kLeaveDown, "launcher.restart is never; left down"},
      {"worker exit 3 is a crash", on_failure, DaemonKind::kWorker,
       Exited(kExitReplaced), 0, RestartAction::kRestart, ""},
      {"ps stood down", on_failure, DaemonKind::kPs, Exited(0), 0,
       RestartAction::kLeaveDown, "stood down"},
      {"standby stopped", on_failure, DaemonKind::kStandby, Exited(0), 0,
       RestartAction::kLeaveDown, "left down"},
      {"coordinator stopped", on_failure, DaemonKind::kCoordinator, Exited(0),
       0, RestartAction::kGiveUp, "stopped from outside"},
  };
  for (const Case& c : cases) {
    const RestartDecision d =
        DecideRestart(c.policy, c.kind, c.exit, c.restarts);
    EXPECT_EQ(d.action, c.action) << c.name;
    EXPECT_THAT(d.reason, HasSubstr(c.reason)) << c.name;
  }
}

TEST(RestartBackoffTest, DoublesFromTheFirstWaitToTheCap) {
  const LauncherSection policy;  // 0.5 s doubling to 5 s
  const absl::Duration quick = absl::Seconds(1);
  int streak = 0;
  std::vector<absl::Duration> delays;
  for (int i = 0; i < 7; ++i) {
    const RestartBackoff b = NextRestartBackoff(policy, streak, quick);
    delays.push_back(b.delay);
    streak = b.streak;
  }
  EXPECT_THAT(delays, ::testing::ElementsAre(
                          absl::ZeroDuration(), absl::Milliseconds(500),
                          absl::Seconds(1), absl::Seconds(2), absl::Seconds(4),
                          absl::Seconds(5), absl::Seconds(5)));
  EXPECT_EQ(streak, 7);
}

TEST(RestartBackoffTest, ADaemonThatLivedLongStartsOver) {
  const LauncherSection policy;
  const RestartBackoff after_long_life =
      NextRestartBackoff(policy, 4, kRestartBackoffResetAfter);
  EXPECT_EQ(after_long_life.delay, absl::ZeroDuration());
  EXPECT_EQ(after_long_life.streak, 1);
  const RestartBackoff just_short = NextRestartBackoff(
      policy, 4, kRestartBackoffResetAfter - absl::Milliseconds(1));
  EXPECT_EQ(just_short.delay, absl::Seconds(4));  // the 5th in a row
}

TEST(RestartBackoffTest, TheConfigSetsStartAndCapAndZeroRestartsAtOnce) {
  LauncherSection policy;
  policy.restart_backoff_s = 0.25;
  policy.max_restart_backoff_s = 0.6;
  EXPECT_EQ(NextRestartBackoff(policy, 0, absl::ZeroDuration()).delay,
            absl::ZeroDuration());
  EXPECT_EQ(NextRestartBackoff(policy, 1, absl::ZeroDuration()).delay,
            absl::Milliseconds(250));
  EXPECT_EQ(NextRestartBackoff(policy, 2, absl::ZeroDuration()).delay,
            absl::Milliseconds(500));
  EXPECT_EQ(NextRestartBackoff(policy, 3, absl::ZeroDuration()).delay,
            absl::Milliseconds(600));
  EXPECT_EQ(NextRestartBackoff(policy, 1000, absl::ZeroDuration()).delay,
            absl::Milliseconds(600));
  policy.restart_backoff_s = 0;
  EXPECT_EQ(NextRestartBackoff(policy, 9, absl::ZeroDuration()).delay,
            absl::ZeroDuration());
}

TEST(RestartPolicyTest, DescribeExitNamesStatusOrSignal) {
  EXPECT_EQ(DescribeExit(Exited(1)), "exited with status 1");
  EXPECT_EQ(DescribeExit(Killed(9)), "killed by signal 9 (Killed)");
}

}  // namespace
}  // namespace downpour
