// gRPC ps client. Requests go to all shards at once through gRPC's callback
// API; a shard's blocks are cut into chunks of at most kChunkBytes so no
// message is huge (gRPC's rate drops for messages above a few MiB). Requests
// and replies are raw byte buffers (rpc/wire_format.h). mu_ guards only the
// placement and the push windows; it is never held across an RPC or a backoff
// sleep.
#include "worker/grpc_ps_client.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "common/logging.h"
#include "common/push_sequence.h"
#include "common/retry.h"
#include "common/sparse_keys.h"
#include "common/status_macros.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "rpc/grpc_status.h"
#include "rpc/server_util.h"
#include "rpc/wire_format.h"
#include "worker/bucket_split.h"
#include "worker/grpc_ps_client_internal.h"
#include "worker/ps_requests.h"

namespace downpour::worker {
namespace {

// Requests carry at most this many bytes of blocks: gRPC's rate drops for
// larger messages (docs/BENCHMARKS.md).
constexpr int64_t kChunkBytes = 4 << 20;

}  // namespace

GrpcPsClient::GrpcPsClient(const ModelSpec& spec,
                           membership::CoordinatorClient* coordinator,
                           const RpcSection& rpc, int worker_id,
                           Counters* counters,
                           std::function<bool()> should_stop, Clock* clock,
                           absl::Duration outage_timeout,
                           int max_pushes_in_flight)
    : spec_(spec),
      coordinator_(coordinator),
      rpc_(rpc),
      worker_id_(worker_id),
      counters_(counters),
      should_stop_(std::move(should_stop)),
      clock_(clock != nullptr ? clock : Clock::Real()),
      // A validated config names a known encoding.
      encoding_(rpc.encoding),
      outage_timeout_(outage_timeout),
      pushes_(max_pushes_in_flight,
              [this](const float* grad, const std::vector<uint64_t>& versions,
                     PushReport* report) {
                return SendPush(grad, versions, report);
              }) {}

absl::Duration OutageTimeout(double outage_timeout_s) {
  return outage_timeout_s > 0 ? absl::Seconds(outage_timeout_s)
                              : absl::InfiniteDuration();
}

std::string DescribeOutage(const GrpcPsClient::Outage& outage) {
  return absl::StrFormat(
      "ps %d at %s (unreachable for %.0f s; %s)", outage.shard, outage.address,
      absl::ToDoubleSeconds(outage.unreachable_for),
      outage.timeout == absl::InfiniteDuration()
          ? std::string("waits forever, training.outage_timeout_s 0")
          : absl::StrFormat("gives up after %.0f s, training.outage_timeout_s",
                            absl::ToDoubleSeconds(outage.timeout)));
}

void GrpcPsClient::StartWaiting(int index, const std::string& address,
                                absl::Time since) {
  absl::MutexLock lock(&mu_);
  Waiting& waiting = waiting_[index];
  if (waiting.calls++ == 0 || since < waiting.since) waiting.since = since;
  waiting.address = address;
}

void GrpcPsClient::StopWaiting(int index) {
  absl::MutexLock lock(&mu_);
  auto it = waiting_.find(index);
  if (it != waiting_.end() && --it->second.calls <= 0) waiting_.erase(it);
}

std::optional<GrpcPsClient::Outage> GrpcPsClient::outage() const {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  std::optional<Outage> longest;
  for (const auto& [index, waiting] : waiting_) {
    if (longest.has_value() &&
        now - waiting.since <= longest->unreachable_for) {
      continue;
    }
    longest =
        Outage{index, waiting.address, now - waiting.since, outage_timeout_};
  }
  return longest;
}

GrpcPsClient::~GrpcPsClient() = default;

absl::Status GrpcPsClient::Connect() { return Refresh(0); }

uint64_t GrpcPsClient::epoch() const {
  absl::MutexLock lock(&mu_);
  return epoch_;
}

absl::Status GrpcPsClient::Refresh(uint64_t seen_epoch) {
  {
    absl::MutexLock lock(&mu_);
    if (epoch_ > seen_epoch) return absl::OkStatus();  // someone else refreshed
  }
  // The first time, wait (bounded) for a placement; later, read it once: when
  // it is not newer, or the coordinator is down, we keep the one we have and
  // the caller's backoff decides when to try again.
  absl::StatusOr<proto::GetPlacementResponse> placement =
      seen_epoch == 0 ? coordinator_->WaitForPlacement(1, should_stop_)
                      : coordinator_->GetPlacement();
  if (!placement.ok()) {
    return seen_epoch == 0 ? placement.status() : absl::OkStatus();
  }
  if (placement->epoch() <= seen_epoch) return absl::OkStatus();
  std::vector<std::shared_ptr<const ShardLink>> shards;
  for (const proto::ShardInfo& info : placement->shards()) {
    auto shard = std::make_shared<ShardLink>();
    shard->index = info.index();
    shard->address = info.address();
    shard->stub =
        std::make_unique<grpc::GenericStub>(MakeChannel(info.address()));
    int64_t bytes = kChunkBytes;
    for (uint32_t id : info.block_ids()) {
      const int64_t block_bytes = spec_.blocks()[id].length * 4;
      if (bytes + block_bytes > kChunkBytes) {
        shard->chunks.emplace_back();
        bytes = 0;
      }
      shard->chunks.back().push_back(id);
      bytes += block_bytes;
    }
    shards.push_back(std::move(shard));
  }
  // Sparse models: the ps of each hash bucket, as the placement gives them.
  std::shared_ptr<std::vector<int>> owners;
  if (!spec_.sparse_tables().empty()) {
    for (const proto::ShardInfo& info : placement->shards()) {
      for (uint32_t b : info.buckets()) {
        if (owners == nullptr) {
          owners = std::make_shared<std::vector<int>>(
              spec_.sparse_tables()[0].buckets, -1);
        }
        if (b < owners->size()) (*owners)[b] = info.index();
      }
    }
  }
  absl::MutexLock lock(&mu_);
  if (placement->epoch() > epoch_) {
    SPDLOG_LOGGER_INFO(Log(Logger::kWorker), "placement epoch {}: {} shards",
                       placement->epoch(), shards.size());
    epoch_ = placement->epoch();
    shards_ = std::move(shards);
    bucket_owners_ = std::move(owners);
  }
  return absl::OkStatus();
}

std::shared_ptr<const std::vector<int>> GrpcPsClient::BucketOwners() const {
  absl::MutexLock lock(&mu_);
  return bucket_owners_;
}

std::shared_ptr<const GrpcPsClient::ShardLink> GrpcPsClient::GetShardLink(
    int index, uint64_t* epoch) const {
  absl::MutexLock lock(&mu_);
  *epoch = epoch_;
  if (index < 0 || static_cast<size_t>(index) >= shards_.size()) return nullptr;
  return shards_[index];
}

std::vector<std::shared_ptr<const GrpcPsClient::ShardLink>>
GrpcPsClient::GetShardLinks(uint64_t* epoch) const {
  absl::MutexLock lock(&mu_);
  *epoch = epoch_;
  return shards_;
}

absl::Status GrpcPsClient::WithRetries(
    int index, const std::string& what,
    const std::function<grpc::Status(const ShardLink&, uint64_t)>& call,
    const grpc::Status* first_try, bool return_moved) {
  uint64_t epoch = 0;
  std::shared_ptr<const ShardLink> shard = GetShardLink(index, &epoch);
  if (shard == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("placement epoch ", epoch, " names no ps ", index));
  }
  absl::Status moved;  // the ps's "bucket moved", once the placement is read
  const std::string target = absl::StrCat("ps ", index, " at ", shard->address);
  absl::Time first_failure = absl::InfiniteFuture();
  RetryOptions options;
  options.timeout = outage_timeout_;
  options.should_stop = should_stop_;
  options.clock = clock_;
  absl::Status result = RetryFor(
      absl::StrCat("worker ", worker_id_), absl::StrCat(what, " ", target),
      options, [&]() -> absl::Status {
        // The first try may have run already (asynchronously).
        absl::Status status = FromGrpcStatus(
            first_try != nullptr ? *first_try : call(*shard, epoch),
            absl::StrCat(what, " ", target));
        first_try = nullptr;
        // A ps shutting down in order cancels the calls it has not served yet:
        // for us that is an unreachable ps. Retrying is safe: a push that was
        // applied after all comes back as a duplicate (its sequence number).
        if (status.code() == absl::StatusCode::kCancelled) {
          status = absl::UnavailableError(status.message());
        }
        if (return_moved && IsBucketMoved(status)) {
          moved = status;  // the caller re-splits by the owners read here
          return Refresh(epoch);
        }
        if (status.ok() || !IsRetryable(status)) return status;
        if (first_failure == absl::InfiniteFuture()) {
          first_failure = clock_->Now();
          StartWaiting(index, shard->address, first_failure);
          SPDLOG_LOGGER_WARN(Log(Logger::kWorker),
                             "worker {}: {}; retrying with backoff", worker_id_,
                             std::string(status.message()));
        }
        counters_->stats().rpc_retries.Increment();
        // The shard may have moved or restarted: read the placement again.
        absl::Status refreshed = Refresh(epoch);
        if (!refreshed.ok()) return refreshed;
        // A ps the new placement no longer names: keep trying the old one.
        uint64_t now_epoch = 0;
        if (auto now = GetShardLink(index, &now_epoch); now != nullptr) {
          shard = std::move(now);
          epoch = now_epoch;
        }
        {
          absl::MutexLock lock(&mu_);  // it may have moved
          waiting_[index].address = shard->address;
        }
        return status;
      });
  if (first_failure != absl::InfiniteFuture()) StopWaiting(index);
  if (result.ok() && !moved.ok()) return moved;
  if (absl::IsDeadlineExceeded(result)) {
    // Compute waited all this time (no step on stale parameters); now the job
    // fails rather than end on a model trained without this shard.
    return absl::DeadlineExceededError(absl::StrFormat(
        "%s; a worker waits at most training.outage_timeout_s (%.0f s) for an "
        "unreachable ps shard: bring ps %d back (restart it with --index %d, "
        "or start a standby) and raise training.outage_timeout_s (0 waits "
        "forever) if outages this long are expected",
        result.message(), absl::ToDoubleSeconds(outage_timeout_), index,
        index));
  }
  if (result.ok() && first_failure != absl::InfiniteFuture()) {
    // How long this worker could not reach the shard: the outage it saw.
    const double outage = absl::ToDoubleSeconds(clock_->Now() - first_failure);
    counters_->stats().outage_seconds.Increment(outage);
    SPDLOG_LOGGER_INFO(
        Log(Logger::kWorker),
        "worker {}: ps {} reachable again at {} (placement epoch {}) "
        "after {:.2f} s",
        worker_id_, index, shard->address, epoch, outage);
  }
  return result;
}

