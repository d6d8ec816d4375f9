// The run folder's lock and the pid file, on real processes (sleep).
#include "deploy/run_dir_guard.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "common/subprocess.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour {
namespace {

namespace fs = std::filesystem;
using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Dir() {
  const fs::path dir =
      fs::path(std::getenv("TEST_TMPDIR")) /
      ::testing::UnitTest::GetInstance()->current_test_info()->name();
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::unique_ptr<Subprocess> Sleeper(const std::string& dir) {
  auto p =
      Subprocess::Start("sleep", {"/bin/sleep", "600"}, dir + "/sleep.log");
  EXPECT_THAT(p, IsOk());
  return *std::move(p);
}

TEST(RunDirGuardTest, ASecondLockOnOneRunDirIsRefusedNamingTheHolder) {
  const std::string dir = Dir();
  ASSERT_THAT(WritePidFile(dir, {{4242, 1, "launcher"}}), IsOk());
  auto first = RunDirLock::Acquire(dir);
  ASSERT_THAT(first, IsOk());
  EXPECT_THAT(
      RunDirLock::Acquire(dir),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               HasSubstr("another launcher (pid 4242) is running on " + dir)));
  first->reset();
  EXPECT_THAT(RunDirLock::Acquire(dir), IsOk()) << "released by the destructor";
}

TEST(RunDirGuardTest, PidFileRoundTripsAndSkipsBadLines) {
  const std::string dir = Dir();
  ASSERT_THAT(WritePidFile(dir, {{10, 20, "ps 0"}, {11, 21, "worker 1"}}),
              IsOk());
  std::vector<PidEntry> read = ReadPidFile(dir);
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(read[1].pid, 11);
  EXPECT_EQ(read[1].start_time, 21u);
  EXPECT_EQ(read[1].name, "worker 1");
  EXPECT_TRUE(ReadPidFile(dir + "/absent").empty());
}

TEST(RunDirGuardTest, StartTimeTellsAProcessFromALaterOneWithItsPid) {
  auto self = ProcessStartTime(::getpid());
  ASSERT_THAT(self, IsOk());
  EXPECT_GT(*self, 0u);
  EXPECT_THAT(ProcessStartTime(0x3fffffff),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST(RunDirGuardTest, StopsLeftoversButNotAReusedPid) {
  const std::string dir = Dir();
  std::unique_ptr<Subprocess> orphan = Sleeper(dir);
  std::unique_ptr<Subprocess> stopped = Sleeper(dir);
  std::unique_ptr<Subprocess> stranger = Sleeper(dir);
  ::kill(stopped->pid(), SIGSTOP);  // a daemon left stopped still goes
  auto start = [](pid_t pid) { return ProcessStartTime(pid).value_or(0); };
  ASSERT_THAT(WritePidFile(
                  dir, {{::getpid(), start(::getpid()), "launcher"},
                        {orphan->pid(), start(orphan->pid()), "ps 0"},
                        {stopped->pid(), start(stopped->pid()), "worker 0"},
                        // The pid was reused: another start time.
                        {stranger->pid(), start(stranger->pid()) + 1, "ps 1"}}),
              IsOk());
  std::vector<PidEntry> gone = StopLeftoverDaemons(dir, absl::Seconds(10));
  std::vector<std::string> names;
  for (const PidEntry& e : gone) names.push_back(e.name);
  EXPECT_THAT(names, ElementsAre("ps 0", "worker 0"));
  EXPECT_EQ(orphan->Wait(absl::Seconds(5)), 128 + SIGTERM);
  EXPECT_EQ(stopped->Wait(absl::Seconds(5)), 128 + SIGTERM);
  EXPECT_FALSE(stranger->Poll().has_value())
      << "someone else's process was signalled";
  EXPECT_FALSE(fs::exists(PidFilePath(dir)));
}

}  // namespace
}  // namespace downpour
