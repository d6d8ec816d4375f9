// The order of each coordinator request's steps, under one lock: who may
// register, what a registration, heartbeat or silence changes (each change
// done by a part: Membership, DataPartTable, RecoveryLog, ShardPlacement,
// JobProgress), and the snapshot saved after releasing the lock.
#include "coordinator/cluster_state.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "coordinator/member_identity.h"

namespace downpour::coordinator {
namespace {

spdlog::logger* L() { return Log(Logger::kCoordinator); }

// A drained worker's slot takes no registration but a --join's.
absl::Status Drained(const Member& m) {
  return absl::FailedPreconditionError(absl::StrCat(
      "register: worker ", m.index,
      " was drained (psctl drain-worker): its data parts went to the other "
      "workers and its slot stays drained. Start the worker with --join to "
      "train in this job again"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ClusterState>> ClusterState::Create(
    Options options) {
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(options.config.model);
  if (!spec.ok()) return spec.status();
  std::unique_ptr<ClusterState> state(
      new ClusterState(std::move(options), *std::move(spec)));
  absl::Status loaded = state->Load();
  if (!loaded.ok()) return loaded;
  return state;
}

ClusterState::ClusterState(Options options, ModelSpec spec)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : Clock::Real()),
      start_(clock_->Now()),
      state_file_(options_.config.coordinator.state_dir.empty()
                      ? nullptr
                      : std::make_unique<StateFile>(StateFilePath(
                            options_.config.coordinator.state_dir))),
      members_(options_.config.cluster, clock_, start_),
      parts_(options_.config.cluster.workers.size(),
             WorkerSlots(options_.config.cluster)),
      recoveries_(clock_, start_),
      placement_(options_.config, std::move(spec), clock_, start_, &members_,
                 &recoveries_),
      progress_(options_.config, clock_, start_) {}

absl::Status ClusterState::MayRegister(MemberRole role, int index,
                                       const std::string& key,
                                       const std::string& address) {
  uint64_t incarnation = 0;
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(members_.CheckIndex(role, index));
    const Member* m = members_.Find(role, index);
    if (m->drained) return Drained(*m);
    // Free, its own process again, or declared dead: nothing to wait for.
    if (!m->registered || !m->alive || SameKey(key, m->key)) {
      return absl::OkStatus();
    }
    absl::Status lease = LeaseAllowsTakeOver(
        role, index, address, m->address, clock_->Now() - m->lease_heard,
        absl::Seconds(options_.config.heartbeat.timeout_s));
    // A registration from another address waits for the lease; so does one
    // from the member's own address unless that address proves it changed
    // hands (below).
    if (lease.ok() || address != m->address || !options_.probe) return lease;
    incarnation = m->incarnation;
  }
  // A process restarted in place: a daemon at the member's own address that
  // answers as another process (another incarnation, or none yet) means
  // the registered process lost its port, so it is gone. Only a positive
  // answer ends the lease early: a flood or a stall that keeps the probe
  // unanswered changes nothing (issue 42).
  const std::optional<uint64_t> answer = options_.probe(address);
  if (answer.has_value() && *answer != incarnation) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  const Member* m = members_.Find(role, index);
  return LeaseAllowsTakeOver(
      role, index, address, m->address, clock_->Now() - m->lease_heard,
      absl::Seconds(options_.config.heartbeat.timeout_s));
}

absl::Status ClusterState::AnswersAt(const std::string& address) const {
  if (!options_.probe || options_.probe(address).has_value()) {
    return absl::OkStatus();
  }
  return absl::UnavailableError(absl::StrCat(
      "register: nothing answers at ", address,
      " as a Downpour daemon (its Status service): a standby registers the "
      "address it serves on and is reachable at from the coordinator and the "
      "ps (check --listen and --advertise); retried, nothing was stored"));
}

absl::Status ClusterState::HandToInSyncBackup(
    const proto::RegisterServerRequest& request) {
  // A restarted ps (a new process) while the shard's backup holds an
  // in-sync copy: the backup takes over now, since it holds every
  // acknowledged push and the restarted process only its checkpoint (the
  // applied totals cannot tell: the last heartbeat's may be older than the
  // checkpoint). This daemon is refused and rejoins as a spare.
  std::optional<Snapshot> taken;
  std::string to;
  {
    absl::MutexLock lock(&mu_);
    Member* m = members_.Find(MemberRole::kPs, request.index());
    if (m != nullptr && m->registered &&
        !SameKey(request.member_key(), m->key)) {
      to = placement_.HandToInSyncBackup(*m, request.address(),
                                         request.applied_total());
      if (!to.empty()) taken = TakeSnapshot();
    }
  }
  if (to.empty()) return absl::OkStatus();
  Save(std::move(taken));
  return absl::AlreadyExistsError(absl::StrCat(
      "register: ps ", request.index(), "'s backup at ", to,
      " holds every acknowledged push of the shard (this daemon restored ",
      request.applied_total(),
      " updates from its checkpoint): it serves the shard now"));
}

void ClusterState::AdmitStandby(Member& m, const std::string& key) {
  const std::string old_key = m.key;
  const bool fresh = members_.Admit(m, key);
  members_.Touch(m);
  // A new process may be handed its old process's shard right here
  // (EndServedLease): that serving_index stays.
  if (fresh) {
    // What the old process reported (its replica) is not this one's.
    m.report.Clear();
    m.replica_of = -1;
    placement_.EndServedLease(m, old_key);
  } else {
    m.serving_index = -1;
  }
  m.replica_of = -1;
}

proto::RegisterServerResponse ClusterState::ServerResponse(
    const Member& m) const {
  proto::RegisterServerResponse response;
  response.set_placement_epoch(placement_.epoch());
  response.set_member_key(m.key);
  response.set_incarnation(m.incarnation);
  response.set_standby_index(m.role == MemberRole::kStandby ? m.index : -1);
  response.set_shard_index(m.role == MemberRole::kPs ? m.index : -1);
  members_.AddWorkerIncarnations(m, response.mutable_worker_incarnations());
  return response;
}

absl::StatusOr<proto::RegisterServerResponse> ClusterState::RegisterServer(
    const proto::RegisterServerRequest& request) {
  RETURN_IF_ERROR(CheckRegisterBounds(request));
  if (request.join()) {
    ASSIGN_OR_RETURN(proto::RegisterServerRequest joined, Join(request));
    return RegisterServer(joined);
  }
  if (request.standby() || request.spare()) {
    RETURN_IF_ERROR(AnswersAt(request.address()));
  }
  if (request.spare()) return RegisterSpare(request);
  const MemberRole role =
      request.standby() ? MemberRole::kStandby : MemberRole::kPs;
  if (request.standby()) {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(members_.CheckConfiguredStandby(request.index()));
  }
  RETURN_IF_ERROR(MayRegister(role, request.index(), request.member_key(),
                              request.address()));
  if (!request.standby()) RETURN_IF_ERROR(HandToInSyncBackup(request));
  proto::RegisterServerResponse response;
  std::optional<Snapshot> snapshot;
  {
    absl::MutexLock lock(&mu_);
    Member* m = members_.Find(role, request.index());
    if (m == nullptr) {
      const size_t n =
          request.standby() ? members_.standby().size() : members_.ps().size();
      return absl::InvalidArgumentError(absl::StrCat(
          "register: ", MemberRoleName(role), " index ", request.index(),
          " is not in the config (", n, " in cluster.",
          request.standby() ? "standby_ps" : "ps", ")"));
    }
    const bool restarted = m->registered;
    const bool was_alive = m->alive;
    const std::string old_address = m->address;
    m->address = request.address();
    bool fresh = false;
    if (request.standby()) {
      AdmitStandby(*m, request.member_key());
    } else {
      fresh = members_.Admit(*m, request.member_key());
      members_.Touch(*m);
    }
    SPDLOG_LOGGER_INFO(L(), "{} {} registered from {}", MemberRoleName(role),
                       m->index, m->address);
    if (!request.standby() && restarted && placement_.epoch() > 0) {
      placement_.ShardRestarted(*m, old_address, fresh || !was_alive,
                                request.applied_total());
    }
    placement_.MaybePlace();
    placement_.AssignBackups();
    snapshot = TakeSnapshot();
    response = ServerResponse(*m);
  }
  Save(std::move(snapshot));
  return response;
}

absl::StatusOr<proto::RegisterServerRequest> ClusterState::Join(
    const proto::RegisterServerRequest& request) {
  if (request.standby() || request.spare() || request.address().empty()) {
    return absl::InvalidArgumentError(
        "register: a ps joins (--join) as a ps with its address, not as a "
        "standby or spare");
  }
  proto::RegisterServerRequest joined = request;
  joined.set_join(false);
  std::optional<Snapshot> snapshot;
  {
    absl::MutexLock lock(&mu_);
    if (placement_.epoch() == 0) {
      return absl::FailedPreconditionError(
          "register: a ps joins (--join) a running job, and this one has no "
          "placement yet (every ps of cluster.ps registers first); retried");
    }
    int index = members_.JoinedPsAt(request.address());
    const size_t added =
        members_.ps().size() - options_.config.cluster.ps.size();
    if (index < 0 && added >= kMaxJoinedPs) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "register: ", added,
          " ps have joined this job already, the most "
          "one job takes; list the ps in cluster.ps and restart the job to "
          "grow further"));
    }
    if (index < 0) {
      index = members_.AddPs(request.address());
      placement_.AddShard();
      snapshot = TakeSnapshot();
    }
    joined.set_index(index);
  }
  Save(std::move(snapshot));
  return joined;
}