absl::Status GrpcPsClient::Pull(float* params,
                                std::vector<uint64_t>* versions) {
  return PullFollowingMoves(params, versions, 0);
}

absl::Status GrpcPsClient::PullFollowingMoves(float* params,
                                              std::vector<uint64_t>* versions,
                                              int hops) {
  versions->resize(spec_.blocks().size());
  uint64_t epoch = 0;
  const std::vector<std::shared_ptr<const ShardLink>> shards =
      GetShardLinks(&epoch);
  struct Chunk {
    int shard;
    size_t chunk;
    grpc::ClientContext context;
    grpc::ByteBuffer request, reply;
    grpc::Status status;
    absl::Status copied;
  };
  std::vector<std::unique_ptr<Chunk>> chunks;
  for (const auto& shard : shards) {
    for (size_t c = 0; c < shard->chunks.size(); ++c) {
      auto chunk = std::make_unique<Chunk>();
      chunk->shard = shard->index;
      chunk->chunk = c;
      chunk->request =
          PullRequestBytes(epoch, worker_id_, shard->chunks[c], encoding_);
      chunk->context.set_deadline(DeadlineIn(rpc_.deadline_s));
      chunks.push_back(std::move(chunk));
    }
  }
  // Every chunk of every shard at once; each reply is copied into params on
  // the thread that receives it (chunks cover disjoint blocks).
  absl::BlockingCounter pending(static_cast<int>(chunks.size()));
  for (auto& chunk : chunks) {
    Chunk* c = chunk.get();
    shards[c->shard]->stub->UnaryCall(
        &c->context, kPullMethod, grpc::StubOptions(), &c->request, &c->reply,
        [this, c, params, versions, &pending](grpc::Status status) {
          c->status = std::move(status);
          if (c->status.ok()) {
            c->copied = CopyBlocks(c->shard, c->reply, params, versions);
          }
          pending.DecrementCount();
        });
  }
  pending.Wait();
  // Retries, one chunk at a time, in shard order.
  for (auto& chunk : chunks) {
    Chunk* c = chunk.get();
    if (c->status.ok()) {
      if (!c->copied.ok()) return c->copied;
      continue;
    }
    const std::vector<uint32_t>& ids = shards[c->shard]->chunks[c->chunk];
    absl::Status status = WithRetries(
        c->shard, "pull from",
        [&](const ShardLink& now, uint64_t now_epoch) {
          grpc::ByteBuffer request =
              PullRequestBytes(now_epoch, worker_id_, ids, encoding_);
          c->reply.Clear();
          return now.Call(kPullMethod, rpc_.deadline_s, request, &c->reply);
        },
        &c->status, true);
    if (IsBucketMoved(status)) {
      return PullAfterMove(params, versions, hops, status);
    }
    if (!status.ok()) return status;
    RETURN_IF_ERROR(CopyBlocks(c->shard, c->reply, params, versions));
  }
  return absl::OkStatus();
}

