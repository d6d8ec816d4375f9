// bench/scale_model, one tiny row (1 worker, 1 shard, float32, a few short
// steps over shaped links) of the MLP and one of sparse_linear to a low AUC,
// so that the benchmark cannot rot unnoticed. Skips
// where network namespaces cannot be made (not root, no ip or tc).
#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon_harness.h"
#include "tests/netns_lab.h"

namespace downpour {
namespace {

namespace fs = std::filesystem;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

bool HasTool(const char* name) {
  for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
    if (fs::exists(std::string(dir) + name)) return true;
  }
  return false;
}

TEST(ScaleModelSmokeTest, OneWorkerOneShardRowMeasuresUpdatesPerSecond) {
  if (geteuid() != 0) GTEST_SKIP() << "not root: no network namespaces";
  if (!HasTool("ip") || !HasTool("tc")) GTEST_SKIP() << "no ip or tc";
  const std::string dir = testing::TestDir();
  {
    // Where no namespace can be made or run in (a chroot), the bench cannot
    // build its lab: skip, saying why.
    NetnsLab probe(dir, "dpsp");
    if (const std::string why = probe.SetUp({{"probe", 2}}); !why.empty()) {
      GTEST_SKIP() << "no network namespaces here: " << why;
    }
  }
  const std::string bin = testing::BinDir();
  auto bench = Subprocess::Start(
      "scale_model",
      {(fs::path(bin) / "bench/scale_model").string(), "--workers=1",
       "--shards=1", "--encodings=float32", "--model=mlp", "--steps=20",
       "--warmup_steps=2", "--step_ms=100", "--link_mbit=100",
       "--bin_dir=" + bin, "--run_dir=" + dir + "/runs",
       "--markdown=" + dir + "/table.md"},
      dir + "/scale_model.log");
  ASSERT_TRUE(bench.ok()) << bench.status();
  const std::optional<int> status = (*bench)->Wait(absl::Seconds(120));
  ASSERT_TRUE(status.has_value()) << "still running after 120 s:\n"
                                  << (*bench)->LogTail(40);
  const std::string output = ReadFile(dir + "/scale_model.log").value_or("");
  ASSERT_EQ(*status, 0) << output;
  const std::string table = ReadFile(dir + "/table.md").value_or("");
  // One row, measured: a worker at 100 ms per step makes at most 10 updates/s.
  EXPECT_THAT(table, HasSubstr("| mlp | float32 | 1 | 1 | ")) << table;
  EXPECT_THAT(table, HasSubstr(" | 1.00 | ")) << table;  // efficiency of W=1
  EXPECT_THAT(table, Not(HasSubstr("error"))) << table;
  // The lab is gone: none of the bench's namespaces is left.
  const std::string lab = absl::StrCat("dpsm", (*bench)->pid() % 100000, "-");
  auto list = Subprocess::Start("ip", {"/usr/sbin/ip", "netns", "list"},
                                dir + "/netns.txt");
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ((*list)->Wait(absl::Seconds(30)), 0);
  EXPECT_THAT(ReadFile(dir + "/netns.txt").value_or(""), Not(HasSubstr(lab)));
}

// --model=sparse_linear: the bench generates a small click log, trains to its
// target AUC and measures the row, the ps link included (from the lab
// switch's counters: the ps's own bytes counter holds no sparse traffic).
TEST(ScaleModelSmokeTest, SparseLinearRowReachesTheTargetAuc) {
  if (geteuid() != 0) GTEST_SKIP() << "not root: no network namespaces";
  if (!HasTool("ip") || !HasTool("tc")) GTEST_SKIP() << "no ip or tc";
  const std::string dir = testing::TestDir();
  {
    NetnsLab probe(dir, "dpsp");
    if (const std::string why = probe.SetUp({{"probe", 2}}); !why.empty()) {
      GTEST_SKIP() << "no network namespaces here: " << why;
    }
  }
  const std::string bin = testing::BinDir();
  auto bench = Subprocess::Start(
      "scale_model",
      {(fs::path(bin) / "bench/scale_model").string(), "--workers=1",
       "--shards=1", "--model=sparse_linear", "--click_rows=20000",
       "--click_test_rows=2000", "--eval_rows=2000", "--auc_gap=0.13",
       "--warmup_steps=2", "--step_ms=50", "--link_mbit=100",
       "--work=" + dir + "/click", "--bin_dir=" + bin,
       "--run_dir=" + dir + "/runs", "--markdown=" + dir + "/table.md"},
      dir + "/scale_model.log");
  ASSERT_TRUE(bench.ok()) << bench.status();
  const std::optional<int> status = (*bench)->Wait(absl::Seconds(120));
  ASSERT_TRUE(status.has_value()) << "still running after 120 s:\n"
                                  << (*bench)->LogTail(40);
  const std::string output = ReadFile(dir + "/scale_model.log").value_or("");
  ASSERT_EQ(*status, 0) << output;
  const std::string table = ReadFile(dir + "/table.md").value_or("");
  // link 100 Mbit/s, 1 shard, 1 worker, its seconds to target, speed-up 1.
  EXPECT_THAT(table, ContainsRegex("\\| sparse_linear \\| 100 \\| 1 \\| 1 "
                                   "\\| [0-9.]+ \\| 1.00 \\|"))
      << table;
  // The busiest ps link was measured (a percentage, not "-").
  EXPECT_THAT(table, ContainsRegex("/0 \\| [0-9]+% \\|")) << table;
  EXPECT_THAT(table, Not(HasSubstr("error"))) << table;
  EXPECT_TRUE(fs::exists(dir + "/click/r20000-t2000-s1/gen.log")) << output;
}

}  // namespace
}  // namespace downpour
