// Bad input ends a daemon at once with status 2 (config) or 1 (environment) and
// a message naming the cause and the fix; never a hang.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <optional>

#include "absl/strings/str_cat.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon_harness.h"

namespace downpour {
namespace {

using ::testing::HasSubstr;

struct Exit {
  int status = -1;
  std::string log;
};

Exit RunToExit(const std::string& name, const std::string& binary,
               std::vector<std::string> args) {
  auto daemon = testing::StartDaemon(name, binary, std::move(args));
  EXPECT_TRUE(daemon.ok()) << daemon.status();
  if (!daemon.ok()) return {};
  const std::optional<int> status = (*daemon)->Wait(absl::Seconds(20));
  EXPECT_TRUE(status.has_value()) << name << " did not exit within 20 s";
  return {status.value_or(-1), (*daemon)->LogTail(10)};
}

TEST(BadInputTest, ConfigErrorsExitWithStatus2AndNameFileLineAndKey) {
  const std::string unknown_key = testing::WriteConfig(
      "unknown.yaml", "training:\n  batch_size: 64\n  batchsize: 32\n");
  const std::string wrong_type =
      testing::WriteConfig("type.yaml", "optimizer:\n  learning_rate: fast\n");
  const std::string malformed =
      testing::WriteConfig("bad.yaml", "model: [1, 2\n");
  struct Case {
    std::string binary, config, expect;
  } cases[] = {
      {"coordinator/coordinator", unknown_key,
       "unknown.yaml:3: unknown key 'training.batchsize'"},
      {"server/ps_server", wrong_type,
       "type.yaml:2: optimizer.learning_rate must be a number"},
      {"worker/ps_worker", malformed, "malformed YAML"},
      {"coordinator/coordinator", testing::TestDir() + "/missing.yaml",
       "not found"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"--config", c.config};
    if (c.binary != "coordinator/coordinator") {
      args.push_back("--index");
      args.push_back("0");
    }
    const Exit exit = RunToExit("daemon", c.binary, args);
    EXPECT_EQ(exit.status, 2) << c.binary << " " << c.config << "\n"
                              << exit.log;
    EXPECT_THAT(exit.log, HasSubstr(c.expect)) << c.binary;
  }
}

TEST(BadInputTest, MissingIndexAndOutOfRangeIndexAreRefused) {
  const std::string config =
      testing::WriteConfig("ok.yaml", testing::LoopbackConfig(1, 1, ""));
  Exit exit = RunToExit("ps", "server/ps_server", {"--config", config});
  EXPECT_EQ(exit.status, 2);
  EXPECT_THAT(exit.log, HasSubstr("--index N is required"));
  exit =
      RunToExit("ps", "server/ps_server", {"--config", config, "--index", "3"});
  EXPECT_EQ(exit.status, 2);
  EXPECT_THAT(exit.log, HasSubstr("lists 1 ps"));
}

TEST(BadInputTest, PortInUseIsAnErrorNotASilentShare) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string taken = absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));
  const std::string config =
      testing::WriteConfig("ok.yaml", testing::LoopbackConfig(1, 1, ""));
  const Exit exit = RunToExit("coordinator", "coordinator/coordinator",
                              {"--config", config, "--listen", taken});
  ::close(fd);
  EXPECT_EQ(exit.status, 1);
  EXPECT_THAT(exit.log, HasSubstr(absl::StrCat("cannot listen on ", taken)));
  EXPECT_THAT(exit.log, HasSubstr("address in use"));
}

TEST(BadInputTest, MissingDataNamesTheFileAndTheFix) {
  const std::string config = testing::WriteConfig(
      "data.yaml",
      testing::LoopbackConfig(1, 1,
                              absl::StrCat("data:\n  source: mnist\n  path: ",
                                           testing::TestDir(), "/nothing\n")));
  const Exit exit = RunToExit("worker", "worker/ps_worker",
                              {"--config", config, "--index", "0"});
  EXPECT_EQ(exit.status, 2);
  EXPECT_THAT(exit.log, HasSubstr("nothing/0.json"));
  EXPECT_THAT(exit.log, HasSubstr("fetch_mnist.sh"));
}

