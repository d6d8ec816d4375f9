#include "server/memory_budget.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::server {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;

constexpr int64_t kMiB = int64_t{1} << 20;

void WriteFile(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(
      std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

std::string FakeRoot(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string root = std::string(dir ? dir : "/tmp") + "/" + name;
  std::filesystem::remove_all(root);
  WriteFile(root + "/proc/meminfo",
            "MemTotal:       16777216 kB\nMemFree:  1 kB\n");
  return root;
}

TEST(MemoryBudgetTest, TheHostIsMemTotalOrTheCgroupLimitWhicheverIsLess) {
  const std::string root = FakeRoot("host");
  MemoryBudget::HostMemory host = MemoryBudget::ReadHostMemory(root);
  EXPECT_EQ(host.bytes, 16 * 1024 * kMiB);
  EXPECT_EQ(host.source, "MemTotal");
  WriteFile(root + "/sys/fs/cgroup/memory.max", "max\n");
  EXPECT_EQ(MemoryBudget::ReadHostMemory(root).bytes, 16 * 1024 * kMiB)
      << "no limit";
  WriteFile(root + "/sys/fs/cgroup/memory.max", "2147483648\n");
  host = MemoryBudget::ReadHostMemory(root);
  EXPECT_EQ(host.bytes, 2048 * kMiB);
  EXPECT_THAT(host.source, HasSubstr("memory.max"));
}

TEST(MemoryBudgetTest, TheDefaultIsHalfTheHostSharedByItsPs) {
  Config config;
  config.cluster.ps = {"10.0.0.1:7001", "10.0.0.1:7002", "10.0.0.2:7001"};
  config.cluster.standby_ps = {"10.0.0.1:7003"};
  const MemoryBudget::HostMemory host{12 * 1024 * kMiB, "MemTotal"};
  const MemoryBudget on_a = MemoryBudget::ForPs(config, 0, host);
  EXPECT_EQ(on_a.budget_bytes(), 2 * 1024 * kMiB) << "6 GiB over 3 ps";
  EXPECT_EQ(on_a.table_bytes(), 1024 * kMiB);
  EXPECT_EQ(on_a.reply_bytes(), 512 * kMiB);
  EXPECT_THAT(on_a.origin(), HasSubstr("shared by 3 ps"));
  EXPECT_EQ(MemoryBudget::ForPs(config, 2, host).budget_bytes(),
            6 * 1024 * kMiB);
  config.eviction.memory_budget_mb = 300;
  EXPECT_EQ(MemoryBudget::ForPs(config, 0, host).budget_bytes(), 300 * kMiB);
}

std::unique_ptr<SparseTable> Table() {
  SparseTable::Options options;
  options.dim = 4;
  options.track_clocks = true;
  auto table = SparseTable::Create(options);
  EXPECT_THAT(table.status(), IsOk());
  return std::move(table).value();
}

void Fill(SparseTable* t, uint64_t from, int64_t n) {
  std::vector<uint64_t> keys(n);
  for (int64_t i = 0; i < n; ++i) keys[i] = from + i;
  std::vector<float> grads(n * t->dim(), 0.1f);
  t->Apply(keys.data(), n, grads.data());
}

TEST(MemoryBudgetTest, NoEvictionWhileThePushFits) {
  auto t = Table();
  Fill(t.get(), 1, 1000);
  const MemoryBudget budget(64 * kMiB, "test");
  auto plan = budget.PlanFor({{t.get(), 10, 100}});
  ASSERT_THAT(plan.status(), IsOk());
  EXPECT_FALSE(plan->evict);
  EXPECT_LE(plan->bytes_after, budget.table_bytes());
}

// Past table_bytes() the plan keeps 90 % of the rows that fit with the
// push's new ones; the tables then hold no more than planned.
TEST(MemoryBudgetTest, PastTheBudgetThePlanEvictsToTheLowWatermark) {
  auto t = Table();
  Fill(t.get(), 1, 200000);
  const int64_t budget = 2 * t->BytesAt(150000);
  const MemoryBudget small(budget, "test");
  auto plan = small.PlanFor({{t.get(), 0, 20000}});
  ASSERT_THAT(plan.status(), IsOk());
  ASSERT_TRUE(plan->evict);
  EXPECT_LE(plan->bytes_after, small.table_bytes());
  EXPECT_GT(plan->keep_rows[0], 100000) << "not far below the watermark";
  EXPECT_LE(plan->keep_rows[0], 200000 - 20000) << "room for 10 % more";
  t->EvictForRoom(plan->keep_rows[0], nullptr, 0);
  Fill(t.get(), 1'000'000, 20000);
  EXPECT_LE(t->bytes(), small.table_bytes());
}

// Where the index would double for one more row, a push of one new key
// still frees a tenth of the rows, not one: evictions stay rare.
TEST(MemoryBudgetTest, AnEvictionFreesATenthOfTheRowsAtTheIndexsDoubling) {
  auto t = Table();
  const int64_t full = 131071 - 131071 / 8;  // the index's 2^17 - 1 slots
  Fill(t.get(), 1, full);
  const MemoryBudget budget(2 * (t->BytesAt(full) + (1 << 20)), "test");
  ASSERT_GT(t->BytesAt(full + 1), budget.table_bytes()) << "the doubling";
  auto plan = budget.PlanFor({{t.get(), 0, 1}});
  ASSERT_THAT(plan.status(), IsOk());
  ASSERT_TRUE(plan->evict);
  EXPECT_LE(plan->keep_rows[0], full - full / 10);
  EXPECT_GE(plan->keep_rows[0], full - full / 10 - 10);
}

TEST(MemoryBudgetTest, APushThatCannotFitIsRefusedNamingTheBudget) {
  auto t = Table();
  Fill(t.get(), 1, 1000);
  const MemoryBudget tiny(4 * t->BytesAt(50000), "eviction.memory_budget_mb");
  EXPECT_THAT(tiny.PlanFor({{t.get(), 1000, 300000}}).status(),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("half of the ps memory budget")));
  // Evicting the rows not pushed makes room for a smaller push.
  auto plan = tiny.PlanFor({{t.get(), 10, 20000}});
  ASSERT_THAT(plan.status(), IsOk());
}

}  // namespace
}  // namespace downpour::server
