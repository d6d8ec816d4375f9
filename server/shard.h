// One parameter-server shard: the conductor of each request. It holds the one
// lock and the order of the steps; each step's work is a part it owns: which
// pushes it takes (PushAdmission, PushGuard), the blocks (BlockStore), the
// sparse tables (SparseTables), who may push when (ConsistencyGate), how
// updates reach the model (ModelUpdates), what the next replica cut carries
// (ReplicaLog) and the checkpoint chain (CheckpointChain).
//
// Plain C++ over proto messages, with no path to gRPC
// (//server:plain_cores_test checks): the ParameterServer service adapter
// forwards each RPC here and builds the pull reply's bytes itself
// (server/pull_reply.h); tests drive it directly.
#ifndef DOWNPOUR_SERVER_SHARD_H_
#define DOWNPOUR_SERVER_SHARD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/config.h"
#include "common/counters.h"
#include "common/model_spec.h"
#include "common/push_view.h"
#include "proto/ps.pb.h"
#include "server/block_store.h"
#include "server/checkpoint.h"
#include "server/checkpoint_chain.h"
#include "server/consistency_gate.h"
#include "server/dense_push_check.h"
#include "server/model_updates.h"
#include "server/moved_blocks.h"
#include "server/optimizer.h"  // DenseOptimizer
#include "server/placement_epoch.h"
#include "server/pull_blocks.h"
#include "server/push_admission.h"
#include "server/push_guard.h"
#include "server/refusal_memory.h"
#include "server/replication/replica_log.h"
#include "server/reply_bytes.h"
#include "server/sparse_tables.h"

namespace downpour::server {

// Thread-safe. Holds the only lock of the ps core: one reader/writer mutex over
// the epoch and the parts above (which take none). Pulls, Checksums and
// checkpoint snapshots share it; pushes and placements hold it exclusively, so
// a push is validated and applied as one step. Checkpoints are copied under
// the lock and written to disk without it. (With optimizer.delay_compensation,
// the store's ServedValues also locks a mutex per worker, always inside this
// one.)
class Shard {
 public:
  // Reads this shard's checkpoint, if checkpoint.dir holds one: DataLoss or
  // FailedPrecondition when it is corrupt or of another format (the daemon then
  // refuses to start rather than silently training from scratch).
  static absl::StatusOr<std::unique_ptr<Shard>> Create(const Config& config,
                                                       int index,
                                                       Counters* counters) {
    return Build(config, index, counters, std::nullopt);
  }
  // A shard that starts from `state` (a backup's replica, in the checkpoint's
  // form) instead of reading checkpoint.dir. FailedPrecondition when `state`
  // is of another shard or optimizer.
  static absl::StatusOr<std::unique_ptr<Shard>> CreateFrom(const Config& config,
                                                           int index,
                                                           Counters* counters,
                                                           Checkpoint state) {
    return Build(config, index, counters, std::move(state));
  }

  // What a primary streams to its backup (server/replication/replica_log.h).
  using ReplicaUpdate = ::downpour::server::ReplicaUpdate;
  using ReplicaCut = ::downpour::server::ReplicaCut;
  ReplicaCut CutForReplica(bool full, bool checks = false)
      ABSL_LOCKS_EXCLUDED(mu_);
  // ReplicaLog::SetLogging, never with delay compensation (not replayable).
  void SetReplicaLog(bool on) ABSL_LOCKS_EXCLUDED(mu_);
  // ReplicaLog::generation: a cut of it holds everything acknowledged so far.
  uint64_t generation() const ABSL_LOCKS_EXCLUDED(mu_);
  // The updates the shard holds: the sum of its blocks' versions (blocks
  // restored but not placed here included) and of its sparse rows' versions.
  uint64_t applied_total() const ABSL_LOCKS_EXCLUDED(mu_);
  // PushAdmission::Holes and AppliedFrom.
  uint64_t push_holes() const ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<IssuedIncarnation> applied_from() const ABSL_LOCKS_EXCLUDED(mu_);

  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  // Serves blocks `ids` from placement `epoch` on. Blocks already held are
  // kept; new ones are CheckpointChain::AddBlock's. Blocks held or restored
  // that `ids` does not name moved to another ps (a live move): they are
  // kept as MovedBlocks for the destination's last pass and refused from
  // now on.
  absl::Status Assign(uint64_t epoch, const std::vector<uint32_t>& ids)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The sparse buckets held, as the placement map gives them
  // (SparseTables::BucketFlags, whose errors change nothing).
  absl::Status AssignBuckets(const std::vector<uint32_t>& buckets)
      ABSL_LOCKS_EXCLUDED(mu_);

