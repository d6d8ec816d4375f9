// Which pushes a ps shard takes, and which it has taken: the worker's
// identity (a configured worker id, an incarnation the coordinator issued it,
// a sequence near its window) and the exactly-once window per worker.
//
//   PushAdmission::Options options;
//   options.num_workers = 4;
//   PushAdmission admission(options);
//   ASSIGN_OR_RETURN(PushAdmission::Verdict verdict,
//                    admission.Admit(request.worker_id, request.sequence));
//   if (verdict == PushAdmission::Verdict::kDuplicate) acknowledge again;
//   else { apply; if (request.sequence > 0) admission.MarkApplied(...); }
//
// It knows workers and sequences (common/push_sequence.h), not what a push
// carries, so any table a shard holds (the dense BlockStore today) admits its
// pushes through the same object and shares one window per worker.
//
// Incarnations: before the first LearnWorkerIncarnations (no coordinator:
// tests, benchmarks) any incarnation is taken, and untracked pushes
// (sequence 0). From then on (a coordinated job) every push is tracked and is
// taken only with an incarnation learned there and that incarnation's push
// key: a newer incarnation is Unavailable until the next heartbeat tells it,
// an older one is OutOfRange (a replaced process, which must stop), one far
// beyond every incarnation heard of is InvalidArgument (never issued: a
// forged 2^32-1 would otherwise be retried forever), and a wrong push key is
// PermissionDenied. A replaced process may still have its duplicates
// acknowledged only while no newer incarnation of its worker has pushed here.
//
// Jumps: a worker keeps at most kPushRequestsPerShard requests in flight per
// shard, so once this object has applied a push of a worker's incarnation
// ("anchored" it), a later one lies at most kMaxAnchoredJump past its window.
// The first push of an incarnation here may lie up to kMaxSequenceJump past
// it: a shard restored from an older checkpoint, or taken over from a backup
// that was behind, missed what the worker pushed meanwhile.
//
// No error message names another member's incarnation, key or sequence.
//
// Thread-compatible, like BlockStore: the owner (Shard) serialises, holding
// its mutex shared for the const methods and exclusively for the others.
#ifndef DOWNPOUR_SERVER_PUSH_ADMISSION_H_
#define DOWNPOUR_SERVER_PUSH_ADMISSION_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/counters.h"
#include "server/sequence_window.h"

namespace downpour::server {

// What the coordinator issued a worker process (its heartbeat replies to a
// ps: proto::WorkerIncarnation): the push key's digest, never the key.
struct IssuedIncarnation {
  int32_t worker = 0;
  uint64_t incarnation = 0;
  // common/push_key.h PushKeyDigest; 0: none issued (a state file from
  // before keys).
  uint64_t push_key_digest = 0;
};

class PushAdmission {
 public:
  struct Options {
    // Workers 0 .. num_workers - 1 (WorkerSlots(config.cluster)) may push.
    int num_workers = 0;
    // Names this ps in messages ("push: ps 2 has not heard of ...").
    int shard_index = 0;
    // Where "sequence_window_skips" is counted. Not owned; may be null.
    Counters* counters = nullptr;
  };

  // The last kIncarnationsKept incarnations learned per worker are kept.
  static constexpr size_t kIncarnationsKept = 8;
  // How far past a worker's applied window (its n part, CountOf) the first
  // push of an incarnation here may jump (a shard restored from an older
  // checkpoint misses at most what was pushed since it was written), and how
  // far any later one may (the client keeps at most kPushRequestsPerShard in
  // flight; the window's width leaves room).
  static constexpr uint64_t kMaxSequenceJump = uint64_t{1} << 20;
  static constexpr uint64_t kMaxAnchoredJump = SequenceWindow::kWidth;
  // How far past the newest worker incarnation this ps has heard of a push's
  // incarnation may lie and still be one the coordinator issued since the
  // ps's last heartbeat (Unavailable: retried); beyond it, InvalidArgument.
  static constexpr uint64_t kIncarnationSlack = 4096;

  // `windows`: the applied-push windows a checkpoint or replica held.
  explicit PushAdmission(const Options& options,
                         std::map<int32_t, SequenceWindow> windows = {});