absl::Status GrpcPsClient::PullAfterMove(float* params,
                                         std::vector<uint64_t>* versions,
                                         int hops, const absl::Status& answer) {
  // A live move took blocks along: the whole pull again, from the owners of
  // the placement just read (the blocks are disjoint, so what was copied is
  // simply copied again).
  if (hops >= kMaxMoveHops) {
    return absl::UnavailableError(
        absl::StrCat("worker ", worker_id_, ": pull: dense blocks moved ", hops,
                     " times while they were pulled (last: ", answer.message(),
                     "): do moves keep handing them on? Check `psctl shards`"));
  }
  clock_->SleepFor(absl::Milliseconds(10) * hops);
  return PullFollowingMoves(params, versions, hops + 1);
}

absl::Status GrpcPsClient::CopyBlock(int index, const wire::BlockRef& block,
                                     const wire::CopyPayload& copy,
                                     float* params,
                                     std::vector<uint64_t>* versions,
                                     int64_t* bytes) {
  if (block.id >= spec_.blocks().size()) {
    return absl::InternalError(
        absl::StrCat("ps ", index, " returned unknown block ", block.id));
  }
  const BlockSpec& spec = spec_.blocks()[block.id];
  // The ps answers in the encoding asked for; the block says which.
  const auto encoding = static_cast<WireEncoding>(block.encoding);
  if (!IsKnownWireEncoding(encoding)) {
    return absl::InternalError(absl::StrCat("ps ", index, " returned block ",
                                            spec.id, " in ",
                                            WireEncodingName(encoding)));
  }
  const int64_t expected = spec.length * BytesPerElement(encoding);
  if (static_cast<int64_t>(block.size) != expected) {
    return absl::InternalError(
        absl::StrCat("ps ", index, " returned ", block.size,
                     " bytes for block ", spec.id, ", expected ", expected,
                     " (", spec.length, " ", WireEncodingName(encoding),
                     " values): do all daemons use the same config?"));
  }
  if (encoding == WireEncoding::kFloat32) {
    copy(reinterpret_cast<char*>(params + spec.offset));
  } else {
    // Gathered from the slices, then decoded into params.
    thread_local std::vector<char> encoded;
    encoded.resize(block.size);
    copy(encoded.data());
    DecodeFloats(encoded.data(), spec.length, encoding, params + spec.offset);
  }
  (*versions)[spec.id] = block.version;
  *bytes += block.size;
  return absl::OkStatus();
}

