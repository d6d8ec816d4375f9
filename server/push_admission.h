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
// tests, benchmarks) any incarnation is taken. From then on a tracked push is
// taken only with an incarnation learned there: a newer one is Unavailable
// until the next heartbeat tells it, an older one is OutOfRange (a replaced
// process, which must stop), and one far beyond every incarnation heard of is
// InvalidArgument (never issued: a forged 2^32-1 would otherwise be retried
// forever). A replaced process may still have its duplicates acknowledged
// only while no newer incarnation of its worker has pushed here.
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

class PushAdmission {
 public:
  struct Options {
    // Workers 0 .. num_workers - 1 (config.cluster.workers) may push.
    int num_workers = 0;
    // Names this ps in messages ("push: ps 2 has not heard of ...").
    int shard_index = 0;
    // Where "sequence_window_skips" is counted. Not owned; may be null.
    Counters* counters = nullptr;
  };

  // The last kIncarnationsKept incarnations learned per worker are kept.
  static constexpr size_t kIncarnationsKept = 8;
  // How far past a worker's applied window (its n part, CountOf) a push
  // sequence may jump; a client keeps at most kPushRequestsPerShard in flight, and
  // a shard restored from an older checkpoint misses at most what was pushed
  // since it was written.
  static constexpr uint64_t kMaxSequenceJump = uint64_t{1} << 20;
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
      const std::vector<std::pair<int32_t, uint64_t>>& incarnations);

  enum class Verdict {
    kNew,        // apply it (then MarkApplied when tracked)
    kDuplicate,  // applied before: acknowledge again, apply nothing
  };

  // The verdict on a push of `worker` with `sequence` (0: untracked, always
  // kNew once the worker id is good). Changes nothing, so a refused push
  // leaves no trace to checkpoint or replicate. Errors:
  //   InvalidArgument: a worker id outside [0, num_workers) ("push: worker_id
  //     7 is not a configured worker (4 in cluster.workers: 0 to 3)"); n = 0;
  //     n more than kMaxSequenceJump past the worker's window; an incarnation
  //     never issued.
  //   Unavailable: an incarnation not heard of yet (retry after a heartbeat).
  //   OutOfRange: an incarnation replaced, or older than one that has pushed
  //     here ("...; stop this process").
  absl::StatusOr<Verdict> Admit(int32_t worker, uint64_t sequence) const;

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

  // The push sequences missing below each worker's newest here, summed
  // (SequenceWindow::holes): in flight while workers push, lost once every
  // worker has finished.
  uint64_t Holes() const;

  // Per worker id, its applied-push window (for checkpoints and replicas).
  const std::map<int32_t, SequenceWindow>& windows() const { return windows_; }

 private:
  // The checks of Admit before the window is consulted.
  absl::Status CheckIdentity(int32_t worker, uint64_t sequence) const;
  absl::Status CheckIncarnation(int32_t worker, uint64_t incarnation) const;
  SequenceWindow::Verdict WindowVerdict(int32_t worker,
                                        uint64_t sequence) const;

  // Constant after construction.
  const Options options_;

  // Per worker id, the push sequences applied (exactly-once pushes).
  std::map<int32_t, SequenceWindow> windows_;
  // Per worker id, the incarnations the coordinator issued it (ascending);
  // checked once incarnations_known_.
  std::map<int32_t, std::vector<uint64_t>> incarnations_;
  bool incarnations_known_ = false;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_PUSH_ADMISSION_H_