  // One block of a pull as VisitBlocks hands it out (server/pull_blocks.h).
  using PulledBlock = ::downpour::server::PulledBlock;
  // The blocks of a pull, each value copied once to where the caller says.
  // Without the lock, PullBlocks::Check and `reserve` (its error returned);
  // under the shared lock, PlacementEpoch::Check and PullBlocks::Visit with
  // `room`, which must not block.
  absl::Status VisitBlocks(
      const proto::PullRequest& request,
      const std::function<absl::Status(size_t num_blocks,
                                       size_t payload_bytes)>& reserve,
      const std::function<char*(const PulledBlock& block)>& room) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // VisitBlocks into PullBlocks::Into (in-process callers and tests; the
  // gRPC reply is server/pull_reply.h's).
  absl::Status Pull(const proto::PullRequest& request,
                    proto::PullResponse* response) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Applies a push, or refuses it whole: the errors of PlacementEpoch::Check,
  // PushAdmission::Admit (a duplicate is acknowledged: response.duplicate),
  // ValidatePush (an outlier is answered OK, response.refused) and
  // ModelUpdates::ApplyBlocks. Under ssp/bsp, a push that must wait is held
  // (ConsistencyGate::Hold) until shortly before `deadline` (at most
  // kMaxHold), then Unavailable names whom it waits for. A bsp push is
  // acknowledged once its round is applied, with the new versions.
  absl::Status Push(const wire::PushView& request,
                    proto::PushResponse* response,
                    absl::Time deadline = absl::InfiniteFuture())
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Push(const proto::PushRequest& request,
                    proto::PushResponse* response,
                    absl::Time deadline = absl::InfiniteFuture())
      ABSL_LOCKS_EXCLUDED(mu_) {
    return Push(wire::ViewOf(request), response, deadline);
  }

  // The workers ssp/bsp wait for (registered, alive, not finished), from the
  // coordinator's heartbeat replies. Wakes held pushes; a bsp round whose
  // missing workers dropped out is applied.
  void SetActiveWorkers(const std::vector<int>& workers)
      ABSL_LOCKS_EXCLUDED(mu_);
  // PushAdmission::LearnWorkerIncarnations, from the coordinator's
  // registration and heartbeat replies.
  void LearnWorkerIncarnations(
      const std::vector<IssuedIncarnation>& incarnations)
      ABSL_LOCKS_EXCLUDED(mu_);
  // ConsistencyGate::ReleaseHolds (the ps is stopping): held pushes return
  // Unavailable; pushes that need no wait are still applied.
  void ReleaseHeldPushes() ABSL_LOCKS_EXCLUDED(mu_);

  // A hold's longest wait, and its margin before the deadline.
  static constexpr absl::Duration kMaxHold = absl::Seconds(10);
  static constexpr absl::Duration kHoldMargin = absl::Milliseconds(500);
  // A sparse pull's longest wait for room among the replies in flight.
  static constexpr absl::Duration kReplyWait = absl::Seconds(2);

  // The sparse rows of a pull (InvalidArgument when it asks for blocks too):
  // SparseTables::DecodePull and ReadPull, with VisitBlocks' checks, within
  // the bytes of replies in flight (SparseTables::PullBytes, ReplyBytes:
  // waits up to kReplyWait for room, then Unavailable).
  absl::Status PullSparse(const proto::PullRequest& request,
                          proto::PullResponse* response) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Read-only rows of one table (SparseTables::DecodeLookup, ReadLookup);
  // Unavailable before the first placement. Within the bytes of replies in
  // flight (SparseTables::LookupBytes, ReplyBytes: Unavailable at once when
  // others hold them).
  absl::Status Lookup(const proto::LookupRequest& request,
                      proto::LookupResponse* response) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Before a Lookup or pull request (`op`) of `request_bytes` is parsed:
  // ResourceExhausted when the least its parse and reply take (the keys
  // parsed and copied, a float and a byte a key: SparseTables::LookupBytes
  // at dim 1) pass the bound of replies in flight alone (ask for fewer
  // keys). A dense pull's request (block ids) is far below it.
  absl::Status CheckReadSize(const char* op, size_t request_bytes) const;

