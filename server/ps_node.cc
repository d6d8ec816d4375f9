// PsNode: the ps daemon's gRPC server, heartbeat, placement and checkpoint
// threads, and its life cycle as a ps or standby.
#include "server/ps_node.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/counters.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "coordinator/member_identity.h"
#include "membership/coordinator_client.h"
#include "membership/member_agent.h"
#include "proto/coordinator.pb.h"
#include "rpc/daemon.h"
#include "rpc/health.h"
#include "rpc/metrics_http.h"
#include "rpc/server_util.h"
#include "rpc/status_service.h"
#include "server/bucket_mover.h"
#include "server/checkpoint_health.h"
#include "server/ps_service.h"
#include "server/replication/replica.h"
#include "server/replication/replicator.h"
#include "server/shard.h"

namespace downpour::server {
namespace {

spdlog::logger* L() { return Log(Logger::kServer); }

// Marks a Start error as one a restart cannot cure (see IsSetupError).
constexpr char kSetupErrorPayload[] = "type.downpour/server.SetupError";

// The shard could not be built: from the config or from what is on disk, the
// same on every try, unless the error says the disk or system may recover.
absl::Status ShardSetupError(absl::Status status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kUnknown:
      return status;
    default:
      status.SetPayload(kSetupErrorPayload, absl::Cord("setup"));
      return status;
  }
}

}  // namespace

bool IsSetupError(const absl::Status& status) {
  return status.GetPayload(kSetupErrorPayload).has_value();
}

class PsNode::Impl {
 public:
  explicit Impl(Options options)
      : options_(std::move(options)),
        clock_(options_.clock != nullptr ? options_.clock : Clock::Real()),
        service_(nullptr, PsService::PushThreadsFor(options_.config)),
        replica_(DenseOptimizer(options_.config)) {}
  ~Impl() {
    // A caller that wants the final checkpoint's status calls Stop() itself.
    Stop().IgnoreError();
    // The agent calls into this object, the server into service_ and the shard.
    agent_.reset();
    server_.server.reset();
  }

  // Everything PsNode::Start promises; on error the caller destroys the Impl,
  // which stops what was started (and writes no checkpoint).
  absl::Status Start();
  absl::Status Stop() ABSL_LOCKS_EXCLUDED(stop_mu_, mu_);
  void Wait() ABSL_LOCKS_EXCLUDED(mu_);

