#include "server/sequence_window.h"

#include "common/push_sequence.h"

namespace downpour::server {

SequenceWindow::Verdict SequenceWindow::Check(uint64_t sequence) const {
  const uint64_t incarnation = IncarnationOf(sequence);
  if (incarnation < IncarnationOf(base_)) return Verdict::kStale;
  if (incarnation > IncarnationOf(base_)) return Verdict::kNew;
  if (sequence <= base_) return Verdict::kDuplicate;
  const uint64_t offset = sequence - base_ - 1;
  if (offset < kWidth && (mask_ >> offset) & 1) return Verdict::kDuplicate;
  return Verdict::kNew;
}

uint64_t SequenceWindow::MarkApplied(uint64_t sequence) {
  uint64_t skipped = 0;
  if (IncarnationOf(sequence) > IncarnationOf(base_)) {
    base_ = MakeSequence(IncarnationOf(sequence), 0);  // n counts from 1
    mask_ = 0;
  }
  uint64_t offset = sequence - base_ - 1;
  if (offset >= kWidth) {
    // Move the window so that `sequence` is its last slot.
    const uint64_t shift = offset - (kWidth - 1);
    const uint64_t kept = shift >= kWidth ? 0 : mask_ >> shift;
    const uint64_t dropped =
        shift >= kWidth ? mask_ : mask_ & ((uint64_t{1} << shift) - 1);
    skipped = shift - static_cast<uint64_t>(__builtin_popcountll(dropped));
    base_ += shift;
    mask_ = kept;
    offset = kWidth - 1;
  }
  mask_ |= uint64_t{1} << offset;
  // Slide over the applied prefix.
  while (mask_ & 1) {
    mask_ >>= 1;
    ++base_;
  }
  return skipped;
}

}  // namespace downpour::server
