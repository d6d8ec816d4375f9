// RunCluster on fake daemons: shell scripts in place of coordinator, ps_server
// and ps_worker, and a FakeClock, so that timeouts and progress periods pass
// without waiting. tests/cluster_test.cc runs it on the real daemons.
#include "deploy/launcher_lib.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/file_util.h"
#include "common/testing/fake_clock.h"
#include "common/testing/status_matchers.h"
#include "coordinator/cluster_state.h"
#include "deploy/run_dir_guard.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/checkpoint.h"

namespace downpour {
namespace {

namespace fs = std::filesystem;
using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

// Every script starts by exiting 0 on SIGTERM, as the real daemons do.
// Serves until SIGTERM; says it is ready (its handler set) with a file in
// $READY.
constexpr char kServe[] =
    "mktemp -p \"$READY\" >/dev/null\n"
    "sleep 600 & wait\n";
// Writes port 1 (nothing listens there) to --port_file.
constexpr char kWritePort[] =
    "for a; do [ \"$prev\" = --port_file ] && echo 1 > \"$a\"; prev=$a; done\n";
// Writes `reason` to --exit_reason_file, as rpc/daemon.h's Die does.
std::string SayWhy(const std::string& reason) {
  return "for a; do [ \"$prev\" = --exit_reason_file ] && echo '" + reason +
         "' > \"$a\"; prev=$a; done\n";
}
// Exits 0 once `daemons` (the coordinator, the ps and the standbys) are
// ready, so that each is stopped by a SIGTERM it handles: one stopped before
// its trap is set exits 143, which the launcher rightly calls a failure.
std::string TrainAndExit(int daemons) {
  return "while [ $(ls \"$READY\" | wc -l) -lt " + std::to_string(daemons) +
         " ]; do sleep 0.01; done\nexit 0\n";
}

class LauncherLibTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(std::getenv("TEST_TMPDIR")) /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/ready");
    config_.path = dir_ + "/job.yaml";
    config_.cluster.coordinator = "127.0.0.1:0";
    config_.cluster.ps = {"127.0.0.1:0", "127.0.0.1:0"};
    config_.cluster.workers = {"127.0.0.1:0"};
    config_.checkpoint.dir = dir_ + "/ckpt";
    config_.coordinator.state_dir = dir_ + "/coordinator";
    config_.explicit_keys = {"checkpoint.dir", "coordinator.state_dir"};
    options_.config_path = config_.path;
    options_.run_dir = dir_ + "/run";
    options_.bin_dir = dir_ + "/bin";
    options_.out = nullptr;
    options_.clock = &clock_;
    // The fake clock runs far ahead of the scripts' real start-up; no timeout
    // unless a test asks for one.
    options_.startup_timeout = absl::InfiniteDuration();
    Daemon("coordinator/coordinator", std::string(kWritePort) + kServe);
    Daemon("server/ps_server", kServe);
    Daemon("worker/ps_worker", TrainAndExit(3));
  }

  // Installs a fake daemon binary: a shell script with `body`.
  void Daemon(const std::string& binary, const std::string& body) {
    const fs::path path = fs::path(options_.bin_dir) / binary;
    fs::create_directories(path.parent_path());
    std::ofstream(path)
        << "#!/bin/sh\ntrap 'kill $! 2>/dev/null; exit 0' TERM\n"
        << "READY=" << dir_ << "/ready\n"
        << body;
    chmod(path.c_str(), 0755);
  }

  // A file the previous run left: ps checkpoint `shard`, or the coordinator
  // state.
  std::string Leftover(const std::string& path) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << "old";
    return path;
  }

  std::string Summary() {
    return ReadFile(options_.run_dir + "/summary.json")
        .value_or("(no summary.json)");
  }
  static int CountOf(const std::string& text, const std::string& part) {
    int n = 0;
    for (size_t at = text.find(part); at != std::string::npos;
         at = text.find(part, at + 1))
      ++n;
    return n;
  }

  std::string dir_;
  Config config_;
  LaunchOptions options_;
  FakeClock clock_;
};

