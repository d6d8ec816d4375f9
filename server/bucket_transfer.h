// The rows of a live bucket move (docs/OPERATIONS.md, "Moving buckets"), on
// both sides of CopyBuckets: the source answers a chunk of a pass from its
// tables; the destination imports each chunk into its own tables, where the
// rows stay out of reach of pulls and pushes until the placement gives it
// their buckets, and keeps each pass's clocks for the next one.
//
//   // source, under the shard's shared lock:
//   RETURN_IF_ERROR(ExportBucketChunk(tables, request, &response));
//   // destination:
//   IncomingMove move(id, buckets, tables.size());
//   request = move.NextRequest(0);           // a pass from the start
//   ... response = CopyBuckets(request) ...
//   RETURN_IF_ERROR(move.Accept(response, &rows));  // then import `rows`
#ifndef DOWNPOUR_SERVER_BUCKET_TRANSFER_H_
#define DOWNPOUR_SERVER_BUCKET_TRANSFER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "proto/ps.pb.h"
#include "server/sparse_table.h"

namespace downpour::server {

class SparseTables;

// The most row bytes one chunk carries (gRPC's limit is 64 MiB).
inline constexpr int64_t kMoveChunkBytes = int64_t{48} << 20;

// One chunk of `request`'s pass from `tables`: the rows of
// request.buckets[first, next) changed since request.since_clocks (all rows
// when empty), as many whole buckets as fit kMoveChunkBytes (at least one),
// in one pass over each table's index. InvalidArgument for buckets not
// ascending or beyond model.sparse_buckets, since_clocks of another table
// count, or `first` past the end. Reads only: the caller holds the shard's lock
// shared.
absl::Status ExportBucketChunk(const SparseTables& tables,
                               const proto::CopyBucketsRequest& request,
                               proto::CopyBucketsResponse* response);

// Bucket flags (entry b: 1 when b is in `buckets`) of `total` buckets.
std::vector<char> BucketSet(const std::vector<uint32_t>& buckets,
                            uint32_t total);

// The destination's view of one move: the passes it has made, the clocks
// the next pass starts from, and the rows copied. Thread-compatible.
class IncomingMove {
 public:
  IncomingMove(uint64_t id, std::vector<uint32_t> buckets, size_t tables)
      : id_(id), buckets_(std::move(buckets)), tables_(tables) {}

  uint64_t id() const { return id_; }
  const std::vector<uint32_t>& buckets() const { return buckets_; }

  // The request for the chunk of the current pass starting at `first`;
  // at_epoch > 0: the switch's last pass.
  proto::CopyBucketsRequest NextRequest(uint32_t first, uint64_t at_epoch,
                                        int to_shard) const;
  // A chunk's rows, by table, to import (in order); the pass ends when
  // response.next reaches the end, and the next pass then starts from the
  // clocks its first chunk answered. InvalidArgument when the chunk does not
  // fit (another table count, a chunk that does not advance).
  absl::Status Accept(
      const proto::CopyBucketsResponse& response, uint32_t first,
      std::vector<std::pair<uint32_t, SparseTable::Rows>>* rows);
  // The next pass copies every row again (the destination lost some of the
  // rows it imported: evicted for its memory budget, or it restarted).
  void StartOver();

  bool pass_complete() const { return pass_complete_; }
  // Rows the last complete pass carried, and all passes together.
  int64_t last_pass_rows() const { return last_pass_rows_; }
  int64_t rows_copied() const { return rows_copied_; }
  int passes() const { return passes_; }

 private:
  const uint64_t id_;
  const std::vector<uint32_t> buckets_;
  const size_t tables_;
  std::vector<uint64_t> since_;       // this pass's; empty: all rows
  std::vector<uint64_t> next_since_;  // answered by this pass's first chunk
  int64_t pass_rows_ = 0;
  int64_t last_pass_rows_ = -1;
  int64_t rows_copied_ = 0;
  int passes_ = 0;
  bool pass_complete_ = false;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_BUCKET_TRANSFER_H_
