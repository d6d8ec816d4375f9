// Replicator: consistent cuts of a shard, streamed to its backup.
#include "server/replication/replicator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "rpc/grpc_status.h"
#include "rpc/server_util.h"

namespace downpour::server {
namespace {

spdlog::logger* L() { return Log(Logger::kServer); }

// How long the thread waits after a failed send before the next try.
constexpr absl::Duration kRetryPause = absl::Milliseconds(100);
// How often an idle thread looks for changes no push announced (a refused
// push uses up its sequence, a placement adds blocks).
constexpr absl::Duration kIdleCheck = absl::Milliseconds(500);
// How often a cut carries every block's checksum, for the backup to compare
// with what its replayed updates gave it.
constexpr absl::Duration kCheckEvery = absl::Seconds(1);

void ToBytes(const std::vector<float>& floats, std::string* out) {
  out->assign(reinterpret_cast<const char*>(floats.data()),
              floats.size() * sizeof(float));
}

}  // namespace

Replicator::Replicator(Shard* shard, Options options)
    : shard_(shard), options_(std::move(options)) {
  thread_ = std::thread([this] { Loop(); });
}

Replicator::~Replicator() { Stop(); }

void Replicator::Stop() {
  std::vector<Waiter> waiters;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    waiters = TakeWaiters(0, /*all=*/true);
  }
  for (Waiter& w : waiters) {
    w.second(absl::UnavailableError("push: this ps is stopping; retry"));
  }
  if (thread_.joinable()) thread_.join();
}

void Replicator::SetBackup(const std::string& address) {
  std::vector<Waiter> released;
  // Updates are kept for a backup to replay only while there is one.
  shard_->SetReplicaLog(!address.empty());
  {
    absl::MutexLock lock(&mu_);
    if (address == backup_) return;
    if (address.empty()) {
      SPDLOG_LOGGER_WARN(L(),
                         "ps {}: no backup any more (was {}): pushes are "
                         "acknowledged unreplicated until the coordinator "
                         "names another",
                         options_.shard_index, backup_);
      released = TakeWaiters(0, /*all=*/true);
    } else {
      SPDLOG_LOGGER_INFO(L(), "ps {}: backup is {}: sending a full copy",
                         options_.shard_index, address);
    }
    backup_ = address;
    ++backup_version_;
    need_full_ = true;
    in_sync_ = false;
    degraded_ = false;
    acked_ = 0;
    failing_since_ = absl::InfiniteFuture();
  }
  for (Waiter& w : released) w.second(absl::OkStatus());
}

void Replicator::WhenReplicated(std::function<void(const absl::Status&)> done) {
  const uint64_t generation = shard_->generation();
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    if (replaced_ || stopping_) {
      status = absl::UnavailableError(absl::StrCat(
          "push: ps ", options_.shard_index,
          replaced_ ? " was replaced by its backup: re-read the placement"
                    : " is stopping; retry"));
    } else if (!backup_.empty() && !degraded_ && generation > acked_) {
      waiters_.emplace_back(generation, std::move(done));
      poked_ = true;
      return;
    } else if (degraded_ && options_.counters != nullptr) {
      options_.counters->stats().replication_degraded.Increment(1);
    }
  }
  done(status);
}

bool Replicator::in_sync() const {
  absl::MutexLock lock(&mu_);
  return in_sync_ && !degraded_ && !replaced_;
}

std::string Replicator::backup() const {
  absl::MutexLock lock(&mu_);
  return backup_;
}

std::vector<Replicator::Waiter> Replicator::TakeWaiters(uint64_t generation,
                                                        bool all) {
  std::vector<Waiter> taken, kept;
  for (Waiter& w : waiters_) {
    (all || w.first <= generation ? taken : kept).push_back(std::move(w));
  }
  waiters_.swap(kept);
  return taken;
}