TEST_F(LauncherLibTest, RunsUntilTheWorkersExitAndWritesTheSummary) {
  absl::StatusOr<LaunchSummary> summary = RunCluster(config_, options_);
  ASSERT_THAT(summary, IsOk());
  EXPECT_FALSE(summary->interrupted);
  EXPECT_TRUE(summary->workers.empty())
      << "nothing answered at the coordinator's port";
  EXPECT_EQ(summary->summary_path, options_.run_dir + "/summary.json");
  EXPECT_EQ(ReadFile(summary->summary_path).value_or(""),
            SummaryJson(*summary));
  for (const char* log : {"coordinator", "ps-0", "ps-1", "worker-0"}) {
    EXPECT_TRUE(fs::exists(options_.run_dir + "/logs/" + log + ".log")) << log;
  }
}

TEST_F(LauncherLibTest,
       ACoordinatorThatNeverListensTimesOutOnTheInjectedClock) {
  Daemon("coordinator/coordinator", kServe);
  options_.startup_timeout = absl::Seconds(20);
  const absl::Time start = clock_.Now();
  const absl::Time real_start = absl::Now();
  EXPECT_THAT(RunCluster(config_, options_),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("did not start listening within 20s")));
  EXPECT_GE(clock_.Now() - start, absl::Seconds(20));
  EXPECT_LT(absl::Now() - real_start, absl::Seconds(10))
      << "waited on the wall clock";
}

TEST_F(LauncherLibTest, AFailingWorkerEndsTheRunWithItsLog) {
  Daemon("worker/ps_worker",
         "echo 'worker: data.path not found' >&2\nexit 2\n");
  EXPECT_THAT(RunCluster(config_, options_),
              StatusIs(absl::StatusCode::kAborted,
                       AllOf(HasSubstr("worker 0 exited with status 2"),
                             HasSubstr("data.path not found"),
                             HasSubstr("a restart cannot fix"))));
  // Not restarted (a config error), and the summary is there all the same.
  EXPECT_THAT(Summary(),
              AllOf(HasSubstr("\"outcome\": \"failed: worker 0 exited "
                              "with status 2"),
                    HasSubstr("\"action\": \"gave up\"")));
}

TEST_F(LauncherLibTest, ACrashedPsIsRestartedWithTheSameFlags) {
  // The first start crashes; the restart serves.
  Daemon("server/ps_server", "echo \"$@\" >> " + dir_ +
                                 "/ps-args\n"
                                 "case \"$*\" in *'--index 0'*) [ -e " +
                                 dir_ +
                                 "/crashed ] || "
                                 "{ touch " +
                                 dir_ + "/crashed; exit 1; } ;; esac\n" +
                                 kServe);
  absl::StatusOr<LaunchSummary> summary = RunCluster(config_, options_);
  ASSERT_THAT(summary, IsOk());
  EXPECT_EQ(summary->outcome, "succeeded");
  ASSERT_EQ(summary->faults.size(), 1u);
  EXPECT_EQ(summary->faults[0].daemon, "ps 0");
  EXPECT_EQ(summary->faults[0].what, "exited with status 1");
  EXPECT_EQ(summary->faults[0].action, "restarted");
  std::vector<std::string> starts = absl::StrSplit(
      ReadFile(dir_ + "/ps-args").value_or(""), '\n', absl::SkipEmpty());
  int ps0 = 0;
  for (const std::string& args : starts)
    ps0 += absl::StrContains(args, "--index 0");
  EXPECT_EQ(ps0, 2);
  EXPECT_THAT(Summary(),
              HasSubstr("\"recovery\": \"the job saw 1 fault: ps 0"));
}

TEST_F(LauncherLibTest, RestartsRunOutAndTheJobFailsWithASummary) {
  Daemon("server/ps_server", "case \"$*\" in *'--index 1'*) exit 1 ;; esac\n" +
                                 std::string(kServe));
  Daemon("worker/ps_worker", kServe);
  config_.launcher.max_restarts = 2;
  EXPECT_THAT(RunCluster(config_, options_),
              StatusIs(absl::StatusCode::kAborted,
                       AllOf(HasSubstr("ps 1 exited with status 1"),
                             HasSubstr("gave up after 2 restarts"))));
  const std::string json = Summary();
  EXPECT_THAT(json,
              HasSubstr("\"outcome\": \"failed: ps 1 exited with status 1"));
  EXPECT_EQ(CountOf(json, "\"action\": \"restarted\""), 2) << json;
  EXPECT_EQ(CountOf(json, "\"action\": \"gave up\""), 1) << json;
}