  int port() const { return server_.port; }
  const std::string& address() const { return server_.address; }
  std::string name() const ABSL_LOCKS_EXCLUDED(mu_);
  absl::Notification* ended() { return &ended_; }
  bool Orphaned() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return PsNode::JoinedTheJob(options_) && job_over_ &&
           clock_->Now() - last_contact_ >
               PsNode::kOrphanedAfterTimeouts *
                   absl::Seconds(options_.config.heartbeat.timeout_s);
  }

 private:
  uint64_t epoch() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t num_blocks() const ABSL_LOCKS_EXCLUDED(mu_);
  // The bytes the shard's sparse tables may hold (MemoryBudget::
  // table_bytes()); 0 without a shard.
  int64_t sparse_budget_bytes() const ABSL_LOCKS_EXCLUDED(mu_);
  // The serving shard's sparse tables (none on a standby).
  std::vector<Shard::SparseTableStats> sparse_stats() const
      ABSL_LOCKS_EXCLUDED(mu_);
  proto::MemberReport Report() const;

  // Start's steps, in order: the shard (a ps) or the replica (a standby);
  // the gRPC and metrics servers; registration (and a ps's replicator); the
  // heartbeat, placement and checkpoint threads.
  absl::Status TakeRole() ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Listen();
  // --join: registers as a new shard (the coordinator gives its index, kept
  // in options_.index), then takes that shard's role.
  absl::Status JoinAsNewShard() ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Join() ABSL_LOCKS_EXCLUDED(mu_);
  void StartThreads();
  // GetStatus's answer (the StatusService's callback).
  void FillStatus(proto::GetStatusResponse* r) ABSL_LOCKS_EXCLUDED(mu_);
  void FillSparseStatus(
      google::protobuf::Map<std::string, double>* counters) const;

  // Registers as the current identity (ps or standby). The first time (from
  // Start) a ps applies the coordinator's placement at once; later (after a
  // coordinator restart, on the heartbeat thread) it leaves that to the
  // placement thread.
  absl::Status Register(bool first) ABSL_LOCKS_EXCLUDED(mu_);
  // A ps whose registration was refused because another daemon serves its
  // shard (`refusal`) rejoins as a spare standby at its own address: it drops
  // the shard it restored and registers as a spare.
  absl::Status BecomeSpare(const absl::Status& refusal)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The identity it heartbeats as: "ps" and the shard, or "standby" and its
  // slot.
  std::pair<std::string, int> Identity() const ABSL_LOCKS_EXCLUDED(mu_);

  // Hands the workers' incarnations from a registration or heartbeat reply
  // to the shard (server/shard.h LearnWorkerIncarnations).
  void LearnWorkerIncarnations(
      const google::protobuf::RepeatedPtrField<proto::WorkerIncarnation>& from)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Heartbeat thread: records what the coordinator wants and wakes the
  // placement thread; stands down at once when replaced.
  void OnHeartbeat(const proto::HeartbeatResponse& response)
      ABSL_LOCKS_EXCLUDED(mu_);
  void StandDown(uint64_t epoch) ABSL_LOCKS_EXCLUDED(mu_);

  // The shard's BucketMover (nullptr: no shard served, or a dense model).
  BucketMover* Mover() ABSL_LOCKS_EXCLUDED(mu_);

  // Placement thread: applies the newest wanted placement or take-over.
  void PlacementLoop() ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status ApplyPlacement(uint64_t epoch) ABSL_LOCKS_EXCLUDED(mu_);
  // Health "" SERVING while registered, not stopping or replaced, and (a
  // shard) holding its blocks; called after each of those changes.
  void UpdateHealth() ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status TakeOver(int shard_index, uint64_t epoch)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Checkpointer thread, and the final checkpoint. A periodic checkpoint is
  // skipped while the node has not heard from the coordinator for
  // heartbeat.timeout_s: another daemon may own the shard by now.
  void CheckpointLoop();
  absl::Status Checkpoint(bool periodic = false) ABSL_LOCKS_EXCLUDED(mu_);

  // Replication (cluster.replication 2, standbys configured): the primary's
  // Replicator, started with the shard.
  void StartReplicator(Shard* shard, int shard_index) ABSL_LOCKS_EXCLUDED(mu_);
  bool replicating() const {
    return options_.config.cluster.replication >= 2 &&
           !options_.config.cluster.standby_ps.empty();
  }

  // The lease: no answer from the coordinator for heartbeat.timeout_s, so it
  // may have declared this ps dead and given the shard to another daemon.
  bool LeaseLapsed() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return clock_->Now() - last_contact_ >
           absl::Seconds(options_.config.heartbeat.timeout_s);
  }
  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return work_ || stopping_ || replaced_;
  }
  // Stop() was called or the node ended on its own.
  bool Finished() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || ended_.HasBeenNotified();
  }

  // Constant after construction.
  // (options_.index of a ps that joins is set once by JoinAsNewShard, before
  // any thread starts.)
  Options options_;
  Clock* const clock_;
  Counters counters_;
  PsService service_;
  // Outcomes of checkpoint attempts (Status, psctl health, the log).
  CheckpointHealth checkpoint_health_{&counters_};

  // Set in Start, before any thread that reads them starts; constant after.
  std::unique_ptr<StatusService> status_;
  StartedServer server_;
  std::unique_ptr<MetricsHttpServer> metrics_;  // null: metrics off
  std::string advertised_;
  std::unique_ptr<membership::CoordinatorClient> client_;
  std::unique_ptr<membership::MemberAgent> agent_;
  std::thread placement_thread_;
  std::thread checkpointer_;
  bool started_ = false;  // Start succeeded

  absl::Notification stop_checkpoints_;
  // Set once the gRPC server has shut down: no push arrives after it.
  std::atomic<bool> server_down_{false};
  // A standby's copy of the shard it backs up (see
  // server/replication/replica.h).
  Replica replica_;

  absl::Mutex stop_mu_;  // serialises Stop
  std::optional<absl::Status> stop_status_ ABSL_GUARDED_BY(stop_mu_);

  // State below is protected by mu_.
  mutable absl::Mutex mu_;
  // The shard served; set once (at Start for a ps, at take-over for a standby)
  // and kept as long as the node, so it is used without mu_ once read.
  std::unique_ptr<Shard> shard_ ABSL_GUARDED_BY(mu_);
  int shard_index_ ABSL_GUARDED_BY(mu_) = -1;  // -1: none (a standby)
  // Live bucket moves of a sparse model's shard; made with the first
  // heartbeat or placement that finds the shard (after shard_, so it goes
  // first).
  std::unique_ptr<BucketMover> mover_ ABSL_GUARDED_BY(mu_);
  // A standby's slot: options_.index, or the spare slot the coordinator gave.
  int standby_index_ ABSL_GUARDED_BY(mu_) = -1;
  // A ps that rejoined as a spare, and the shard it served.
  bool spare_ ABSL_GUARDED_BY(mu_) = false;
  int former_shard_ ABSL_GUARDED_BY(mu_) = -1;
  // The shard a spare dropped: kept (unserved) while RPCs that read it
  // before may still run; freed with the node.
  std::unique_ptr<Shard> dropped_shard_ ABSL_GUARDED_BY(mu_);
  bool replaced_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Replaced: the node ended on its own. Notified under mu_ (for Wait()).
  absl::Notification ended_;
  // What the coordinator wants, newest first; the placement thread applies it.
  bool work_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t wanted_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  int take_over_index_ ABSL_GUARDED_BY(mu_) = -1;
  // Streams the shard to its backup; set with the shard (never reset until
  // the node goes).
  std::unique_ptr<Replicator> replicator_ ABSL_GUARDED_BY(mu_);
  // The workers' incarnations the coordinator last sent (a shard taken over
  // learns them before it serves).
  std::vector<server::IssuedIncarnation> incarnations_ ABSL_GUARDED_BY(mu_);
  bool incarnations_known_ ABSL_GUARDED_BY(mu_) = false;
  // When a heartbeat last got an answer.
  absl::Time last_contact_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // A heartbeat reply said the job is over (Orphaned).
  bool job_over_ ABSL_GUARDED_BY(mu_) = false;
  // A periodic checkpoint was skipped for want of contact (logged once).
  bool skip_logged_ ABSL_GUARDED_BY(mu_) = false;
};

