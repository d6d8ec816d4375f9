// RunCluster on fake daemons: shell scripts in place of coordinator, ps_server
// and ps_worker, and a FakeClock, so that timeouts and progress periods pass
// without waiting. tests/cluster_test.cc runs it on the real daemons.
#include "deploy/launcher_lib.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/config.h"
#include "common/file_util.h"
#include "common/testing/fake_clock.h"
#include "common/testing/status_matchers.h"
#include "coordinator/cluster_state.h"
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

// Every script starts by exiting 0 on SIGTERM, as the real daemons do.
// Serves until SIGTERM; says it is ready (its handler set) with a file in
// $READY.
constexpr char kServe[] =
    "mktemp -p \"$READY\" >/dev/null\n"
    "sleep 600 & wait\n";
// Writes port 1 (nothing listens there) to --port_file.
constexpr char kWritePort[] =
    "for a; do [ \"$prev\" = --port_file ] && echo 1 > \"$a\"; prev=$a; done\n";
// Exits 0 once the coordinator and both ps are ready, so that they are stopped
// by a SIGTERM they handle.
constexpr char kTrainAndExit[] =
    "while [ $(ls \"$READY\" | wc -l) -lt 3 ]; do sleep 0.01; done\nexit 0\n";

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
    Daemon("worker/ps_worker", kTrainAndExit);
  }

  // Installs a fake daemon binary: a shell script with `body`.
  void Daemon(const std::string& binary, const std::string& body) {
    const fs::path path = fs::path(options_.bin_dir) / binary;
    fs::create_directories(path.parent_path());
    std::ofstream(path) << "#!/bin/sh\ntrap 'kill $! 2>/dev/null; exit 0' TERM\n"
                        << "READY=" << dir_ << "/ready\n"
                        << body;
    chmod(path.c_str(), 0755);
  }

  // A file the previous run left: ps checkpoint `shard`, or the coordinator state.
  std::string Leftover(const std::string& path) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << "old";
    return path;
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
  EXPECT_TRUE(summary->workers.empty()) << "nothing answered at the coordinator's port";
  EXPECT_EQ(summary->summary_path, options_.run_dir + "/summary.json");
  EXPECT_EQ(ReadFile(summary->summary_path).value_or(""), SummaryJson(*summary));
  for (const char* log : {"coordinator", "ps-0", "ps-1", "worker-0"}) {
    EXPECT_TRUE(fs::exists(options_.run_dir + "/logs/" + log + ".log")) << log;
  }
}

TEST_F(LauncherLibTest, ACoordinatorThatNeverListensTimesOutOnTheInjectedClock) {
  Daemon("coordinator/coordinator", kServe);
  options_.startup_timeout = absl::Seconds(20);
  const absl::Time start = clock_.Now();
  const absl::Time real_start = absl::Now();
  EXPECT_THAT(RunCluster(config_, options_),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("did not start listening within 20s")));
  EXPECT_GE(clock_.Now() - start, absl::Seconds(20));
  EXPECT_LT(absl::Now() - real_start, absl::Seconds(10)) << "waited on the wall clock";
}

TEST_F(LauncherLibTest, AFailingWorkerEndsTheRunWithItsLog) {
  Daemon("worker/ps_worker", "echo 'worker: data.path not found' >&2\nexit 2\n");
  EXPECT_THAT(RunCluster(config_, options_),
              StatusIs(absl::StatusCode::kAborted,
                       AllOf(HasSubstr("worker 0 exited with status 2"),
                             HasSubstr("data.path not found"))));
}

TEST_F(LauncherLibTest, AFreshJobForgetsThePreviousRunsCheckpointsAndState) {
  const std::string shard0 = Leftover(server::CheckpointPath(config_.checkpoint.dir, 0));
  const std::string shard1 = Leftover(server::CheckpointPath(config_.checkpoint.dir, 1));
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
  const std::string shard0 = Leftover(server::CheckpointPath(config_.checkpoint.dir, 0));
  const std::string state =
      Leftover(coordinator::StateFilePath(config_.coordinator.state_dir));
  options_.resume = true;
  ASSERT_THAT(RunCluster(config_, options_), IsOk());
  EXPECT_TRUE(fs::exists(shard0));
  EXPECT_TRUE(fs::exists(state));
}

TEST_F(LauncherLibTest, SshModeNeedsFixedPorts) {
  options_.remote = RemoteOptions();
  EXPECT_THAT(RunCluster(config_, options_),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--ssh needs fixed ports, but cluster.coordinator is "
                                 "127.0.0.1:0")));
  config_.cluster.coordinator = "10.0.0.1:7000";
  config_.cluster.ps = {"10.0.0.2:7001", "10.0.0.3:7001"};
  config_.cluster.standby_ps = {"10.0.0.4:0"};  // not started by the launcher
  EXPECT_THAT(RunCluster(config_, options_),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("cluster.workers[0] is 127.0.0.1:0")));
}

}  // namespace
}  // namespace downpour
