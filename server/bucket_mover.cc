#include "server/bucket_mover.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "common/retry.h"
#include "common/status_macros.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/grpc_status.h"
#include "rpc/server_util.h"
#include "server/sparse_rows_proto.h"

namespace downpour::server {
namespace {

constexpr char kPhaseCopy[] = "copy";
constexpr char kPhaseSwitched[] = "switched";
// A copy pass this small (or the sixth pass) makes the move ready to switch:
// the last pass, which holds the shard's pushes, copies about as many.
constexpr int64_t kCaughtUpRows = 65536;
constexpr int kMostPassesBeforeSwitch = 6;
// Between passes of a move that caught up: it stays close to the source.
constexpr absl::Duration kPassInterval = absl::Milliseconds(200);
constexpr double kChunkDeadlineSeconds = 60;

spdlog::logger* L() { return Log(Logger::kServer); }

}  // namespace

BucketMover::BucketMover(Shard* shard, int index)
    : shard_(shard), index_(index) {
  thread_ = std::thread([this] { Loop(); });
}

BucketMover::~BucketMover() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void BucketMover::Update(const Moves& in, const Moves& out) {
  std::set<uint64_t> now;
  bool ended = false;
  {
    absl::MutexLock lock(&mu_);
    for (const proto::BucketMove& m : in) {
      now.insert(m.id());
      if (m.to_shard() != index_) continue;
      Move& move = moves_[m.id()];
      move.spec = m;
      if (move.copy == nullptr) {
        move.copy = std::make_unique<IncomingMove>(
            m.id(),
            std::vector<uint32_t>(m.buckets().begin(), m.buckets().end()),
            shard_->sparse_stats().size());
        move.evicted_at_start = shard_->sparse_rows_evicted();
      }
    }
    for (const proto::BucketMove& m : out) now.insert(m.id());
    for (auto it = moves_.begin(); it != moves_.end();) {
      // Ended (done or rolled back), unless a pass of it still runs.
      it = now.count(it->first) == 0 && !it->second.busy ? moves_.erase(it)
                                                         : std::next(it);
    }
    for (uint64_t id : seen_) ended |= now.count(id) == 0;
    ended |= !swept_;
    swept_ = true;
    seen_ = now;
  }
  if (ended) Sweep(in, out);
}

void BucketMover::Sweep(const Moves& in, const Moves& out) {
  // Blocks moved away: their copies go once no move out still switches.
  std::set<uint32_t> keep_blocks;
  for (const proto::BucketMove& m : out) {
    keep_blocks.insert(m.blocks().begin(), m.blocks().end());
  }
  const int released = shard_->ReleaseMovedBlocks(keep_blocks);
  if (released > 0) {
    SPDLOG_LOGGER_INFO(L(),
                       "ps {}: released the copies of {} dense blocks another "
                       "ps holds now",
                       index_, released);
  }
  const uint32_t total = shard_->sparse_buckets();
  if (total == 0) return;
  std::vector<char> keep(total, 0);
  for (const Moves* moves : {&in, &out}) {
    for (const proto::BucketMove& m : *moves) {
      for (uint32_t b : m.buckets()) {
        if (b < total) keep[b] = 1;
      }
    }
  }
  const int64_t dropped = shard_->DropUnheldRows(keep);
  if (dropped > 0) {
    SPDLOG_LOGGER_INFO(L(),
                       "ps {}: dropped {} sparse rows of buckets another ps "
                       "holds now (moved away, or a move into this shard "
                       "rolled back)",
                       index_, dropped);
  }
}

std::vector<proto::BucketMoveProgress> BucketMover::Progress() const {
  absl::MutexLock lock(&mu_);
  std::vector<proto::BucketMoveProgress> progress;
  for (const auto& [id, move] : moves_) {
    proto::BucketMoveProgress p;
    p.set_id(id);
    p.set_rows_copied(move.copy->rows_copied());
    p.set_caught_up(move.caught_up);
    p.set_done(move.done);
    p.set_error(move.error);
    progress.push_back(std::move(p));
  }
  return progress;
}

absl::Status BucketMover::Pass(IncomingMove* move, const std::string& address,
                               uint64_t at_epoch) const {
  std::unique_ptr<proto::ParameterServer::Stub> stub =
      proto::ParameterServer::NewStub(MakeChannel(address));
  uint32_t first = 0;
  do {
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(kChunkDeadlineSeconds));
    proto::CopyBucketsResponse response;
    const grpc::Status status = stub->CopyBuckets(
        &context, move->NextRequest(first, at_epoch, index_), &response);
    RETURN_IF_ERROR(FromGrpcStatus(
        status,
        absl::StrCat("copy buckets of move ", move->id(), " from ", address)));
    std::vector<std::pair<uint32_t, SparseTable::Rows>> rows;
    RETURN_IF_ERROR(move->Accept(response, first, &rows));
    RETURN_IF_ERROR(shard_->ImportMoved(rows));
    first = response.next();
  } while (!move->pass_complete());
  return absl::OkStatus();
}

