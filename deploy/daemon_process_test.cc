#include "deploy/daemon_process.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "absl/time/clock.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour {
namespace {

using ::downpour::testing::IsOk;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ShellQuoteTest, QuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(ShellQuote("--index"), "--index");
  EXPECT_EQ(ShellQuote("/opt/downpour/bin"), "/opt/downpour/bin");
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("$HOME"), "'$HOME'");
}

TEST(RemoteArgvTest, EchoesThePidThenExecsTheDaemon) {
  RemoteOptions remote;
  remote.ssh = {"ssh", "-p", "2222"};
  remote.bin_dir = "/opt/downpour";
  remote.work_dir = "/srv/job one";
  EXPECT_THAT(
      RemoteArgv(remote, "10.0.0.2", "server/ps_server", {"--index", "1"}),
      ElementsAre("ssh", "-p", "2222", "10.0.0.2",
                  "cd '/srv/job one' && echo downpour-pid $$ && exec 3<&0 && "
                  "{ (cat <&3 >/dev/null 2>&1; kill -TERM $$ 2>/dev/null) "
                  ">/dev/null 2>&1 & } && exec "
                  "/opt/downpour/server/ps_server --index 1 3<&-"));
}

// An "ssh" that runs the command here: `fake_ssh HOST COMMAND`.
std::string FakeSsh() {
  const std::string path =
      std::string(std::getenv("TEST_TMPDIR")) + "/fake_ssh";
  std::ofstream(path)
      << "#!/bin/sh\n# fake ssh: ignore the host, run the command here\n"
         "shift\nexec /bin/sh -c \"$1\"\n";
  chmod(path.c_str(), 0755);
  return path;
}

TEST(DaemonProcessTest, RemoteDaemonStopsInOrderThroughItsPid) {
  RemoteOptions remote;
  remote.ssh = {FakeSsh()};
  remote.bin_dir = "/bin";
  const std::string log =
      std::string(std::getenv("TEST_TMPDIR")) + "/remote.log";
  // A "daemon" that finishes cleanly on SIGTERM, as ours do.
  auto daemon =
      DaemonProcess::StartRemote("ps 0", remote, "10.0.0.2", "sh",
                                 {"-c",
                                  "trap 'echo flushed; exit 0' TERM; echo "
                                  "serving; while :; do sleep 0.05; done"},
                                 log);
  ASSERT_THAT(daemon, IsOk());
  EXPECT_TRUE((*daemon)->remote());
  // Wait until it serves, so the pid line is in the log.
  while ((*daemon)->LogTail(5).find("serving") == std::string::npos) {
    ASSERT_FALSE((*daemon)->Wait(absl::Milliseconds(20)).has_value())
        << (*daemon)->LogTail(5);
  }
  EXPECT_EQ((*daemon)->Stop(absl::Seconds(60)), 0);
  EXPECT_THAT((*daemon)->LogTail(5), HasSubstr("flushed"));
  EXPECT_THAT((*daemon)->LogTail(5), HasSubstr("downpour-pid "));
}

// An "ssh" whose remote side outlives it, as a remote host's does: the
// command runs in a session of its own (setsid), with the ssh's stdin (as
// sshd gives it the session's; an async command's stdin is otherwise
// /dev/null, hence the detour through fd 3).
std::string DetachedFakeSsh() {
  const std::string path =
      std::string(std::getenv("TEST_TMPDIR")) + "/detached_ssh";
  std::ofstream(path)
      << "#!/bin/sh\nshift\nexec 3<&0\nsetsid /bin/sh -c \"$1\" <&3 3<&- &\n"
         "exec 3<&-\nwait\n";
  chmod(path.c_str(), 0755);
  return path;
}

// Issue 26: in --ssh mode a launcher killed with SIGKILL leaves no remote
// daemon behind. A forked "launcher" starts a remote daemon that ignores
// nothing of its session (no terminal, its own session) and is killed; the
// daemon ends because its ssh session's stdin does.
TEST(DaemonProcessTest, ARemoteDaemonEndsWhenItsLauncherIsKilled) {
  const std::string dir = std::getenv("TEST_TMPDIR");
  const std::string log = dir + "/orphan.log";
  std::remove(log.c_str());
  const pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    RemoteOptions remote;
    remote.ssh = {DetachedFakeSsh()};
    remote.bin_dir = "/bin";
    auto daemon = DaemonProcess::StartRemote(
        "ps 0", remote, "10.0.0.2", "sh",
        {"-c", "echo serving; while :; do sleep 0.05; done"}, log);
    if (!daemon.ok()) _exit(2);
    for (;;) pause();  // until killed
  }
  // The pid the remote shell echoed ("downpour-pid N") once it serves.
  long pid = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline && pid == 0) {
    std::ifstream in(log);
    std::string word, text((std::istreambuf_iterator<char>(in)),
                           std::istreambuf_iterator<char>());
    std::istringstream words(text);
    bool serving = text.find("serving") != std::string::npos;
    while (serving && words >> word) {
      if (word == "downpour-pid") words >> pid;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_GT(pid, 0) << "the remote daemon never started";
  ASSERT_EQ(kill(static_cast<pid_t>(pid), 0), 0) << "it runs";
  kill(launcher, SIGKILL);
  waitpid(launcher, nullptr, 0);
  bool gone = false;
  const absl::Time end = absl::Now() + absl::Seconds(30);
  while (absl::Now() < end && !gone) {
    gone = kill(static_cast<pid_t>(pid), 0) != 0;
    absl::SleepFor(absl::Milliseconds(20));
  }
  if (!gone) kill(static_cast<pid_t>(pid), SIGKILL);
  EXPECT_TRUE(gone) << "the remote daemon " << pid << " outlived its launcher";
}

TEST(DaemonProcessTest, RemoteExitStatusIsTheDaemons) {
  RemoteOptions remote;
  remote.ssh = {FakeSsh()};
  remote.bin_dir = "/bin";
  auto daemon = DaemonProcess::StartRemote(
      "worker 0", remote, "h", "sh", {"-c", "exit 2"},
      std::string(std::getenv("TEST_TMPDIR")) + "/exit.log");
  ASSERT_THAT(daemon, IsOk());
  EXPECT_EQ((*daemon)->Wait(absl::Seconds(60)), 2);
}

TEST(DaemonProcessTest, LocalDaemon) {
  auto daemon = DaemonProcess::StartLocal(
      "local", {"/bin/sh", "-c", "echo hi; exit 3"},
      std::string(std::getenv("TEST_TMPDIR")) + "/local.log");
  ASSERT_THAT(daemon, IsOk());
  EXPECT_FALSE((*daemon)->remote());
  EXPECT_EQ((*daemon)->Wait(absl::Seconds(60)), 3);
  EXPECT_THAT((*daemon)->LogTail(1), HasSubstr("hi"));
}

}  // namespace
}  // namespace downpour