absl::StatusOr<proto::RegisterServerResponse> ClusterState::RegisterSpare(
    const proto::RegisterServerRequest& request) {
  int slot;
  bool existing;
  {
    absl::MutexLock lock(&mu_);
    slot = members_.SpareSlotFor(request);
    existing = slot < static_cast<int>(members_.standby().size());
    if (slot < 0) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "register: no spare slot left for ", request.address(), " (",
          members_.Spares(), " spares registered, at most ",
          members_.MaxSpares(),
          "): stop a spare ps_server, or list this one in cluster.standby_ps"));
    }
  }
  // A live spare's slot is taken only from its own process, or from a new
  // one at its address once the old one no longer answers there.
  if (existing) {
    RETURN_IF_ERROR(MayRegister(MemberRole::kStandby, slot,
                                request.member_key(), request.address()));
  }
  proto::RegisterServerResponse response;
  std::optional<Snapshot> snapshot;
  {
    absl::MutexLock lock(&mu_);
    // Taken meanwhile by another spare: the next free one.
    if (members_.SpareSlotTaken(slot, request.address())) {
      slot = members_.SpareSlotFor(request);
      if (slot < 0) {
        return absl::ResourceExhaustedError(
            "register: no spare slot left; try again");
      }
    }
    Member& m = members_.SpareSlot(slot, request.address());
    m.address = request.address();
    m.spare = true;
    const int former = request.former_shard();
    m.former_shard =
        former >= 0 && former < static_cast<int>(members_.ps().size()) ? former
                                                                       : -1;
    AdmitStandby(m, request.member_key());
    SPDLOG_LOGGER_INFO(L(),
                       "spare standby {} registered from {} (it served shard "
                       "{}, which another daemon serves now)",
                       m.index, m.address, m.former_shard);
    placement_.AssignBackups();
    snapshot = TakeSnapshot();
    response = ServerResponse(m);
  }
  Save(std::move(snapshot));
  return response;
}