absl::Status GrpcPsClient::CopyBlocks(int index, const grpc::ByteBuffer& reply,
                                      float* params,
                                      std::vector<uint64_t>* versions) {
  int64_t bytes = 0;
  absl::Status status = wire::ParsePullReply(
      reply, [&](const wire::BlockRef& block, const wire::CopyPayload& copy) {
        return CopyBlock(index, block, copy, params, versions, &bytes);
      });
  if (!status.ok()) {
    return absl::IsInvalidArgument(status)
               ? absl::InternalError(
                     absl::StrCat("ps ", index, ": ", status.message()))
               : status;
  }
  counters_->stats().pulls.Increment();
  counters_->stats().bytes_in.Increment(static_cast<double>(bytes));
  return absl::OkStatus();
}

void GrpcPsClient::set_start_clock(uint64_t start) {
  absl::MutexLock lock(&mu_);
  if (pushes_begun_ > 0) return;
  start_clock_ = start;
  acked_clock_ = start;
}

void GrpcPsClient::set_incarnation(uint64_t incarnation, uint64_t push_key) {
  absl::MutexLock lock(&mu_);
  if (pushes_begun_ > 0) return;
  incarnation_ = incarnation;
  push_key_.store(push_key);
}

uint64_t GrpcPsClient::acked_clock() const {
  absl::MutexLock lock(&mu_);
  return acked_clock_;
}

absl::Status GrpcPsClient::PushWithRows(
    const float* grad, const std::vector<uint64_t>& versions,
    const std::vector<std::vector<wire::SparseRef>>& rows, PushReport* report) {
  return SendPush(grad, versions, report, &rows);
}

