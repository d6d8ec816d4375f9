// The `launcher` section (common/config_launcher.h): its keys, defaults and
// the errors of bad values.
#include <string>

#include "common/config.h"
#include "common/config_test_util.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour {
namespace {

using config_testing::ExpectAllFail;
using config_testing::Parse;
using ::downpour::testing::IsOk;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(LauncherConfigTest, RestartPolicyIsReadAndChecked) {
  absl::StatusOr<Config> defaults = Parse("");
  ASSERT_THAT(defaults, IsOk());
  EXPECT_EQ(defaults->launcher.restart, RestartMode::kOnFailure);
  EXPECT_EQ(defaults->launcher.max_restarts, 3);
  EXPECT_EQ(defaults->launcher.restart_backoff_s, 0.5);
  EXPECT_EQ(defaults->launcher.max_restart_backoff_s, 5);
  absl::StatusOr<Config> config = Parse(
      "launcher:\n  restart: never\n  max_restarts: 0\n"
      "  restart_backoff_s: 0\n  max_restart_backoff_s: 0\n");
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->launcher.restart, RestartMode::kNever);
  EXPECT_EQ(config->launcher.max_restarts, 0);
  EXPECT_EQ(config->launcher.restart_backoff_s, 0);
  EXPECT_EQ(config->launcher.max_restart_backoff_s, 0);
  ExpectAllFail({
      {"launcher:\n  restart: always\n",
       "cfg.yaml:2: launcher.restart must be one of never, on-failure"},
      {"launcher:\n  max_restarts: -1\n", "cfg.yaml:2: launcher.max_restarts"},
      {"launcher:\n  restart_backoff_s: -1\n",
       "cfg.yaml:2: launcher.restart_backoff_s"},
      {"launcher:\n  max_restart_backoff_s: 3601\n",
       "cfg.yaml:2: launcher.max_restart_backoff_s"},
      {"launcher:\n  restart_backoff_s: 10\n",
       "launcher.max_restart_backoff_s (5) must be >= "
       "launcher.restart_backoff_s (10)"},
      {"launcher:\n  restarts: 2\n",
       "unknown key 'launcher.restarts'; allowed keys in 'launcher': restart, "
       "max_restarts, restart_backoff_s, max_restart_backoff_s, "
       "worker_command"},
  });
}

TEST(LauncherConfigTest, WorkerCommandIsAListWhoseProgramIsNamed) {
  absl::StatusOr<Config> defaults = Parse("");
  ASSERT_THAT(defaults, IsOk());
  EXPECT_THAT(defaults->launcher.worker_command, IsEmpty());
  absl::StatusOr<Config> config = Parse(
      "launcher:\n  worker_command: [/usr/bin/python3, train.py, --fast]\n");
  ASSERT_THAT(config, IsOk());
  EXPECT_THAT(config->launcher.worker_command,
              ElementsAre("/usr/bin/python3", "train.py", "--fast"));
  ExpectAllFail({
      {"launcher:\n  worker_command: ['', train.py]\n",
       "launcher.worker_command: its first entry is the program to run"},
      {"launcher:\n  worker_command: python3 train.py\n",
       "cfg.yaml:2: launcher.worker_command"},
  });
}

}  // namespace
}  // namespace downpour