absl::StatusOr<proto::RegisterWorkerRequest> ClusterState::JoinWorker(
    const proto::RegisterWorkerRequest& request) {
  absl::MutexLock lock(&mu_);
  const Member* m = members_.JoinWorker(request.address());
  if (m == nullptr) {
    const ClusterSection& cluster = options_.config.cluster;
    return absl::ResourceExhaustedError(absl::StrCat(
        "register: no worker slot is free for the worker joining from ",
        request.address(), ": cluster.max_workers is ", cluster.max_workers,
        " and all ", members_.worker_slots(),
        " slots (cluster.workers included) hold a worker that was not "
        "drained. Drain one first (psctl drain-worker N), or raise "
        "cluster.max_workers and restart the job"));
  }
  proto::RegisterWorkerRequest joined = request;
  joined.set_join(false);
  joined.set_index(m->index);
  return joined;
}

absl::StatusOr<proto::RegisterWorkerResponse> ClusterState::RegisterWorker(
    const proto::RegisterWorkerRequest& request) {
  RETURN_IF_ERROR(CheckRegisterBounds(request));
  proto::RegisterWorkerRequest registering = request;
  if (request.join()) {
    ASSIGN_OR_RETURN(registering, JoinWorker(request));
  }
  {
    // A drained worker started again: told so, it exits 0 (not a failure
    // its supervisor would restart it for, over and over).
    absl::MutexLock lock(&mu_);
    const Member* m = members_.Find(MemberRole::kWorker, registering.index());
    if (m != nullptr && m->drained) {
      proto::RegisterWorkerResponse drained;
      drained.set_index(m->index);
      drained.set_drained(true);
      return drained;
    }
  }
  RETURN_IF_ERROR(MayRegister(MemberRole::kWorker, registering.index(),
                              request.member_key(), request.address()));
  proto::RegisterWorkerResponse response;
  std::optional<Snapshot> snapshot;
  {
    absl::MutexLock lock(&mu_);
    Member* m = members_.Find(MemberRole::kWorker, registering.index());
    if (m == nullptr) return absl::InternalError("register: worker vanished");
    if (m->drained) return Drained(*m);
    m->address = request.address();
    // The pack it joins (ssp): read before this registration changes anything.
    response.set_start_clock(
        JobProgress::StartClock(members_.workers(), m->index));
    // The same process registering again keeps its key and incarnation (its
    // push sequences go on); a new one gets its own.
    const bool unfinished = m->registered && !m->report.finished();
    const uint64_t pushed = m->report.pushes();
    if (members_.Admit(*m, request.member_key()) && unfinished && pushed > 0) {
      recoveries_.NoteWorkerProcessLost(m->index, pushed);
    }
    response.set_incarnation(m->incarnation);
    response.set_member_key(m->key);
    response.set_push_key(m->push_key);
    response.set_index(m->index);
    members_.Touch(*m);
    m->report.set_finished(false);
    // A joined worker has no home part: joining or restarted, it takes its
    // share from the workers holding the most.
    if (m->joined) {
      parts_.Join(members_.workers(), m->index);
    } else {
      parts_.Claim(members_.workers(), m->index);
    }
    SPDLOG_LOGGER_INFO(L(), "worker {} {} from {}: data parts [{}]", m->index,
                       request.join() ? "joined" : "registered", m->address,
                       absl::StrJoin(parts_.parts(m->index), ", "));
    snapshot = TakeSnapshot();
    *response.mutable_partition() = parts_.PartitionOf(m->index);
  }
  Save(std::move(snapshot));
  return response;
}

