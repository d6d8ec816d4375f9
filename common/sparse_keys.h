// Where a sparse table's key lives: keys are mixed, then cut into hash
// buckets, and the coordinator's placement map gives each ps its buckets
// (GetPlacementResponse ShardInfo.buckets, from BucketOwners).
//
//   bucket = MixKey(key) % model.sparse_buckets
//   shard  = the ps the placement gives `bucket` (BucketOwners: bucket % ps)
//
// MixKey is SplitMix64's finalizer (Steele, Lea and Flood, 2014; without
// the generator's increment, so MixKey(0) == 0): a bijection of uint64 whose
// every output bit depends on every input bit, so patterned ids (multiples of
// 1024, consecutive ids, hashes with a constant low byte) spread evenly; plain
// `key % n` would put them on one shard. Buckets are the unit the placement map
// moves; today it assigns bucket b to ps b % shards, and ShardOfKey (tools
// reading checkpoints, a ps without a placement) computes the same.
#ifndef DOWNPOUR_COMMON_SPARSE_KEYS_H_
#define DOWNPOUR_COMMON_SPARSE_KEYS_H_

#include <cstdint>
#include <vector>

namespace downpour {

inline uint64_t MixKey(uint64_t key) {
  key = (key ^ (key >> 30)) * 0xbf58476d1ce4e5b9ULL;
  key = (key ^ (key >> 27)) * 0x94d049bb133111ebULL;
  return key ^ (key >> 31);
}

// SplitMix64's output function (Steele, Lea and Flood 2014): the generator's
// step, then the finalizer MixKey is.
inline uint64_t SplitMix64(uint64_t x) {
  return MixKey(x + 0x9e3779b97f4a7c15ULL);
}

// Value i of a sparse row's initializer, uniform in [-scale, scale) from
// SplitMix64 of (seed, key, i) alone, so that it does not depend on arrival
// order, on which ps holds the key, or on whether a row exists: the ps's
// table (server/sparse_table.h) and a served snapshot of an fm model
// (model/sparse_model.h) compute the same value for a key without a row.
// scale 0: 0.
inline float SparseInitialValue(uint64_t seed, double scale, uint64_t key,
                                int i) {
  if (scale == 0) return 0.0f;
  const uint64_t bits =
      SplitMix64(SplitMix64(seed ^ SplitMix64(key)) + static_cast<uint64_t>(i));
  // 24 random bits -> [0, 1), then [-scale, scale).
  const double u =
      static_cast<double>(bits >> 40) / static_cast<double>(1 << 24);
  return static_cast<float>((2.0 * u - 1.0) * scale);
}

// Begins the message of the FAILED_PRECONDITION a ps answers a pull or push
// (at its placement epoch) whose keys include a bucket the placement gives
// another ps: the sender split its keys by an older placement (a retry across
// a live move or a take-over). Nothing was applied and a push's sequence is
// not used up, so the sender re-reads the placement, sends those keys to
// their ps and the rest here again.
inline constexpr char kBucketMovedMessage[] = "bucket moved";

// REQUIRES: buckets >= 1.
inline uint32_t BucketOf(uint64_t key, uint32_t buckets) {
  return static_cast<uint32_t>(MixKey(key) % buckets);
}

// REQUIRES: buckets >= 1, shards >= 1.
inline int ShardOfKey(uint64_t key, uint32_t buckets, int shards) {
  return static_cast<int>(BucketOf(key, buckets) %
                          static_cast<uint32_t>(shards));
}

// The coordinator's assignment of `buckets` buckets to `shards` ps: entry b
// is bucket b's ps. REQUIRES: shards >= 1.
inline std::vector<int> BucketOwners(uint32_t buckets, int shards) {
  std::vector<int> owners(buckets);
  for (uint32_t b = 0; b < buckets; ++b) {
    owners[b] = static_cast<int>(b % static_cast<uint32_t>(shards));
  }
  return owners;
}

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_SPARSE_KEYS_H_