  PushAdmission(const PushAdmission&) = delete;
  PushAdmission& operator=(const PushAdmission&) = delete;

  // The incarnations the coordinator issued each worker (its registration
  // and heartbeat replies): from the first call on, Admit checks a tracked
  // push's incarnation against them (see the file comment). Workers outside
  // [0, num_workers) and incarnation 0 are ignored.
  void LearnWorkerIncarnations(
      const std::vector<IssuedIncarnation>& incarnations);

  enum class Verdict {
    kNew,        // apply it (then MarkApplied when tracked)
    kDuplicate,  // applied before: acknowledge again, apply nothing
  };

  // The verdict on a push of `worker` with `sequence` (0: untracked, kNew
  // once the worker id is good, only before incarnations are known) and
  // `push_key`. Changes nothing, so a refused push leaves no trace to
  // checkpoint or replicate. Errors:
  //   InvalidArgument: a worker id outside [0, num_workers) ("push: worker_id
  //     7 is not a configured worker (4 worker slots in cluster.workers and
  //     cluster.max_workers: 0 to 3)"); n = 0; sequence 0 in a coordinated job;
  //     n too far past the worker's window (see Jumps above); an incarnation
  //     never issued.
  //   Unavailable: an incarnation not heard of yet (retry after a heartbeat).
  //   OutOfRange: an incarnation replaced, or older than one that has pushed
  //     here ("...; stop this process").
  //   PermissionDenied: a push key that is not the incarnation's (its digest
  //     differs from the one the coordinator sent).
  absl::StatusOr<Verdict> Admit(int32_t worker, uint64_t sequence,
                                uint64_t push_key = 0) const;

  // Records tracked push `sequence` of `worker` as applied, or as used up by
  // a refusal the client does not retry (so it cannot hold the window back).
  // A sequence past the window counts the ones it skips
  // ("sequence_window_skips") and logs a warning.
  // REQUIRES: sequence > 0 and IsNew(worker, sequence).
  void MarkApplied(int32_t worker, uint64_t sequence);

  // The window's word alone, without the identity checks of Admit: true when
  // `sequence` of `worker` has not been applied and is not stale.
  bool IsNew(int32_t worker, uint64_t sequence) const;
  // True when `sequence` of `worker` has been applied.
  bool Applied(int32_t worker, uint64_t sequence) const;

  // True when `sequence` lies within `worker`'s window, past its base, so
  // that marking it applied moves no window: an empty push there (the piece
  // of a request whose blocks all moved to another ps, sent so that this
  // ps's sequences have no hole) fills only its own slot.
  bool WithinWindow(int32_t worker, uint64_t sequence) const;

  // The push sequences missing below each worker's newest here, summed
  // (SequenceWindow::holes): in flight while workers push, lost once every
  // worker has finished.
  uint64_t Holes() const;

  // Per worker with a tracked push applied here (from a checkpoint or replica
  // too), the incarnation of its newest (push_key 0).
  std::vector<IssuedIncarnation> AppliedFrom() const;

  // Per worker id, its applied-push window (for checkpoints and replicas).
  const std::map<int32_t, SequenceWindow>& windows() const { return windows_; }

 private:
  struct Issued {
    uint64_t incarnation = 0;
    uint64_t push_key_digest = 0;
  };

  // The checks of Admit before the window is consulted.
  absl::Status CheckIdentity(int32_t worker, uint64_t sequence,
                             uint64_t push_key) const;
  absl::Status CheckIncarnation(int32_t worker, uint64_t incarnation,
                                uint64_t push_key) const;
  SequenceWindow::Verdict WindowVerdict(int32_t worker,
                                        uint64_t sequence) const;

  // Constant after construction.
  const Options options_;

  // Per worker id, the push sequences applied (exactly-once pushes).
  std::map<int32_t, SequenceWindow> windows_;
  // Per worker id, the incarnations the coordinator issued it (ascending)
  // with their push keys' digests; checked once incarnations_known_.
  std::map<int32_t, std::vector<Issued>> incarnations_;
  bool incarnations_known_ = false;
  // Per worker id, the incarnation of which this object applied a push (see
  // Jumps in the file comment).
  std::map<int32_t, uint64_t> anchored_;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_PUSH_ADMISSION_H_
