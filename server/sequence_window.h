// Exactly-once bookkeeping for one worker's pushes to one shard, with several
// pushes in flight at once (they may arrive in any order).
//
//   SequenceWindow window;                       // nothing applied yet
//   switch (window.Check(request.sequence)) {
//     case SequenceWindow::Verdict::kNew: Apply(...); window.MarkApplied(seq);
//     case SequenceWindow::Verdict::kDuplicate: acknowledge again, apply
//     nothing case SequenceWindow::Verdict::kStale: refuse (an older
//     incarnation)
//   }
//
// A sequence is MakeSequence(incarnation, n) (common/push_sequence.h): the
// incarnation the coordinator gave the worker process at registration
// (RegisterWorkerResponse.incarnation) and n = 1, 2, ... its push requests to
// this shard. The window remembers every
// sequence up to `base` as applied, and which of the next kWidth are.
// A sequence of a newer incarnation starts a fresh window (the worker
// restarted); one of an older incarnation is stale (a replaced process).
//
// The client keeps fewer than kWidth requests in flight past its oldest
// unacknowledged one, so in normal operation a sequence never lands beyond the
// window. One that does (the shard restarted from an older checkpoint while
// the worker went on) moves the window up to it: sequences left behind count
// as applied (returned by the jump so the caller can say how many).
//
// Thread-compatible: the owner (Shard) serialises.
#ifndef DOWNPOUR_SERVER_SEQUENCE_WINDOW_H_
#define DOWNPOUR_SERVER_SEQUENCE_WINDOW_H_

#include <cstdint>

namespace downpour::server {

class SequenceWindow {
 public:
  // How far past `base` a sequence may be remembered individually.
  static constexpr uint64_t kWidth = 64;

  enum class Verdict { kNew, kDuplicate, kStale };

  SequenceWindow() = default;
  // A window restored from a checkpoint (base() and mask()).
  SequenceWindow(uint64_t base, uint64_t mask) : base_(base), mask_(mask) {}

  Verdict Check(uint64_t sequence) const;

  // Records `sequence` as applied. Returns how many sequences between the old
  // window and this one were never seen and now count as applied (0 unless
  // the sequence lay beyond the window of the same incarnation).
  // REQUIRES: Check(sequence) == kNew.
  uint64_t MarkApplied(uint64_t sequence);

  // Every sequence <= base() of base()'s incarnation has been applied.
  uint64_t base() const { return base_; }
  // Bit i: sequence base() + 1 + i has been applied.
  uint64_t mask() const { return mask_; }

  // Sequences below the newest applied one that have not arrived: in flight
  // (they arrive out of order), or never to come (acknowledged by a server
  // whose state this one does not hold). 0 while nothing past base() is in.
  // How far past base() the newest applied sequence lies (0: none past it).
  uint64_t newest_offset() const {
    return mask_ == 0 ? 0 : static_cast<uint64_t>(64 - __builtin_clzll(mask_));
  }

  uint64_t holes() const {
    if (mask_ == 0) return 0;
    const int top = 63 - __builtin_clzll(mask_);
    return static_cast<uint64_t>(top + 1 - __builtin_popcountll(mask_));
  }

 private:
  uint64_t base_ = 0;
  uint64_t mask_ = 0;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_SEQUENCE_WINDOW_H_