  // The bytes the sparse tables may hold (MemoryBudget::table_bytes()).
  int64_t sparse_budget_bytes() const {
    return sparse_->budget().table_bytes();  // constant
  }
  // One sparse table as Status and tests see it.
  using SparseTableStats = SparseTables::Stats;
  std::vector<SparseTableStats> sparse_stats() const ABSL_LOCKS_EXCLUDED(mu_);
  // The figures of `tables` summed (id 0), for reports over all tables.
  static SparseTableStats SumOf(const std::vector<SparseTableStats>& tables) {
    return SparseTables::SumOf(tables);
  }

  proto::ChecksumResponse Checksums() const ABSL_LOCKS_EXCLUDED(mu_);

  // Live bucket moves (server/bucket_transfer.h). The source: one chunk of
  // a copy pass (ExportBucketChunk) under the shared lock; the switch's last
  // pass (request.at_epoch) is Unavailable until this shard serves that
  // epoch, so no push changes the buckets' rows after it.
  absl::Status CopyBuckets(const proto::CopyBucketsRequest& request,
                           proto::CopyBucketsResponse* response) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The destination: a chunk's rows imported (SparseTables::Import), noted
  // for the backup's next cut and the next incremental checkpoint.
  absl::Status ImportMoved(
      const std::vector<std::pair<uint32_t, SparseTable::Rows>>& rows)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The source of a move of dense blocks, its last pass: the blocks as they
  // stood when the placement moved them away (MovedBlocks::Copy).
  // Unavailable until this shard serves request.at_epoch.
  absl::Status CopyBlocks(const proto::CopyBlocksRequest& request,
                          proto::CopyBlocksResponse* response) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The destination, before it serves the switch's epoch: the moved blocks
  // held (replacing any older copy), noted for the backup's next cut;
  // served once Assign names them.
  absl::Status ImportMovedBlocks(std::vector<BlockStore::BlockSnapshot> blocks)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The source, once no move holds them: the copies of blocks moved away
  // and not in `keep` are released (MovedBlocks::Release); returns how many.
  int ReleaseMovedBlocks(const std::set<uint32_t>& keep)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Either side, once no move holds them: the rows of buckets neither held
  // nor flagged in `keep` are dropped (SparseTables::UnheldKeys lists them
  // once), as tombstones for the checkpoint chain and the backup,
  // kDropBatchRows a table at a time under the exclusive lock. Returns how
  // many.
  int64_t DropUnheldRows(const std::vector<char>& keep)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Rows a table drops under one hold of the lock (DropUnheldRows).
  static constexpr int64_t kDropBatchRows = 262144;
  static constexpr absl::Duration kDropPause = absl::Milliseconds(20);
  // Rows the sparse tables evicted since start (a move's copy must start
  // over when the destination evicted rows it had imported).
  int64_t sparse_rows_evicted() const ABSL_LOCKS_EXCLUDED(mu_);
  // model.sparse_buckets (0: no sparse tables).
  uint32_t sparse_buckets() const {
    return sparse_->empty() ? 0 : sparse_->buckets();  // constant
  }

  // With eviction.*, first CheckpointChain::Evict. Then, with checkpoint.dir,
  // writes CheckpointChain::TakeCut as the next generation with
  // ShardCheckpoints::Write (its errors returned; `may_write` is asked before
  // the rename). One call at a time (a second waits).
  absl::Status WriteCheckpoint(const std::function<absl::Status()>& may_write =
                                   nullptr) ABSL_LOCKS_EXCLUDED(mu_);

  // True when Push may hold a request (training.consistency ssp or bsp).
  bool may_hold_pushes() const { return may_hold_pushes_; }