absl::Status BucketMover::PassBlocks(const proto::BucketMove& move,
                                     const std::string& address) const {
  std::unique_ptr<proto::ParameterServer::Stub> stub =
      proto::ParameterServer::NewStub(MakeChannel(address));
  std::vector<BlockStore::BlockSnapshot> blocks;
  std::vector<uint32_t> left(move.blocks().begin(), move.blocks().end());
  while (!left.empty()) {
    proto::CopyBlocksRequest request;
    request.mutable_blocks()->Add(left.begin(), left.end());
    request.set_at_epoch(move.switch_epoch());
    request.set_to_shard(index_);
    request.set_move_id(move.id());
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(kChunkDeadlineSeconds));
    proto::CopyBlocksResponse response;
    RETURN_IF_ERROR(
        FromGrpcStatus(stub->CopyBlocks(&context, request, &response),
                       absl::StrCat("copy dense blocks of move ", move.id(),
                                    " from ", address)));
    if (response.blocks_size() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("copy blocks of move ", move.id(), ": ps at ", address,
                       " answered no block: does it run this build?"));
    }
    if (response.blocks_size() > static_cast<int>(left.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "copy blocks of move ", move.id(), ": ps at ", address, " answered ",
          response.blocks_size(), " blocks for ", left.size(), " asked"));
    }
    for (int i = 0; i < response.blocks_size(); ++i) {
      const proto::ReplicaBlock& in = response.blocks(i);
      if (in.id() != left[i]) {
        return absl::InvalidArgumentError(
            absl::StrCat("copy blocks of move ", move.id(), ": ps at ", address,
                         " answered block ", in.id(), " where block ", left[i],
                         " was asked for"));
      }
      RETURN_IF_ERROR(ToBlock(in, "copy blocks", &blocks.emplace_back()));
    }
    left.erase(left.begin(), left.begin() + response.blocks_size());
  }
  return shard_->ImportMovedBlocks(std::move(blocks));
}

