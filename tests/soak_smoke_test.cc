// bench/soak for 2 s per phase with 8 clients against a real ps daemon, so
// that the benchmark cannot rot unnoticed: every figure is printed, valid
// traffic has no errors, every invalid request is refused, and the checksums
// after the invalid phase are those after the valid one.
#include <filesystem>
#include <string>

#include "common/file_util.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon_harness.h"

namespace downpour {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(SoakSmokeTest, ShortRunPrintsEveryFigureAndPasses) {
  const std::string dir = testing::TestDir();
  const std::string bin = testing::BinDir();
  auto soak = Subprocess::Start(
      "soak",
      {(fs::path(bin) / "bench/soak").string(), "--seconds=2", "--clients=8",
       "--bin_dir=" + bin, "--run_dir=" + dir + "/run"},
      dir + "/soak.log");
  ASSERT_TRUE(soak.ok()) << soak.status();
  const std::optional<int> status = (*soak)->Wait(absl::Seconds(60));
  ASSERT_TRUE(status.has_value()) << "still running after 60 s:\n"
                                  << (*soak)->LogTail(40);
  const std::string output = ReadFile(dir + "/soak.log").value_or("");
  EXPECT_EQ(*status, 0) << output;
  for (const char* line :
       {"valid phase: 8 clients", "invalid phase: 8 clients", "requests/s",
        "pull+push pairs/s", "latency     p50 ", "ps VmRSS    start ",
        "garbage_push   INVALID_ARGUMENT", "unknown_block  NOT_FOUND",
        "huge_pull      INVALID_ARGUMENT", "bad_encoding   INVALID_ARGUMENT",
        "every request refused", "soak: PASS"}) {
    EXPECT_THAT(output, HasSubstr(line)) << output;
  }
  // A failed check prints "FAILED" at the end of its line; a refusal code
  // (FAILED_PRECONDITION: random garbage that parses as a push of a stale
  // placement epoch, now and then) is not one.
  EXPECT_THAT(output, Not(::testing::ContainsRegex("FAILED(\n|$)"))) << output;
}

}  // namespace
}  // namespace downpour
