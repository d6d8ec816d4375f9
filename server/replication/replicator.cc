// Replicator: consistent cuts of a shard, streamed to its backup.
#include "server/replication/replicator.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "rpc/grpc_status.h"
#include "rpc/server_util.h"
#include "server/sparse_rows_proto.h"

namespace downpour::server {
namespace {

spdlog::logger* L() { return Log(Logger::kServer); }

// How long the thread waits after a failed send before the next try to that
// backup, and once the backup counts as dead.
constexpr absl::Duration kRetryPause = absl::Milliseconds(100);
constexpr absl::Duration kDeadRetryPause = absl::Milliseconds(500);
// How often an idle thread looks for changes no push announced (a refused
// push uses up its sequence, a placement adds blocks).
constexpr absl::Duration kIdleCheck = absl::Milliseconds(500);
// How often a cut carries every block's checksum, for the backup to compare
// with what its replayed updates gave it.
constexpr absl::Duration kCheckEvery = absl::Seconds(1);

// Sends `request` to every stub whose `status` is still OK, all at once;
// records each one's result in `status`.
void SendToAll(const std::vector<proto::ParameterServer::Stub*>& stubs,
               const proto::ReplicateRequest& request,
               const Replicator::Options& options,
               std::vector<absl::Status>* status) {
  const std::string what =
      absl::StrCat("replicate shard ", options.shard_index, " to backup");
  const auto deadline = absl::ToChronoTime(absl::Now() + options.rpc_timeout);
  if (stubs.size() == 1) {  // the common case, on this thread
    grpc::ClientContext context;
    context.set_deadline(deadline);
    proto::ReplicateResponse response;
    (*status)[0] =
        FromGrpcStatus(stubs[0]->Replicate(&context, request, &response), what);
    return;
  }
  struct Call {
    grpc::ClientContext context;
    proto::ReplicateResponse response;
  };
  std::vector<Call> calls(stubs.size());
  absl::Mutex mu;
  size_t pending = 0;
  for (size_t i = 0; i < stubs.size(); ++i) {
    if (!(*status)[i].ok()) continue;
    ++pending;
    calls[i].context.set_deadline(deadline);
    // The request is only read while the calls run (protobuf's const
    // methods are safe to share).
    stubs[i]->async()->Replicate(&calls[i].context, &request,
                                 &calls[i].response, [&, i](grpc::Status s) {
                                   absl::Status got = FromGrpcStatus(s, what);
                                   absl::MutexLock lock(&mu);
                                   (*status)[i] = std::move(got);
                                   --pending;
                                 });
  }
  absl::MutexLock lock(&mu);
  mu.Await(absl::Condition(
      +[](size_t* n) { return *n == 0; }, &pending));
}

// One cut's Replicate requests: pieces are added to request() until the next
// would pass max_request_bytes, then what is there is sent to every backup
// that has taken the cut so far. The last request carries the cut's checks,
// generation and sequences.
class CutSender {
 public:
  CutSender(const std::vector<proto::ParameterServer::Stub*>& stubs,
            const Replicator::Options& options, Shard::ReplicaCut* cut,
            bool full)
      : stubs_(stubs),
        options_(options),
        cut_(cut),
        full_(full),
        status_(stubs.size()) {
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
  // Each backup's result so far (OK: it took every request sent).
  const std::vector<absl::Status>& status() const { return status_; }

  // OK while some backup takes the cut; else the first backup's error.
  absl::Status Send(bool last) {
    request_.set_full(full_ && first_);
    if (last) AddCutEnd();
    SendToAll(stubs_, request_, options_, &status_);
    first_ = false;
    total_ += bytes_;
    bytes_ = 0;
    request_.clear_blocks();
    request_.clear_updates();
    request_.clear_sparse();
    for (const absl::Status& s : status_) {
      if (s.ok()) return s;
    }
    return status_.empty() ? absl::OkStatus() : status_[0];
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

  const std::vector<proto::ParameterServer::Stub*>& stubs_;
  const Replicator::Options& options_;
  Shard::ReplicaCut* const cut_;
  const bool full_;
  std::vector<absl::Status> status_;
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
    FromBlock(block, sender->request().add_blocks());
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
    FromRows(table, rows, begin, n, sender->request().add_sparse());
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
  SetBackups(address.empty() ? std::vector<std::string>()
                             : std::vector<std::string>{address});
}

void Replicator::SetBackups(const std::vector<std::string>& addresses) {
  std::vector<Waiter> released;
  // Updates are kept for a backup to replay only while there is one.
  shard_->SetReplicaLog(!addresses.empty());
  {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> named;
    for (const Backup& b : backups_) named.push_back(b.address);
    if (named == addresses) return;
    std::vector<Backup> next;
    for (const std::string& address : addresses) {
      auto kept =
          std::find_if(backups_.begin(), backups_.end(),
                       [&](const Backup& b) { return b.address == address; });
      if (kept != backups_.end()) {
        next.push_back(std::move(*kept));
        continue;
      }
      SPDLOG_LOGGER_INFO(L(), "ps {}: backup {} named: sending a full copy",
                         options_.shard_index, address);
      Backup b;
      b.address = address;
      b.id = ++next_id_;
      next.push_back(std::move(b));
    }
    for (const Backup& b : backups_) {
      if (std::find(addresses.begin(), addresses.end(), b.address) ==
          addresses.end()) {
        SPDLOG_LOGGER_WARN(L(), "ps {}: {} is no longer a backup{}",
                           options_.shard_index, b.address,
                           addresses.empty()
                               ? ": pushes are acknowledged unreplicated "
                                 "until the coordinator names another"
                               : "");
      }
    }
    backups_ = std::move(next);
    // Waiters that waited only for a backup no longer named.
    released = TakeWaiters(AckedByAll(), /*all=*/false);
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
    } else {
      // Acknowledged with fewer backups than named.
      if (AnyDegraded() && options_.counters != nullptr) {
        options_.counters->stats().replication_degraded.Increment(1);
      }
      if (generation > AckedByAll()) {
        waiters_.emplace_back(generation, std::move(done));
        poked_ = true;
        return;
      }
    }
  }
  done(status);
}

bool Replicator::in_sync() const {
  absl::MutexLock lock(&mu_);
  if (replaced_ || backups_.empty()) return false;
  for (const Backup& b : backups_) {
    if (!b.in_sync || b.degraded) return false;
  }
  return true;
}

int Replicator::backups_in_sync() const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const Backup& b : backups_) n += b.in_sync && !b.degraded && !replaced_;
  return n;
}

std::string Replicator::backup() const {
  absl::MutexLock lock(&mu_);
  return backups_.empty() ? "" : backups_[0].address;
}

std::vector<std::string> Replicator::backups() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const Backup& b : backups_) out.push_back(b.address);
  return out;
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