TEST_F(LauncherLibTest, RestartNeverEndsTheJobAtTheFirstDeath) {
  Daemon("server/ps_server", "case \"$*\" in *'--index 1'*) exit 1 ;; esac\n" +
                                 std::string(kServe));
  Daemon("worker/ps_worker", kServe);
  config_.launcher.restart = RestartMode::kNever;
  EXPECT_THAT(RunCluster(config_, options_),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("launcher.restart is never")));
  EXPECT_EQ(CountOf(Summary(), "\"action\""), 1);
}

TEST_F(LauncherLibTest, StandbysStartAfterThePs) {
  config_.cluster.standby_ps = {"127.0.0.1:0"};
  // The three ps scripts run side by side, so the order of their lines in
  // ps-args is the scheduler's, not the launcher's. The launcher names each
  // daemon in its pid file, with the clock tick it was forked in, after it
  // forks it and before it starts the next: the standby waits until the file
  // names it (the launcher may not have written it yet when the script
  // runs), then copies it.
  const std::string pids = PidFilePath(options_.run_dir);
  Daemon("server/ps_server", "echo \"$@\" >> " + dir_ +
                                 "/ps-args\n"
                                 "case \"$*\" in *--standby*)\n"
                                 "  until grep -q ' standby 0$' " +
                                 pids +
                                 "; do sleep 0.01; done\n"
                                 "  mkdir " +
                                 dir_ + "/at-standby && cp " + pids + " " +
                                 dir_ + "/at-standby ;;\nesac\n" + kServe);
  Daemon("worker/ps_worker", TrainAndExit(4));
  ASSERT_THAT(RunCluster(config_, options_), IsOk());
  const std::string args = ReadFile(dir_ + "/ps-args").value_or("");
  EXPECT_EQ(CountOf(args, "\n"), 3) << args;
  EXPECT_EQ(CountOf(args, "--standby --index 0 --coordinator 127.0.0.1:1\n"), 1)
      << args;
  // Forked in this order: by start tick, then by pid within one tick.
  std::map<std::string, std::pair<unsigned long long, pid_t>> forked;
  for (const PidEntry& e : ReadPidFile(dir_ + "/at-standby")) {
    forked[e.name] = {e.start_time, e.pid};
  }
  ASSERT_EQ(forked.count("standby 0"), 1u);
  for (const char* ps : {"ps 0", "ps 1"}) {
    ASSERT_EQ(forked.count(ps), 1u)
        << ps << " was not started before the standby";
    EXPECT_LT(forked[ps], forked["standby 0"]) << ps;
  }
  EXPECT_TRUE(fs::exists(options_.run_dir + "/logs/standby-0.log"));
}

TEST_F(LauncherLibTest, AReplacedPsIsRestartedWithItsOwnFlags) {
  config_.cluster.standby_ps = {"127.0.0.1:0"};
  // ps 0 learns once that another daemon serves its shard (exit 3); started
  // again as ps 0 (not as the standby), it would rejoin as a spare.
  Daemon("server/ps_server", "echo \"$@\" >> " + dir_ +
                                 "/ps-args\n"
                                 "case \"$*\" in\n"
                                 "  *--standby*) ;;\n"
                                 "  *'--index 0'*) [ -e " +
                                 dir_ + "/replaced ] || { touch " + dir_ +
                                 "/replaced; exit 3; } ;;\n"
                                 "esac\n" +
                                 std::string(kServe));
  const std::string ps0_starts =
      "$(grep -v standby " + dir_ + "/ps-args | grep -c -- '--index 0')";
  // Waits for ps 0's second start, at most 10 s: a launcher that never
  // restarts it then fails the checks below instead of hanging the test.
  Daemon("worker/ps_worker",
         "end=$(($(date +%s) + 10))\n"
         "while [ " +
             ps0_starts +
             " -lt 2 ] && [ $(date +%s) -lt $end ]; do\n"
             "  sleep 0.01; done\nexit 0\n");
  absl::StatusOr<LaunchSummary> summary = RunCluster(config_, options_);
  ASSERT_THAT(summary, IsOk());
  ASSERT_EQ(summary->faults.size(), 1u);
  EXPECT_EQ(summary->faults[0].daemon, "ps 0");
  EXPECT_EQ(summary->faults[0].what, "exited with status 3");
  EXPECT_EQ(summary->faults[0].action, "restarted");
  EXPECT_THAT(summary->faults[0].reason, HasSubstr("rejoins as a spare"));
  const std::string args = ReadFile(dir_ + "/ps-args").value_or("");
  EXPECT_EQ(CountOf(args, "--standby"), 1) << "the standby was not restarted:\n"
                                           << args;
  EXPECT_EQ(summary->outcome, "succeeded");
}