absl::StatusOr<proto::HeartbeatResponse> ClusterState::Heartbeat(
    const proto::HeartbeatRequest& request) {
  RETURN_IF_ERROR(CheckHeartbeatBounds(request));
  const std::optional<MemberRole> role = ParseMemberRole(request.role());
  if (!role.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("heartbeat: role must be ps, worker or standby, got '",
                     request.role(), "'"));
  }
  proto::HeartbeatResponse response;
  std::optional<Snapshot> snapshot;
  {
    absl::MutexLock lock(&mu_);
    Member* m = members_.Find(*role, request.index());
    if (m == nullptr || !m->registered) {
      return absl::FailedPreconditionError(absl::StrCat(
          "heartbeat: ", request.role(), " ", request.index(),
          " is not registered with this coordinator; register first"));
    }
    switch (members_.Identify(*m, request.member_key())) {
      case Membership::KeyMatch::kCurrent:
        break;
      case Membership::KeyMatch::kRetired:
        // A process that was declared dead and replaced came back (e.g.
        // after SIGSTOP): it stands down.
        response.set_replaced(true);
        response.set_placement_epoch(placement_.epoch());
        response.set_take_over_index(-1);
        response.set_replica_of(-1);
        return response;
      case Membership::KeyMatch::kNone:
        return absl::PermissionDeniedError(absl::StrCat(
            "heartbeat for ", request.role(), " ", request.index(),
            " is not from its registered process: its member_key is ",
            request.member_key().empty() ? "missing" : "wrong",
            ". Only the process that registered as ", request.role(), " ",
            request.index(),
            " (the key is in its registration reply) may report for it; "
            "nothing was changed"));
    }
    const bool was_finished = m->report.finished();
    members_.Heard(*m, request.report());
    const bool settled = *role == MemberRole::kPs && NoteShardReport(*m);
    const bool switched = placement_.NoteMoveProgress(*m);
    const bool moved = *role == MemberRole::kWorker &&
                       parts_.NotePositions(m->index, m->report.positions());
    placement_.AssignBackups();
    const bool stopped = MaybeStopJob();
    // A drained worker's reports until it leaves are its last (saved: a
    // restarted coordinator shows its work, MemberRecord.final_report).
    if (stopped || settled || switched || m->drained ||
        m->report.finished() != was_finished || (moved && PositionSaveDue())) {
      snapshot = TakeSnapshot();
    }
    HeartbeatReply(*m, &response);
    if (*role == MemberRole::kPs && progress_.stopped()) m->told_stop = true;
  }
  Save(std::move(snapshot));
  return response;
}

