// The keys of one ps request re-split by their buckets' owners, for a
// request that ps answered "bucket moved" (common/sparse_keys.h
// kBucketMovedMessage): a live move handed some of its buckets to another ps.
//
//   ASSIGN_OR_RETURN(BucketSplit split,
//                    BucketSplit::Of(buckets, owners.get(), shards, keys));
//   for (const BucketSplit::Group& g : split.groups()) ... g.shard, g.at
//
//   ASSIGN_OR_RETURN(auto rows, SplitRows::Make(refs, spec, owners, shards,
//                                               keep_shard));
//
// Plain C++, no gRPC. Thread-compatible.
#ifndef DOWNPOUR_WORKER_BUCKET_SPLIT_H_
#define DOWNPOUR_WORKER_BUCKET_SPLIT_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model_spec.h"
#include "common/push_view.h"

namespace downpour::worker {

// The ps of `key` under `owners` (entry b: bucket b's ps; null: the
// coordinator's rule, bucket % shards). FailedPrecondition naming the bucket
// when the placement gives it no ps.
absl::StatusOr<int> OwnerOfKey(uint64_t key, uint32_t buckets,
                               const std::vector<int>* owners, int shards);

// Positions of `keys` grouped by their owner, each group's positions
// ascending (so sorted keys stay sorted within a group), groups by shard.
class BucketSplit {
 public:
  struct Group {
    int shard = 0;
    std::vector<uint32_t> at;  // indices into the keys split
  };

  // OwnerOfKey's errors.
  static absl::StatusOr<BucketSplit> Of(uint32_t buckets,
                                        const std::vector<int>* owners,
                                        int shards,
                                        const std::vector<uint64_t>& keys);

  const std::vector<Group>& groups() const { return groups_; }
  // True when every key is `shard`'s (or there are none).
  bool AllOf(int shard) const {
    return groups_.empty() ||
           (groups_.size() == 1 && groups_[0].shard == shard);
  }

 private:
  std::vector<Group> groups_;
};

// The sparse rows of one push request (SparseRefs into the caller's arrays)
// copied into buffers of its own, split by owner. Each piece holds, for
// every ref, the keys (ascending as they came), values and counts of that
// owner's keys. The piece of `keep` (the ps that answered "bucket moved")
// comes first and always exists, with a ref per table even where it holds no
// keys: it is resent under the request's sequence so that ps's sequence has
// no gap. Pieces of other owners hold at least one key. The refs point into
// this object: keep it while they are in use.
class SplitRows {
 public:
  struct Piece {
    int shard = 0;
    std::vector<wire::SparseRef> refs;
    int64_t keys = 0;  // keys of the first ref (each table has the same)
  };

  // InvalidArgument when a ref's values or counts do not fit its keys, or
  // it names a table the model lacks; OwnerOfKey's errors.
  static absl::StatusOr<std::unique_ptr<SplitRows>> Make(
      const std::vector<wire::SparseRef>& refs, const ModelSpec& spec,
      const std::vector<int>* owners, int shards, int keep);

  const std::vector<Piece>& pieces() const { return pieces_; }

  SplitRows(const SplitRows&) = delete;
  SplitRows& operator=(const SplitRows&) = delete;

 private:
  SplitRows() = default;
  // Appends the rows at `at` of `ref` to `piece` (bytes owned here).
  void AddRows(const wire::SparseRef& ref, const std::vector<uint32_t>& at,
               size_t value_bytes, Piece* piece);

  std::deque<std::string> bytes_;  // stable addresses for the refs
  std::vector<Piece> pieces_;
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_BUCKET_SPLIT_H_
