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

// One cut's Replicate requests: pieces are added to request() until the next
// would pass max_request_bytes, then what is there is sent. The last request
// carries the cut's checks, generation and sequences.
class CutSender {
 public:
  CutSender(proto::ParameterServer::Stub* stub,
            const Replicator::Options& options, Shard::ReplicaCut* cut,
            bool full)
      : stub_(stub), options_(options), cut_(cut), full_(full) {
    request_.set_shard_index(options.shard_index);
    request_.set_placement_epoch(cut->epoch);
    request_.set_optimizer(cut->optimizer);
    if (full) request_.set_optimizer_settings(cut->optimizer_settings);
    request_.set_primary(options.self_address);
  }

  // Sends what the request holds if `size` more bytes would not fit.
  absl::Status MakeRoom(int64_t size) {
    if (bytes_ > 0 && bytes_ + size > options_.max_request_bytes) {
      return Send(/*last=*/false);
    }
    return absl::OkStatus();
  }
  proto::ReplicateRequest& request() { return request_; }
  void Added(int64_t size) { bytes_ += size; }
  int64_t max_request_bytes() const { return options_.max_request_bytes; }
  // Bytes of blocks, updates and rows sent so far.
  int64_t total() const { return total_; }

  absl::Status Send(bool last) {
    request_.set_full(full_ && first_);
    if (last) AddCutEnd();
    grpc::ClientContext context;
    context.set_deadline(
        absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
    proto::ReplicateResponse response;
    absl::Status status = FromGrpcStatus(
        stub_->Replicate(&context, request_, &response),
        absl::StrCat("replicate shard ", options_.shard_index, " to backup"));
    first_ = false;
    total_ += bytes_;
    bytes_ = 0;
    request_.clear_blocks();
    request_.clear_updates();
    request_.clear_sparse();
    return status;
  }

 private:
  void AddCutEnd() {
    for (const Shard::ReplicaCut::Check& c : cut_->checks) {
      proto::ReplicaCheck* check = request_.add_checks();
      check->set_block(c.id);
      check->set_version(c.version);
      check->set_crc32c(c.crc32c);
    }
    request_.set_generation(cut_->generation);
    for (const auto& [worker, window] : cut_->sequences) {
      proto::ReplicaSequence* s = request_.add_sequences();
      s->set_worker_id(worker);
      s->set_base(window.base());
      s->set_mask(window.mask());
    }
  }

  proto::ParameterServer::Stub* const stub_;
  const Replicator::Options& options_;
  Shard::ReplicaCut* const cut_;
  const bool full_;
  proto::ReplicateRequest request_;
  bool first_ = true;
  int64_t bytes_ = 0;
  int64_t total_ = 0;
};

absl::Status AddBlocks(const std::vector<BlockStore::BlockSnapshot>& blocks,
                       CutSender* sender) {
  for (const BlockStore::BlockSnapshot& block : blocks) {
    const int64_t size =
        static_cast<int64_t>(block.values.size() + block.state.size()) *
        sizeof(float);
    absl::Status sent = sender->MakeRoom(size);
    if (!sent.ok()) return sent;
    proto::ReplicaBlock* out = sender->request().add_blocks();
    out->set_id(block.id);
    out->set_version(block.version);
    ToBytes(block.values, out->mutable_values());
    ToBytes(block.state, out->mutable_state());
    sender->Added(size);
  }
  return absl::OkStatus();
}

// The gradients are moved into the requests.
absl::Status AddUpdates(std::vector<Shard::ReplicaUpdate>* updates,
                        CutSender* sender) {
  for (Shard::ReplicaUpdate& logged : *updates) {
    const int64_t size = static_cast<int64_t>(logged.gradient.size());
    absl::Status sent = sender->MakeRoom(size);
    if (!sent.ok()) return sent;
    const BlockStore::Replayed& u = logged.update;
    proto::ReplicaUpdate* out = sender->request().add_updates();
    out->set_block(u.id);
    out->set_version(u.version);
    out->set_base_version(u.base_version);
    out->set_worker(u.worker_id);
    out->set_encoding(static_cast<uint32_t>(u.encoding));
    out->set_clip_norm(u.clip_norm);
    out->set_mean_staleness(u.mean_staleness);
    out->set_gradient(std::move(logged.gradient));
    sender->Added(size);
  }
  return absl::OkStatus();
}

// A new piece of `table`'s rows in the request, its header filled.
proto::ReplicaSparseRows* AddSparsePiece(uint32_t table,
                                         const SparseTable::Rows& rows,
                                         CutSender* sender) {
  proto::ReplicaSparseRows* out = sender->request().add_sparse();
  out->set_table(table);
  out->set_optimizer(SparseOptimizerName(rows.optimizer));
  out->set_dim(static_cast<uint32_t>(rows.dim));
  out->set_state_slots(static_cast<uint32_t>(rows.state_slots));
  out->set_clock(rows.clock);
  out->set_evicted_versions(rows.evicted_versions);
  return out;
}

// The table's evicted keys, in pieces of their own.
absl::Status AddTombstones(uint32_t table, const SparseTable::Rows& rows,
                           CutSender* sender) {
  const size_t per_tombstone_piece = static_cast<size_t>(
      std::max<int64_t>(1, sender->max_request_bytes() / 8));
  for (size_t begin = 0; begin < rows.evicted_keys.size();) {
    const size_t n =
        std::min(per_tombstone_piece, rows.evicted_keys.size() - begin);
    absl::Status sent = sender->MakeRoom(static_cast<int64_t>(n) * 8);
    if (!sent.ok()) return sent;
    AddSparsePiece(table, rows, sender)
        ->set_evicted_keys(
            reinterpret_cast<const char*>(rows.evicted_keys.data() + begin),
            n * sizeof(uint64_t));
    sender->Added(static_cast<int64_t>(n) * 8);
    begin += n;
  }
  return absl::OkStatus();
}

// The table's rows in pieces of at most max_request_bytes, whole rows each
// (one empty piece for a table without rows or tombstones).
absl::Status AddRows(uint32_t table, const SparseTable::Rows& rows,
                     CutSender* sender) {
  const size_t stride = static_cast<size_t>(rows.dim) * (1 + rows.state_slots);
  const bool clocks = !rows.clocks.empty();
  const int64_t row_bytes = sizeof(uint64_t) + stride * sizeof(float) +
                            sizeof(uint32_t) + (clocks ? sizeof(uint64_t) : 0);
  const size_t per_piece = static_cast<size_t>(
      std::max<int64_t>(1, sender->max_request_bytes() / row_bytes));
  size_t begin = 0;
  do {
    const size_t n = std::min(per_piece, rows.keys.size() - begin);
    if (n == 0 && !rows.evicted_keys.empty()) break;  // said by the tombstones
    absl::Status sent = sender->MakeRoom(static_cast<int64_t>(n) * row_bytes);
    if (!sent.ok()) return sent;
    proto::ReplicaSparseRows* out = AddSparsePiece(table, rows, sender);
    out->set_keys(reinterpret_cast<const char*>(rows.keys.data() + begin),
                  n * sizeof(uint64_t));
    out->set_data(
        reinterpret_cast<const char*>(rows.data.data() + begin * stride),
        n * stride * sizeof(float));
    out->set_versions(
        reinterpret_cast<const char*>(rows.versions.data() + begin),
        n * sizeof(uint32_t));
    if (clocks) {
      out->set_clocks(reinterpret_cast<const char*>(rows.clocks.data() + begin),
                      n * sizeof(uint64_t));
    }
    sender->Added(static_cast<int64_t>(n) * row_bytes);
    begin += n;
  } while (begin < rows.keys.size());
  return absl::OkStatus();
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
  CutSender sender(stub, options_, cut, full);
  absl::Status sent = AddBlocks(cut->blocks, &sender);
  // Updates after the blocks, in the order applied.
  if (sent.ok()) sent = AddUpdates(&cut->updates, &sender);
  // Each table's evicted keys (tombstones), then its rows.
  for (const auto& [table, rows] : cut->sparse) {
    if (sent.ok()) sent = AddTombstones(table, rows, &sender);
    if (sent.ok()) sent = AddRows(table, rows, &sender);
  }
  if (!sent.ok()) return sent;
  sent = sender.Send(/*last=*/true);
  if (sent.ok() && options_.counters != nullptr) {
    options_.counters->stats().replicated_cuts.Increment(1);
    options_.counters->stats().replicated_bytes.Increment(
        static_cast<double>(sender.total()));
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
    Round round;
    if (!AwaitRound(failed, &round)) return;
    if (round.address.empty()) continue;  // no backup
    if (!round.full && shard_->generation() <= round.acked) {
      continue;  // nothing new
    }
    if (stub == nullptr || stub_address != round.address) {
      stub = proto::ParameterServer::NewStub(MakeChannel(round.address));
      stub_address = round.address;
    }
    const absl::Time started = absl::Now();
    const bool checks = !round.full && started - last_check >= kCheckEvery;
    if (checks || round.full) last_check = started;
    Shard::ReplicaCut cut = shard_->CutForReplica(round.full, checks);
    const absl::Status sent = Send(stub.get(), &cut, round.full);
    Settled settled = Settle(round, sent, cut.generation, started);
    failed = settled.failed;
    // Fenced first: nothing more is served once the waiters hear why.
    if (settled.replaced && options_.on_replaced) options_.on_replaced();
    for (Waiter& w : settled.done) w.second(settled.result);
    if (settled.replaced) return;
  }
}

bool Replicator::AwaitRound(bool failed, Round* round) {
  absl::MutexLock lock(&mu_);
  if (failed) {
    // A pause between tries, cut short by Stop.
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), kRetryPause);
  }
  mu_.AwaitWithTimeout(absl::Condition(this, &Replicator::HasWork), kIdleCheck);
  if (stopping_ || replaced_) return false;
  if (backup_.empty()) return true;
  round->address = backup_;
  round->full = need_full_;
  poked_ = false;
  round->version = backup_version_;
  round->acked = acked_;
  return true;
}