TEST(BadInputTest, WorkerGivesUpOnAnUnreachableCoordinatorWithAMessage) {
  const std::string config = testing::WriteConfig(
      "lonely.yaml", testing::LoopbackConfig(
                         1, 1,
                         "data:\n  source: synthetic\n  train_examples: 100\n"
                         "  test_examples: 10\n") +
                         "");
  // Port 1 on loopback: nothing listens there.
  const Exit exit =
      RunToExit("worker", "worker/ps_worker",
                {"--config", config, "--index", "0", "--coordinator",
                 "127.0.0.1:1", "--set", "rpc.connect_timeout_s=2"});
  EXPECT_EQ(exit.status, 1);
  EXPECT_THAT(exit.log,
              HasSubstr("gave up waiting for the coordinator at 127.0.0.1:1"));
}

TEST(BadInputTest, PsctlSaysWhenTheCoordinatorIsUnreachable) {
  const Exit exit =
      RunToExit("psctl", "tools/psctl",
                {"status", "--coordinator", "127.0.0.1:1", "--timeout_s", "1"});
  EXPECT_EQ(exit.status, 1);
  EXPECT_THAT(exit.log,
              HasSubstr("cannot reach the coordinator at 127.0.0.1:1"));
}

// Issue 12: any bad flag value exits 2 with a message naming the flag; --help
// exits 0. absl alone exits 1 for both.
TEST(BadInputTest, BadFlagValuesExit2NamingTheFlagAndHelpExits0) {
  const std::string config =
      testing::WriteConfig("ok.yaml", testing::LoopbackConfig(1, 1, ""));
  struct Case {
    std::string binary;
    std::vector<std::string> args;
    std::string expect;
  } cases[] = {
      {"server/ps_server",
       {"--config", config, "--index", "abc"},
       "Illegal value 'abc' specified for flag 'index'"},
      {"server/ps_server",
       {"--config", config, "--index", "-4"},
       "--index must be 0 or more"},
      {"server/ps_server",
       {"--config", config, "--index", "0", "--bogus"},
       "Unknown command line flag 'bogus'"},
      {"worker/ps_worker",
       {"--config", config, "--index", "0", "--gpu", "x"},
       "Illegal value 'x' specified for flag 'gpu'"},
      {"worker/ps_worker",
       {"--config", config, "--index", "0", "--device", "tpu"},
       "compute.device must be one of auto, cpu, cuda, simulated; got 'tpu'"},
      {"coordinator/coordinator",
       {"--config", config, "--index", "0"},
       "--index does not apply to the coordinator"},
      {"coordinator/coordinator",
       {"--config", config, "stray"},
       "unexpected argument 'stray'"},
      {"tools/psctl",
       {"--timeout_s", "abc", "status"},
       "Illegal value 'abc' specified for flag 'timeout_s'"},
      {"tools/psctl",
       {"--timeout_s", "-1", "status"},
       "--timeout_s must be in (0, 86400]"},
      {"tools/psctl", {"--count", "-2", "watch"}, "--count must be 0"},
      {"deploy/launcher",
       {"--progress_s", "x"},
       "Illegal value 'x' specified for flag 'progress_s'"},
      {"deploy/launcher",
       {"--accuracy_mark", "2"},
       "--accuracy_mark must be in [0, 1], got 2"},
  };
  for (const Case& c : cases) {
    const Exit exit = RunToExit("bad-flag", c.binary, c.args);
    EXPECT_EQ(exit.status, 2) << c.binary << " " << c.args.back() << "\n"
                              << exit.log;
    EXPECT_THAT(exit.log, HasSubstr(c.expect)) << c.binary;
  }
  for (const char* binary :
       {"server/ps_server", "worker/ps_worker", "coordinator/coordinator",
        "tools/psctl", "deploy/launcher"}) {
    const Exit exit = RunToExit("help", binary, {"--help"});
    EXPECT_EQ(exit.status, 0) << binary << "\n" << exit.log;
  }
}

// An empty config file, or one that never ends, is refused at once.
TEST(BadInputTest, EmptyOrEndlessConfigFileExits2) {
  const std::string empty =
      testing::WriteConfig("empty.yaml", "# nothing here yet\n\n");
  Exit exit =
      RunToExit("ps", "server/ps_server", {"--config", empty, "--index", "0"});
  EXPECT_EQ(exit.status, 2);
  EXPECT_THAT(exit.log, HasSubstr("config file is empty"));
  exit = RunToExit("coordinator", "coordinator/coordinator",
                   {"--config", "/dev/zero"});
  EXPECT_EQ(exit.status, 2);
  EXPECT_THAT(exit.log, HasSubstr("'/dev/zero' is larger than 1048576 bytes"));
}

}  // namespace
}  // namespace downpour
