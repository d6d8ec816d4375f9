// Where a sparse table's key lives: keys are mixed, then cut into hash
// buckets, and the coordinator's placement map gives each ps its buckets
// (GetPlacementResponse ShardInfo.buckets, from BucketOwners).
//
//   bucket = MixKey(key) % model.sparse_buckets
//   shard  = the ps the placement gives `bucket` (BucketOwners: bucket % ps)
//
// MixKey is SplitMix64's finalizer (Steele, Lea and Flood, 2014; without
// the generator's increment, so MixKey(0) == 0): a bijection of uint64 whose every output bit depends on every input bit, so
// patterned ids (multiples of 1024, consecutive ids, hashes with a constant
// low byte) spread evenly; plain `key % n` would put them on one shard.
// Buckets are the unit the placement map moves; today it assigns bucket b
// to ps b % shards, and ShardOfKey (tools reading checkpoints, a ps without
// a placement) computes the same.
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

// REQUIRES: buckets >= 1.
inline uint32_t BucketOf(uint64_t key, uint32_t buckets) {
  return static_cast<uint32_t>(MixKey(key) % buckets);
}

// REQUIRES: buckets >= 1, shards >= 1.
inline int ShardOfKey(uint64_t key, uint32_t buckets, int shards) {
  return static_cast<int>(BucketOf(key, buckets) % static_cast<uint32_t>(shards));
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