uint64_t Replicator::AckedByAll() const {
  uint64_t least = UINT64_MAX;
  for (const Backup& b : backups_) {
    if (!b.degraded) least = std::min(least, b.acked);
  }
  return least;
}

bool Replicator::AnyDegraded() const {
  for (const Backup& b : backups_) {
    if (b.degraded) return true;
  }
  return false;
}

Replicator::Backup* Replicator::Find(const std::string& address, uint64_t id) {
  for (Backup& b : backups_) {
    if (b.address == address && b.id == id) return &b;
  }
  return nullptr;
}

bool Replicator::HasWork() const {
  if (stopping_) return true;
  for (const Backup& b : backups_) {
    if (Ready(b, now_) && (poked_ || b.need_full)) return true;
  }
  return false;
}

absl::Duration Replicator::NextWake(absl::Time now) const {
  absl::Duration wait = kIdleCheck;
  for (const Backup& b : backups_) {
    if (!Ready(b, now)) wait = std::min(wait, b.retry_at - now);
  }
  return wait;
}

std::vector<absl::Status> Replicator::Send(
    const std::vector<proto::ParameterServer::Stub*>& stubs,
    Shard::ReplicaCut* cut, bool full) {
  CutSender sender(stubs, options_, cut, full);
  absl::Status sent = AddBlocks(cut->blocks, &sender);
  // Updates after the blocks, in the order applied.
  if (sent.ok()) sent = AddUpdates(&cut->updates, &sender);
  // Each table's evicted keys (tombstones), then its rows.
  for (const auto& [table, rows] : cut->sparse) {
    if (sent.ok()) sent = AddTombstones(table, rows, &sender);
    if (sent.ok()) sent = AddRows(table, rows, &sender);
  }
  if (sent.ok()) sent = sender.Send(/*last=*/true);
  int took = 0;
  for (const absl::Status& s : sender.status()) took += s.ok();
  if (took > 0 && options_.counters != nullptr) {
    options_.counters->stats().replicated_cuts.Increment(1);
    options_.counters->stats().replicated_bytes.Increment(
        static_cast<double>(sender.total() * took));
    options_.counters->stats().replicated_updates.Increment(
        static_cast<double>(cut->updates.size()));
  }
  return sender.status();
}

