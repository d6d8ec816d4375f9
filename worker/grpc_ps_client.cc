// gRPC ps client. Requests go to all shards in parallel; a shard's blocks are cut
// into chunks of at most kChunkBytes so no message is huge (gRPC's rate drops for
// messages above a few MiB). Pull chunks are all in flight at once; push chunks to
// one shard go in order, one at a time, which keeps exactly-once sequencing
// simple. mu_ guards only the placement and the push lanes; it is never held
// across an RPC or a backoff sleep.
#include "worker/grpc_ps_client.h"

#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "common/grpc_status.h"
#include "common/logging.h"
#include "common/retry.h"
#include "common/server_util.h"

namespace downpour::worker {
namespace {

// Requests carry at most this many bytes of blocks: gRPC's rate drops for larger
// messages (docs/BENCHMARKS.md).
constexpr int64_t kChunkBytes = 4 << 20;

}  // namespace

struct GrpcPsClient::Shard {
  int index = 0;
  std::string address;
  std::unique_ptr<proto::ParameterServer::Stub> stub;
  std::vector<std::vector<uint32_t>> chunks;  // block ids per request
};

GrpcPsClient::GrpcPsClient(const ModelSpec& spec,
                           coordinator::CoordinatorClient* coordinator,
                           const RpcSection& rpc, int worker_id,
                           Counters* counters, std::function<bool()> should_stop,
                           Clock* clock)
    : spec_(spec), coordinator_(coordinator), rpc_(rpc), worker_id_(worker_id),
      counters_(counters), should_stop_(std::move(should_stop)),
      clock_(clock != nullptr ? clock : Clock::Real()),
      // A validated config names a known encoding.
      encoding_(
          ParseWireEncoding(rpc.encoding).value_or(WireEncoding::kFloat32)) {}

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
  // The first time, wait (bounded) for a placement; later, read it once: when it
  // is not newer, or the coordinator is down, we keep the one we have and the
  // caller's backoff decides when to try again.
  absl::StatusOr<proto::GetPlacementResponse> placement =
      seen_epoch == 0 ? coordinator_->WaitForPlacement(1, should_stop_)
                      : coordinator_->GetPlacement();
  if (!placement.ok()) {
    return seen_epoch == 0 ? placement.status() : absl::OkStatus();
  }
  if (placement->epoch() <= seen_epoch) return absl::OkStatus();
  std::vector<std::shared_ptr<const Shard>> shards;
  for (const proto::ShardInfo& info : placement->shards()) {
    auto shard = std::make_shared<Shard>();
    shard->index = info.index();
    shard->address = info.address();
    shard->stub = proto::ParameterServer::NewStub(MakeChannel(info.address()));
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
  absl::MutexLock lock(&mu_);
  if (placement->epoch() > epoch_) {
    SPDLOG_LOGGER_INFO(Log(Logger::kWorker), "placement epoch {}: {} shards",
                       placement->epoch(), shards.size());
    epoch_ = placement->epoch();
    shards_ = std::move(shards);
  }
  return absl::OkStatus();
}

std::shared_ptr<const GrpcPsClient::Shard> GrpcPsClient::GetShard(
    int index, uint64_t* epoch) const {
  absl::MutexLock lock(&mu_);
  *epoch = epoch_;
  return shards_[index];
}

int GrpcPsClient::num_shards() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(shards_.size());
}

