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

}  // namespace
}  // namespace downpour