absl::Status PsNode::Impl::Start() {
  // A ps that joins learns its shard index by registering, once it listens.
  if (!options_.join) RETURN_IF_ERROR(TakeRole());
  status_ = std::make_unique<StatusService>(
      options_.standby ? "standby" : "ps", options_.index, &counters_,
      [this](proto::GetStatusResponse* r) { FillStatus(r); });
  RETURN_IF_ERROR(Listen());
  if (options_.join) RETURN_IF_ERROR(JoinAsNewShard());
  RETURN_IF_ERROR(Join());
  StartThreads();
  started_ = true;
  UpdateHealth();
  return absl::OkStatus();
}

absl::Status PsNode::Impl::TakeRole() {
  if (!options_.standby) {
    absl::StatusOr<std::unique_ptr<Shard>> shard =
        Shard::Create(options_.config, options_.index, &counters_);
    if (!shard.ok()) return ShardSetupError(shard.status());
    absl::MutexLock lock(&mu_);
    shard_ = *std::move(shard);
    shard_index_ = options_.index;
    service_.set_shard(shard_.get());
  } else {
    absl::MutexLock lock(&mu_);
    // A spare's slot comes from the coordinator at registration.
    standby_index_ = options_.spare ? -1 : options_.index;
    spare_ = options_.spare;
    service_.set_replica(&replica_);
  }
  if (options_.spare) counters_.stats().spare.Set(1);
  return absl::OkStatus();
}

void PsNode::Impl::FillStatus(proto::GetStatusResponse* r) {
  const auto [now_role, now_index] = Identity();
  r->set_role(now_role);
  r->set_index(now_index);
  r->set_device("cpu");
  (*r->mutable_counters())["blocks"] = num_blocks();
  (*r->mutable_counters())["placement_epoch"] = epoch();
  FillSparseStatus(r->mutable_counters());
  const std::optional<double> age =
      checkpoint_health_.age_seconds(clock_->Now());
  if (age.has_value()) (*r->mutable_counters())["checkpoint_age_s"] = *age;
  r->set_last_checkpoint_error(checkpoint_health_.last_error());
  // Replication (cluster.replication 2 with standbys): 1 while a backup holds
  // an in-sync copy of this shard, 0 while it has none (no standby free, the
  // backup unreachable, or its first full copy still on the way): losing
  // this ps now loses the pushes since its last checkpoint. The ps's side of
  // ClusterStatus shard_replication; Prometheus downpour_backup_in_sync
  // (deploy/prometheus/alerts.yml).
  if (now_role == "ps" && replicating()) {
    Replicator* replicator;
    {
      absl::MutexLock lock(&mu_);
      replicator = replicator_.get();
    }
    (*r->mutable_counters())["backup_in_sync"] =
        replicator != nullptr && replicator->in_sync() ? 1 : 0;
  }
}

void PsNode::Impl::FillSparseStatus(
    google::protobuf::Map<std::string, double>* counters) const {
  // Sparse tables as they are now (rows, heap bytes, bytes a row, weights
  // that are not 0), summed over tables.
  const std::vector<Shard::SparseTableStats> tables = sparse_stats();
  if (tables.empty()) return;
  const Shard::SparseTableStats sum = Shard::SumOf(tables);
  auto& c = *counters;
  c["sparse_tables"] = static_cast<double>(tables.size());
  c["sparse_rows"] = static_cast<double>(sum.rows);
  c["sparse_bytes"] = static_cast<double>(sum.bytes);
  c["sparse_bytes_per_row"] =
      sum.rows > 0 ? static_cast<double>(sum.bytes) / sum.rows : 0;
  c["sparse_nonzero"] = static_cast<double>(sum.nonzero);
  // The row updates held: the sum of the rows' versions.
  c["sparse_row_updates"] = static_cast<double>(sum.updates);
  // Admission: keys counted but not admitted yet.
  c["sparse_pending_keys"] = static_cast<double>(sum.pending);
  // The memory budget's part for the tables (eviction.memory_budget_mb):
  // sparse_bytes stays below it (alerts.yml, DownpourSparseBudgetPressure).
  c["sparse_budget_bytes"] = static_cast<double>(sparse_budget_bytes());
}

