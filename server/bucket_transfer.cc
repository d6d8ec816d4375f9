#include "server/bucket_transfer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/sparse_rows_proto.h"
#include "server/sparse_tables.h"

namespace downpour::server {
namespace {

absl::Status CheckRequest(const SparseTables& tables,
                          const proto::CopyBucketsRequest& request) {
  const uint32_t total = tables.buckets();
  for (int i = 0; i < request.buckets_size(); ++i) {
    const uint32_t b = request.buckets(i);
    if (b >= total || (i > 0 && b <= request.buckets(i - 1))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "copy buckets: bucket ", b, " at position ", i,
          " is not ascending or not below model.sparse_buckets ", total));
    }
  }
  if (request.since_clocks_size() != 0 &&
      static_cast<size_t>(request.since_clocks_size()) != tables.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("copy buckets: ", request.since_clocks_size(),
                     " clocks for ", tables.size(), " sparse tables"));
  }
  if (static_cast<int>(request.first()) > request.buckets_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "copy buckets: chunk start ", request.first(), " is past the move's ",
        request.buckets_size(), " buckets"));
  }
  return absl::OkStatus();
}

// The most rows one chunk carries: kMoveChunkBytes over a key's bytes in
// every table (key, values and state, version and clock).
int64_t ChunkRows(const SparseTables& tables) {
  int64_t bytes = 0;
  for (size_t t = 0; t < tables.size(); ++t) {
    const SparseTable& table = tables.table(t);
    bytes +=
        20 + static_cast<int64_t>(table.dim()) * (1 + table.state_slots()) * 4;
  }
  return std::max<int64_t>(1, kMoveChunkBytes / std::max<int64_t>(1, bytes));
}

}  // namespace

std::vector<char> BucketSet(const std::vector<uint32_t>& buckets,
                            uint32_t total) {
  std::vector<char> in(total, 0);
  for (uint32_t b : buckets) {
    if (b < total) in[b] = 1;
  }
  return in;
}

absl::Status ExportBucketChunk(const SparseTables& tables,
                               const proto::CopyBucketsRequest& request,
                               proto::CopyBucketsResponse* response) {
  response->Clear();
  RETURN_IF_ERROR(CheckRequest(tables, request));
  const uint32_t first = request.first();
  const std::vector<uint32_t> left(request.buckets().begin() + first,
                                   request.buckets().end());
  std::vector<char> in = BucketSet(left, tables.buckets());
  // Table 0 decides where the chunk ends (whole buckets within the bound);
  // the other tables send the same buckets.
  uint32_t end = tables.buckets();
  for (size_t t = 0; t < tables.size(); ++t) {
    const SparseTable& table = tables.table(t);
    const uint64_t since =
        request.since_clocks().empty() ? 0 : request.since_clocks(t);
    const SparseTable::Rows rows =
        t == 0 ? table.RowsInBuckets(in, tables.buckets(), since,
                                     ChunkRows(tables), &end)
               : table.RowsInBuckets(in, tables.buckets(), since);
    if (t == 0) {
      for (uint32_t b = end; b < in.size(); ++b) in[b] = 0;
    }
    FromRows(static_cast<uint32_t>(t), rows, 0, rows.keys.size(),
             response->add_tables());
    response->add_clocks(table.clock());
  }
  uint32_t next = first;
  while (next < static_cast<uint32_t>(request.buckets_size()) &&
         request.buckets(next) < end) {
    ++next;
  }
  response->set_next(next);
  return absl::OkStatus();
}

proto::CopyBucketsRequest IncomingMove::NextRequest(uint32_t first,
                                                    uint64_t at_epoch,
                                                    int to_shard) const {
  proto::CopyBucketsRequest request;
  request.mutable_buckets()->Add(buckets_.begin(), buckets_.end());
  request.mutable_since_clocks()->Add(since_.begin(), since_.end());
  request.set_at_epoch(at_epoch);
  request.set_first(first);
  request.set_to_shard(to_shard);
  request.set_move_id(id_);
  return request;
}

absl::Status IncomingMove::Accept(
    const proto::CopyBucketsResponse& response, uint32_t first,
    std::vector<std::pair<uint32_t, SparseTable::Rows>>* rows) {
  rows->clear();
  if (static_cast<size_t>(response.tables_size()) != tables_ ||
      static_cast<size_t>(response.clocks_size()) != tables_ ||
      response.next() <= first || response.next() > buckets_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "copy buckets: the source answered ", response.tables_size(),
        " tables and chunk end ", response.next(), " for a chunk from ", first,
        " of ", buckets_.size(), " buckets and ", tables_,
        " tables: does it run this config?"));
  }
  if (first == 0) pass_rows_ = 0;  // a pass that failed midway starts over
  for (const proto::ReplicaSparseRows& in : response.tables()) {
    SparseTable::Rows out;
    RETURN_IF_ERROR(ToRows(in, "copy buckets", &out));
    pass_rows_ += static_cast<int64_t>(out.keys.size());
    rows->emplace_back(in.table(), std::move(out));
  }
  if (first == 0) {
    pass_complete_ = false;
    next_since_.assign(response.clocks().begin(), response.clocks().end());
  }
  if (response.next() == buckets_.size()) {
    since_ = next_since_;
    last_pass_rows_ = pass_rows_;
    rows_copied_ += pass_rows_;
    pass_rows_ = 0;
    ++passes_;
    pass_complete_ = true;
  }
  return absl::OkStatus();
}

void IncomingMove::StartOver() {
  since_.clear();
  pass_rows_ = 0;
  pass_complete_ = false;
}

}  // namespace downpour::server
