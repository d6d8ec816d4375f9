// Splitting a request's keys by their buckets' current owners
// (worker/bucket_split.h).
#include "worker/bucket_split.h"

#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/sparse_keys.h"
#include "common/status_macros.h"

namespace downpour::worker {

absl::StatusOr<int> OwnerOfKey(uint64_t key, uint32_t buckets,
                               const std::vector<int>* owners, int shards) {
  const uint32_t bucket = BucketOf(key, buckets);
  if (owners == nullptr) {
    return static_cast<int>(bucket % static_cast<uint32_t>(shards));
  }
  const int s = bucket < owners->size() ? (*owners)[bucket] : -1;
  if (s < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the placement names no ps for hash bucket ", bucket, " of ", buckets,
        ": does the coordinator run this config?"));
  }
  return s;
}

absl::StatusOr<BucketSplit> BucketSplit::Of(uint32_t buckets,
                                            const std::vector<int>* owners,
                                            int shards,
                                            const std::vector<uint64_t>& keys) {
  std::map<int, std::vector<uint32_t>> by_shard;
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSIGN_OR_RETURN(const int s, OwnerOfKey(keys[i], buckets, owners, shards));
    by_shard[s].push_back(static_cast<uint32_t>(i));
  }
  BucketSplit split;
  for (auto& [shard, at] : by_shard) {
    split.groups_.push_back({shard, std::move(at)});
  }
  return split;
}

void SplitRows::AddRows(const wire::SparseRef& ref,
                        const std::vector<uint32_t>& at, size_t value_bytes,
                        Piece* piece) {
  std::string& keys = bytes_.emplace_back(at.size() * sizeof(uint64_t), '\0');
  std::string& values = bytes_.emplace_back(at.size() * value_bytes, '\0');
  std::string& counts = bytes_.emplace_back(
      ref.counts_size > 0 ? at.size() * sizeof(uint32_t) : 0, '\0');
  for (size_t j = 0; j < at.size(); ++j) {
    const size_t i = at[j];
    std::memcpy(&keys[j * sizeof(uint64_t)], ref.keys + i * sizeof(uint64_t),
                sizeof(uint64_t));
    std::memcpy(&values[j * value_bytes], ref.values + i * value_bytes,
                value_bytes);
    if (!counts.empty()) {
      std::memcpy(&counts[j * sizeof(uint32_t)],
                  ref.counts + i * sizeof(uint32_t), sizeof(uint32_t));
    }
  }
  wire::SparseRef out;
  out.table = ref.table;
  out.keys = keys.data();
  out.keys_size = keys.size();
  out.values = values.data();
  out.values_size = values.size();
  out.counts = counts.empty() ? nullptr : counts.data();
  out.counts_size = counts.size();
  if (piece->refs.empty()) piece->keys = static_cast<int64_t>(at.size());
  piece->refs.push_back(out);
}

absl::StatusOr<std::unique_ptr<SplitRows>> SplitRows::Make(
    const std::vector<wire::SparseRef>& refs, const ModelSpec& spec,
    const std::vector<int>* owners, int shards, int keep) {
  std::unique_ptr<SplitRows> rows(new SplitRows());
  rows->pieces_.push_back({keep, {}, 0});
  std::map<int, size_t> piece_of = {{keep, 0}};
  for (const wire::SparseRef& ref : refs) {
    if (ref.table >= spec.sparse_tables().size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "push: sparse table ", ref.table, " is not in the model (",
          spec.sparse_tables().size(), " tables)"));
    }
    const size_t n = ref.keys_size / sizeof(uint64_t);
    const size_t value_bytes = n == 0 ? 0 : ref.values_size / n;
    if (ref.keys_size % sizeof(uint64_t) != 0 ||
        (n > 0 && ref.values_size % n != 0) ||
        (ref.counts_size != 0 && ref.counts_size != n * sizeof(uint32_t))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "push: sparse rows of table ", ref.table, " hold ", ref.keys_size,
          " bytes of keys, ", ref.values_size, " of values and ",
          ref.counts_size, " of counts, which do not fit one another"));
    }
    std::vector<uint64_t> keys(n);
    if (n > 0) std::memcpy(keys.data(), ref.keys, ref.keys_size);
    ASSIGN_OR_RETURN(const BucketSplit split,
                     BucketSplit::Of(spec.sparse_tables()[ref.table].buckets,
                                     owners, shards, keys));
    bool kept = false;
    for (const BucketSplit::Group& group : split.groups()) {
      auto [it, added] = piece_of.emplace(group.shard, rows->pieces_.size());
      if (added) rows->pieces_.push_back({group.shard, {}, 0});
      rows->AddRows(ref, group.at, value_bytes, &rows->pieces_[it->second]);
      kept = kept || group.shard == keep;
    }
    if (!kept) rows->AddRows(ref, {}, value_bytes, &rows->pieces_[0]);
  }
  return rows;
}

}  // namespace downpour::worker