absl::Status PsNode::Impl::Listen() {
  const std::string who = name();
  ASSIGN_OR_RETURN(
      server_, StartServer(options_.listen, {&service_, status_.get()}, who));
  // Not ready until registered and holding its blocks (UpdateHealth).
  SetReady(server_.server.get(), false);
  status_->set_address(server_.address);
  ASSIGN_OR_RETURN(metrics_, StartMetrics(options_.config, options_.listen,
                                          server_.address, status_.get()));
  advertised_ = AdvertisedAddress(server_.address, options_.advertise);
  SPDLOG_LOGGER_INFO(L(), "{}: listening on {}; registering as {}", who,
                     server_.address, advertised_);
  return absl::OkStatus();
}

absl::Status PsNode::Impl::JoinAsNewShard() {
  client_ = std::make_unique<membership::CoordinatorClient>(
      options_.config.cluster.coordinator, options_.config.rpc, name());
  proto::RegisterServerRequest request;
  request.set_join(true);
  request.set_index(-1);
  request.set_address(advertised_);
  ASSIGN_OR_RETURN(proto::RegisterServerResponse joined,
                   client_->RegisterServer(std::move(request)));
  options_.index = joined.shard_index();  // the client keeps its member key
  status_->set_index(options_.index);
  SetLogPrefix(absl::StrCat("ps ", options_.index));
  SPDLOG_LOGGER_INFO(L(), "ps at {} joined the job as shard {}", advertised_,
                     options_.index);
  return TakeRole();
}

absl::Status PsNode::Impl::Join() {
  // (A ps that joined has its client, and the member key it registered with.)
  if (client_ == nullptr) {
    client_ = std::make_unique<membership::CoordinatorClient>(
        options_.config.cluster.coordinator, options_.config.rpc, name());
  }
  {
    absl::MutexLock lock(&mu_);
    last_contact_ = clock_->Now();
  }
  absl::Status registered = Register(/*first=*/true);
  if (absl::IsAlreadyExists(registered) && !options_.standby) {
    registered = BecomeSpare(registered);
  }
  RETURN_IF_ERROR(registered);
  SPDLOG_LOGGER_INFO(L(), "{}: registered, serving on {}", name(), advertised_);
  if (Identity().first == "ps") {
    Shard* shard;
    {
      absl::MutexLock lock(&mu_);
      shard = shard_.get();
    }
    StartReplicator(shard, options_.index);
  }
  return absl::OkStatus();
}

void PsNode::Impl::StartThreads() {
  const auto [identity_role, identity_index] = Identity();
  agent_ = std::make_unique<membership::MemberAgent>(
      client_.get(), identity_role, identity_index, advertised_,
      options_.config.heartbeat.interval_s,
      [this] { return Register(/*first=*/false); }, [this] { return Report(); },
      [this](const proto::HeartbeatResponse& r) { OnHeartbeat(r); });
  agent_->Start();
  placement_thread_ = std::thread([this] { PlacementLoop(); });
  if (options_.config.checkpoint.interval_s > 0) {
    checkpointer_ = std::thread([this] { CheckpointLoop(); });
  }
}

void PsNode::Impl::UpdateHealth() {
  bool ready;
  {
    absl::MutexLock lock(&mu_);
    // A standby is ready once registered; a shard once it holds its blocks.
    ready =
        !stopping_ && !replaced_ && (shard_ == nullptr || shard_->epoch() > 0);
  }
  SetReady(server_.server.get(), ready);
}

absl::Status PsNode::Impl::Stop() {
  absl::MutexLock stop_lock(&stop_mu_);
  if (stop_status_.has_value()) return *stop_status_;
  // Probes and balancers see NOT_SERVING before anything stops.
  SetShuttingDown(server_.server.get());
  Shard* shard = nullptr;
  {
    // Also ends Wait() and a placement being waited for.
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    shard = shard_.get();
  }
  // Held ssp/bsp pushes answer UNAVAILABLE now, so the server's shutdown does
  // not wait for them.
  if (shard != nullptr) shard->ReleaseHeldPushes();
  Replicator* replicator;
  {
    absl::MutexLock lock(&mu_);
    replicator = replicator_.get();
  }
  // Pushes waiting for the backup answer UNAVAILABLE (the clients retry; the
  // sequences keep it exactly once).
  if (replicator != nullptr) replicator->Stop();
  stop_checkpoints_.Notify();
  if (checkpointer_.joinable()) checkpointer_.join();
  if (server_.server != nullptr) server_.server->Shutdown(DeadlineIn(2));
  server_down_.store(true);  // the final heartbeat says so (final_report)
  if (agent_ != nullptr) {   // the final heartbeat: its loss counts
    agent_->Stop(membership::MemberAgent::FinalBeatBudget(
        options_.config.rpc.connect_timeout_s));
  }
  if (placement_thread_.joinable()) placement_thread_.join();
  stop_status_ = started_ ? Checkpoint() : absl::OkStatus();
  service_.set_replicator(nullptr);
  return *stop_status_;
}

void PsNode::Impl::Wait() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(this, &Impl::Finished));
}