bool ClusterState::NoteShardReport(Member& ps) {
  ps.applied_total = ps.report.applied_total();
  bool settled =
      recoveries_.SettleApplied(ps.index, ps.address, ps.applied_total);
  // Its report after it was told the job is over comes after every
  // worker finished: its push holes are losses then.
  // So is its last report, sent after its server stopped, once every
  // worker finished (the launcher stops the ps after the workers).
  settled = recoveries_.SettleAckedLoss(
                ps, ps.told_stop ||
                        (progress_.stopped() && ps.report.final_report())) ||
            settled;
  placement_.FollowShard(ps);
  return settled;
}

bool ClusterState::PositionSaveDue() {
  const absl::Time now = clock_->Now();
  if (now < next_position_save_) return false;
  next_position_save_ =
      now + absl::Seconds(options_.config.heartbeat.interval_s);
  return true;
}

void ClusterState::HeartbeatReply(const Member& m,
                                  proto::HeartbeatResponse* response) const {
  placement_.AddTo(m, response);
  progress_.AddTo(response);
  if (m.role == MemberRole::kWorker) {
    *response->mutable_partition() = parts_.PartitionOf(m.index);
    response->set_drained(m.drained);
    return;
  }
  members_.AddWorkerIncarnations(m, response->mutable_worker_incarnations());
  // Whom ssp/bsp wait for: a dead or finished worker drops out. Under bsp
  // a worker that has not registered yet counts too: were the set to grow
  // as workers arrive, each ps would hear of a newcomer at its own moment,
  // one would close a round without it while another waited for it, and
  // the two shards' rounds would stay a step apart (each waiting for the
  // other's next step). The first rounds wait for every worker instead.
  members_.AddActiveWorkers(
      options_.config.training.consistency == ConsistencyMode::kBsp, response);
}

