// Bounded sparse tables with real daemons (issue 22, item 2): a sparse_linear
// job whose ps evict rows beyond eviction.max_rows and write incremental
// checkpoints (a full cut, then deltas). Asserts on what a client observes:
// the ps Status counters and the checkpoints on disk (read as the ps and
// psctl export read them), polled with deadlines.
#include <signal.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/subprocess.h"
#include "common/testing/poll.h"
#include "gtest/gtest.h"
#include "server/checkpoint.h"
#include "tests/daemon_harness.h"

namespace downpour {
namespace {

constexpr int kMaxRows = 250;
constexpr absl::Duration kLong = absl::Seconds(120);

class SparseEvictionTest : public testing::DaemonJobTest {
 protected:
  void SetUp() override {
    dir_ = testing::TestDir();
    // 3000 ids over the whole uint64 range, 30 a row: about 1500 a ps.
    testing::WriteSparseLibsvm(dir_ + "/train.svm", 4000, 1);
    testing::WriteSparseLibsvm(dir_ + "/test.svm", 500, 2);
    config_ = testing::WriteConfig(
        "job.yaml",
        testing::LoopbackConfig(
            2, 1,
            absl::StrCat(
                "data:\n  source: libsvm\n  path: ", dir_,
                "/train.svm\n  test_path: ", dir_,
                "/test.svm\n"
                "model:\n  type: sparse_linear\n  task: binary\n"
                "  sparse_buckets: 32\n"
                "optimizer:\n  type: ftrl\n  learning_rate: 0.2\n  l1: 0.5\n"
                "  l2: 1\n"
                "training:\n  batch_size: 32\n  epochs: 60\n"
                "  eval_every_steps: 100\n"
                "eviction:\n  max_rows: ",
                kMaxRows,
                "\n"
                "checkpoint:\n  dir: ",
                dir_,
                "/ckpt\n  interval_s: 0.3\n"
                "  incremental: true\n  full_every: 50\n  keep: 2\n")));
  }

  // `listen` "": the config's address (an ephemeral port).
  void StartPs(int index, const std::string& listen = "") {
    const std::string port_file = absl::StrCat(dir_, "/ps-", index, ".port");
    std::filesystem::remove(port_file);
    std::vector<std::string> args = {"--index",       absl::StrCat(index),
                                     "--coordinator", coordinator_,
                                     "--port_file",   port_file};
    if (!listen.empty()) {
      args.push_back("--listen");
      args.push_back(listen);
    }
    Subprocess& ps =
        Start(absl::StrCat("ps-", index), "server/ps_server", args);
    auto address = testing::WaitForPort(ps, port_file);
    ASSERT_TRUE(address.ok()) << address.status();
    ps_[index] = *address;
  }

  // What shard `index` would restore from now: ok() false before its first
  // checkpoint.
  absl::StatusOr<server::ShardCheckpoints::Loaded> Newest(int index) {
    server::ShardCheckpoints::Options options;
    options.dir = dir_ + "/ckpt";
    options.shard_index = index;
    return server::ShardCheckpoints(options).ReadNewest();
  }