std::string PsNode::Impl::name() const {
  absl::MutexLock lock(&mu_);
  if (shard_index_ >= 0) return absl::StrCat("ps ", shard_index_);
  if (spare_) {
    return absl::StrCat("spare standby ", standby_index_, " (was ps ",
                        former_shard_, ")");
  }
  return absl::StrCat("standby ", standby_index_);
}

std::pair<std::string, int> PsNode::Impl::Identity() const {
  absl::MutexLock lock(&mu_);
  if (shard_index_ >= 0) return {"ps", shard_index_};
  return {"standby", standby_index_};
}

absl::Status PsNode::Impl::BecomeSpare(const absl::Status& refusal) {
  std::unique_ptr<Shard> dropped;
  {
    absl::MutexLock lock(&mu_);
    former_shard_ = shard_index_;
    spare_ = true;
    shard_index_ = -1;
    standby_index_ = -1;
    service_.set_shard(nullptr);
    dropped_shard_ = std::move(shard_);
  }
  service_.set_replica(&replica_);
  counters_.stats().spare.Set(1);
  SPDLOG_LOGGER_WARN(L(),
                     "ps {}: {} -- rejoining as a spare standby at {}: it "
                     "backs up a shard without a backup (its own first) and "
                     "takes one over when its server dies",
                     options_.index, std::string(refusal.message()),
                     advertised_);
  return Register(/*first=*/true);
}

uint64_t PsNode::Impl::epoch() const {
  absl::MutexLock lock(&mu_);
  return shard_ ? shard_->epoch() : 0;
}

int64_t PsNode::Impl::sparse_budget_bytes() const {
  absl::MutexLock lock(&mu_);
  return shard_ ? shard_->sparse_budget_bytes() : 0;
}

std::vector<Shard::SparseTableStats> PsNode::Impl::sparse_stats() const {
  absl::MutexLock lock(&mu_);
  return shard_ ? shard_->sparse_stats()
                : std::vector<Shard::SparseTableStats>();
}

size_t PsNode::Impl::num_blocks() const {
  absl::MutexLock lock(&mu_);
  return shard_ ? shard_->num_blocks() : 0;
}

proto::MemberReport PsNode::Impl::Report() const {
  proto::MemberReport report;
  report.set_pulls(counters_.stats().pulls.Value());
  report.set_pushes(counters_.stats().pushes.Value());
  report.set_bytes(counters_.stats().bytes_in.Value() +
                   counters_.stats().bytes_out.Value());
  report.set_loss(NAN);
  report.set_accuracy(NAN);
  const StalenessSummary staleness = counters_.Staleness().Summary();
  report.set_mean_staleness(staleness.mean);
  report.set_staleness_p50(staleness.p50);
  report.set_staleness_p99(staleness.p99);
  report.set_staleness_max(staleness.max);
  Shard* shard;
  Replicator* replicator;
  {
    absl::MutexLock lock(&mu_);
    shard = shard_.get();
    replicator = replicator_.get();
  }
  BucketMover* mover = nullptr;
  {
    absl::MutexLock lock(&mu_);
    mover = mover_.get();  // kept as long as the node once set
  }
  if (mover != nullptr) {
    for (proto::BucketMoveProgress& p : mover->Progress()) {
      *report.add_move_progress() = std::move(p);
    }
  }
  if (shard != nullptr) {
    report.set_applied_total(shard->applied_total());
    const Shard::SparseTableStats sparse = Shard::SumOf(shard->sparse_stats());
    report.set_sparse_rows(static_cast<uint64_t>(sparse.rows));
    report.set_sparse_bytes(static_cast<uint64_t>(sparse.bytes));
    report.set_sparse_row_updates(sparse.updates);
    report.set_sparse_rows_created(
        static_cast<uint64_t>(counters_.stats().sparse_rows_created.Value()));
    report.set_sparse_push_keys(
        static_cast<uint64_t>(counters_.stats().sparse_push_keys.Value()));
    report.set_sparse_pull_keys(
        static_cast<uint64_t>(counters_.stats().sparse_pull_keys.Value()));
    report.set_sparse_evicted_rows(
        static_cast<uint64_t>(counters_.stats().sparse_evicted_rows.Value()));
    report.set_replicated(replicator != nullptr && replicator->in_sync());
    report.set_backups_in_sync(
        replicator != nullptr ? replicator->backups_in_sync() : 0);
    // Requests past a worker's window that never arrived here: acknowledged
    // by a server whose state this shard does not hold (it was restored from
    // something older). Holes: missing below a worker's newest request.
    report.set_acked_pushes_lost(
        static_cast<uint64_t>(counters_.stats().sequence_window_skips.Value()));
    report.set_push_holes(shard->push_holes());
    for (const IssuedIncarnation& i : shard->applied_from()) {
      proto::WorkerIncarnation* from = report.add_applied_from();
      from->set_worker(i.worker);
      from->set_incarnation(i.incarnation);
    }
    report.set_final_report(server_down_.load());
  } else {
    const Replica::Info replica = replica_.info();
    report.set_has_replica(replica.held);
    report.set_replica_shard(replica.shard);
    report.set_replica_applied_total(replica.applied_total);
  }
  return report;
}