  uint64_t epoch() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t num_blocks() const ABSL_LOCKS_EXCLUDED(mu_);
  int index() const { return index_; }

 private:
  static absl::StatusOr<std::unique_ptr<Shard>> Build(
      const Config& config, int index, Counters* counters,
      std::optional<Checkpoint> state);
  Shard(const Config& config, int index, ModelSpec spec,
        std::unique_ptr<BlockStore> store, std::unique_ptr<SparseTables> sparse,
        RestoredShard restored, Counters* counters);

  // PushAdmission's verdict, counted; a duplicate is acknowledged.
  absl::StatusOr<PushAdmission::Verdict> Admit(
      const wire::PushView& request, proto::PushResponse* response) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  // A push as validated, kept across its holds.
  struct CheckedPush : CheckedBlocks {
    std::vector<SparseTables::DecodedRows> rows;
    bool waited = false;  // a hold was counted
  };
  // One pass of Push, in order: epoch, admission, validation, the gate's
  // route (a bsp push is answered through PushBsp), the ssp turn.
  enum class Turn { kAnswered, kAgain, kApply };
  absl::StatusOr<Turn> TakeTurn(const wire::PushView& request,
                                const std::vector<uint32_t>& ids,
                                absl::Time until, proto::PushResponse* response,
                                CheckedPush* checked)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ValidateDensePush, then SparseTables::DecodePush and MakeRoom; a refusal
  // but the rate bound's (Unavailable) and the memory budget's
  // (ResourceExhausted) uses up the sequence.
  absl::Status ValidatePush(const wire::PushView& request, CheckedPush* checked)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // SparseTables::MakeRoom for `rows`; the keys it evicted become the
  // checkpoint chain's tombstones and the backup's next cut's (without a
  // backup, whose next one starts from a full cut, the tables' change
  // records are dropped instead: a flood's evictions must not pile up).
  absl::Status MakeRoom(const wire::PushView& request,
                        const std::vector<SparseTables::DecodedRows>& rows)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Rows changed outside a push (evicted, imported, dropped): the backup's
  // next cut carries them; without a backup the change records go.
  void NoteRowsChanged() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The bsp path of Push: `rows` join their tables' rounds.
  absl::Status PushBsp(const wire::PushView& request,
                       std::vector<SparseTables::DecodedRows> rows,
                       proto::PushResponse* response, absl::Time until)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Serializes WriteCheckpoint; taken before mu_.
  absl::Mutex checkpoint_mu_;

  // Constant after construction.
  const Config config_;
  const int index_;
  const ModelSpec spec_;
  Counters* const counters_;
  const bool may_hold_pushes_;
  const PullBlocks pull_;  // the pull's checks and its visit of the store

  // State below is protected by mu_.
  mutable absl::Mutex mu_;
  const std::unique_ptr<BlockStore> store_ ABSL_PT_GUARDED_BY(mu_);
  // Guarded by mu_ but for SparseTables' "constants only".
  const std::unique_ptr<SparseTables> sparse_;
  // Bytes of Lookup and sparse pull replies in flight (thread-safe itself).
  mutable ReplyBytes replies_;
  PlacementEpoch epoch_ ABSL_GUARDED_BY(mu_);
  MovedBlocks moved_ ABSL_GUARDED_BY(mu_);        // blocks moved to another ps
  PushAdmission admission_ ABSL_GUARDED_BY(mu_);  // built before chain_
  CheckpointChain chain_ ABSL_GUARDED_BY(mu_);
  PushGuard guard_ ABSL_GUARDED_BY(mu_);  // config.robustness
  RefusalMemory refusals_ ABSL_GUARDED_BY(mu_);
  ConsistencyGate gate_ ABSL_GUARDED_BY(mu_);  // training.consistency
  ReplicaLog replica_log_ ABSL_GUARDED_BY(mu_);
  // A backup is named (SetReplicaLog): the sparse tables' change records
  // wait for its next cut; without one MakeRoom drops them.
  bool backup_named_ ABSL_GUARDED_BY(mu_) = false;
  // Writes store_, sparse_, admission_, guard_'s norms and replica_log_.
  ModelUpdates updates_ ABSL_GUARDED_BY(mu_);
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_SHARD_H_