Replicator::Settled Replicator::Settle(const Round& round,
                                       const absl::Status& sent,
                                       uint64_t generation,
                                       absl::Time started) {
  Settled settled;
  absl::MutexLock lock(&mu_);
  if (round.version != backup_version_) {
    need_full_ = true;  // the backup changed while this cut was sent
    return settled;
  }
  const absl::Time now = absl::Now();
  if (sent.ok()) {
    Synced(round.address, generation, now - started, &settled);
  } else if (absl::IsAborted(sent)) {
    Replaced(sent, &settled);
  } else if (absl::IsDataLoss(sent)) {
    Mismatched(sent);
  } else {
    SendFailed(round.address, sent, now, &settled);
  }
  return settled;
}

void Replicator::Synced(const std::string& address, uint64_t generation,
                        absl::Duration lag, Settled* settled) {
  if (degraded_ || !in_sync_) {
    SPDLOG_LOGGER_INFO(L(), "ps {}: backup {} in sync (generation {})",
                       options_.shard_index, address, generation);
  }
  acked_ = generation;
  in_sync_ = true;
  degraded_ = false;
  need_full_ = false;
  failing_since_ = absl::InfiniteFuture();
  settled->done = TakeWaiters(acked_, /*all=*/false);
  if (options_.counters != nullptr) {
    options_.counters->stats().replication_lag_ms.Set(
        absl::ToDoubleMilliseconds(lag));
  }
}