absl::Status PsNode::Impl::Register(bool first) {
  proto::RegisterServerRequest request;
  bool standby;
  {
    absl::MutexLock lock(&mu_);
    standby = shard_index_ < 0;
    request.set_index(standby ? standby_index_ : shard_index_);
    request.set_standby(standby);
    request.set_spare(spare_);
    request.set_former_shard(former_shard_);
    if (!standby) request.set_applied_total(shard_->applied_total());
  }
  request.set_address(advertised_);
  auto response = client_->RegisterServer(std::move(request));
  if (!response.ok()) return response.status();
  if (standby && response->standby_index() >= 0) {
    bool moved;
    {
      absl::MutexLock lock(&mu_);
      moved = standby_index_ != response->standby_index();
      standby_index_ = response->standby_index();
    }
    // A spare given another slot (a coordinator restarted without its
    // state) heartbeats as that one.
    if (moved && agent_ != nullptr) {
      agent_->SetIdentity("standby", response->standby_index());
    }
  }
  // Shown in Status: the coordinator asks it to tell whether this process
  // still serves as the member it registered (coordinator/member_identity.h).
  counters_.stats().member_incarnation.Set(
      static_cast<double>(response->incarnation()));
  LearnWorkerIncarnations(response->worker_incarnations());
  const uint64_t wanted = response->placement_epoch();
  if (standby || wanted <= epoch()) return absl::OkStatus();
  if (first) return ApplyPlacement(wanted);
  absl::MutexLock lock(&mu_);
  wanted_epoch_ = std::max(wanted_epoch_, wanted);
  work_ = true;
  return absl::OkStatus();
}

void PsNode::Impl::LearnWorkerIncarnations(
    const google::protobuf::RepeatedPtrField<proto::WorkerIncarnation>& from) {
  Shard* shard = nullptr;
  std::vector<server::IssuedIncarnation> incarnations;
  for (const proto::WorkerIncarnation& i : from) {
    incarnations.push_back({i.worker(), i.incarnation(), i.push_key_digest()});
  }
  {
    absl::MutexLock lock(&mu_);
    incarnations_ = incarnations;
    incarnations_known_ = true;
    shard = shard_.get();  // kept as long as the node once set
  }
  if (shard != nullptr) shard->LearnWorkerIncarnations(incarnations);
}

void PsNode::Impl::OnHeartbeat(const proto::HeartbeatResponse& response) {
  PsService::FlushRefusalLog();
  if (response.replaced()) {
    StandDown(response.placement_epoch());
    return;
  }
  if (BucketMover* mover = Mover()) {
    mover->Update(response.moves_in(), response.moves_out());
  }
  Shard* shard = nullptr;
  Replicator* replicator = nullptr;
  {
    absl::MutexLock lock(&mu_);
    last_contact_ = clock_->Now();
    job_over_ = job_over_ || response.stop();
    wanted_epoch_ = std::max(wanted_epoch_, response.placement_epoch());
    take_over_index_ = response.take_over_index();
    work_ = true;
    shard = shard_.get();  // kept as long as the node once set
    replicator = replicator_.get();
  }
  if (replicator != nullptr) {
    // A coordinator before replication 3 names one backup only.
    std::vector<std::string> backups(response.backup_addresses().begin(),
                                     response.backup_addresses().end());
    if (backups.empty() && !response.backup_address().empty()) {
      backups.push_back(response.backup_address());
    }
    replicator->SetBackups(backups);
  }
  LearnWorkerIncarnations(response.worker_incarnations());
  if (shard == nullptr && response.take_over_index() < 0) {
    // A standby that backs up no shard, or another one now, frees its copy.
    const Replica::Info held = replica_.info();
    if (held.held && held.shard != response.replica_of()) replica_.Drop();
  }
  // Whom ssp/bsp pushes wait for; a coordinator that does not say leaves the
  // shard ungated.
  if (shard != nullptr && response.active_workers_known()) {
    shard->SetActiveWorkers(
        {response.active_workers().begin(), response.active_workers().end()});
  }
}

void PsNode::Impl::StandDown(uint64_t epoch) {
  const std::string who = name();
  {
    // Fencing is immediate, not queued behind a placement in progress: every
    // call is UNAVAILABLE from here on, and no shard is set again
    // (ApplyPlacement checks replaced_).
    absl::MutexLock lock(&mu_);
    if (replaced_) return;
    replaced_ = true;
    service_.set_shard(nullptr);
  }
  UpdateHealth();
  SPDLOG_LOGGER_WARN(L(),
                     "{}: another daemon serves this shard now (placement "
                     "epoch {}); standing down without writing a checkpoint",
                     who, epoch);
  absl::MutexLock lock(&mu_);
  ended_.Notify();  // under mu_, so that Wait() sees it
}

BucketMover* PsNode::Impl::Mover() {
  absl::MutexLock lock(&mu_);
  if (mover_ == nullptr && shard_ != nullptr && shard_index_ >= 0) {
    mover_ = std::make_unique<BucketMover>(shard_.get(), shard_index_);
  }
  return mover_.get();
}

