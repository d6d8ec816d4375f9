// The write path of one shard's model: the one place updates reach its
// BlockStore and SparseTables. It applies a push's validated dense blocks in
// order (each new version into the reply) and its decoded sparse rows, and
// the bsp rounds a ConsistencyGate completes (a dense round's mean at
// staleness 0, a sparse round's merged rows), marking the pushes they
// complete applied (PushAdmission). Each change is noted for the replica
// (ReplicaLog: an update kept, or its block marked changed) and counted.
//
//   ModelUpdates updates(index, counters,
//                        {&store, &tables, &admission, &guard, &log});
//   ASSIGN_OR_RETURN(int64_t bytes,
//                    updates.ApplyBlocks(request, checked, &response));
//   updates.ApplyRows(rows);
//   updates.MarkPushed(worker, sequence);
//   updates.ApplyCompleteRounds(&gate);  // bsp
//
// Which pushes get here, and when, is its owner's (Shard). Borrows the parts
// it writes; not thread-safe: the owner calls it under its exclusive lock.
#ifndef DOWNPOUR_SERVER_MODEL_UPDATES_H_
#define DOWNPOUR_SERVER_MODEL_UPDATES_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/counters.h"
#include "common/push_view.h"
#include "common/wire_encoding.h"
#include "proto/ps.pb.h"
#include "server/block_store.h"
#include "server/consistency_gate.h"
#include "server/dense_push_check.h"
#include "server/push_admission.h"
#include "server/push_guard.h"
#include "server/replication/replica_log.h"
#include "server/sparse_tables.h"

namespace downpour::server {

class ModelUpdates {
 public:
  // The parts written; each outlives this.
  struct Parts {
    BlockStore* store = nullptr;
    SparseTables* tables = nullptr;
    PushAdmission* admission = nullptr;
    PushGuard* guard = nullptr;  // the norms of applied blocks
    ReplicaLog* log = nullptr;
  };
  // `index` names the shard in logs; `counters` outlives this.
  ModelUpdates(int index, Counters* counters, Parts parts)
      : index_(index), counters_(counters), parts_(parts) {}
  ModelUpdates(const ModelUpdates&) = delete;
  ModelUpdates& operator=(const ModelUpdates&) = delete;

  // BlockStore::Apply of one update (`worker` -1 for a bsp round), noted for
  // the replica. InvalidArgument when it would overflow the block, which is
  // then unchanged.
  absl::StatusOr<BlockStore::PushResult> Apply(
      BlockStore::Block* block, const void* data, uint64_t base_version,
      int32_t worker, WireEncoding encoding = WireEncoding::kFloat32,
      const BlockStore::GradientStats* stats = nullptr);
  // Applies the validated blocks of `request` (`checked`: its
  // ValidateDensePush) in order, each new version into *response, each norm
  // to the PushGuard; returns the payload bytes applied. An update that would
  // overflow its block ends it with that error (counted "rejected_pushes"):
  // the blocks before it stay applied, so the push's sequence is used up (a
  // retry must not apply them twice).
  absl::StatusOr<int64_t> ApplyBlocks(const wire::PushView& request,
                                      const CheckedBlocks& checked,
                                      proto::PushResponse* response);
  // SparseTables::Apply of a push's decoded rows, noted for the replica;
  // returns the keys applied.
  int64_t ApplyRows(const std::vector<SparseTables::DecodedRows>& rows);
  // Marks a tracked push applied (or used up by a refusal), noted for the
  // replica; nothing for an untracked one (sequence 0).
  void MarkPushed(int32_t worker, uint64_t sequence);
  // Applies every round `gate` has complete (the mean, at staleness 0), marks
  // the pushes each completes applied, and bumps the gate's generation after
  // each. A dense round's new version goes to the gate (RoundVersion); one
  // that would overflow its block, or of a block placed elsewhere meanwhile,
  // is dropped with a warning.
  void ApplyCompleteRounds(ConsistencyGate* gate);

 private:
  using Done = std::vector<std::pair<int, uint64_t>>;  // (worker, sequence)

  // Closes and applies round `id` of `gate`; returns the pushes it completes.
  Done ApplyDenseRound(ConsistencyGate* gate, uint32_t id);
  Done ApplySparseRound(ConsistencyGate* gate, uint32_t id);

  const int index_;
  Counters* const counters_;
  const Parts parts_;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_MODEL_UPDATES_H_
