// GrpcPsClient's requests that a ps answered "bucket moved" (a live move
// handed some of their buckets to another ps): split by the buckets' owners
// now (worker/bucket_split.h), each part sent to its owner.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/push_sequence.h"
#include "common/status_macros.h"
#include "worker/bucket_split.h"
#include "worker/grpc_ps_client.h"
#include "worker/grpc_ps_client_internal.h"
#include "worker/ps_requests.h"

namespace downpour::worker {

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
  ASSIGN_OR_RETURN(std::shared_ptr<const SplitRows> split,
                   SplitRows::Make(request->sparse, spec_, owners.get(), shards,
                                   request->shard));
  const std::vector<SplitRows::Piece>& pieces = split->pieces();
  if (pieces.size() == 1) return false;  // the placement still says it is here
  // What stays keeps the request's sequence (and its dense blocks): the ps
  // did not use it up. Each piece gets its shard's next sequence, outside the
  // window (a piece is rare, and the ps's window, 64, is far wider).
  request->sparse = pieces[0].refs;
  request->owned_rows = split;
  int64_t moved_keys = 0;
  absl::MutexLock lock(&mu_);
  for (size_t p = 1; p < pieces.size(); ++p) {
    auto piece = std::make_unique<PushRequestState>();
    piece->shard = pieces[p].shard;
    piece->sparse = pieces[p].refs;
    piece->owned_rows = split;
    piece->fresh = true;
    piece->failed = true;
    if (lanes_.size() <= static_cast<size_t>(piece->shard))
      lanes_.resize(piece->shard + 1);
    if (call->reports.size() <= static_cast<size_t>(piece->shard))
      call->reports.resize(piece->shard + 1);
    PushLane& lane = lanes_[piece->shard];
    if (lane.next_sequence == 0)
      lane.next_sequence = MakeSequence(incarnation_, 1);
    piece->sequence = lane.next_sequence++;
    lane.in_flight.insert(piece->sequence);
    ++call->failures;
    moved_keys += pieces[p].keys;
    call->requests.push_back(std::move(piece));
  }
  NoteMovedLocked("push", request->shard, moved_keys, pieces.size() - 1);
  return true;
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
      "worker {}: ps {} handed buckets to other ps (placement epoch {}): a {} "
      "re-split by the new owners, {} key(s) to {} other ps ({} re-split "
      "request(s) so far; at most one such line per {} s)",
      worker_id_, shard, epoch_, what, keys, owners, moved_splits_,
      absl::ToInt64Seconds(kMovedLogEvery));
  moved_logged_ = now;
}

absl::Status GrpcPsClient::OwnersDisagree(int shard,
                                          const absl::Status& answer) const {
  return absl::InternalError(absl::StrCat(
      "worker ", worker_id_, ": ", answer.message(), "; but placement epoch ",
      epoch(), " still gives those keys' buckets to ps ", shard, " after ",
      kMovedTries,
      " reads: the coordinator and the ps disagree on who holds the buckets. "
      "Check `psctl shards` and the logs of the coordinator and of ps ",
      shard, " for the move"));
}

}  // namespace downpour::worker