TEST_F(LauncherLibTest, ARefusingPsIsNotRestartedAndTheSummaryGivesItsReason) {
  const std::string reason =
      "checkpoint /ckpt/ps-1/e1-g2.ckpt is corrupt (checksum mismatch); move "
      "it away to start from fresh parameters, or restore a good copy";
  Daemon("server/ps_server",
         "echo \"$@\" >> " + dir_ +
             "/ps-args\n"
             "case \"$*\" in *'--index 1'*)\n" +
             SayWhy(reason) + "  echo \"ps 1: $(cat " + options_.run_dir +
             "/logs/ps-1.reason)\" >&2; exit 2 ;;\nesac\n" + kServe);
  Daemon("worker/ps_worker", kServe);
  const absl::Status status = RunCluster(config_, options_).status();
  ASSERT_THAT(status, StatusIs(absl::StatusCode::kAborted));
  const std::string message(status.message());
  const std::string first_line = message.substr(0, message.find('\n'));
  EXPECT_THAT(first_line, AllOf(HasSubstr("ps 1 exited with status 2 after "),
                                HasSubstr(" s: " + reason)));
  // The launcher's own explanation stays below it.
  EXPECT_THAT(message, AllOf(HasSubstr("the end of its log (" +
                                       options_.run_dir + "/logs/ps-1.log):"),
                             HasSubstr("deterministic refusal")));
  const std::string json = Summary();
  EXPECT_THAT(json,
              HasSubstr("\"failure\": \"ps 1 exited with status 2 after "));
  EXPECT_THAT(json,
              HasSubstr("\"outcome\": \"failed: ps 1 exited with status 2"));
  EXPECT_EQ(CountOf(json, reason), 2) << "in failure and outcome:\n" << json;
  EXPECT_EQ(CountOf(json, "\"action\": \"gave up\""), 1) << json;
  EXPECT_EQ(CountOf(json, "\"action\""), 1) << "no restart:\n" << json;
  const std::string args = ReadFile(dir_ + "/ps-args").value_or("");
  EXPECT_EQ(CountOf(args, "--index 1"), 1) << args;
  EXPECT_EQ(CountOf(args, "--exit_reason_file " + options_.run_dir +
                              "/logs/ps-1.reason "),
            1)
      << args;
}

TEST_F(LauncherLibTest, WithoutAReasonTheFailureIsTheLastLineOfItsLog) {
  // The first start gives a reason and exits 1; its restart gives none: the
  // first one's reason must not be taken for it.
  Daemon("server/ps_server",
         "case \"$*\" in *'--index 1'*)\n"
         "  if [ -e " +
             dir_ +
             "/failed-once ]; then\n"
             "    echo 'ps 1: no reason file this time' >&2; exit 1\n"
             "  fi\n"
             "  touch " +
             dir_ + "/failed-once\n" + SayWhy("the first failure") +
             "  exit 1 ;;\nesac\n" + kServe);
  Daemon("worker/ps_worker", kServe);
  config_.launcher.max_restarts = 1;
  const absl::Status status = RunCluster(config_, options_).status();
  const std::string message(status.message());
  EXPECT_THAT(message.substr(0, message.find('\n')),
              AllOf(HasSubstr("ps 1 exited with status 1 after "),
                    HasSubstr("s; its log (" + options_.run_dir +
                              "/logs/ps-1.log) ends: ps 1: no reason file "
                              "this time")));
  EXPECT_THAT(message, Not(HasSubstr("the first failure")));
  EXPECT_THAT(Summary(),
              HasSubstr("\"failure\": \"ps 1 exited with status 1 after "));
}

// A FakeClock that stands still once `frozen()` is true: SleepFor then waits
// a real millisecond and moves nothing.
class FreezingClock final : public Clock {
 public:
  explicit FreezingClock(std::function<bool()> frozen)
      : frozen_(std::move(frozen)) {}
  absl::Time Now() override { return clock_.Now(); }
  void SleepFor(absl::Duration duration) override {
    if (frozen_()) {
      absl::SleepFor(absl::Milliseconds(1));
    } else {
      clock_.SleepFor(duration);
    }
  }
  bool WaitForNotificationWithTimeout(absl::Notification* notification,
                                      absl::Duration timeout) override {
    return clock_.WaitForNotificationWithTimeout(notification, timeout);
  }

 private:
  FakeClock clock_;
  const std::function<bool()> frozen_;
};

