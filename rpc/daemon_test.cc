#include "rpc/daemon.h"

#include <filesystem>
#include <fstream>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "common/file_util.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

ABSL_DECLARE_FLAG(std::string, port_file);
ABSL_DECLARE_FLAG(std::string, exit_reason_file);

namespace downpour {
namespace {

using ::downpour::testing::IsOk;
using ::testing::HasSubstr;

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

// A path whose parent is a regular file: no write can succeed there.
std::string UnwritablePath() {
  const std::string file = TempDir() + "/plain-file";
  std::ofstream(file) << "x";
  return file + "/port";
}

TEST(WritePortFileTest, WritesThePortAndANewline) {
  const std::string path = TempDir() + "/ps.port";
  ASSERT_THAT(WritePortFileTo(path, 7001), IsOk());
  EXPECT_EQ(ReadFile(path).value_or(""), "7001\n");
  ASSERT_THAT(WritePortFileTo(path, 42), IsOk());  // replaces the old one
  EXPECT_EQ(ReadFile(path).value_or(""), "42\n");
}

TEST(WritePortFileTest, NoPathWritesNothing) {
  EXPECT_THAT(WritePortFileTo("", 7001), IsOk());
}

TEST(WritePortFileTest, FailureIsReportedWithThePath) {
  const std::string path = UnwritablePath();
  const absl::Status status = WritePortFileTo(path, 7001);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("write port file: cannot create directory '" +
                        TempDir() + "/plain-file'"));
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(WritePortFileDeathTest, TheFlagFormExitsWithStatus1OnFailure) {
  absl::SetFlag(&FLAGS_port_file, UnwritablePath());
  EXPECT_EXIT(WritePortFile(7001), ::testing::ExitedWithCode(1),
              "daemon: --port_file .*plain-file/port: write port file: ");
  absl::SetFlag(&FLAGS_port_file, "");
}

TEST(WritePortFileDeathTest, TheFlagFormWritesTheFile) {
  const std::string path = TempDir() + "/flag.port";
  absl::SetFlag(&FLAGS_port_file, path);
  WritePortFile(9);
  absl::SetFlag(&FLAGS_port_file, "");
  EXPECT_EQ(ReadFile(path).value_or(""), "9\n");
}

TEST(WriteExitReasonTest, WritesTheMessageAndANewline) {
  const std::string path = TempDir() + "/logs/ps-1.reason";
  ASSERT_THAT(WriteExitReasonTo(path, "checkpoint 'c' is corrupt"), IsOk());
  EXPECT_EQ(ReadFile(path).value_or(""), "checkpoint 'c' is corrupt\n");
  EXPECT_THAT(WriteExitReasonTo("", "anything"), IsOk());
}

TEST(WriteExitReasonTest, FailureNamesThePath) {
  const absl::Status status = WriteExitReasonTo(UnwritablePath(), "why");
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("write exit reason file: cannot create directory '" +
                        TempDir() + "/plain-file'"));
}

TEST(DieDeathTest, WritesTheReasonFileBeforeExiting) {
  const std::string path = TempDir() + "/die.reason";
  std::filesystem::remove(path);
  absl::SetFlag(&FLAGS_exit_reason_file, path);
  EXPECT_EXIT(Die("ps 1", "checkpoint 'c' is corrupt (bad crc)", kExitConfig),
              ::testing::ExitedWithCode(kExitConfig),
              "ps 1: checkpoint 'c' is corrupt \\(bad crc\\)");
  absl::SetFlag(&FLAGS_exit_reason_file, "");
  EXPECT_EQ(ReadFile(path).value_or("(none)"),
            "checkpoint 'c' is corrupt (bad crc)\n");
}

TEST(DieDeathTest, StatusZeroLeavesNoReason) {
  const std::string path = TempDir() + "/stopped.reason";
  std::filesystem::remove(path);
  absl::SetFlag(&FLAGS_exit_reason_file, path);
  EXPECT_EXIT(Die("ps 1", "signal 15 (Terminated) while starting", 0),
              ::testing::ExitedWithCode(0), "while starting");
  absl::SetFlag(&FLAGS_exit_reason_file, "");
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(DieDeathTest, AnUnwritableReasonFileIsOneMoreLineOnStderr) {
  absl::SetFlag(&FLAGS_exit_reason_file, UnwritablePath());
  EXPECT_EXIT(Die("worker 0", "data.path not found", kExitConfig),
              ::testing::ExitedWithCode(kExitConfig),
              "worker 0: --exit_reason_file .*plain-file/port: write exit "
              "reason file: ");
  absl::SetFlag(&FLAGS_exit_reason_file, "");
}

}  // namespace
}  // namespace downpour