absl::Status GrpcPsClient::WithRetries(
    int index, const std::string& what,
    const std::function<grpc::Status(const Shard&, uint64_t)>& call) {
  uint64_t epoch = 0;
  std::shared_ptr<const Shard> shard = GetShard(index, &epoch);
  const std::string target = absl::StrCat("ps ", index, " at ", shard->address);
  absl::Time first_failure = absl::InfiniteFuture();
  RetryOptions options;
  options.timeout = absl::Seconds(rpc_.connect_timeout_s);
  options.should_stop = should_stop_;
  options.clock = clock_;
  absl::Status result = RetryFor(
      absl::StrCat("worker ", worker_id_), absl::StrCat(what, " ", target), options,
      [&]() -> absl::Status {
        absl::Status status =
            FromGrpcStatus(call(*shard, epoch), absl::StrCat(what, " ", target));
        // A ps shutting down in order cancels the calls it has not served yet:
        // for us that is an unreachable ps. Retrying is safe: a push that was
        // applied after all comes back as a duplicate (its sequence number).
        if (status.code() == absl::StatusCode::kCancelled) {
          status = absl::UnavailableError(status.message());
        }
        if (status.ok() || !IsRetryable(status)) return status;
        if (first_failure == absl::InfiniteFuture()) {
          first_failure = clock_->Now();
          SPDLOG_LOGGER_WARN(Log(Logger::kWorker), "worker {}: {}; retrying with backoff",
                             worker_id_, std::string(status.message()));
        }
        counters_->Add("rpc_retries", 1);
        // The shard may have moved or restarted: read the placement again.
        absl::Status refreshed = Refresh(epoch);
        if (!refreshed.ok()) return refreshed;
        shard = GetShard(index, &epoch);
        return status;
      });
  if (result.ok() && first_failure != absl::InfiniteFuture()) {
    // How long this worker could not reach the shard: the outage it saw.
    const double outage = absl::ToDoubleSeconds(clock_->Now() - first_failure);
    counters_->Add("outage_seconds", outage);
    SPDLOG_LOGGER_INFO(Log(Logger::kWorker),
                       "worker {}: ps {} reachable again at {} (placement epoch {}) "
                       "after {:.2f} s",
                       worker_id_, index, shard->address, epoch, outage);
  }
  return result;
}