absl::Status GrpcPsClient::PushWithRowsAndPull(
    const float* grad, const std::vector<uint64_t>& versions,
    const std::vector<std::vector<wire::SparseRef>>& rows, PushReport* report,
    float* params, std::vector<uint64_t>* fresh) {
  if (fresh->size() != spec_.blocks().size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("PushWithRowsAndPull: the versions hold ", fresh->size(),
                     " entries, the model ", spec_.blocks().size(), " blocks"));
  }
  const Values values{params, fresh};
  return SendPush(grad, versions, report, &rows, nullptr, &values);
}

absl::Status GrpcPsClient::PullTables(
    const std::vector<TableRows>& tables,
    const std::vector<std::vector<uint64_t>>& keys,
    std::vector<std::vector<std::vector<float>>>* values) {
  values->assign(tables.size(), std::vector<std::vector<float>>(keys.size()));
  uint64_t epoch = 0;
  const std::vector<std::shared_ptr<const ShardLink>> shards =
      GetShardLinks(&epoch);
  // Every shard at once; failures are retried one at a time below.
  struct Call {
    grpc::ClientContext context;
    grpc::ByteBuffer request, reply;
    grpc::Status status;
    bool sent = false;
  };
  std::vector<Call> calls(keys.size());
  int sent = 0;
  for (size_t s = 0; s < keys.size() && s < shards.size(); ++s) {
    if (!keys[s].empty()) ++sent;
  }
  absl::BlockingCounter pending(sent);
  for (size_t s = 0; s < keys.size() && s < shards.size(); ++s) {
    if (keys[s].empty()) continue;
    Call* c = &calls[s];
    c->sent = true;
    c->request = PullRowsRequest(tables, keys[s], worker_id_, epoch);
    c->context.set_deadline(DeadlineIn(rpc_.deadline_s));
    shards[s]->stub->UnaryCall(&c->context, kPullMethod, grpc::StubOptions(),
                               &c->request, &c->reply,
                               [c, &pending](grpc::Status status) {
                                 c->status = std::move(status);
                                 pending.DecrementCount();
                               });
  }
  pending.Wait();
  for (size_t s = 0; s < keys.size(); ++s) {
    if (keys[s].empty()) continue;
    Call& c = calls[s];
    if (c.sent && c.status.ok()) {
      RETURN_IF_ERROR(CopyPulledRows(s, tables, keys[s], &c.reply, values));
      continue;
    }
    RETURN_IF_ERROR(RetryPullRows(tables, static_cast<int>(s), keys[s],
                                  c.sent ? &c.status : nullptr, &c.reply,
                                  values));
  }
  counters_->stats().pulls.Increment();
  return absl::OkStatus();
}

absl::Status GrpcPsClient::PushPullBlocks(const float* grad,
                                          const std::vector<uint64_t>& versions,
                                          const std::vector<uint32_t>& ids,
                                          PushReport* report, float* params,
                                          std::vector<uint64_t>* fresh) {
  if (fresh->size() != spec_.blocks().size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("PushPullBlocks: the versions hold ", fresh->size(),
                     " entries, the model ", spec_.blocks().size(), " blocks"));
  }
  const Values values{params, fresh};
  return SendPush(grad, versions, report, nullptr, &ids, &values);
}

absl::Status GrpcPsClient::SendPush(
    const float* grad, const std::vector<uint64_t>& versions,
    PushReport* report, const std::vector<std::vector<wire::SparseRef>>* rows,
    const std::vector<uint32_t>* only, const Values* values) {
  std::vector<char> wanted;
  RETURN_IF_ERROR(MarkWanted(only, &wanted));
  PushCall call;
  call.grad = grad;
  call.versions = &versions;
  call.values = values;
  BeginPush(&call);
  AddBlockRequests(wanted, &call);
  if (rows != nullptr) AddSparseRequests(*rows, &call);
  // The versions each request's gradient was computed on, kept apart: the
  // values answered overwrite *values->versions, which may be `versions`.
  for (auto& r : call.requests) {
    for (uint32_t id : r->ids) r->bases.push_back(versions[id]);
  }
  const absl::Status status = RunRequests(&call);
  const absl::Status copied = ReleaseRequests(&call);
  if (!status.ok()) return status;
  if (!copied.ok()) return copied;  // applied, but its values are unusable
  EndPush(call, report);
  return absl::OkStatus();
}

absl::Status GrpcPsClient::MarkWanted(const std::vector<uint32_t>* only,
                                      std::vector<char>* wanted) const {
  if (only == nullptr) return absl::OkStatus();
  wanted->assign(spec_.blocks().size(), 0);
  for (uint32_t id : *only) {
    if (id >= wanted->size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("push: block ", id, " is not in the model (",
                       wanted->size(), " blocks)"));
    }
    (*wanted)[id] = 1;
  }
  return absl::OkStatus();
}