void PsNode::Impl::PlacementLoop() {
  for (;;) {
    int shard_index, take_over;
    uint64_t wanted;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &Impl::HasWork));
      if (stopping_ || replaced_) return;
      // Heartbeats that arrived while the last change was applied are
      // coalesced: only the newest wanted state is looked at.
      work_ = false;
      shard_index = shard_index_;
      take_over = take_over_index_;
      wanted = wanted_epoch_;
    }
    if (shard_index < 0 && take_over >= 0) {
      absl::Status taken = TakeOver(take_over, wanted);
      if (!taken.ok()) {
        SPDLOG_LOGGER_ERROR(L(), "{}: cannot take over shard {}: {}", name(),
                            take_over, std::string(taken.message()));
      }
    } else if (shard_index >= 0 && wanted > epoch()) {
      absl::Status applied = ApplyPlacement(wanted);
      if (!applied.ok()) {
        SPDLOG_LOGGER_WARN(L(), "{}: {}", name(),
                           std::string(applied.message()));
      }
    }
  }
}

absl::Status PsNode::Impl::ApplyPlacement(uint64_t epoch) {
  ASSIGN_OR_RETURN(proto::GetPlacementResponse placement,
                   client_->WaitForPlacement(epoch, [this] {
                     absl::MutexLock lock(&mu_);
                     return stopping_ || replaced_;
                   }));
  Shard* shard;
  int shard_index;
  {
    absl::MutexLock lock(&mu_);
    shard = shard_.get();
    shard_index = shard_index_;
  }
  std::vector<uint32_t> ids;
  std::vector<uint32_t> buckets;
  bool names_buckets = false;
  for (const proto::ShardInfo& info : placement.shards()) {
    if (info.index() == shard_index) {
      ids.assign(info.block_ids().begin(), info.block_ids().end());
      buckets.assign(info.buckets().begin(), info.buckets().end());
    }
    names_buckets |= info.buckets_size() > 0;
  }
  // Buckets moved here at this epoch: their last rows first (the ps serves
  // none of its keys at the epoch before it holds them).
  if (BucketMover* mover = Mover()) {
    RETURN_IF_ERROR(mover->FinishSwitched(
        placement, absl::Seconds(2 * options_.config.heartbeat.timeout_s),
        [this] {
          absl::MutexLock lock(&mu_);
          return stopping_ || replaced_;
        }));
  }
  // Buckets first: keys are checked against them once the epoch serves.
  if (names_buckets) RETURN_IF_ERROR(shard->AssignBuckets(buckets));
  RETURN_IF_ERROR(shard->Assign(placement.epoch(), ids));
  {
    absl::MutexLock lock(&mu_);
    if (!replaced_) service_.set_shard(shard);
  }
  UpdateHealth();
  return absl::OkStatus();
}

absl::Status PsNode::Impl::TakeOver(int shard_index, uint64_t epoch) {
  SPDLOG_LOGGER_WARN(L(), "{}: taking over shard {} at placement epoch {}",
                     name(), shard_index, epoch);
  // From the in-memory replica when this standby was the shard's backup
  // (nothing acknowledged is lost); else the shard's latest checkpoint (the
  // checkpoint folder is shared).
  const Replica::Info held = replica_.info();
  std::optional<server::Checkpoint> replica = replica_.Take(shard_index);
  std::unique_ptr<Shard> shard;
  if (replica.has_value()) {
    SPDLOG_LOGGER_WARN(L(),
                       "{}: shard {} comes from its in-memory replica "
                       "(generation {}, {} updates held): no acknowledged "
                       "update lost",
                       name(), shard_index, held.generation,
                       held.applied_total);
    ASSIGN_OR_RETURN(shard, Shard::CreateFrom(options_.config, shard_index,
                                              &counters_, *std::move(replica)));
    counters_.stats().takeovers_from_replica.Increment();
  } else {
    SPDLOG_LOGGER_WARN(L(),
                       "{}: holds no replica of shard {}: loading its "
                       "checkpoint; updates since it was written are lost",
                       name(), shard_index);
    replica_.Fence(shard_index);
    ASSIGN_OR_RETURN(shard,
                     Shard::Create(options_.config, shard_index, &counters_));
  }
  Shard* taken = shard.get();
  {
    absl::MutexLock lock(&mu_);
    // The workers' incarnations heard so far, before the shard serves.
    if (incarnations_known_) taken->LearnWorkerIncarnations(incarnations_);
    shard_ = std::move(shard);
    shard_index_ = shard_index;
  }
  absl::Status placed = ApplyPlacement(epoch);
  // Heartbeat as the shard from now on; a failed placement is retried on the
  // next heartbeat, as that ps.
  agent_->SetIdentity("ps", shard_index);
  RETURN_IF_ERROR(placed);
  StartReplicator(taken, shard_index);
  counters_.stats().takeovers.Increment();
  // A checkpoint at the new epoch at once: the shard's state is on disk
  // under its new owner, and a replaced ps that wakes up cannot pass it off
  // as newer.
  absl::Status written = Checkpoint();
  if (!written.ok()) {
    SPDLOG_LOGGER_ERROR(L(), "{}: checkpoint after take-over failed: {}",
                        name(), std::string(written.message()));
  }
  return absl::OkStatus();
}

