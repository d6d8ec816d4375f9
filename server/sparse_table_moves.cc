// SparseTable's part in live bucket moves (server/bucket_transfer.h): the
// rows of a set of buckets read, rows imported, rows moved away dropped.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "common/sparse_keys.h"
#include "common/status_macros.h"
#include "server/sparse_table.h"

namespace downpour::server {

SparseTable::Rows SparseTable::RowsInBuckets(
    const std::vector<char>& in_buckets, uint32_t buckets, uint64_t since,
    int64_t max_rows, uint32_t* end) const {
  struct Match {
    uint32_t bucket;
    uint32_t row;
    uint64_t key;
  };
  std::vector<Match> matches;
  std::vector<int64_t> per_bucket(buckets, 0);
  const bool by_clock = since > 0 && track_clocks_;
  for (const auto& [key, row] : index_) {
    const uint32_t bucket = BucketOf(key, buckets);
    if (bucket >= in_buckets.size() || in_buckets[bucket] == 0) continue;
    if (by_clock && RowClock(row) <= since) continue;
    matches.push_back({bucket, row, key});
    ++per_bucket[bucket];
  }
  // The first flagged buckets whose rows fit, at least one.
  uint32_t cut = buckets;
  int64_t taken = 0;
  bool any = false;
  for (uint32_t b = 0; b < buckets && b < in_buckets.size(); ++b) {
    if (in_buckets[b] == 0) continue;
    if (any && max_rows > 0 && taken + per_bucket[b] > max_rows) {
      cut = b;
      break;
    }
    taken += per_bucket[b];
    any = true;
  }
  if (end != nullptr) *end = cut;
  std::vector<std::pair<uint64_t, uint32_t>> order;
  order.reserve(static_cast<size_t>(taken));
  for (const Match& m : matches) {
    if (m.bucket < cut) order.emplace_back(m.key, m.row);
  }
  std::sort(order.begin(), order.end());
  return RowsOf(order);
}

absl::Status SparseTable::Import(const Rows& rows) {
  RETURN_IF_ERROR(CheckRows(rows, "move", /*finite=*/true));
  if (rows.keys.empty()) return absl::OkStatus();
  ++clock_;
  const int64_t created_before = created_;
  for (size_t i = 0; i < rows.keys.size(); ++i) {
    const uint32_t row = PutRow(rows, i);
    if (track_clocks_) RowClock(row) = clock_;
    NoteChanged(row);
  }
  created_ = created_before;  // rows held, not created by training
  return absl::OkStatus();
}

std::vector<uint64_t> SparseTable::KeysInBuckets(
    const std::vector<char>& in_buckets, uint32_t buckets) const {
  std::vector<uint64_t> keys;
  const auto flagged = [&](uint64_t key) {
    const uint32_t bucket = BucketOf(key, buckets);
    return bucket < in_buckets.size() && in_buckets[bucket] != 0;
  };
  if (row_keys_) {  // the arena's keys in order: no walk of the index
    for (int64_t r = 0; r < rows(); ++r) {
      const uint64_t key = RowKey(static_cast<uint32_t>(r));
      if (flagged(key)) keys.push_back(key);
    }
  } else {
    for (const auto& entry : index_) {
      if (flagged(entry.first)) keys.push_back(entry.first);
    }
  }
  return keys;
}

void SparseTable::KeepRowKeys(bool on) {
  if (on == row_keys_ || (!on && options_.track_changes)) return;
  row_keys_ = on;
  keys_.clear();
  keys_.shrink_to_fit();
  if (!on) return;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    keys_.emplace_back(new uint64_t[kRowsPerChunk]);
  }
  for (const auto& [key, row] : index_) RowKey(row) = key;
}

std::vector<uint64_t> SparseTable::DropMovedKeys(const uint64_t* keys,
                                                 int64_t n) {
  std::vector<uint64_t> victims;
  const int64_t count = MarkKeys(keys, n, &victims);
  if (count == 0) return {};
  // DropRows counts the dropped rows' versions evicted (version_sum_ keeps
  // them): these moved to another ps instead, and leave with them.
  const uint64_t evicted_before = evicted_versions_;
  std::vector<uint64_t> dropped = DropRows(victims, count);
  version_sum_ -= evicted_versions_ - evicted_before;
  evicted_versions_ = evicted_before;
  if (options_.track_changes) {
    evicted_keys_.insert(evicted_keys_.end(), dropped.begin(), dropped.end());
  }
  return dropped;
}

}  // namespace downpour::server
