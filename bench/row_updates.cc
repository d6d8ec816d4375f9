// The row updates a job's final checkpoints hold, per shard and in all
// (server::SparseRowUpdates: every row's version and the versions of rows
// evicted), to set against those the workers had acknowledged
// (bench/move_under_load.sh). A row that moved between shards counts once,
// in the checkpoint of the shard that held it last.
//
//   bazel-bin/bench/row_updates --checkpoint_dir run/checkpoints --shards 2
//
// Prints "shard N: generation G, R rows, U row updates" per shard and
// "total: U row updates"; exits 1 naming the shard whose checkpoint cannot
// be read.
#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "bench/bench_util.h"
#include "server/checkpoint.h"

ABSL_FLAG(std::string, checkpoint_dir, "", "the job's checkpoint.dir");
ABSL_FLAG(int, shards, 1, "shards 0..shards-1 are read");

namespace downpour::bench {
namespace {

int Run() {
  const std::string dir = absl::GetFlag(FLAGS_checkpoint_dir);
  if (dir.empty()) {
    std::fprintf(stderr, "row_updates: give --checkpoint_dir\n");
    return 2;
  }
  uint64_t total = 0;
  for (int shard = 0; shard < absl::GetFlag(FLAGS_shards); ++shard) {
    absl::StatusOr<server::Checkpoint> c =
        server::ReadNewestCheckpoint(dir, shard);
    CheckOrExit(c.status(), "row_updates",
                "read shard " + std::to_string(shard) + "'s checkpoint");
    size_t rows = 0;
    for (const auto& [id, table] : c->sparse_tables) rows += table.keys.size();
    const uint64_t updates = server::SparseRowUpdates(*c);
    std::printf("shard %d: generation %llu, %zu rows, %llu row updates\n",
                shard, static_cast<unsigned long long>(c->generation), rows,
                static_cast<unsigned long long>(updates));
    total += updates;
  }
  std::printf("total: %llu row updates\n",
              static_cast<unsigned long long>(total));
  return 0;
}

}  // namespace
}  // namespace downpour::bench

int main(int argc, char** argv) {
  return downpour::bench::ParseFlagsAndRun(argc, argv, downpour::bench::Run);
}