void GrpcPsClient::BeginPush(PushCall* call) {
  call->shards = GetShardLinks(&call->epoch);
  {
    absl::MutexLock lock(&mu_);
    call->clock = start_clock_ + ++pushes_begun_;
    if (lanes_.size() < call->shards.size()) lanes_.resize(call->shards.size());
  }
  call->reports.resize(call->shards.size());
}

void GrpcPsClient::AddBlockRequests(const std::vector<char>& wanted,
                                    PushCall* call) {
  // Requests interleaved across shards, so every shard's link starts at once.
  size_t most = 0;
  for (const auto& shard : call->shards)
    most = std::max(most, shard->chunks.size());
  for (size_t c = 0; c < most; ++c) {
    for (const auto& shard : call->shards) {
      if (c >= shard->chunks.size()) continue;
      auto r = std::make_unique<PushRequestState>();
      r->shard = shard->index;
      if (wanted.empty()) {
        r->ids = shard->chunks[c];
      } else {
        for (uint32_t id : shard->chunks[c]) {
          if (wanted[id]) r->ids.push_back(id);
        }
        if (r->ids.empty()) continue;
      }
      call->requests.push_back(std::move(r));
    }
  }
}

void GrpcPsClient::AddSparseRequests(
    const std::vector<std::vector<wire::SparseRef>>& rows, PushCall* call) {
  // A shard's sparse rows ride on its first request, or on one of their own
  // where the shard holds no blocks.
  for (const auto& shard : call->shards) {
    const size_t s = static_cast<size_t>(shard->index);
    if (s >= rows.size() || rows[s].empty()) continue;
    PushRequestState* first = nullptr;
    for (auto& r : call->requests) {
      if (r->shard == shard->index) {
        first = r.get();
        break;
      }
    }
    if (first == nullptr) {
      auto r = std::make_unique<PushRequestState>();
      r->shard = shard->index;
      first = r.get();
      call->requests.push_back(std::move(r));
    }
    first->sparse = rows[s];
  }
}

absl::Status GrpcPsClient::RunRequests(PushCall* call) {
  absl::Status status;
  // Pieces split off for moved buckets (appended by RetryFailedPushes) are
  // sent there, not here.
  const size_t planned = call->requests.size();
  for (size_t r = 0; r < planned && status.ok(); ++r) {
    while (!StartRequest(call, r)) {
      status = RetryFailedPushes(call);
      if (!status.ok()) break;
    }
  }
  {
    // Every request started must end before `call` goes away.
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](PushCall* c)
             ABSL_NO_THREAD_SAFETY_ANALYSIS { return c->outstanding == 0; },
        call));
  }
  if (status.ok()) status = RetryFailedPushes(call);
  // Requests that never got through leave the window: their sequences are
  // abandoned (the ps moves past them when later ones arrive).
  {
    absl::MutexLock lock(&mu_);
    for (const auto& r : call->requests) {
      if (r->sequence != 0 && !r->done)
        lanes_[r->shard].in_flight.erase(r->sequence);
    }
    window_moved_.SignalAll();
  }
  return status;
}

absl::Status GrpcPsClient::ReleaseRequests(PushCall* call) {
  // The requests' contexts hold their gRPC calls, and a call that failed
  // before its message was written (a peer that died or stopped, a deadline
  // hit while connecting) keeps the message's slices until the call is
  // destroyed: so the requests go first, then the pins are awaited.
  absl::Status copied;
  for (const auto& r : call->requests) {
    if (copied.ok()) copied = r->copied;
  }
  call->requests.clear();
  // grad may change once we return. Bounded: should gRPC keep a slice past
  // its call (never seen once the calls are gone), the pins are left to it
  // rather than the worker hanging.
  if (!call->pins->WaitReleased(absl::Seconds(10))) {
    SPDLOG_LOGGER_WARN(Log(Logger::kWorker),
                       "worker {}: gRPC still holds {} buffers of a push "
                       "whose calls all ended, 10 s on; leaving them to it "
                       "and going on",
                       worker_id_, call->pins->pinned());
    counters_->stats().push_pins_abandoned.Increment();
    call->pins.release();  // a late release must find it (a small leak)
  }
  return copied;
}