proto::GetPlacementResponse ClusterState::Placement() const {
  absl::MutexLock lock(&mu_);
  return placement_.Describe();
}

bool ClusterState::MaybeStopJob() {
  if (!progress_.MaybeStop(members_, parts_)) return false;
  // Nothing copies any more: a move still copying would stay open, and its
  // rows at the destination in the final checkpoints.
  placement_.RollBackCopies("the job ended during the copy");
  return true;
}

absl::StatusOr<proto::MoveBucketsResponse> ClusterState::MoveBuckets(
    const proto::MoveBucketsRequest& request) {
  absl::StatusOr<proto::MoveBucketsResponse> response;
  std::optional<Snapshot> snapshot;
  {
    absl::MutexLock lock(&mu_);
    if (progress_.stopped()) {
      return absl::FailedPreconditionError(
          absl::StrCat("move-buckets: the job is over (",
                       progress_.stop_reason(), "): nothing moves any more"));
    }
    response = placement_.MoveBuckets(request);
    if (response.ok()) snapshot = TakeSnapshot();
  }
  Save(std::move(snapshot));
  return response;
}

proto::ClusterStatusResponse ClusterState::Status() const {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  proto::ClusterStatusResponse response;
  response.set_uptime_seconds(absl::ToDoubleSeconds(now - start_));
  progress_.AddStatus(&response);
  members_.AddStatus(now, &response);
  parts_.AddTo(response.mutable_members());
  recoveries_.AddStatus(&response);
  placement_.AddStatus(now, &response);
  return response;
}

absl::StatusOr<proto::DrainWorkerResponse> ClusterState::DrainWorker(
    int index) {
  proto::DrainWorkerResponse response;
  std::optional<Snapshot> snapshot;
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(members_.MayDrain(index));
    const std::vector<PartMove> moves = parts_.Drain(members_.workers(), index);
    Member* m = members_.Find(MemberRole::kWorker, index);
    m->drained = true;
    m->report.set_finished(true);
    m->reported_finished = false;
    std::vector<std::string> handed;
    for (const PartMove& move : moves) {
      proto::PartHandOff* h = response.add_handed();
      h->set_part(move.part);
      h->set_to(move.to);
      handed.push_back(
          absl::StrCat("part ", move.part, " to worker ", move.to));
    }
    response.set_message(absl::StrCat(
        "worker ", index, " drained: ",
        handed.empty() ? "it held no data parts"
                       : absl::StrCat(absl::StrJoin(handed, ", "),
                                      " (each from its saved position)"),
        "; it ends its step and exits"));
    SPDLOG_LOGGER_INFO(L(), "{}", response.message());
    MaybeStopJob();
    snapshot = TakeSnapshot();
  }
  Save(std::move(snapshot));
  return response;
}

int ClusterState::CheckLiveness() {
  int changed = 0;
  std::optional<Snapshot> snapshot;
  {
    absl::MutexLock lock(&mu_);
    // Each death is handled before the next member is judged: a standby
    // judged later may still take a shard over, a worker judged later may
    // still adopt parts.
    DataPartTable* parts = &parts_;
    ShardPlacement* placement = &placement_;
    const std::vector<Member>* workers = &members_.workers();
    // Once the job is over no push can come: a ps silent then without its
    // final report (stalled, or slow to write its final checkpoint) is
    // waited for. Its backup, which the launcher may be stopping already,
    // would never write the shard's final checkpoint, and the ps, told it
    // was replaced, would stand down without writing it either. A ps that
    // sent its final report wrote that checkpoint and stopped: its shard
    // goes to a standby as ever (one restarted there, say).
    const bool job_over = progress_.stopped();
    changed = members_.ExpireSilent(
        absl::Seconds(options_.config.heartbeat.timeout_s), [&](Member& m) {
          if (m.role == MemberRole::kWorker) parts->HandOff(*workers, m.index);
          if (m.role != MemberRole::kPs) return;
          if (!job_over || m.report.final_report()) {
            placement->ReplaceShard(m);
            return;
          }
          SPDLOG_LOGGER_WARN(
              L(),
              "ps {} at {} is silent after the job ended, without its final "
              "report: its shard is not handed to a standby (no push can "
              "come any more); it writes the shard's final checkpoint when "
              "it answers again, and the launcher reports it if it never "
              "does",
              m.index, m.address);
        });
    if (changed > 0) {
      placement_.AssignBackups();
      MaybeStopJob();
      snapshot = TakeSnapshot();
    }
  }
  Save(std::move(snapshot));
  return changed;
}