absl::Status Replicator::Send(proto::ParameterServer::Stub* stub,
                              Shard::ReplicaCut* cut, bool full) {
  proto::ReplicateRequest request;
  request.set_shard_index(options_.shard_index);
  request.set_placement_epoch(cut->epoch);
  request.set_optimizer(cut->optimizer);
  if (full) request.set_optimizer_settings(cut->optimizer_settings);
  request.set_primary(options_.self_address);
  bool first = true;
  int64_t bytes = 0, total = 0;
  auto send = [&](bool last) -> absl::Status {
    request.set_full(full && first);
    if (last) {
      for (const Shard::ReplicaCut::Check& c : cut->checks) {
        proto::ReplicaCheck* check = request.add_checks();
        check->set_block(c.id);
        check->set_version(c.version);
        check->set_crc32c(c.crc32c);
      }
      request.set_generation(cut->generation);
      for (const auto& [worker, window] : cut->sequences) {
        proto::ReplicaSequence* s = request.add_sequences();
        s->set_worker_id(worker);
        s->set_base(window.base());
        s->set_mask(window.mask());
      }
    }
    grpc::ClientContext context;
    context.set_deadline(
        absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
    proto::ReplicateResponse response;
    absl::Status status = FromGrpcStatus(
        stub->Replicate(&context, request, &response),
        absl::StrCat("replicate shard ", options_.shard_index, " to backup"));
    first = false;
    total += bytes;
    bytes = 0;
    request.clear_blocks();
    request.clear_updates();
    request.clear_sparse();
    return status;
  };
  for (const BlockStore::BlockSnapshot& block : cut->blocks) {
    const int64_t size =
        static_cast<int64_t>(block.values.size() + block.state.size()) *
        sizeof(float);
    if (bytes > 0 && bytes + size > options_.max_request_bytes) {
      absl::Status sent = send(/*last=*/false);
      if (!sent.ok()) return sent;
    }
    proto::ReplicaBlock* out = request.add_blocks();
    out->set_id(block.id);
    out->set_version(block.version);
    ToBytes(block.values, out->mutable_values());
    ToBytes(block.state, out->mutable_state());
    bytes += size;
  }
  // Updates after the blocks, in the order applied.
  for (Shard::ReplicaUpdate& logged : cut->updates) {
    const int64_t size = static_cast<int64_t>(logged.gradient.size());
    if (bytes > 0 && bytes + size > options_.max_request_bytes) {
      absl::Status sent = send(/*last=*/false);
      if (!sent.ok()) return sent;
    }
    const BlockStore::Replayed& u = logged.update;
    proto::ReplicaUpdate* out = request.add_updates();
    out->set_block(u.id);
    out->set_version(u.version);
    out->set_base_version(u.base_version);
    out->set_worker(u.worker_id);
    out->set_encoding(static_cast<uint32_t>(u.encoding));
    out->set_clip_norm(u.clip_norm);
    out->set_mean_staleness(u.mean_staleness);
    out->set_gradient(std::move(logged.gradient));
    bytes += size;
  }
  // Rows in pieces of at most max_request_bytes, whole rows each, after the
  // table's evicted keys (tombstones, in pieces of their own).
  for (const auto& [table, rows] : cut->sparse) {
    auto piece = [&, table = table, &rows = rows] {
      proto::ReplicaSparseRows* out = request.add_sparse();
      out->set_table(table);
      out->set_optimizer(SparseOptimizerName(rows.optimizer));
      out->set_dim(static_cast<uint32_t>(rows.dim));
      out->set_state_slots(static_cast<uint32_t>(rows.state_slots));
      out->set_clock(rows.clock);
      out->set_evicted_versions(rows.evicted_versions);
      return out;
    };
    const size_t per_tombstone_piece = static_cast<size_t>(
        std::max<int64_t>(1, options_.max_request_bytes / 8));
    for (size_t begin = 0; begin < rows.evicted_keys.size();) {
      const size_t n =
          std::min(per_tombstone_piece, rows.evicted_keys.size() - begin);
      if (bytes > 0 &&
          bytes + static_cast<int64_t>(n) * 8 > options_.max_request_bytes) {
        absl::Status sent = send(/*last=*/false);
        if (!sent.ok()) return sent;
      }
      piece()->set_evicted_keys(
          reinterpret_cast<const char*>(rows.evicted_keys.data() + begin),
          n * sizeof(uint64_t));
      bytes += static_cast<int64_t>(n) * 8;
      begin += n;
    }
    const size_t stride =
        static_cast<size_t>(rows.dim) * (1 + rows.state_slots);
    const bool clocks = !rows.clocks.empty();
    const int64_t row_bytes = sizeof(uint64_t) + stride * sizeof(float) +
                              sizeof(uint32_t) +
                              (clocks ? sizeof(uint64_t) : 0);
    const size_t per_piece = static_cast<size_t>(
        std::max<int64_t>(1, options_.max_request_bytes / row_bytes));
    size_t begin = 0;
    do {
      const size_t n = std::min(per_piece, rows.keys.size() - begin);
      if (n == 0 && !rows.evicted_keys.empty())
        break;  // said by the tombstones
      if (bytes > 0 && bytes + static_cast<int64_t>(n) * row_bytes >
                           options_.max_request_bytes) {
        absl::Status sent = send(/*last=*/false);
        if (!sent.ok()) return sent;
      }
      proto::ReplicaSparseRows* out = piece();
      out->set_keys(reinterpret_cast<const char*>(rows.keys.data() + begin),
                    n * sizeof(uint64_t));
      out->set_data(
          reinterpret_cast<const char*>(rows.data.data() + begin * stride),
          n * stride * sizeof(float));
      out->set_versions(
          reinterpret_cast<const char*>(rows.versions.data() + begin),
          n * sizeof(uint32_t));
      if (clocks) {
        out->set_clocks(
            reinterpret_cast<const char*>(rows.clocks.data() + begin),
            n * sizeof(uint64_t));
      }
      bytes += static_cast<int64_t>(n) * row_bytes;
      begin += n;
    } while (begin < rows.keys.size());
  }
  absl::Status sent = send(/*last=*/true);
  if (sent.ok() && options_.counters != nullptr) {
    options_.counters->stats().replicated_cuts.Increment(1);
    options_.counters->stats().replicated_bytes.Increment(
        static_cast<double>(total));
    options_.counters->stats().replicated_updates.Increment(
        static_cast<double>(cut->updates.size()));
  }
  return sent;
}

void Replicator::Loop() {
  std::unique_ptr<proto::ParameterServer::Stub> stub;
  std::string stub_address;
  bool failed = false;
  absl::Time last_check = absl::InfinitePast();
  for (;;) {
    std::string address;
    bool full;
    uint64_t version, acked;
    {
      absl::MutexLock lock(&mu_);
      if (failed) {
        // A pause between tries, cut short by Stop.
        mu_.AwaitWithTimeout(absl::Condition(&stopping_), kRetryPause);
      }
      mu_.AwaitWithTimeout(absl::Condition(this, &Replicator::HasWork),
                           kIdleCheck);
      if (stopping_ || replaced_) return;
      if (backup_.empty()) continue;
      address = backup_;
      full = need_full_;
      poked_ = false;
      version = backup_version_;
      acked = acked_;
    }
    if (!full && shard_->generation() <= acked) continue;  // nothing new
    if (stub == nullptr || stub_address != address) {
      stub = proto::ParameterServer::NewStub(MakeChannel(address));
      stub_address = address;
    }
    const absl::Time started = absl::Now();
    const bool checks = !full && started - last_check >= kCheckEvery;
    if (checks || full) last_check = started;
    Shard::ReplicaCut cut = shard_->CutForReplica(full, checks);
    const absl::Status sent = Send(stub.get(), &cut, full);
    std::vector<Waiter> done;
    absl::Status result;
    bool replaced_now = false;
    {
      absl::MutexLock lock(&mu_);
      failed = false;
      if (version != backup_version_) {
        need_full_ = true;  // the backup changed while this cut was sent
        continue;
      }
      const absl::Time now = absl::Now();
      if (sent.ok()) {
        if (degraded_ || !in_sync_) {
          SPDLOG_LOGGER_INFO(L(), "ps {}: backup {} in sync (generation {})",
                             options_.shard_index, address, cut.generation);
        }
        acked_ = cut.generation;
        in_sync_ = true;
        degraded_ = false;
        need_full_ = false;
        failing_since_ = absl::InfiniteFuture();
        done = TakeWaiters(acked_, /*all=*/false);
        if (options_.counters != nullptr) {
          options_.counters->stats().replication_lag_ms.Set(
              absl::ToDoubleMilliseconds(now - started));
        }
      } else if (absl::IsAborted(sent)) {
        SPDLOG_LOGGER_WARN(L(), "ps {}: {}", options_.shard_index,
                           std::string(sent.message()));
        replaced_ = true;
        replaced_now = true;
        done = TakeWaiters(0, /*all=*/true);
        result = absl::UnavailableError(
            absl::StrCat("push: ps ", options_.shard_index,
                         " was replaced by its backup: re-read the placement"));
      } else if (absl::IsDataLoss(sent)) {
        // The backup's copy differs from this shard's (its replayed updates
        // gave other floats, or it lost a cut): a full cut at once. The
        // backup holds nothing it could take over meanwhile.
        SPDLOG_LOGGER_WARN(L(), "ps {}: {}: sending a full copy",
                           options_.shard_index, std::string(sent.message()));
        need_full_ = true;
        in_sync_ = false;
        if (options_.counters != nullptr) {
          options_.counters->stats().replication_mismatches.Increment(1);
        }
      } else {
        failed = true;
        need_full_ = true;
        in_sync_ = false;
        if (options_.counters != nullptr) {
          options_.counters->stats().replication_failures.Increment(1);
        }
        if (failing_since_ == absl::InfiniteFuture()) failing_since_ = now;
        if (!degraded_ && now - failing_since_ >= options_.give_up_after) {
          degraded_ = true;
          // A backup that answers but refuses the cuts (another optimizer
          // section, say) is no more use than one that does not answer;
          // the message says which it was.
          SPDLOG_LOGGER_ERROR(
              L(),
              "ps {}: backup {} {} for {:.1f} s ({}): acknowledging "
              "pushes WITHOUT a backup until it answers or the coordinator "
              "names another",
              options_.shard_index, address,
              absl::IsFailedPrecondition(sent) ? "refused the cuts"
                                               : "unreachable",
              absl::ToDoubleSeconds(now - failing_since_),
              std::string(sent.message()));
        }
        if (degraded_) done = TakeWaiters(0, /*all=*/true);
      }
    }
    // Fenced first: nothing more is served once the waiters hear why.
    if (replaced_now && options_.on_replaced) options_.on_replaced();
    for (Waiter& w : done) w.second(result);
    if (replaced_now) return;
  }
}

}  // namespace downpour::server