void Replicator::Replaced(const absl::Status& sent, Settled* settled) {
  SPDLOG_LOGGER_WARN(L(), "ps {}: {}", options_.shard_index,
                     std::string(sent.message()));
  replaced_ = true;
  settled->replaced = true;
  settled->done = TakeWaiters(0, /*all=*/true);
  settled->result = absl::UnavailableError(
      absl::StrCat("push: ps ", options_.shard_index,
                   " was replaced by its backup: re-read the placement"));
}

void Replicator::Mismatched(const absl::Status& sent) {
  // The backup's copy differs from this shard's (its replayed updates gave
  // other floats, or it lost a cut): a full cut at once. The backup holds
  // nothing it could take over meanwhile.
  SPDLOG_LOGGER_WARN(L(), "ps {}: {}: sending a full copy",
                     options_.shard_index, std::string(sent.message()));
  need_full_ = true;
  in_sync_ = false;
  if (options_.counters != nullptr) {
    options_.counters->stats().replication_mismatches.Increment(1);
  }
}

void Replicator::SendFailed(const std::string& address,
                            const absl::Status& sent, absl::Time now,
                            Settled* settled) {
  settled->failed = true;
  need_full_ = true;
  in_sync_ = false;
  if (options_.counters != nullptr) {
    options_.counters->stats().replication_failures.Increment(1);
  }
  if (failing_since_ == absl::InfiniteFuture()) failing_since_ = now;
  if (!degraded_ && now - failing_since_ >= options_.give_up_after) {
    degraded_ = true;
    // A backup that answers but refuses the cuts (another optimizer section,
    // say) is no more use than one that does not answer; the message says
    // which it was.
    SPDLOG_LOGGER_ERROR(
        L(),
        "ps {}: backup {} {} for {:.1f} s ({}): acknowledging "
        "pushes WITHOUT a backup until it answers or the coordinator "
        "names another",
        options_.shard_index, address,
        absl::IsFailedPrecondition(sent) ? "refused the cuts" : "unreachable",
        absl::ToDoubleSeconds(now - failing_since_),
        std::string(sent.message()));
  }
  if (degraded_) settled->done = TakeWaiters(0, /*all=*/true);
}

}  // namespace downpour::server
