// A backup's copy of one shard: what the shard's primary streamed to it
// (server/replication/replicator.h), kept in memory until the backup takes the
// shard over.
//
//   Replica replica;
//   RETURN_IF_ERROR(replica.Apply(request));      // Replicate RPCs, in order
//   std::optional<Checkpoint> state = replica.Take(shard);  // at take-over
//   Shard::CreateFrom(config, shard, counters, *std::move(state));
//
// A cut marked `full` replaces what is held; later cuts bring the blocks that
// changed (a block is replaced by a copy of a higher or equal version), the
// dense updates applied since, which the replica applies again with the same
// optimizer to blocks at the same versions (replication by gradient; an
// update older than the block held is skipped, a missing one or a cut's
// checksum that differs from the replica's block is DATA_LOSS, and the
// replica is not taken over until the full cut the primary then sends), the
// sparse rows that changed (whole rows, merged into a SparseTable per table,
// after the rows of the keys the primary evicted are dropped: its
// tombstones) and every worker's applied-push window. A cut holds the blocks
// and the windows of one moment, so the replica never holds a push's sequence
// without its update. A cut too large for one message comes in several
// requests; only the last carries the generation, and the replica's generation
// (what the primary acknowledges against) moves only then.
//
// Take fences the replica: every Apply after it is refused with Aborted, which
// tells the old primary that it was replaced.
#ifndef DOWNPOUR_SERVER_REPLICATION_REPLICA_H_
#define DOWNPOUR_SERVER_REPLICATION_REPLICA_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/config.h"
#include "proto/ps.pb.h"
#include "server/block_store.h"
#include "server/checkpoint.h"
#include "server/sparse_table.h"

namespace downpour::server {

// Thread-safe.
class Replica {
 public:
  struct Info {
    bool held = false;  // a full cut arrived
    int shard = -1;
    uint64_t generation = 0;  // of the last complete cut
    uint64_t applied_total =
        0;               // the sum of the held blocks' and rows' versions
    uint64_t bytes = 0;  // values and state held (rows: table bytes)
    int64_t sparse_rows = 0;
  };

  // `dense`: the optimizer section of the model's dense blocks
  // (DenseOptimizer(config)): the primary's, which replicated updates are
  // applied with. A full cut of a primary whose optimizer is of another
  // type, or whose optimizer_settings differ from `expected_settings`, is
  // refused (FailedPrecondition naming the first key that differs).
  // `expected_settings`: OptimizerSettingsText(dense) when empty; a test
  // that wants a standby replaying differently from its primary (to see
  // the checksums catch it) passes the primary's here.
  explicit Replica(OptimizerSection dense = OptimizerSection(),
                   std::string expected_settings = "");
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  // Applies one request of a cut. After Take or Fence: Aborted for the shard
  // now served ("this standby serves shard N now"), FailedPrecondition for
  // any other; FailedPrecondition for a partial cut of a shard not held
  // (the primary then sends a full one); InvalidArgument for a block whose
  // bytes are not whole floats or hold a NaN/Inf (nothing is applied), or an
  // update whose gradient a push could not carry; DataLoss for an update of
  // a block at an older version than it was applied to, or a checksum that
  // differs (the replica is then not taken over until a full cut). Returns
  // the generation held.
  absl::StatusOr<uint64_t> Apply(const proto::ReplicateRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The replica of `shard` in checkpoint form, moved out, and the replica
  // fenced; nullopt (and nothing changes) when no full cut of `shard` is held.
  std::optional<Checkpoint> Take(int shard) ABSL_LOCKS_EXCLUDED(mu_);

  // Forgets what is held (the coordinator gave this standby another role).
  void Drop() ABSL_LOCKS_EXCLUDED(mu_);

  // This standby serves shard `shard` now (taken from a checkpoint): what is
  // held is dropped, and every later Apply refused (Aborted for `shard`).
  void Fence(int shard) ABSL_LOCKS_EXCLUDED(mu_);

  Info info() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  bool fenced_ ABSL_GUARDED_BY(mu_) = false;
  int fenced_shard_ ABSL_GUARDED_BY(mu_) = -1;
  bool held_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  // Apply's steps after the decoding, in order.
  // Refuses every request once fenced: Aborted for the shard taken over.
  absl::Status CheckNotFenced(const proto::ReplicateRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A full cut: checks the primary's optimizer is this standby's and starts
  // an empty copy.
  absl::Status StartCopy(const proto::ReplicateRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Any other request: the copy it adds to is held.
  absl::Status CheckHeld(const proto::ReplicateRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every table's rows fit (tables made as needed); nothing merged yet.
  absl::Status CheckRows(const proto::ReplicateRequest& request,
                         const std::vector<SparseTable::Rows>& rows)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds the blocks newer than those held; a refused one drops the copy.
  absl::Status AddBlocks(std::vector<BlockStore::BlockSnapshot>* blocks)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The request's epoch and optimizer; the last of a cut also brings the
  // windows and the generation.
  void EndRequest(const proto::ReplicateRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies request.updates() and compares request.checks() with the blocks
  // held.
  absl::Status Replay(const proto::ReplicateRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const OptimizerSection dense_;
  const std::string expected_settings_;
  Checkpoint state_ ABSL_GUARDED_BY(mu_);
  // The dense blocks while streaming (state_ keeps none); null until a full
  // cut.
  std::unique_ptr<BlockStore> store_ ABSL_GUARDED_BY(mu_);
  // By table id: the rows held.
  std::map<uint32_t, std::unique_ptr<SparseTable>> tables_ ABSL_GUARDED_BY(mu_);
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_REPLICATION_REPLICA_H_