int ClusterState::HoldJudgement() {
  absl::MutexLock lock(&mu_);
  return members_.HoldJudgement();
}

bool ClusterState::HearsNobody(absl::Duration silence) const {
  absl::MutexLock lock(&mu_);
  return members_.HearsNobody(silence);
}

void ClusterState::GiveGrace(absl::Duration stalled) {
  const int given = HoldJudgement();
  SPDLOG_LOGGER_WARN(L(),
                     "the coordinator itself stalled for {:.1f} s (paused or "
                     "starved of CPU): {} live members get a fresh {:.1f} s "
                     "to heartbeat before they are judged",
                     absl::ToDoubleSeconds(stalled), given,
                     options_.config.heartbeat.timeout_s);
}

// --- Persistence -------------------------------------------------------------

std::optional<ClusterState::Snapshot> ClusterState::TakeSnapshot() {
  if (state_file_ == nullptr) return std::nullopt;
  Snapshot snapshot;
  snapshot.sequence = ++snapshots_;
  proto::CoordinatorState& state = snapshot.state;
  members_.SaveTo(&state);  // first: the parts below add to its records
  parts_.SaveTo(&state);
  placement_.SaveTo(&state);
  progress_.SaveTo(&state);
  recoveries_.SaveTo(&state);
  return snapshot;
}

void ClusterState::SaveNow() {
  std::optional<Snapshot> snapshot;
  {
    absl::MutexLock lock(&mu_);
    snapshot = TakeSnapshot();
  }
  if (snapshot.has_value()) snapshot->state.set_stopped_cleanly(true);
  Save(std::move(snapshot));
}

void ClusterState::Save(std::optional<Snapshot> snapshot) {
  if (!snapshot.has_value()) return;
  absl::Status written =
      state_file_->Write(snapshot->sequence, std::move(snapshot->state));
  if (!written.ok()) {
    SPDLOG_LOGGER_ERROR(L(), "cannot save coordinator state: {}",
                        std::string(written.message()));
  }
}

absl::Status ClusterState::Load() {
  if (state_file_ == nullptr) return absl::OkStatus();
  const std::string& path = state_file_->path();
  absl::StatusOr<proto::CoordinatorState> state = state_file_->Read();
  if (absl::IsNotFound(state.status())) return absl::OkStatus();  // first start
  if (!state.ok()) return state.status();
  absl::MutexLock lock(&mu_);
  if (state->stop()) {
    // The job's end is durable: a coordinator restarted after it stays done,
    // and tells every member that asks. (The launcher deletes the state file
    // to start a new job.)
    SPDLOG_LOGGER_INFO(L(),
                       "{} holds a finished job ({}): it stays done; delete "
                       "the file to start a new job",
                       path, state->stop_reason());
  }
  members_.RestoreJoined(*state);  // first: the parts size by the ps
  RETURN_IF_ERROR(placement_.Restore(*state, path));
  progress_.Restore(*state);
  recoveries_.Restore(*state);
  const int restored = members_.Restore(*state);
  parts_.Restore(*state);
  SPDLOG_LOGGER_INFO(L(),
                     "restored state from {}: placement epoch {}, {} members",
                     path, placement_.epoch(), restored);
  return absl::OkStatus();
}

}  // namespace downpour::coordinator