absl::Status GrpcPsClient::ForEachShard(int n,
                                        const std::function<absl::Status(int)>& fn) {
  std::vector<absl::Status> results(n);
  std::vector<std::thread> threads;
  for (int i = 1; i < n; ++i) {
    threads.emplace_back([&, i] { results[i] = fn(i); });
  }
  if (n > 0) results[0] = fn(0);
  for (std::thread& t : threads) t.join();
  for (const absl::Status& status : results) {
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status GrpcPsClient::Pull(float* params, std::vector<uint64_t>* versions) {
  versions->resize(spec_.blocks().size());
  return ForEachShard(num_shards(),
                      [&](int index) { return PullShard(index, params, versions); });
}

absl::Status GrpcPsClient::CopyBlocks(int index, const proto::PullResponse& response,
                                      float* params, std::vector<uint64_t>* versions) {
  int64_t bytes = 0;
  for (const proto::BlockData& block : response.blocks()) {
    if (block.block_id() >= spec_.blocks().size()) {
      return absl::InternalError(absl::StrCat("ps ", index, " returned unknown block ",
                                              block.block_id()));
    }
    const BlockSpec& spec = spec_.blocks()[block.block_id()];
    // The ps answers in the encoding asked for; the block says which it is.
    const auto encoding = static_cast<WireEncoding>(block.encoding());
    if (!IsKnownWireEncoding(encoding)) {
      return absl::InternalError(absl::StrCat("ps ", index, " returned block ",
                                              spec.id, " in ",
                                              WireEncodingName(encoding)));
    }
    const int64_t expected = spec.length * BytesPerElement(encoding);
    if (static_cast<int64_t>(block.data().size()) != expected) {
      return absl::InternalError(
          absl::StrCat("ps ", index, " returned ", block.data().size(),
                       " bytes for block ", spec.id, ", expected ", expected,
                       " (", spec.length, " ", WireEncodingName(encoding),
                       " values): do all daemons use the same config?"));
    }
    DecodeFloats(block.data().data(), spec.length, encoding,
                 params + spec.offset);
    (*versions)[spec.id] = block.version();
    bytes += block.data().size();
  }
  counters_->Add("pulls", 1);
  counters_->Add("bytes_in", bytes);
  return absl::OkStatus();
}

// Pulls have no ordering to keep, so every chunk of a shard is requested at once
// (a single request in flight per shard left the link idle between chunks); the
// chunks that fail are then retried one by one.
absl::Status GrpcPsClient::PullShard(int index, float* params,
                                     std::vector<uint64_t>* versions) {
  uint64_t epoch = 0;
  std::shared_ptr<const Shard> shard = GetShard(index, &epoch);
  const size_t num_chunks = shard->chunks.size();
  std::vector<grpc::ClientContext> contexts(num_chunks);
  std::vector<proto::PullRequest> requests(num_chunks);
  std::vector<proto::PullResponse> responses(num_chunks);
  std::vector<grpc::Status> results(num_chunks);
  absl::BlockingCounter pending(static_cast<int>(num_chunks));
  for (size_t c = 0; c < num_chunks; ++c) {
    requests[c].set_placement_epoch(epoch);
    requests[c].set_worker_id(worker_id_);
    requests[c].set_encoding(static_cast<proto::Encoding>(encoding_));
    for (uint32_t id : shard->chunks[c]) requests[c].add_block_ids(id);
    contexts[c].set_deadline(DeadlineIn(rpc_.deadline_s));
    shard->stub->async()->Pull(&contexts[c], &requests[c], &responses[c],
                               [&results, &pending, c](grpc::Status status) {
                                 results[c] = std::move(status);
                                 pending.DecrementCount();
                               });
  }
  pending.Wait();
  for (size_t c = 0; c < num_chunks; ++c) {
    if (!results[c].ok()) {
      absl::Status status = WithRetries(
          index, "pull from", [&](const Shard& now, uint64_t now_epoch) {
            proto::PullRequest request;
            request.set_placement_epoch(now_epoch);
            request.set_worker_id(worker_id_);
            request.set_encoding(static_cast<proto::Encoding>(encoding_));
            for (uint32_t id : now.chunks[c]) request.add_block_ids(id);
            grpc::ClientContext context;
            context.set_deadline(DeadlineIn(rpc_.deadline_s));
            responses[c].Clear();
            return now.stub->Pull(&context, request, &responses[c]);
          });
      if (!status.ok()) return status;
    }
    absl::Status copied = CopyBlocks(index, responses[c], params, versions);
    if (!copied.ok()) return copied;
  }
  return absl::OkStatus();
}

void GrpcPsClient::set_start_clock(uint64_t start) {
  absl::MutexLock lock(&mu_);
  if (pushes_begun_ > 0) return;
  start_clock_ = start;
  acked_clock_ = start;
}

uint64_t GrpcPsClient::acked_clock() const {
  absl::MutexLock lock(&mu_);
  return acked_clock_;
}

absl::Status GrpcPsClient::Push(const float* grad,
                                const std::vector<uint64_t>& versions,
                                StalenessHistogram* staleness) {
  // Take a ticket on every shard at once, so that pushes reach each shard in the
  // order they began here.
  std::vector<uint64_t> tickets;
  uint64_t push_clock = 0;
  {
    absl::MutexLock lock(&mu_);
    push_clock = start_clock_ + ++pushes_begun_;
    if (lanes_.size() < shards_.size()) {
      // Sequences start at the wall clock in microseconds (not clock_: this is
      // about identity across restarts, not waiting), so a restarted worker's
      // pushes number above its previous run's (each push takes far more than
      // 1 us) and the ps does not mistake them for duplicates.
      PushLane fresh;
      fresh.next_sequence = static_cast<uint64_t>(absl::ToUnixMicros(absl::Now()));
      lanes_.resize(shards_.size(), fresh);
    }
    for (size_t i = 0; i < shards_.size(); ++i) {
      tickets.push_back(lanes_[i].next_ticket++);
    }
  }
  // One histogram per shard: the shards' pushes run in parallel.
  std::vector<StalenessHistogram> per_shard(tickets.size());
  absl::Status status =
      ForEachShard(static_cast<int>(tickets.size()), [&](int index) {
        return PushShard(index, tickets[index], push_clock, grad, versions,
                         &per_shard[index]);
      });
  if (!status.ok()) return status;
  {
    absl::MutexLock lock(&mu_);
    acked_clock_ = std::max(acked_clock_, push_clock);
  }
  if (staleness != nullptr) {
    for (const StalenessHistogram& h : per_shard) staleness->Merge(h);
  }
  return absl::OkStatus();
}

absl::Status GrpcPsClient::PushShard(int index, uint64_t ticket,
                                     uint64_t push_clock, const float* grad,
                                     const std::vector<uint64_t>& versions,
                                     StalenessHistogram* staleness) {
  {
    absl::MutexLock lock(&mu_);
    while (lanes_[index].serving != ticket) turn_changed_.Wait(&mu_);
  }
  // The turn is ours: no other push sends to this shard until we pass it on,
  // and no mutex is held while the requests and their retries run.
  absl::Status status =
      SendPushChunks(index, push_clock, grad, versions, staleness);
  absl::MutexLock lock(&mu_);
  ++lanes_[index].serving;
  turn_changed_.SignalAll();
  return status;
}

absl::Status GrpcPsClient::SendPushChunks(int index, uint64_t push_clock,
                                          const float* grad,
                                          const std::vector<uint64_t>& versions,
                                          StalenessHistogram* staleness) {
  uint64_t unused = 0;
  const size_t num_chunks = GetShard(index, &unused)->chunks.size();
  for (size_t c = 0; c < num_chunks; ++c) {
    uint64_t sequence = 0;
    {
      absl::MutexLock lock(&mu_);
      sequence = lanes_[index].next_sequence++;
    }
    int64_t bytes = 0;
    proto::PushResponse response;
    std::vector<uint32_t> sent;  // block ids of the request answered
    absl::Status status = WithRetries(
        index, "push to", [&](const Shard& shard, uint64_t epoch) {
          proto::PushRequest request;
          request.set_placement_epoch(epoch);
          request.set_worker_id(worker_id_);
          request.set_sequence(sequence);
          request.set_clock(push_clock);
          bytes = 0;
          for (uint32_t id : shard.chunks[c]) {
            const BlockSpec& spec = spec_.blocks()[id];
            proto::BlockData* block = request.add_blocks();
            block->set_block_id(id);
            block->set_version(versions[id]);
            if (encoding_ == WireEncoding::kFloat32) {
              block->set_data(reinterpret_cast<const char*>(grad + spec.offset),
                              spec.length * 4);
            } else {
              // Encoded straight into the request's bytes: no float32 copy.
              block->set_encoding(static_cast<proto::Encoding>(encoding_));
              std::string* data = block->mutable_data();
              data->resize(spec.length * BytesPerElement(encoding_));
              EncodeFloats(grad + spec.offset, spec.length, encoding_,
                           data->data());
            }
            bytes += block->data().size();
          }
          grpc::ClientContext context;
          context.set_deadline(DeadlineIn(rpc_.deadline_s));
          response.Clear();
          sent.assign(shard.chunks[c].begin(), shard.chunks[c].end());
          return shard.stub->Push(&context, request, &response);
        });
    if (!status.ok()) return status;
    // The ps answers each applied block's new version, one past the version
    // the update was applied to; a duplicate answers none.
    if (response.versions_size() == static_cast<int>(sent.size())) {
      for (size_t i = 0; i < sent.size(); ++i) {
        const uint64_t applied_to = response.versions(i) - 1;
        const uint64_t base = versions[sent[i]];
        staleness->Record(applied_to > base ? applied_to - base : 0);
      }
    }
    counters_->Add("pushes", 1);
    counters_->Add("bytes_out", bytes);
  }
  return absl::OkStatus();
}

}  // namespace downpour::worker