void PsNode::Impl::CheckpointLoop() {
  const absl::Duration interval =
      absl::Seconds(options_.config.checkpoint.interval_s);
  while (
      !clock_->WaitForNotificationWithTimeout(&stop_checkpoints_, interval)) {
    // Failures are counted, shown in Status and logged once per cause by
    // checkpoint_health_ (in Checkpoint); the ps keeps serving.
    Checkpoint(/*periodic=*/true).IgnoreError();
  }
}

absl::Status PsNode::Impl::Checkpoint(bool periodic) {
  Shard* shard;
  {
    absl::MutexLock lock(&mu_);
    if (replaced_) return absl::OkStatus();
    shard = shard_.get();
    if (periodic && LeaseLapsed()) {
      // Fencing: the coordinator may have declared this ps dead and given
      // the shard to another daemon, which writes the checkpoints now.
      if (!skip_logged_) {
        SPDLOG_LOGGER_WARN(
            L(),
            "{}: no answer from the coordinator for {:.1f} s: "
            "skipping checkpoints until it answers (another "
            "daemon may serve this shard now)",
            shard_index_ >= 0 ? shard_index_ : options_.index,
            absl::ToDoubleSeconds(clock_->Now() - last_contact_));
        skip_logged_ = true;
      }
      counters_.stats().checkpoints_skipped.Increment();
      return absl::OkStatus();
    }
    skip_logged_ = false;
  }
  // Writes without mu_: the disk write must not hold up heartbeats or Stop.
  // Eviction runs at checkpoint time even without checkpoint files.
  const EvictionSection& eviction = options_.config.eviction;
  const bool evicting = eviction.ttl_updates > 0 || eviction.max_rows > 0;
  if (shard == nullptr || shard->epoch() == 0 ||
      (options_.config.checkpoint.dir.empty() && !evicting)) {
    return absl::OkStatus();
  }
  // Asked again just before the rename: the heartbeat thread may have learned
  // meanwhile that another daemon serves the shard now.
  const absl::Status written = shard->WriteCheckpoint([this, periodic] {
    absl::MutexLock lock(&mu_);
    if (replaced_) {
      return absl::AbortedError(
          "replaced by another daemon while writing: checkpoint abandoned");
    }
    // The lease: a ps that has not heard from the coordinator for
    // heartbeat.timeout_s may have been declared dead meanwhile.
    if (periodic && LeaseLapsed()) {
      return absl::AbortedError(
          "lost contact with the coordinator while writing: checkpoint "
          "abandoned (another daemon may serve this shard now)");
    }
    return absl::OkStatus();
  });
  if (absl::IsAborted(written)) {
    SPDLOG_LOGGER_WARN(L(), "{}: {}", name(), std::string(written.message()));
    return absl::OkStatus();
  }
  if (options_.config.checkpoint.dir.empty()) return written;  // evicted only
  checkpoint_health_.Record(written, clock_->Now());
  return written;
}

void PsNode::Impl::StartReplicator(Shard* shard, int shard_index) {
  if (!replicating() || shard == nullptr) return;
  Replicator::Options options;
  options.shard_index = shard_index;
  options.self_address = advertised_;
  options.rpc_timeout =
      absl::Seconds(std::max(2.0, options_.config.heartbeat.timeout_s));
  options.give_up_after = absl::Seconds(options_.config.heartbeat.timeout_s);
  options.counters = &counters_;
  options.on_replaced = [this, shard_index] {
    SPDLOG_LOGGER_WARN(L(), "ps {}: its backup took the shard over",
                       shard_index);
    StandDown(epoch());
  };
  auto replicator = std::make_unique<Replicator>(shard, std::move(options));
  service_.set_replicator(replicator.get());
  absl::MutexLock lock(&mu_);
  replicator_ = std::move(replicator);
}

// PsNode: the handle forwards to Impl.

absl::StatusOr<std::unique_ptr<PsNode>> PsNode::Start(Options options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<PsNode>(new PsNode(std::move(impl)));
}

PsNode::PsNode(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PsNode::~PsNode() = default;

int PsNode::port() const { return impl_->port(); }
std::string PsNode::address() const { return impl_->address(); }
std::string PsNode::name() const { return impl_->name(); }
absl::Notification* PsNode::ended() { return impl_->ended(); }
bool PsNode::Orphaned() const { return impl_->Orphaned(); }

bool PsNode::JoinedTheJob(const Options& options) {
  return options.join || options.spare ||
         (!options.standby &&
          options.index >= static_cast<int>(options.config.cluster.ps.size()));
}
void PsNode::Wait() { impl_->Wait(); }
absl::Status PsNode::Stop() { return impl_->Stop(); }

}  // namespace downpour::server
