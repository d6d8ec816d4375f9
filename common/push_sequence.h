// The one home of a push's sequence number layout: (incarnation << 32) | n.
//
// The incarnation is the one the coordinator gave the worker process at
// registration (RegisterWorkerResponse.incarnation); n = 1, 2, ... counts that
// process's push requests to one shard. Sequence 0 means an untracked push
// (not exactly-once). The worker's client makes sequences, the ps's
// SequenceWindow and PushAdmission read them; nothing else splits or joins
// the two parts by hand.
//
//   const uint64_t first = MakeSequence(incarnation, 1);
//   IncarnationOf(first) == incarnation;  CountOf(first) == 1
#ifndef DOWNPOUR_COMMON_PUSH_SEQUENCE_H_
#define DOWNPOUR_COMMON_PUSH_SEQUENCE_H_

#include <cstdint>

namespace downpour {

// Bits of a sequence that hold n; the incarnation takes the ones above.
inline constexpr int kSequenceCountBits = 32;
// The largest n (and the largest incarnation) a sequence can hold.
inline constexpr uint64_t kMaxSequenceCount =
    (uint64_t{1} << kSequenceCountBits) - 1;

// The sequence of push `n` of `incarnation`. REQUIRES: n <= kMaxSequenceCount
// (a larger n would spill into the incarnation) and incarnation <=
// kMaxSequenceCount.
constexpr uint64_t MakeSequence(uint64_t incarnation, uint64_t n) {
  return (incarnation << kSequenceCountBits) | n;
}

// The incarnation part of `sequence`.
constexpr uint64_t IncarnationOf(uint64_t sequence) {
  return sequence >> kSequenceCountBits;
}

// The n part of `sequence` (0 for an incarnation's base, before its first
// push).
constexpr uint64_t CountOf(uint64_t sequence) {
  return sequence & kMaxSequenceCount;
}

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_PUSH_SEQUENCE_H_