TEST_F(LauncherLibTest, ARestartWaitsOutItsBackoffWhileTheOthersAreWatched) {
  // ps 1 crashes, is restarted at once, and crashes again; from then on no
  // time passes, so its second restart (0.5 s later) never comes due, while
  // the worker, which exits once the launcher has reaped ps 1 (kill -0 fails
  // on its pid; a zombie would still answer), is seen to finish and the job
  // ends.
  const std::string once = dir_ + "/crashed-once";
  const std::string crashed = dir_ + "/crashed";
  const std::string pid = dir_ + "/ps-1.pid";
  FreezingClock clock([crashed] { return fs::exists(crashed); });
  options_.clock = &clock;
  Daemon("server/ps_server", "echo \"$@\" >> " + dir_ +
                                 "/ps-args\n"
                                 "case \"$*\" in *'--index 1'*) echo $$ > " +
                                 pid + "; if [ -e " + once + " ]; then touch " +
                                 crashed + "; else touch " + once +
                                 "; fi; exit 1 ;; esac\n" + kServe);
  Daemon("worker/ps_worker",
         "while [ ! -e " + crashed + " ] || kill -0 $(cat " + pid +
             ") 2>/dev/null; do\n  sleep 0.01; done\nexit 0\n");
  absl::StatusOr<LaunchSummary> summary = RunCluster(config_, options_);
  ASSERT_THAT(summary, IsOk());
  EXPECT_EQ(CountOf(ReadFile(dir_ + "/ps-args").value_or(""), "--index 1"), 2)
      << "the first restart is at once; the second waits its backoff";
  ASSERT_EQ(summary->faults.size(), 2u);
  EXPECT_EQ(summary->faults[0].action, "restarted");
  EXPECT_EQ(summary->faults[1].daemon, "ps 1");
  EXPECT_EQ(summary->faults[1].action, "left down");
  EXPECT_THAT(summary->faults[1].reason, HasSubstr("waited out its backoff"));
}

TEST_F(LauncherLibTest, TheBackoffDoublesForADaemonThatKeepsFailing) {
  Daemon("server/ps_server", "case \"$*\" in *'--index 1'*) exit 1 ;; esac\n" +
                                 std::string(kServe));
  Daemon("worker/ps_worker", kServe);
  const std::string progress = dir_ + "/progress.txt";
  std::FILE* out = std::fopen(progress.c_str(), "w");
  ASSERT_NE(out, nullptr);
  options_.out = out;
  const absl::Status status = RunCluster(config_, options_).status();
  std::fclose(out);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kAborted,
                               HasSubstr("gave up after 3 restarts")));
  const std::string text = ReadFile(progress).value_or("");
  EXPECT_THAT(text, AllOf(HasSubstr("ps 1 exited with status 1; restarting it "
                                    "(restart 1 of 3)"),
                          HasSubstr("restarting it in 500ms (restart 2 of 3)"),
                          HasSubstr("restarting it in 1s (restart 3 of 3)")))
      << text;
  // Each restart came at least its backoff after the exit, on the clock.
  absl::StatusOr<std::string> json =
      ReadFile(options_.run_dir + "/summary.json");
  ASSERT_THAT(json, IsOk());
  std::vector<double> times;
  for (absl::string_view at : absl::StrSplit(*json, "\"time_s\": ")) {
    double t = 0;
    if (absl::SimpleAtod(at.substr(0, at.find(',')), &t)) times.push_back(t);
  }
  ASSERT_EQ(times.size(), 4u) << *json;
  EXPECT_GE(times[2] - times[1], 0.5);
  EXPECT_GE(times[3] - times[2], 1.0);
}

TEST_F(LauncherLibTest, AJobsStateGoesUnderItsRunDirUnlessTheConfigSetsIt) {
  config_.explicit_keys.clear();
  Daemon("server/ps_server",
         "echo \"$@\" >> " + dir_ + "/ps-args\n" + std::string(kServe));
  const std::string old =
      Leftover(server::CheckpointPath(options_.run_dir + "/checkpoints", 0));
  absl::StatusOr<LaunchSummary> summary = RunCluster(config_, options_);
  ASSERT_THAT(summary, IsOk());
  EXPECT_FALSE(fs::exists(old))
      << "a fresh job forgets the run dir's checkpoints";
  EXPECT_EQ(summary->checkpoint_dir, options_.run_dir + "/checkpoints");
  EXPECT_THAT(ReadFile(dir_ + "/ps-args").value_or(""),
              HasSubstr("checkpoint.dir=" + options_.run_dir +
                        "/checkpoints,coordinator.state_dir=" +
                        options_.run_dir + "/coordinator"));
  config_.explicit_keys = {"checkpoint.dir"};
  EXPECT_THAT(JobStateOverrides(config_, options_),
              ::testing::ElementsAre("coordinator.state_dir=" +
                                     options_.run_dir + "/coordinator"));
  options_.remote = RemoteOptions();
  EXPECT_TRUE(JobStateOverrides(config_, options_).empty());
}

