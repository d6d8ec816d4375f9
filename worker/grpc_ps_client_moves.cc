// GrpcPsClient's requests that a ps answered "bucket moved" (a live move
// handed some of their buckets to another ps): split by the buckets' owners
// now (worker/bucket_split.h), each part sent to its owner.
#include <algorithm>
#include <functional>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/push_sequence.h"
#include "common/status_macros.h"
#include "worker/bucket_split.h"
#include "worker/grpc_ps_client.h"
#include "worker/grpc_ps_client_internal.h"
#include "worker/ps_requests.h"

namespace downpour::worker {
namespace {

// The blocks at `moved` (positions in request->ids, by their owner now) go
// from `request` to each owner's piece (`piece_of`); returns how many.
int64_t MoveBlocksOut(
    const std::map<int, std::vector<size_t>>& moved, PushRequestState* request,
    const std::function<PushRequestState&(int shard)>& piece_of) {
  int64_t count = 0;
  std::vector<char> leaves(request->ids.size(), 0);
  for (const auto& [shard, at] : moved) {
    PushRequestState& piece = piece_of(shard);
    for (size_t i : at) {
      piece.ids.push_back(request->ids[i]);
      piece.bases.push_back(request->bases[i]);
      leaves[i] = 1;
    }
    count += static_cast<int64_t>(at.size());
  }
  std::vector<uint32_t> kept_ids;
  std::vector<uint64_t> kept_bases;
  for (size_t i = 0; i < request->ids.size(); ++i) {
    if (leaves[i] != 0) continue;
    kept_ids.push_back(request->ids[i]);
    kept_bases.push_back(request->bases[i]);
  }
  request->ids = std::move(kept_ids);
  request->bases = std::move(kept_bases);
  return count;
}

}  // namespace

absl::Status GrpcPsClient::RetryPullRows(
    const std::vector<TableRows>& tables, int s,
    const std::vector<uint64_t>& keys, const grpc::Status* first_try,
    grpc::ByteBuffer* reply,
    std::vector<std::vector<std::vector<float>>>* values) {
  const absl::Status status = WithRetries(
      s, "pull rows from",
      [&](const ShardLink& now, uint64_t now_epoch) {
        const grpc::ByteBuffer bytes =
            PullRowsRequest(tables, keys, worker_id_, now_epoch);
        reply->Clear();
        return now.Call(kPullMethod, rpc_.deadline_s, bytes, reply);
      },
      first_try, true);
  if (IsBucketMoved(status)) {
    // Some keys live elsewhere now: from their owners, in the keys' order.
    std::vector<std::vector<float>> rows;
    RETURN_IF_ERROR(PullSplit(tables, s, keys, 0, status, &rows));
    for (size_t t = 0; t < tables.size(); ++t) {
      (*values)[t][s] = std::move(rows[t]);
    }
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(status);
  return CopyPulledRows(s, tables, keys, reply, values);
}

absl::Status GrpcPsClient::PullRowsFrom(const std::vector<TableRows>& tables,
                                        int shard,
                                        const std::vector<uint64_t>& keys,
                                        int hops,
                                        std::vector<std::vector<float>>* rows) {
  grpc::ByteBuffer reply;
  const absl::Status status = WithRetries(
      shard, "pull rows from",
      [&](const ShardLink& now, uint64_t now_epoch) {
        const grpc::ByteBuffer bytes =
            PullRowsRequest(tables, keys, worker_id_, now_epoch);
        reply.Clear();
        return now.Call(kPullMethod, rpc_.deadline_s, bytes, &reply);
      },
      nullptr, true);
  if (IsBucketMoved(status)) {
    return PullSplit(tables, shard, keys, hops + 1, status, rows);
  }
  RETURN_IF_ERROR(status);
  // CopyPulledRows fills (*values)[t][shard].
  std::vector<std::vector<std::vector<float>>> values(
      tables.size(), std::vector<std::vector<float>>(shard + 1));
  RETURN_IF_ERROR(CopyPulledRows(shard, tables, keys, &reply, &values));
  rows->resize(tables.size());
  for (size_t t = 0; t < tables.size(); ++t) {
    (*rows)[t] = std::move(values[t][shard]);
  }
  return absl::OkStatus();
}

absl::Status GrpcPsClient::PullSplit(const std::vector<TableRows>& tables,
                                     int shard,
                                     const std::vector<uint64_t>& keys,
                                     int hops, const absl::Status& answer,
                                     std::vector<std::vector<float>>* rows) {
  if (hops > kMaxMoveHops) {
    return absl::UnavailableError(absl::StrCat(
        "worker ", worker_id_, ": pull rows: the keys' buckets moved ", hops,
        " times while they were pulled (last: ", answer.message(),
        "): do moves keep handing them on? Check `psctl shards`"));
  }
  int shards = 0;
  const std::shared_ptr<const std::vector<int>> owners = OwnersNow(&shards);
  ASSIGN_OR_RETURN(const BucketSplit split,
                   BucketSplit::Of(spec_.sparse_tables()[0].buckets,
                                   owners.get(), shards, keys));
  if (split.AllOf(shard)) {
    // The placement read still gives them all to `shard`: ask again after a
    // pause (a placement newer than the ps's answer may come), a bounded
    // number of times.
    if (hops >= kMovedTries) return OwnersDisagree(shard, answer);
    clock_->SleepFor(absl::Milliseconds(50) * (hops + 1));
    return PullRowsFrom(tables, shard, keys, hops, rows);
  }
  {
    int64_t moved = 0;
    size_t owners_now = 0;
    for (const BucketSplit::Group& group : split.groups()) {
      if (group.shard == shard) continue;
      moved += static_cast<int64_t>(group.at.size());
      ++owners_now;
    }
    absl::MutexLock lock(&mu_);
    NoteMovedLocked("pull", shard, moved, owners_now);
  }
  rows->assign(tables.size(), {});
  for (size_t t = 0; t < tables.size(); ++t) {
    (*rows)[t].resize(keys.size() * tables[t].dim);
  }
  for (const BucketSplit::Group& group : split.groups()) {
    std::vector<uint64_t> part;
    for (uint32_t i : group.at) part.push_back(keys[i]);
    std::vector<std::vector<float>> got;
    RETURN_IF_ERROR(PullRowsFrom(tables, group.shard, part, hops, &got));
    for (size_t t = 0; t < tables.size(); ++t) {
      const int dim = tables[t].dim;
      for (size_t j = 0; j < group.at.size(); ++j) {
        std::copy_n(got[t].begin() + j * dim, dim,
                    (*rows)[t].begin() + size_t{group.at[j]} * dim);
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> GrpcPsClient::SplitMovedPush(PushCall* call,
                                                  PushRequestState* request) {
  int shards = 0;
  const std::shared_ptr<const std::vector<int>> owners = OwnersNow(&shards);
  std::shared_ptr<const SplitRows> split;
  if (!request->sparse.empty()) {
    ASSIGN_OR_RETURN(
        split, SplitRows::Make(request->sparse, spec_, owners.get(), shards,
                               request->shard));
  }
  const std::map<int, std::vector<size_t>> moved_blocks =
      MovedBlocksByOwner(*request);
  const bool rows_moved = split != nullptr && split->pieces().size() > 1;
  if (!rows_moved && moved_blocks.empty()) {
    return false;  // the placement still says it is all here
  }
  // What stays keeps the request's sequence (even when nothing stays: the
  // ps did not use it up, and an empty push within its window fills the
  // slot). Each other owner's piece gets that shard's next sequence,
  // outside the window (a piece is rare, and the ps's window, 64, is far
  // wider).
  std::map<int, std::unique_ptr<PushRequestState>> pieces;
  const auto piece_of = [&](int shard) -> PushRequestState& {
    std::unique_ptr<PushRequestState>& piece = pieces[shard];
    if (piece == nullptr) {
      piece = std::make_unique<PushRequestState>();
      piece->shard = shard;
      piece->owned_rows = split;
      piece->fresh = true;
      piece->failed = true;
    }
    return *piece;
  };
  int64_t moved = 0;
  if (rows_moved) {
    const std::vector<SplitRows::Piece>& rows = split->pieces();
    request->sparse = rows[0].refs;
    request->owned_rows = split;
    for (size_t p = 1; p < rows.size(); ++p) {
      piece_of(rows[p].shard).sparse = rows[p].refs;
      moved += rows[p].keys;
    }
  }
  moved += MoveBlocksOut(moved_blocks, request, piece_of);
  QueuePieces(call, request->shard, moved, &pieces);
  return true;
}

std::map<int, std::vector<size_t>> GrpcPsClient::MovedBlocksByOwner(
    const PushRequestState& request) const {
  uint64_t epoch = 0;
  std::vector<int> block_owner(spec_.blocks().size(), -1);
  for (const auto& link : GetShardLinks(&epoch)) {
    for (const std::vector<uint32_t>& chunk : link->chunks) {
      for (uint32_t id : chunk) block_owner[id] = link->index;
    }
  }
  std::map<int, std::vector<size_t>> moved;  // shard -> at in ids
  for (size_t i = 0; i < request.ids.size(); ++i) {
    const int owner = block_owner[request.ids[i]];
    if (owner >= 0 && owner != request.shard) moved[owner].push_back(i);
  }
  return moved;
}

void GrpcPsClient::QueuePieces(
    PushCall* call, int from, int64_t moved,
    std::map<int, std::unique_ptr<PushRequestState>>* pieces) {
  absl::MutexLock lock(&mu_);
  for (auto& [shard, piece] : *pieces) {
    if (lanes_.size() <= static_cast<size_t>(shard)) lanes_.resize(shard + 1);
    if (call->reports.size() <= static_cast<size_t>(shard))
      call->reports.resize(shard + 1);
    PushLane& lane = lanes_[shard];
    if (lane.next_sequence == 0)
      lane.next_sequence = MakeSequence(incarnation_, 1);
    piece->sequence = lane.next_sequence++;
    lane.in_flight.insert(piece->sequence);
    ++call->failures;
    call->requests.push_back(std::move(piece));
  }
  NoteMovedLocked("push", from, moved, pieces->size());
}

std::shared_ptr<const std::vector<int>> GrpcPsClient::OwnersNow(
    int* shards) const {
  absl::MutexLock lock(&mu_);
  *shards = std::max<int>(1, static_cast<int>(shards_.size()));
  return bucket_owners_;
}

void GrpcPsClient::NoteMovedLocked(const char* what, int shard, int64_t keys,
                                   size_t owners) {
  ++moved_splits_;
  const absl::Time now = clock_->Now();
  if (now - moved_logged_ < kMovedLogEvery) return;
  SPDLOG_LOGGER_INFO(
      Log(Logger::kWorker),
      "worker {}: ps {} handed buckets or blocks to other ps (placement "
      "epoch {}): a {} re-split by the new owners, {} key(s) and dense "
      "block(s) to {} other ps ({} re-split request(s) so far; at most one "
      "such line per {} s)",
      worker_id_, shard, epoch_, what, keys, owners, moved_splits_,
      absl::ToInt64Seconds(kMovedLogEvery));
  moved_logged_ = now;
}

absl::Status GrpcPsClient::OwnersDisagree(int shard,
                                          const absl::Status& answer) const {
  return absl::InternalError(absl::StrCat(
      "worker ", worker_id_, ": ", answer.message(), "; but placement epoch ",
      epoch(), " still gives those keys' buckets (or blocks) to ps ", shard,
      " after ", kMovedTries,
      " reads: the coordinator and the ps disagree on who holds the buckets. "
      "Check `psctl shards` and the logs of the coordinator and of ps ",
      shard, " for the move"));
}

}  // namespace downpour::worker
