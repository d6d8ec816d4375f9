// What a ps may know of a worker's push key: a one-way digest of it. The
// coordinator issues each worker process a random push key (its
// registration reply, to that process alone) and tells the ps members only
// the digest, so no reply to a ps, a spare, or anyone reading a ps's memory or
// checkpoints carries what a forged push would need.
//
//   // coordinator: WorkerIncarnation.push_key_digest
//   const uint64_t digest = PushKeyDigest(worker, incarnation, push_key);
//   // ps, on each push: PushKeyMatches(worker, incarnation, request_key,
//   digest)
#ifndef DOWNPOUR_COMMON_PUSH_KEY_H_
#define DOWNPOUR_COMMON_PUSH_KEY_H_

#include <cstdint>

namespace downpour {

// The first 8 bytes of SHA-256 over a fixed label, the worker id, the
// incarnation and the key (little-endian), as an integer; never 0 (0 means
// "no key issued" on the wire). Bound to the worker and incarnation, so a key
// cannot be replayed under another identity.
uint64_t PushKeyDigest(int32_t worker, uint64_t incarnation, uint64_t push_key);

// True when `push_key` is the key whose digest is `digest`; compares in time
// independent of where the digests differ.
bool PushKeyMatches(int32_t worker, uint64_t incarnation, uint64_t push_key,
                    uint64_t digest);

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_PUSH_KEY_H_