void GrpcPsClient::EndPush(const PushCall& call, PushReport* report) {
  {
    absl::MutexLock lock(&mu_);
    acked_clock_ = std::max(acked_clock_, call.clock);
  }
  // Whole pushes every shard acknowledged ("pushes" counts the requests).
  counters_->stats().pushes_acked.Increment();
  int refused = 0;
  for (const PushReport& r : call.reports) refused += r.refused;
  if (report != nullptr) {
    for (const PushReport& r : call.reports) report->Merge(r);
  }
  if (refused > 0) {
    absl::Duration pause;
    {
      absl::MutexLock lock(&mu_);
      pause = refusal_backoff_.Next();  // 25-50 ms, jittered
    }
    clock_->SleepFor(pause);
  }
}

bool GrpcPsClient::StartRequest(PushCall* call, size_t r) {
  PushRequestState* request = call->requests[r].get();
  constexpr uint64_t window = kPushRequestsPerShard;
  {
    absl::MutexLock lock(&mu_);
    PushLane& lane = lanes_[request->shard];
    if (lane.next_sequence == 0)
      lane.next_sequence = MakeSequence(incarnation_, 1);
    while (!lane.in_flight.empty() &&
           lane.next_sequence >= *lane.in_flight.begin() + window) {
      if (call->failures > 0) return false;  // ours may hold the window
      window_moved_.Wait(&mu_);
    }
    request->sequence = lane.next_sequence++;
    lane.in_flight.insert(request->sequence);
    ++call->outstanding;
  }
  wire::PushView view =
      MakePushView(spec_, call->grad, *call->versions, request->ids,
                   call->epoch, worker_id_, request->sequence, call->clock,
                   push_key_.load(), encoding_, &request->encoded);
  view.sparse = request->sparse;
  view.reply_values = call->values != nullptr;
  request->request = wire::SerializePush(view, call->pins.get());
  request->context.set_deadline(DeadlineIn(rpc_.deadline_s));
  call->shards[request->shard]->stub->UnaryCall(
      &request->context, kPushMethod, grpc::StubOptions(), &request->request,
      &request->reply, [this, call, request](grpc::Status status) {
        if (status.ok()) {
          PushAcknowledged(call, request, request->reply);
        } else {
          absl::MutexLock lock(&mu_);
          request->status = std::move(status);
          request->failed = true;
          ++call->failures;
        }
        absl::MutexLock lock(&mu_);
        --call->outstanding;
        window_moved_.SignalAll();
      });
  return true;
}

void GrpcPsClient::PushAcknowledged(PushCall* call, PushRequestState* request,
                                    const grpc::ByteBuffer& reply) {
  wire::PushAck response;
  const absl::Status copied = ReadPushReply(call, request, reply, &response);
  int64_t bytes_out = 0;
  for (uint32_t id : request->ids) {
    bytes_out += spec_.blocks()[id].length * BytesPerElement(encoding_);
  }
  counters_->stats().pushes.Increment();
  counters_->stats().bytes_out.Increment(static_cast<double>(bytes_out));
  absl::MutexLock lock(&mu_);  // requests of one shard end on many threads
  // The ps answers each applied block's new version, one past the version
  // the update was applied to; a duplicate answers none.
  if (response.versions.size() == request->ids.size()) {
    StalenessHistogram& staleness = call->reports[request->shard].staleness;
    for (size_t i = 0; i < request->ids.size(); ++i) {
      const uint64_t applied_to = response.versions[i] - 1;
      const uint64_t base = request->bases[i];
      staleness.Record(applied_to > base ? applied_to - base : 0);
    }
  }
  if (!response.refused.empty()) {
    // The shard's push guard refused it: nothing applied there, the worker
    // goes on without this gradient (and must not count it as applied).
    counters_->stats().pushes_refused.Increment();
    call->reports[request->shard].AddRefusal(
        absl::StrCat("ps ", request->shard, ": ", response.refused));
  }
  // Only a push that asked for values fails on its reply (an unreadable ack
  // of a plain push is, as ever, an ack without staleness figures).
  if (request->copied.ok() && call->values != nullptr) request->copied = copied;
  request->done = true;
  PushLane& lane = lanes_[request->shard];
  lane.in_flight.erase(request->sequence);
  if (!response.duplicate) {
    lane.duplicates_since = absl::InfiniteFuture();
    lane.duplicates = 0;
  } else {
    if (lane.duplicates == 0) lane.duplicates_since = absl::Now();
    ++lane.duplicates;
  }
}

