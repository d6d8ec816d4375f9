// One parameter-server shard: the conductor of each request. It holds the one
// lock and the order of the steps; each step's work is a part it owns: which
// pushes it takes (PushAdmission, PushGuard), the blocks (BlockStore), the
// sparse tables (SparseTables), who may push when (ConsistencyGate), what the
// next replica cut carries (ReplicaLog) and the checkpoint chain
// (CheckpointChain).
//
// Plain C++ over proto messages, with no path to gRPC
// (//server:plain_cores_test checks): the ParameterServer service adapter
// forwards each RPC here and builds the pull reply's bytes itself
// (server/pull_reply.h); tests drive it directly.
#ifndef DOWNPOUR_SERVER_SHARD_H_
#define DOWNPOUR_SERVER_SHARD_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
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
#include "server/consistency.h"
#include "server/consistency_gate.h"
#include "server/dense_push_check.h"
#include "server/pull_blocks.h"
#include "server/push_admission.h"
#include "server/push_guard.h"
#include "server/refusal_memory.h"
#include "server/replication/replica_log.h"
#include "server/sequence_window.h"
#include "server/sparse_table.h"
#include "server/sparse_tables.h"

namespace downpour::server {

// The optimizer section of a model's dense blocks (config.optimizer, with
// what the model type changes).
OptimizerSection DenseOptimizer(const Config& config);

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
                                                       Counters* counters);
  // A shard that starts from `state` (a backup's replica, in the checkpoint's
  // form) instead of reading checkpoint.dir. FailedPrecondition when `state`
  // is of another shard or optimizer.
  static absl::StatusOr<std::unique_ptr<Shard>> CreateFrom(const Config& config,
                                                           int index,
                                                           Counters* counters,
                                                           Checkpoint state);

  // What a primary streams to its backup (server/replication/replica_log.h).
  using ReplicaUpdate = ::downpour::server::ReplicaUpdate;
  using ReplicaCut = ::downpour::server::ReplicaCut;
  ReplicaCut CutForReplica(bool full, bool checks = false)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Replication by gradient: while on, each dense update applied to a block
  // not already changed since the last cut is kept (its gradient copied) for
  // the next cut, until the updates kept are as many bytes as their blocks'
  // values and state (SGD with float32 pushes: at once), when those blocks
  // go in the cut whole instead. Off (the default, and always with delay
  // compensation, which a backup cannot replay): whole blocks only.
  void SetReplicaLog(bool on) ABSL_LOCKS_EXCLUDED(mu_);
  // Counts every applied update and recorded push sequence: a cut of this
  // generation holds everything acknowledged so far.
  uint64_t generation() const ABSL_LOCKS_EXCLUDED(mu_);
  // The updates the shard holds: the sum of its blocks' versions (blocks
  // restored but not placed here included) and of its sparse rows' versions.
  uint64_t applied_total() const ABSL_LOCKS_EXCLUDED(mu_);
  // Push requests missing below each worker's newest one here
  // (PushAdmission::Holes): in flight, or lost once every worker finished.
  uint64_t push_holes() const ABSL_LOCKS_EXCLUDED(mu_);
  // The worker incarnations of which pushes are applied here
  // (PushAdmission::AppliedFrom).
  std::vector<IssuedIncarnation> applied_from() const ABSL_LOCKS_EXCLUDED(mu_);

  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  // Serves blocks `ids` from placement `epoch` on. Blocks already held are
  // kept; new ones come from the checkpoint read at start when it has them,
  // otherwise from the model's initial values.
  absl::Status Assign(uint64_t epoch, const std::vector<uint32_t>& ids)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The hash buckets of the sparse tables this shard holds, as the
  // placement map gives them (ShardInfo.buckets); InvalidArgument for a
  // bucket beyond model.sparse_buckets (nothing changes). Until called, the
  // shard holds the buckets b with b % (number of ps) == its index, the
  // coordinator's rule.
  absl::Status AssignBuckets(const std::vector<uint32_t>& buckets)
      ABSL_LOCKS_EXCLUDED(mu_);

  // One block of a pull as VisitBlocks hands it out (server/pull_blocks.h).
  using PulledBlock = ::downpour::server::PulledBlock;
  // The blocks of a pull, for a reply the caller builds, each value copied
  // once, from the store to where the caller says. First, without the lock,
  // PullBlocks::Check (InvalidArgument) and `reserve(num_blocks,
  // payload_bytes)`, so the caller can refuse (its error is returned) or
  // allocate before the lock is taken. Then, under the shared lock: the epoch
  // (Unavailable before the first Assign; FailedPrecondition for a request
  // from an older placement epoch, Unavailable for a newer one: this shard
  // has not caught up yet, retry) and, in request order, `room(block)` for
  // each block, which returns where its `block.bytes` bytes go (any
  // alignment); the shard writes them there. NotFound for a block not held
  // here (the blocks before it were written). `room` runs under the lock: it
  // must not block.
  absl::Status VisitBlocks(
      const proto::PullRequest& request,
      const std::function<absl::Status(size_t num_blocks,
                                       size_t payload_bytes)>& reserve,
      const std::function<char*(const PulledBlock& block)>& room) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // VisitBlocks into a protobuf reply (in-process callers and tests; no
  // message size limit: the gRPC reply is server/pull_reply.h's).
  absl::Status Pull(const proto::PullRequest& request,
                    proto::PullResponse* response) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // The epoch and NotFound errors of VisitBlocks, plus InvalidArgument for a
  // wrong size or a NaN/Inf gradient. All
  // blocks are checked before any is applied, so a rejected push changes
  // nothing. A push whose (worker_id, sequence) was already applied is
  // acknowledged again without being applied twice (response.duplicate); pushes
  // of one worker may arrive in any order within a window
  // (server/sequence_window.h). Identity and sequence errors are
  // PushAdmission::Admit's (e.g. OutOfRange for a replaced process). Also
  // InvalidArgument for a block id pushed twice. A push refused as invalid uses
  // up its sequence (the client does not retry it), so it cannot hold the
  // window back.
  //
  // training.consistency ssp/bsp (see server/consistency.h): a push of an
  // active worker that must wait (ssp: too far ahead of the slowest; bsp: its
  // round is not complete) is held, the mutex released, until it may go or
  // until shortly before `deadline` (at most kMaxHold); then Unavailable names
  // whom it waits for, and the client's retry (same sequence) waits again. A
  // bsp push is acknowledged once its round is applied, with the new versions.
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

  // The incarnations and push keys the coordinator issued each worker (its
  // registration and heartbeat replies), for
  // PushAdmission::LearnWorkerIncarnations: from the first call on, every
  // push is tracked and taken only with an incarnation learned here and its
  // key.
  void LearnWorkerIncarnations(
      const std::vector<IssuedIncarnation>& incarnations)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Ends every hold, now and later: held pushes return Unavailable (the ps is
  // stopping; clients retry elsewhere or later). Pushes that need no wait are
  // still applied.
  void ReleaseHeldPushes() ABSL_LOCKS_EXCLUDED(mu_);

  // How long a held push waits at most, and how long before its deadline it
  // gives up so that the reply still arrives in time.
  static constexpr absl::Duration kMaxHold = absl::Seconds(10);
  static constexpr absl::Duration kHoldMargin = absl::Milliseconds(500);

  // The sparse rows of a pull (request.sparse, which then asks for no
  // blocks): for each SparseRows, the values and versions of its keys, in
  // order (server/sparse_table.h: a key without a row reads its initial
  // values; a pull creates no row). InvalidArgument for a table the model
  // lacks, keys that are not whole uint64s, not sorted and unique, more than
  // SparseTable::kMaxKeysPerRequest, or of a bucket another ps serves (the
  // reader's config differs), or blocks asked for too; the epoch errors of
  // VisitBlocks.
  absl::Status PullSparse(const proto::PullRequest& request,
                          proto::PullResponse* response) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // One sparse table as Status and tests see it.
  using SparseTableStats = SparseTables::Stats;
  std::vector<SparseTableStats> sparse_stats() const ABSL_LOCKS_EXCLUDED(mu_);
  // The figures of `tables` summed (id 0), for reports over all tables.
  static SparseTableStats SumOf(const std::vector<SparseTableStats>& tables) {
    return SparseTables::SumOf(tables);
  }

  proto::ChecksumResponse Checksums() const ABSL_LOCKS_EXCLUDED(mu_);

  // The rows of `request.keys` (any order, repeats allowed) of one sparse
  // table, read-only: a key without a row gets the table's initial values
  // and is marked missing. InvalidArgument for an unknown table, keys that
  // are not whole uint64s, more than SparseTable::kMaxKeysPerRequest keys,
  // or a key of a bucket this shard does not hold; Unavailable before the
  // first placement. Creates nothing.
  absl::Status Lookup(const proto::LookupRequest& request,
                      proto::LookupResponse* response) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Writes the blocks, versions, optimizer state and applied sequences as the
  // next checkpoint generation in checkpoint.dir (ShardCheckpoints::Write),
  // at the placement epoch served, or at the highest epoch the folder held at
  // Create when that is higher (a coordinator that lost its state counts
  // epochs from 1 again). FailedPrecondition when another daemon wrote a
  // generation of a higher epoch (this one was replaced). OK without writing
  // when checkpoints are off. `may_write`, when given, is asked just before
  // the file is renamed into place; its error abandons the write (a ps that
  // learned meanwhile that it was replaced).
  //
  // First, with eviction.* set (even without checkpoint.dir), the sparse
  // tables evict under the exclusive lock; a replicated shard sends the
  // evicted keys to its backup with its next cut. With
  // checkpoint.incremental, a full cut or a delta (CheckpointChain::TakeCut);
  // a failed write makes the next one a full cut. One call at a time (a
  // second waits).
  absl::Status WriteCheckpoint(const std::function<absl::Status()>& may_write =
                                   nullptr) ABSL_LOCKS_EXCLUDED(mu_);

  // True when Push may hold a request (training.consistency ssp or bsp).
  bool may_hold_pushes() const { return may_hold_pushes_; }

  uint64_t epoch() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t num_blocks() const ABSL_LOCKS_EXCLUDED(mu_);
  int index() const { return index_; }

 private:
  static absl::StatusOr<std::unique_ptr<Shard>> CreateShard(
      const Config& config, int index, Counters* counters, ModelSpec spec,
      std::unique_ptr<Optimizer> optimizer, RestoredShard restored);
  Shard(const Config& config, int index, ModelSpec spec,
        std::unique_ptr<BlockStore> store, std::unique_ptr<SparseTables> sparse,
        RestoredShard restored, std::map<int32_t, SequenceWindow> windows,
        Counters* counters);

  using DecodedRows = SparseTables::DecodedRows;
  using Done = std::vector<std::pair<int, uint64_t>>;  // (worker, sequence)

  absl::Status CheckEpoch(const char* op, uint64_t request_epoch) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // PushAdmission's verdict on `request`. A refusal is counted
  // ("rejected_pushes"); a duplicate is counted ("duplicate_pushes") and
  // acknowledged into *response.
  absl::StatusOr<PushAdmission::Verdict> Admit(
      const wire::PushView& request, proto::PushResponse* response) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  // A push as validated for Apply, kept across the waits of one Push.
  struct CheckedPush : CheckedBlocks {
    std::vector<DecodedRows> rows;
    bool waited = false;  // a wait was counted ("ssp_waits", "bsp_waits")
  };
  // What one pass of Push over the gate decided.
  enum class Turn { kAnswered, kAgain, kApply };
  // One pass of Push, in order: epoch, admission, validation, the gate's
  // route (a bsp push is answered through PushBsp), the ssp turn.
  absl::StatusOr<Turn> TakeTurn(const wire::PushView& request,
                                const std::vector<uint32_t>& ids,
                                absl::Time until, proto::PushResponse* response,
                                CheckedPush* checked)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Validates `request` into *checked (ValidateDensePush, then
  // SparseTables::DecodePush); nothing changes but the guard's push count.
  // A push refused for good (InvalidArgument, NotFound) or as an outlier
  // (Aborted) uses up its sequence; one past the rate bound (Unavailable)
  // does not.
  absl::Status ValidatePush(const wire::PushView& request, CheckedPush* checked)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The ssp gate's word on `request` (ids: its blocks): false when it may be
  // applied now; true after waiting (releasing mu_) for the gate to change,
  // when everything must be checked again; Unavailable (a hold error) when
  // `until` came first. *waited: whether any wait happened (counted once).
  absl::StatusOr<bool> AwaitSspTurn(const wire::PushView& request,
                                    const std::vector<uint32_t>& ids,
                                    absl::Time until, bool* waited)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies the validated `blocks` of `request` in order, each new version
  // into *response; returns the payload bytes applied. An update that would
  // overflow its block ends it with that error: the blocks before it stay
  // applied, so the sequence is used up (a retry must not apply them twice).
  absl::StatusOr<int64_t> ApplyBlocks(
      const wire::PushView& request,
      const std::vector<BlockStore::Block*>& blocks,
      const std::vector<BlockStore::GradientStats>& stats,
      proto::PushResponse* response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The one place updates reach the store: `worker` is -1 for a bsp round.
  // InvalidArgument when the update would overflow (BlockStore::Apply); the
  // block is then unchanged. Noted for the replica (ReplicaLog).
  absl::StatusOr<BlockStore::PushResult> ApplyUpdate(
      BlockStore::Block* block, const void* data, uint64_t base_version,
      int32_t worker, WireEncoding encoding = WireEncoding::kFloat32,
      const BlockStore::GradientStats* stats = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies every complete bsp round (the mean, at staleness 0) and marks the
  // pushes it completes as applied.
  void ApplyCompleteRounds() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Closes and applies the complete round of block `id` (dense) or of a
  // sparse table (ConsistencyGate::TakeSparseRound); returns the pushes it
  // completes.
  Done ApplyDenseRound(uint32_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Done ApplySparseRound(uint32_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits (releasing mu_) until the gate changes or `until`; false at `until`.
  bool AwaitGateChange(absl::Time until) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks a tracked push applied (or used up by a refusal) and notes the
  // change for the replica.
  void MarkPushed(int32_t worker, uint64_t sequence)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The bsp path of Push (mu_ held throughout but across waits). `rows`:
  // the push's decoded sparse rows, each table a round of its own.
  absl::Status PushBsp(const wire::PushView& request,
                       std::vector<DecodedRows> rows,
                       proto::PushResponse* response, absl::Time until)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Eviction (config eviction.*) of every table, counted; the keys are kept
  // for the next delta checkpoint.
  void EvictRows() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A checkpoint copied at one moment (CheckpointChain::TakeCut: a full cut
  // or a delta).
  CheckpointChain::Cut CutCheckpoint() const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  // Serializes WriteCheckpoint; taken before mu_.
  absl::Mutex checkpoint_mu_;

  // Constant after construction.
  const Config config_;
  const int index_;
  const ModelSpec spec_;
  Counters* const counters_;
  const bool may_hold_pushes_;
  // The pull's checks and its visit of the store (under mu_).
  const PullBlocks pull_;

  // State below is protected by mu_.
  mutable absl::Mutex mu_;
  const std::unique_ptr<BlockStore> store_ ABSL_PT_GUARDED_BY(mu_);
  // The model's sparse tables and the buckets held; guarded by mu_ (read
  // under a shared lock, changed under an exclusive one) but for what
  // SparseTables marks "constants only".
  const std::unique_ptr<SparseTables> sparse_;
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  // Worker identities, incarnations and the applied-push windows.
  PushAdmission admission_ ABSL_GUARDED_BY(mu_);
  // The checkpoint read at start (its blocks serve later Assigns), the
  // epoch floor found then, and the chain written since (incremental cuts,
  // tombstones).
  CheckpointChain chain_ ABSL_GUARDED_BY(mu_);
  // Norm and rate bounds against one bad worker (config.robustness).
  PushGuard guard_ ABSL_GUARDED_BY(mu_);
  // The guard's outlier refusals, answered again to a retry (a push it
  // refused is answered OK with PushResponse.refused: not retried).
  RefusalMemory refusals_ ABSL_GUARDED_BY(mu_);
  // training.consistency: ssp clocks, bsp rounds, holds.
  ConsistencyGate gate_ ABSL_GUARDED_BY(mu_);
  // Replication: changes so far, the blocks changed since the last cut, and
  // the updates kept for it (SetReplicaLog).
  ReplicaLog replica_log_ ABSL_GUARDED_BY(mu_);
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_SHARD_H_