  std::string dir_;
  std::string coordinator_;
  std::map<int, std::string> ps_;
};

// Every checkpoint a ps writes holds at most eviction.max_rows rows a table;
// a ps killed with SIGKILL and started again restores its full cut and the
// deltas after it (nothing cut short), and the job finishes.
TEST_F(SparseEvictionTest, RowsStayBoundedAndAKilledPsRestoresFullPlusDeltas) {
  const std::string port_file = dir_ + "/coordinator.port";
  Subprocess& c = Start("coordinator", "coordinator/coordinator",
                        {"--listen", "127.0.0.1:0", "--port_file", port_file});
  auto address = testing::WaitForPort(c, port_file);
  ASSERT_TRUE(address.ok()) << address.status();
  coordinator_ = *address;
  ASSERT_NO_FATAL_FAILURE(StartPs(0));
  ASSERT_NO_FATAL_FAILURE(StartPs(1));
  Start("worker-0", "worker/ps_worker",
        {"--index", "0", "--coordinator", coordinator_});

  for (int shard = 0; shard < 2; ++shard) {
    ASSERT_TRUE(testing::WaitUntil(
        [&] {
          return testing::StatusCounter(ps_[shard], "sparse_evicted_rows") > 0;
        },
        absl::Seconds(30)))
        << "shard " << shard << " never evicted: the bound is not reached";
  }

  // Each checkpoint seen from now on, full cut or delta, is within the
  // bound; wait for six, and for shard 0's chain to hold two deltas.
  size_t checkpoints_seen = 0;
  size_t most_rows = 0;
  bool bounded = true;
  std::map<int, uint64_t> generation_seen;
  for (int shard = 0; shard < 2; ++shard) {
    auto loaded = Newest(shard);
    if (loaded.ok()) generation_seen[shard] = loaded->checkpoint.generation;
  }
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        bool chain = false;
        for (int shard = 0; shard < 2; ++shard) {
          auto loaded = Newest(shard);
          if (!loaded.ok()) continue;
          if (loaded->checkpoint.generation != generation_seen[shard]) {
            generation_seen[shard] = loaded->checkpoint.generation;
            ++checkpoints_seen;
            const size_t rows =
                loaded->checkpoint.sparse_tables.at(0).second.keys.size();
            most_rows = std::max(most_rows, rows);
            bounded = bounded && rows <= static_cast<size_t>(kMaxRows);
          }
          if (shard == 0) chain = loaded->deltas.size() >= 2;
        }
        return chain && checkpoints_seen >= 6;
      },
      kLong, absl::Milliseconds(20)))
      << "shard 0 never wrote two deltas";
  EXPECT_TRUE(bounded) << "a checkpoint held " << most_rows << " rows";
  EXPECT_GT(most_rows, 0u);
  // SIGKILL: what is on disk now is what the ps restarts from.
  daemons_["ps-0"]->Signal(SIGKILL);
  ASSERT_TRUE(daemons_["ps-0"]->Wait(absl::Seconds(10)).has_value());
  daemons_.erase("ps-0");
  auto on_disk = Newest(0);
  ASSERT_TRUE(on_disk.ok()) << on_disk.status();
  EXPECT_TRUE(on_disk->chain_ended.empty());
  ASSERT_GE(on_disk->deltas.size(), 1u);
  const server::SparseTable::Rows& rows =
      on_disk->checkpoint.sparse_tables.at(0).second;
  uint64_t held = rows.evicted_versions;
  for (uint32_t version : rows.versions) held += version;
  // Restarted in place (its old address): the coordinator lets it in at
  // once, as the old process's address now answers as another process.
  ASSERT_NO_FATAL_FAILURE(StartPs(0, ps_[0]));
  EXPECT_EQ(testing::LiveCounter(ps_[0], "checkpoint_deltas_restored"),
            static_cast<double>(on_disk->deltas.size()))
      << "the restart read the full cut and every delta";
  EXPECT_EQ(testing::LiveCounter(ps_[0], "checkpoint_fallbacks"), 0);
  EXPECT_GE(testing::LiveCounter(ps_[0], "sparse_row_updates"),
            static_cast<double>(held))
      << "the row updates of full + deltas came back";

  Subprocess& worker = *daemons_["worker-0"];
  const std::optional<int> status = worker.Wait(kLong);
  ASSERT_TRUE(status.has_value()) << "the worker still runs";
  EXPECT_EQ(*status, 0) << worker.LogTail(20);
  // The restarted ps goes on within the bound.
  const uint64_t restarted_at = on_disk->checkpoint.generation;
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        auto loaded = Newest(0);
        return loaded.ok() && loaded->checkpoint.generation > restarted_at;
      },
      absl::Seconds(30)));
  auto after = Newest(0);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_LE(after->checkpoint.sparse_tables.at(0).second.keys.size(),
            static_cast<size_t>(kMaxRows));
  std::printf(
      "%zu checkpoints seen, at most %zu rows (max_rows %d); ps 0 "
      "restarted from a full cut and %zu deltas\n",
      checkpoints_seen, most_rows, kMaxRows, on_disk->deltas.size());
}

}  // namespace
}  // namespace downpour
