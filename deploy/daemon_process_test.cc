#include "deploy/daemon_process.h"

#include <signal.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour {
namespace {

using ::downpour::testing::IsOk;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(HostOfTest, Forms) {
  EXPECT_EQ(HostOf("10.0.0.2:7001"), "10.0.0.2");
  EXPECT_EQ(HostOf("ps-0.example.org:7001"), "ps-0.example.org");
  EXPECT_EQ(HostOf("[::1]:7000"), "::1");
  EXPECT_EQ(HostOf("host"), "host");
}

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
                  "cd '/srv/job one' && echo downpour-pid $$ && exec "
                  "/opt/downpour/server/ps_server --index 1"));
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