absl::Status GrpcPsClient::ReadPushReply(PushCall* call,
                                         PushRequestState* request,
                                         const grpc::ByteBuffer& reply,
                                         wire::PushAck* response) {
  // The values answered (reply_values) go straight into the caller's
  // params; only this request's blocks, so requests ending at once write
  // apart. A block the request did not push is refused.
  int64_t bytes_in = 0;
  size_t answered = 0;  // blocks whose values came back
  absl::Status copied = wire::ParsePushReply(
      reply, response,
      [&](const wire::BlockRef& block, const wire::CopyPayload& copy) {
        if (call->values == nullptr) return absl::OkStatus();
        if (std::find(request->ids.begin(), request->ids.end(), block.id) ==
            request->ids.end()) {
          return absl::InternalError(absl::StrCat(
              "ps ", request->shard, " answered a push with block ", block.id,
              ", which it did not carry"));
        }
        ++answered;
        return CopyBlock(request->shard, block, copy, call->values->params,
                         call->values->versions, &bytes_in);
      });
  if (copied.ok() && call->values != nullptr) {
    // Every block pushed comes back: a ps that answers without values (one
    // built before reply_values) would leave the worker on stale values.
    if (answered != request->ids.size()) {
      copied = absl::InternalError(absl::StrCat(
          "ps ", request->shard, " answered a push of ", request->ids.size(),
          " blocks with the values of ", answered,
          " (training.fetch layerwise asks for them): is it an older "
          "version? Update it, or use training.fetch after_push"));
    }
  }
  if (!copied.ok() && absl::IsInvalidArgument(copied)) {
    copied = absl::InternalError(
        absl::StrCat("ps ", request->shard, ": ", copied.message()));
  }
  if (call->values != nullptr && bytes_in > 0) {
    counters_->stats().pulls.Increment();
    counters_->stats().bytes_in.Increment(static_cast<double>(bytes_in));
  }
  return copied;
}

std::optional<GrpcPsClient::DuplicateStreak> GrpcPsClient::duplicate_streak()
    const {
  absl::MutexLock lock(&mu_);
  std::optional<DuplicateStreak> longest;
  const absl::Time now = absl::Now();
  for (size_t s = 0; s < lanes_.size(); ++s) {
    const PushLane& lane = lanes_[s];
    if (lane.duplicates == 0) continue;
    const absl::Duration streak = now - lane.duplicates_since;
    if (!longest.has_value() || streak > longest->for_how_long) {
      longest = DuplicateStreak{static_cast<int>(s), streak, lane.duplicates};
    }
  }
  return longest;
}

absl::Status GrpcPsClient::RetryFailedPushes(PushCall* call) {
  // Indices, not iterators: a request for moved buckets appends pieces.
  for (size_t r = 0; r < call->requests.size(); ++r) {
    PushRequestState* request = call->requests[r].get();
    {
      absl::MutexLock lock(&mu_);
      if (!request->failed) continue;
      request->failed = false;
      --call->failures;
    }
    RETURN_IF_ERROR(ResendPush(call, request));
  }
  return absl::OkStatus();
}

absl::Status GrpcPsClient::ResendPush(PushCall* call,
                                      PushRequestState* request) {
  // Sent again with its sequence: a duplicate if the first one landed.
  if (!request->fresh) counters_->stats().push_resends.Increment();
  const grpc::Status* first_try = request->fresh ? nullptr : &request->status;
  request->fresh = false;
  const auto send = [&](const ShardLink& shard, uint64_t epoch) {
    wire::PushView view =
        MakePushView(spec_, call->grad, *call->versions, request->ids, epoch,
                     worker_id_, request->sequence, call->clock,
                     push_key_.load(), encoding_, &request->encoded);
    view.sparse = request->sparse;
    view.reply_values = call->values != nullptr;
    const grpc::ByteBuffer bytes = wire::SerializePush(view, call->pins.get());
    request->reply.Clear();
    return shard.Call(kPushMethod, rpc_.deadline_s, bytes, &request->reply);
  };
  for (int tries = 1;; first_try = nullptr) {
    absl::Status status =
        WithRetries(request->shard, "push to", send, first_try, true);
    if (!IsBucketMoved(status)) {
      if (!status.ok()) return status;
      PushAcknowledged(call, request, request->reply);
      absl::MutexLock lock(&mu_);
      window_moved_.SignalAll();
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(const bool split, SplitMovedPush(call, request));
    if (split) continue;  // the rest to this ps again, the pieces later
    if (tries++ >= kMovedTries) return OwnersDisagree(request->shard, status);
    clock_->SleepFor(absl::Milliseconds(50) * tries);
  }
}

}  // namespace downpour::worker