TEST_F(LauncherLibTest, ASecondLauncherOnOneRunDirIsRefusedAndWritesNothing) {
  auto lock = RunDirLock::Acquire(options_.run_dir);
  ASSERT_THAT(lock, IsOk());
  EXPECT_THAT(RunCluster(config_, options_),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("another launcher")));
  EXPECT_FALSE(fs::exists(options_.run_dir + "/summary.json"));
  EXPECT_FALSE(fs::exists(options_.run_dir + "/logs"));
}

TEST_F(LauncherLibTest, AnInterruptedJobSaysSo) {
  Daemon("worker/ps_worker", kServe);
  // Ctrl-C once every daemon runs (coordinator, 2 ps, the worker): one
  // stopped before its script set its trap would exit 143, a failure.
  const std::string ready = dir_ + "/ready";
  options_.interrupted = [ready] {
    return std::distance(fs::directory_iterator(ready),
                         fs::directory_iterator()) >= 4;
  };
  absl::StatusOr<LaunchSummary> summary = RunCluster(config_, options_);
  ASSERT_THAT(summary, IsOk());
  EXPECT_THAT(Summary(), HasSubstr("\"outcome\": \"interrupted\""));
  EXPECT_FALSE(fs::exists(PidFilePath(options_.run_dir)))
      << "removed at the end";
}

TEST_F(LauncherLibTest, AFreshJobForgetsThePreviousRunsCheckpointsAndState) {
  const std::string shard0 =
      Leftover(server::CheckpointPath(config_.checkpoint.dir, 0));
  const std::string shard1 =
      Leftover(server::CheckpointPath(config_.checkpoint.dir, 1));
  const std::string generations =
      server::ShardCheckpointDir(config_.checkpoint.dir, 1);
  Leftover(generations + "/" + server::GenerationFileName(3, 7));
  const std::string state =
      Leftover(coordinator::StateFilePath(config_.coordinator.state_dir));
  const std::string other = Leftover(config_.checkpoint.dir + "/notes.txt");
  ASSERT_THAT(RunCluster(config_, options_), IsOk());
  EXPECT_FALSE(fs::exists(shard0));
  EXPECT_FALSE(fs::exists(shard1));
  EXPECT_FALSE(fs::exists(generations));
  EXPECT_FALSE(fs::exists(state));
  EXPECT_TRUE(fs::exists(other)) << "only the files the daemons own go";
}

TEST_F(LauncherLibTest, AResumedJobKeepsThem) {
  const std::string shard0 =
      Leftover(server::CheckpointPath(config_.checkpoint.dir, 0));
  const std::string state =
      Leftover(coordinator::StateFilePath(config_.coordinator.state_dir));
  options_.resume = true;
  ASSERT_THAT(RunCluster(config_, options_), IsOk());
  EXPECT_TRUE(fs::exists(shard0));
  EXPECT_TRUE(fs::exists(state));
}

TEST_F(LauncherLibTest, SshModeNeedsFixedPorts) {
  options_.remote = RemoteOptions();
  EXPECT_THAT(
      RunCluster(config_, options_),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("--ssh needs fixed ports, but cluster.coordinator is "
                         "127.0.0.1:0")));
  config_.cluster.coordinator = "10.0.0.1:7000";
  config_.cluster.ps = {"10.0.0.2:7001", "10.0.0.3:7001"};
  config_.cluster.standby_ps = {"10.0.0.4:0"};  // started by the launcher too
  EXPECT_THAT(RunCluster(config_, options_),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("cluster.standby_ps[0] is 10.0.0.4:0")));
  config_.cluster.standby_ps = {"10.0.0.4:7001"};
  EXPECT_THAT(RunCluster(config_, options_),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("cluster.workers[0] is 127.0.0.1:0")));
}

}  // namespace
}  // namespace downpour