void BucketMover::Loop() {
  for (;;) {
    uint64_t id = 0;
    IncomingMove* copy = nullptr;
    std::string address;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), kPassInterval);
      if (stopping_) return;
      for (auto& [move_id, move] : moves_) {
        if (move.spec.phase() != kPhaseCopy || move.busy) continue;
        if (shard_->sparse_rows_evicted() != move.evicted_at_start) {
          // Rows it imported may be gone: every row again.
          move.copy->StartOver();
          move.evicted_at_start = shard_->sparse_rows_evicted();
        }
        if (move.spec.buckets_size() == 0) {
          // Blocks only: they are copied whole in the last pass.
          move.caught_up = true;
          continue;
        }
        id = move_id;
        copy = move.copy.get();
        address = move.spec.from_address();
        move.busy = true;
        break;
      }
    }
    if (copy == nullptr) continue;
    const absl::Status passed = Pass(copy, address, 0);
    absl::MutexLock lock(&mu_);
    Move& move = moves_[id];
    move.busy = false;
    move.error = passed.ok() ? "" : std::string(passed.message());
    if (!passed.ok()) {
      SPDLOG_LOGGER_WARN(L(), "ps {}: {}; trying again", index_, move.error);
      continue;
    }
    const bool ready =
        copy->passes() >= 2 && (copy->last_pass_rows() <= kCaughtUpRows ||
                                copy->passes() >= kMostPassesBeforeSwitch);
    if (ready && !move.caught_up) {
      SPDLOG_LOGGER_INFO(L(),
                         "ps {}: move {} caught up with ps {} after {} passes "
                         "({} rows copied, {} in the last pass); ready to "
                         "switch",
                         index_, id, move.spec.from_shard(), copy->passes(),
                         copy->rows_copied(), copy->last_pass_rows());
    }
    move.caught_up |= ready;
  }
}

absl::Status BucketMover::LastPass(const proto::BucketMove& m,
                                   IncomingMove* copy,
                                   const std::string& address,
                                   absl::Duration give_up_after,
                                   const std::function<bool()>& should_stop) {
  const absl::Time start = absl::Now();
  absl::Duration backoff = absl::Milliseconds(20);
  for (;;) {
    absl::Status passed = m.buckets_size() > 0
                              ? Pass(copy, address, m.switch_epoch())
                              : absl::OkStatus();
    if (passed.ok() && m.blocks_size() > 0) passed = PassBlocks(m, address);
    if (passed.ok() || !IsRetryable(passed) || should_stop() ||
        absl::Now() - start > give_up_after) {
      return passed;
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Milliseconds(500));
  }
}

absl::Status BucketMover::FinishSwitched(
    const proto::GetPlacementResponse& placement, absl::Duration give_up_after,
    const std::function<bool()>& should_stop) {
  for (const proto::BucketMove& m : placement.moves()) {
    if (m.to_shard() != index_ || m.phase() != kPhaseSwitched ||
        m.switch_epoch() > placement.epoch()) {
      continue;
    }
    std::string address;
    for (const proto::ShardInfo& info : placement.shards()) {
      if (info.index() == m.from_shard()) address = info.address();
    }
    IncomingMove* copy = nullptr;
    {
      absl::MutexLock lock(&mu_);
      Move& move = moves_[m.id()];
      mu_.Await(absl::Condition(
          +[](Move* mv) { return !mv->busy; }, &move));
      if (move.done) continue;
      move.spec = m;
      if (move.copy == nullptr ||
          shard_->sparse_rows_evicted() != move.evicted_at_start) {
        // Restarted since the copy, or rows it imported may be gone.
        move.copy = std::make_unique<IncomingMove>(
            m.id(),
            std::vector<uint32_t>(m.buckets().begin(), m.buckets().end()),
            shard_->sparse_stats().size());
      }
      move.busy = true;
      copy = move.copy.get();
    }
    const absl::Time start = absl::Now();
    const absl::Status passed =
        LastPass(m, copy, address, give_up_after, should_stop);
    absl::MutexLock lock(&mu_);
    Move& move = moves_[m.id()];
    move.busy = false;
    move.error = passed.ok() ? "" : std::string(passed.message());
    if (!passed.ok()) return passed;
    move.done = true;
    SPDLOG_LOGGER_INFO(
        L(),
        "ps {}: move {} switched at placement epoch {}: the last pass took "
        "{} rows and {} dense blocks from ps {} in {:.0f} ms; serving its {} "
        "buckets and {} blocks from now on",
        index_, m.id(), m.switch_epoch(), copy->last_pass_rows(),
        m.blocks_size(), m.from_shard(),
        absl::ToDoubleMilliseconds(absl::Now() - start), m.buckets_size(),
        m.blocks_size());
  }
  return absl::OkStatus();
}

}  // namespace downpour::server