void Replicator::Loop() {
  std::map<std::string, std::unique_ptr<proto::ParameterServer::Stub>> stubs;
  absl::Time last_check = absl::InfinitePast();
  for (;;) {
    Round round;
    if (!AwaitRound(&round)) return;
    if (round.targets.empty()) continue;  // no backup
    if (!round.full && shard_->generation() <= round.acked) {
      continue;  // nothing new
    }
    std::vector<proto::ParameterServer::Stub*> to;
    for (const Target& t : round.targets) {
      auto& stub = stubs[t.address];
      if (stub == nullptr) {
        stub = proto::ParameterServer::NewStub(MakeChannel(t.address));
      }
      to.push_back(stub.get());
    }
    const absl::Time started = absl::Now();
    const bool checks = !round.full && started - last_check >= kCheckEvery;
    if (checks || round.full) last_check = started;
    Shard::ReplicaCut cut = shard_->CutForReplica(round.full, checks);
    const std::vector<absl::Status> sent = Send(to, &cut, round.full);
    Settled settled = Settle(round, sent, cut.generation, started);
    // Fenced first: nothing more is served once the waiters hear why.
    if (settled.replaced && options_.on_replaced) options_.on_replaced();
    for (Waiter& w : settled.done) w.second(settled.result);
    if (settled.replaced) return;
    // Channels of backups no longer named go.
    const std::vector<std::string> named = backups();
    for (auto it = stubs.begin(); it != stubs.end();) {
      const bool keep =
          std::find(named.begin(), named.end(), it->first) != named.end();
      it = keep ? std::next(it) : stubs.erase(it);
    }
  }
}

bool Replicator::AwaitRound(Round* round) {
  absl::MutexLock lock(&mu_);
  now_ = absl::Now();
  mu_.AwaitWithTimeout(absl::Condition(this, &Replicator::HasWork),
                       NextWake(now_));
  if (stopping_ || replaced_) return false;
  now_ = absl::Now();
  round->acked = UINT64_MAX;
  // Every backup in sync gets every cut (a cut takes the shard's changes
  // once); one that failed just now waits for its retry, with a full cut.
  for (const Backup& b : backups_) {
    if (!Ready(b, now_)) continue;
    round->targets.push_back({b.address, b.id});
    round->full |= b.need_full;
    round->acked = std::min(round->acked, b.acked);
  }
  poked_ = false;
  return true;
}

Replicator::Settled Replicator::Settle(const Round& round,
                                       const std::vector<absl::Status>& sent,
                                       uint64_t generation,
                                       absl::Time started) {
  Settled settled;
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  for (size_t i = 0; i < round.targets.size(); ++i) {
    // A backup no longer named (or named afresh) while the cut was sent:
    // a new one starts with a full cut anyway.
    Backup* b = Find(round.targets[i].address, round.targets[i].id);
    if (b == nullptr) continue;
    if (sent[i].ok()) {
      Synced(b, generation, now - started);
    } else if (absl::IsAborted(sent[i])) {
      Replaced(sent[i], &settled);
      return settled;
    } else if (absl::IsDataLoss(sent[i])) {
      Mismatched(b, sent[i]);
    } else {
      SendFailed(b, sent[i], now);
    }
  }
  settled.done = TakeWaiters(AckedByAll(), /*all=*/false);
  return settled;
}

void Replicator::Synced(Backup* b, uint64_t generation, absl::Duration lag) {
  if (b->degraded || !b->in_sync) {
    SPDLOG_LOGGER_INFO(L(), "ps {}: backup {} in sync (generation {})",
                       options_.shard_index, b->address, generation);
  }
  b->acked = generation;
  b->in_sync = true;
  b->degraded = false;
  b->need_full = false;
  b->failing_since = absl::InfiniteFuture();
  b->retry_at = absl::InfinitePast();
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

void Replicator::Mismatched(Backup* b, const absl::Status& sent) {
  // The backup's copy differs from this shard's (its replayed updates gave
  // other floats, or it lost a cut): a full cut at once. The backup holds
  // nothing it could take over meanwhile.
  SPDLOG_LOGGER_WARN(L(), "ps {}: backup {}: {}: sending a full copy",
                     options_.shard_index, b->address,
                     std::string(sent.message()));
  b->need_full = true;
  b->in_sync = false;
  if (options_.counters != nullptr) {
    options_.counters->stats().replication_mismatches.Increment(1);
  }
}

void Replicator::SendFailed(Backup* b, const absl::Status& sent,
                            absl::Time now) {
  b->need_full = true;
  b->in_sync = false;
  // A backup counted dead is tried less often: each try sends every other
  // backup a full cut too.
  b->retry_at = now + (b->degraded ? kDeadRetryPause : kRetryPause);
  if (options_.counters != nullptr) {
    options_.counters->stats().replication_failures.Increment(1);
  }
  if (b->failing_since == absl::InfiniteFuture()) b->failing_since = now;
  if (!b->degraded && now - b->failing_since >= options_.give_up_after) {
    b->degraded = true;
    // A backup that answers but refuses the cuts (another optimizer section,
    // say) is no more use than one that does not answer; the message says
    // which it was.
    SPDLOG_LOGGER_ERROR(
        L(),
        "ps {}: backup {} {} for {:.1f} s ({}): acknowledging "
        "pushes WITHOUT it until it answers or the coordinator "
        "names another",
        options_.shard_index, b->address,
        absl::IsFailedPrecondition(sent) ? "refused the cuts" : "unreachable",
        absl::ToDoubleSeconds(now - b->failing_since),
        std::string(sent.message()));
  }
}

}  // namespace downpour::server
