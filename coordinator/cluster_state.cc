// Membership, placement and failure handling. Placement is computed once every
// ps of the config has registered; its epoch rises whenever a shard moves (a ps
// restarts, or a standby takes a dead shard over), so clients holding an old
// map get FAILED_PRECONDITION from the ps and re-read it.
#include "coordinator/cluster_state.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/host_port.h"
#include "common/logging.h"
#include "common/sparse_keys.h"
#include "common/status_macros.h"
#include "coordinator/assignment.h"
#include "coordinator/member_identity.h"

namespace downpour::coordinator {
namespace {

spdlog::logger* L() { return Log(Logger::kCoordinator); }

}  // namespace

const char* MemberRoleName(MemberRole role) {
  switch (role) {
    case MemberRole::kPs:
      return "ps";
    case MemberRole::kWorker:
      return "worker";
    case MemberRole::kStandby:
      return "standby";
  }
  return "?";
}

std::optional<MemberRole> ParseMemberRole(absl::string_view name) {
  for (MemberRole role : {MemberRole::kPs, MemberRole::kWorker, MemberRole::kStandby}) {
    if (name == MemberRoleName(role)) return role;
  }
  return std::nullopt;
}

std::string StateFilePath(const std::string& state_dir) {
  if (state_dir.empty()) return "";
  return (std::filesystem::path(state_dir) / "coordinator.state").string();
}

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
      spec_(std::move(spec)),
      start_(clock_->Now()),
      last_heard_(start_),
      state_file_(options_.config.coordinator.state_dir.empty()
                      ? nullptr
                      : std::make_unique<StateFile>(StateFilePath(
                            options_.config.coordinator.state_dir))) {
  absl::MutexLock lock(&mu_);
  const auto& cluster = options_.config.cluster;
  for (size_t i = 0; i < cluster.ps.size(); ++i) {
    ps_.push_back({MemberRole::kPs, static_cast<int>(i), cluster.ps[i]});
  }
  for (size_t i = 0; i < cluster.standby_ps.size(); ++i) {
    standby_.push_back(
        {MemberRole::kStandby, static_cast<int>(i), cluster.standby_ps[i]});
  }
  for (size_t i = 0; i < cluster.workers.size(); ++i) {
    workers_.push_back(
        {MemberRole::kWorker, static_cast<int>(i), cluster.workers[i]});
  }
  if (cluster.replication >= 2 && !cluster.standby_ps.empty() &&
      cluster.standby_ps.size() < cluster.ps.size()) {
    SPDLOG_LOGGER_WARN(
        L(),
        "cluster.replication {} with {} standby for {} shards: {} shard(s) "
        "will run without a backup until a ps rejoins as a spare (losing such "
        "a shard's ps loses the pushes since its last checkpoint). List one "
        "cluster.standby_ps entry per ps to back up every shard",
        cluster.replication, cluster.standby_ps.size(), cluster.ps.size(),
        cluster.ps.size() - cluster.standby_ps.size());
  }
}

ClusterState::Member* ClusterState::Find(MemberRole role, int index) {
  std::vector<Member>& members = role == MemberRole::kPs       ? ps_
                                 : role == MemberRole::kWorker ? workers_
                                                         : standby_;
  if (index < 0 || index >= static_cast<int>(members.size())) return nullptr;
  return &members[index];
}

void ClusterState::Touch(Member& m) {
  // A new registration of a member declared dead ends its outage.
  if (m.registered && !m.alive) CloseOutage(m, "restarted");
  m.registered = true;
  m.alive = true;
  m.last_heartbeat = clock_->Now();
  last_heard_ = m.last_heartbeat;
}

absl::Status ClusterState::MayRegister(MemberRole role, int index,
                                       const std::string& key,
                                       const std::string& address) {
  std::string serving;
  uint64_t incarnation = 0;
  {
    absl::MutexLock lock(&mu_);
    const Member* m = Find(role, index);
    if (m == nullptr) {
      const bool worker = role == MemberRole::kWorker;
      const size_t n = worker ? workers_.size()
                       : role == MemberRole::kPs ? ps_.size()
                                           : standby_.size();
      return absl::InvalidArgumentError(absl::StrCat(
          "register: ", MemberRoleName(role), " index ", index,
          " is not in the config (", n, " in cluster.",
          worker ? "workers" : role == MemberRole::kPs ? "ps" : "standby_ps",
          ": valid indices are 0 to ", static_cast<int64_t>(n) - 1, ")"));
    }
    // Free, its own process again, or declared dead: nothing to ask.
    if (!m->registered || !m->alive || SameKey(key, m->key)) {
      return absl::OkStatus();
    }
    serving = m->address;
    incarnation = m->incarnation;
  }
  // The probe runs without the lock. A process that answers at the member's
  // address as the member is the live member: the request is someone else.
  const std::optional<uint64_t> answer =
      options_.probe ? options_.probe(serving) : std::nullopt;
  if (!answer.has_value() && role == MemberRole::kPs &&
      HostOf(serving) != HostOf(address)) {
    // The shard's server heartbeats, from another host than this daemon's:
    // its silence to the probe may be the path from here, cut or still
    // reconnecting after a partition, while it serves the workers. Taking
    // the shard from a checkpoint would lose what it acknowledged since;
    // the liveness check decides instead.
    SPDLOG_LOGGER_WARN(L(),
                       "refused ps {} from {}: the shard's server at {} "
                       "heartbeats; its silence to the probe does not make it "
                       "dead",
                       index, address, serving);
    return absl::AlreadyExistsError(absl::StrCat(
        "register: ps ", index, " is served by ", serving,
        ", which heartbeats to the coordinator (it did not answer the "
        "probe, but from another host that may be the path, not the "
        "server): a second daemon cannot take a live shard. It is declared "
        "dead after heartbeat.timeout_s of silence; a ps rejoins as a spare "
        "meanwhile and takes the shard over then"));
  }
  if (!answer.has_value() || *answer != incarnation) return absl::OkStatus();
  SPDLOG_LOGGER_WARN(L(),
                     "refused {} {} from {}: its registered process at {} is "
                     "alive",
                     MemberRoleName(role), index, address, serving);
  if (role == MemberRole::kWorker) {
    return absl::AlreadyExistsError(absl::StrCat(
        "register: worker ", index, " is registered to a live process at ",
        serving,
        " (it heartbeats and answers as that worker): a second process "
        "cannot take its place. Stop that worker first, or use another "
        "index"));
  }
  return absl::AlreadyExistsError(absl::StrCat(
      "register: ", MemberRoleName(role), " ", index, " is served by ", serving,
      ", which is alive (it heartbeats and answers): a second daemon cannot "
      "take a live shard. Stop that daemon first, or start this one as a "
      "spare (--standby N, listed in cluster.standby_ps)"));
}

bool ClusterState::Admit(Member& m, const std::string& key) {
  if (m.registered && SameKey(key, m.key)) return false;
  Retire(m);
  m.key = NewMemberKey();
  m.incarnation = ++last_incarnation_;
  m.push_key = m.role == MemberRole::kWorker ? NewPushKey() : 0;
  return true;
}

void ClusterState::Retire(Member& m) {
  if (m.key.empty()) return;
  m.retired_keys.push_back(std::move(m.key));
  m.key.clear();
  if (m.retired_keys.size() > kRetiredKeys) {
    m.retired_keys.erase(m.retired_keys.begin());
  }
}

void ClusterState::AddWorkerIncarnations(
    google::protobuf::RepeatedPtrField<proto::WorkerIncarnation>* out) const {
  for (const Member& w : workers_) {
    if (!w.registered || w.incarnation == 0) continue;
    proto::WorkerIncarnation* i = out->Add();
    i->set_worker(w.index);
    i->set_incarnation(w.incarnation);
    i->set_push_key(w.push_key);
  }
}

absl::StatusOr<proto::RegisterServerResponse> ClusterState::RegisterServer(
    const proto::RegisterServerRequest& request) {
  RETURN_IF_ERROR(CheckRegisterBounds(request));
  if (request.spare()) return RegisterSpare(request);
  const size_t configured = options_.config.cluster.standby_ps.size();
  if (request.standby() &&
      (request.index() < 0 || request.index() >= static_cast<int>(configured))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "register: standby index ", request.index(),
        " is not in the config (", configured,
        " in cluster.standby_ps: valid indices are 0 to ",
        static_cast<int64_t>(configured) - 1, ")"));
  }
  RETURN_IF_ERROR(MayRegister(request.standby() ? MemberRole::kStandby : MemberRole::kPs,
                              request.index(), request.member_key(),
                              request.address()));
  proto::RegisterServerResponse response;
  std::optional<Snapshot> snapshot;
  if (!request.standby()) {
    // A restarted ps (a new process) while the shard's backup holds an
    // in-sync copy: the backup takes over now, since it holds every
    // acknowledged push and the restarted process only its checkpoint (the
    // applied totals cannot tell: the last heartbeat's may be older than the
    // checkpoint). This daemon is refused and rejoins as a spare.
    std::optional<Snapshot> taken;
    std::string to;
    {
      absl::MutexLock lock(&mu_);
      Member* m = Find(MemberRole::kPs, request.index());
      if (m != nullptr && m->registered && epoch_ > 0 &&
          !SameKey(request.member_key(), m->key)) {
        const std::vector<StandbySlot> slots = StandbySlots();
        const int picked = PickStandby(slots, m->index);
        if (picked >= 0 && HoldsReplicaOf(slots[picked], m->index)) {
          SPDLOG_LOGGER_WARN(
              L(),
              "ps {} registers again from {} (a new process, {} updates "
              "restored; the shard last reported {}), and its backup standby "
              "{} holds every acknowledged push: the backup takes over",
              m->index, request.address(), request.applied_total(),
              m->applied_total, picked);
          to = standby_[picked].address;
          ReplaceShard(*m);
          AssignBackups();
          taken = TakeSnapshot();
        }
      }
    }
    if (!to.empty()) {
      Save(std::move(taken));
      return absl::AlreadyExistsError(absl::StrCat(
          "register: ps ", request.index(), "'s backup at ", to,
          " holds every acknowledged push of the shard (this daemon restored ",
          request.applied_total(),
          " updates from its checkpoint): it serves the shard now"));
    }
  }
  {
    absl::MutexLock lock(&mu_);
    const MemberRole role = request.standby() ? MemberRole::kStandby : MemberRole::kPs;
    Member* m = Find(role, request.index());
    if (m == nullptr) {
      const size_t n = request.standby() ? standby_.size() : ps_.size();
      return absl::InvalidArgumentError(
          absl::StrCat("register: ", MemberRoleName(role), " index ", request.index(),
                       " is not in the config (", n, " in cluster.",
                       request.standby() ? "standby_ps" : "ps", ")"));
    }
    const bool restarted = m->registered;
    const bool was_alive = m->alive;
    const std::string old_address = m->address;
    const std::string old_key = m->key;
    m->address = request.address();
    const bool fresh = Admit(*m, request.member_key());
    Touch(*m);
    // A new process may be handed its old process's shard right here
    // (EndServedLease): that serving_index stays.
    if (request.standby() && fresh) {
      // What the old process reported (its replica) is not this one's.
      m->report.Clear();
      m->replica_of = -1;
      EndServedLease(*m, old_key);
    } else if (request.standby()) {
      m->serving_index = -1;
    }
    SPDLOG_LOGGER_INFO(L(), "{} {} registered from {}", MemberRoleName(role),
                       m->index, m->address);
    if (!request.standby() && restarted && epoch_ > 0) {
      ++epoch_;
      SPDLOG_LOGGER_INFO(L(), "ps {} restarted at {}: placement epoch {}",
                         m->index, m->address, epoch_);
      // A new process serves the shard from its checkpoint: what the old one
      // acknowledged since is counted by it (acked_pushes_lost).
      if (fresh || !was_alive || old_address != m->address ||
          request.applied_total() < m->applied_total) {
        RecordRecovery(m->index, old_address, m->address, "restart",
                       m->applied_total, request.applied_total());
      }
      m->applied_total = request.applied_total();
      m->report.set_replicated(false);  // the new process has not synced yet
      // A standby that served this shard (it took it over) no longer does.
      for (Member& s : standby_) {
        if (s.serving_index == m->index) {
          s.serving_index = -1;
          s.alive = false;
        }
      }
    }
    if (request.standby()) m->replica_of = -1;
    MaybePlace();
    AssignBackups();
    snapshot = TakeSnapshot();
    response.set_placement_epoch(epoch_);
    response.set_member_key(m->key);
    response.set_incarnation(m->incarnation);
    response.set_standby_index(request.standby() ? m->index : -1);
    AddWorkerIncarnations(response.mutable_worker_incarnations());
  }
  Save(std::move(snapshot));
  return response;
}

int ClusterState::SpareSlotFor(
    const proto::RegisterServerRequest& request) const {
  const size_t first = options_.config.cluster.standby_ps.size();
  const int index = request.index();
  if (index >= static_cast<int>(first) &&
      index < static_cast<int>(standby_.size()) && standby_[index].spare &&
      !request.member_key().empty() &&
      SameKey(request.member_key(), standby_[index].key)) {
    return index;  // its own slot (e.g. after a coordinator restart)
  }
  for (size_t i = first; i < standby_.size(); ++i) {
    if (standby_[i].address == request.address()) return static_cast<int>(i);
  }
  for (size_t i = first; i < standby_.size(); ++i) {
    if (!standby_[i].alive && standby_[i].serving_index < 0) {
      return static_cast<int>(i);
    }
  }
  if (Spares() < MaxSpares()) {
    return static_cast<int>(standby_.size());
  }
  return -1;
}

absl::StatusOr<proto::RegisterServerResponse> ClusterState::RegisterSpare(
    const proto::RegisterServerRequest& request) {
  int slot;
  bool existing;
  {
    absl::MutexLock lock(&mu_);
    slot = SpareSlotFor(request);
    existing = slot < static_cast<int>(standby_.size());
    if (slot < 0) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "register: no spare slot left for ", request.address(), " (",
          Spares(), " spares registered, at most ", MaxSpares(),
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
    if (slot > static_cast<int>(standby_.size()) ||
        (slot < static_cast<int>(standby_.size()) &&
         standby_[slot].address != request.address() &&
         standby_[slot].alive)) {
      slot = SpareSlotFor(request);
      if (slot < 0) {
        return absl::ResourceExhaustedError(
            "register: no spare slot left; try again");
      }
    }
    if (slot == static_cast<int>(standby_.size())) {
      standby_.push_back({MemberRole::kStandby, slot, request.address()});
      standby_.back().spare = true;
    }
    Member& m = standby_[slot];
    const std::string old_key = m.key;
    m.address = request.address();
    m.spare = true;
    const int former = request.former_shard();
    m.former_shard =
        former >= 0 && former < static_cast<int>(ps_.size()) ? former : -1;
    const bool fresh = Admit(m, request.member_key());
    Touch(m);
    m.replica_of = -1;
    if (fresh) {
      m.report.Clear();  // the old process's report (its replica) is not ours
      EndServedLease(m, old_key);  // may hand it its old process's shard
    } else {
      m.serving_index = -1;
    }
    SPDLOG_LOGGER_INFO(L(),
                       "spare standby {} registered from {} (it served shard "
                       "{}, which another daemon serves now)",
                       m.index, m.address, m.former_shard);
    AssignBackups();
    snapshot = TakeSnapshot();
    response.set_placement_epoch(epoch_);
    response.set_member_key(m.key);
    response.set_incarnation(m.incarnation);
    response.set_standby_index(m.index);
    AddWorkerIncarnations(response.mutable_worker_incarnations());
  }
  Save(std::move(snapshot));
  return response;
}

void ClusterState::EndServedLease(Member& m, const std::string& old_key) {
  const int shard = m.serving_index;
  m.serving_index = -1;
  if (shard < 0 || shard >= static_cast<int>(ps_.size()) || old_key.empty()) {
    return;
  }
  Member& ps = ps_[shard];
  // Someone else speaks for the shard by now.
  if (!SameKey(ps.key, old_key) || !ps.alive) return;
  SPDLOG_LOGGER_WARN(L(),
                     "standby {} registered again from {}: its old process, "
                     "which served shard {}, is gone, so the shard fails over "
                     "now (not after the {:.1f} s heartbeat timeout)",
                     m.index, m.address, shard,
                     options_.config.heartbeat.timeout_s);
  ps.alive = false;
  ReplaceShard(ps);
}

absl::StatusOr<proto::RegisterWorkerResponse> ClusterState::RegisterWorker(
    const proto::RegisterWorkerRequest& request) {
  RETURN_IF_ERROR(CheckRegisterBounds(request));
  RETURN_IF_ERROR(MayRegister(MemberRole::kWorker, request.index(),
                              request.member_key(), request.address()));
  proto::RegisterWorkerResponse response;
  std::optional<Snapshot> snapshot;
  {
    absl::MutexLock lock(&mu_);
    Member* m = Find(MemberRole::kWorker, request.index());
    if (m == nullptr) return absl::InternalError("register: worker vanished");
    m->address = request.address();
    // The pack it joins (ssp): the smallest clock of the other workers still
    // training; read before this registration changes anything.
    uint64_t start_clock = 0;
    bool found = false;
    for (const Member& w : workers_) {
      if (w.index == m->index || !w.alive || w.report.finished()) continue;
      if (!found || w.report.clock() < start_clock) start_clock = w.report.clock();
      found = true;
    }
    response.set_start_clock(start_clock);
    // The same process registering again keeps its key and incarnation (its
    // push sequences go on); a new one gets its own.
    const bool unfinished = m->registered && !m->report.finished();
    const uint64_t pushed = m->report.pushes();
    if (Admit(*m, request.member_key()) && unfinished && pushed > 0 &&
        !worker_pushes_uncountable_) {
      worker_pushes_uncountable_ = true;
      SPDLOG_LOGGER_WARN(
          L(),
          "worker {}: a new process replaces one that had not finished ({} "
          "pushes acknowledged): pushes of that process a shard loses in a "
          "recovery from its checkpoint cannot all be counted (it never "
          "pushes again), so from now on such losses are reported as lower "
          "bounds",
          m->index, pushed);
    }
    response.set_incarnation(m->incarnation);
    response.set_member_key(m->key);
    response.set_push_key(m->push_key);
    Touch(*m);
    m->report.set_finished(false);
    ClaimParts(*m);
    SPDLOG_LOGGER_INFO(L(), "worker {} registered from {}: data parts [{}]",
                       m->index, m->address, absl::StrJoin(m->parts, ", "));
    snapshot = TakeSnapshot();
    *response.mutable_partition() = PartitionOf(*m);
  }
  Save(std::move(snapshot));
  return response;
}

namespace {

template <typename Member>
std::vector<WorkerSlot> WorkerSlots(const std::vector<Member>& workers) {
  std::vector<WorkerSlot> slots;
  for (const Member& w : workers) {
    slots.push_back({w.alive, w.report.finished(), w.parts});
  }
  return slots;
}

}  // namespace

void ClusterState::ClaimParts(Member& worker) {
  std::vector<std::vector<int>> parts =
      coordinator::ClaimParts(WorkerSlots(workers_), worker.index);
  for (size_t i = 0; i < workers_.size(); ++i) {
    workers_[i].parts = std::move(parts[i]);
  }
}

void ClusterState::HandOffParts(Member& dead) {
  if (dead.report.finished() || dead.parts.empty()) return;
  const std::vector<PartMove> moves =
      coordinator::HandOffParts(WorkerSlots(workers_), dead.index);
  if (moves.empty()) {
    SPDLOG_LOGGER_WARN(
        L(), "worker {}'s data parts [{}] wait for a worker: none is alive",
        dead.index, absl::StrJoin(dead.parts, ", "));
    return;
  }
  for (const PartMove& move : moves) {
    workers_[move.to].parts.push_back(move.part);
    SPDLOG_LOGGER_INFO(L(), "data part {} of dead worker {} goes to worker {}",
                       move.part, dead.index, move.to);
  }
  dead.parts.clear();
}

// A dead shard goes to an idle standby, which loads the shard's checkpoint.
std::vector<StandbySlot> ClusterState::StandbySlots() const {
  std::vector<StandbySlot> slots;
  for (const Member& s : standby_) {
    slots.push_back({s.alive, s.serving_index, s.replica_of,
                     s.replica_of >= 0 && s.report.has_replica() &&
                         s.report.replica_shard() == s.replica_of,
                     s.address, s.former_shard});
  }
  return slots;
}

void ClusterState::AssignBackups() {
  if (options_.config.cluster.replication < 2 || epoch_ == 0) return;
  for (Member& s : standby_) {
    const bool own = s.replica_of >= 0 &&
                     s.replica_of < static_cast<int>(ps_.size()) &&
                     ps_[s.replica_of].address == s.address;
    if ((!s.alive || s.serving_index >= 0 || own) && s.replica_of >= 0) {
      SPDLOG_LOGGER_WARN(L(), "standby {} no longer backs up shard {} ({})",
                         s.index, s.replica_of,
                         !s.alive              ? "it is dead"
                         : s.serving_index >= 0 ? "it serves a shard"
                                                : "the shard is served at its "
                                                  "own address");
      s.replica_of = -1;
    }
  }
  for (const Member& ps : ps_) {
    if (!ps.alive) continue;  // its backup is kept: it takes the shard over
    // (The loop above freed the backups of dead and serving standbys.)
    if (BackupOf(ps) >= 0) continue;
    const int picked = PickBackup(StandbySlots(), ps.index, ps.address);
    if (picked < 0) break;  // none free: the rest run unreplicated (logged)
    standby_[picked].replica_of = ps.index;
    SPDLOG_LOGGER_INFO(L(), "standby {} at {} backs up shard {} (ps at {})",
                       picked, standby_[picked].address, ps.index, ps.address);
  }
  NoteReplication();
}

int ClusterState::BackupOf(const Member& ps) const {
  for (const Member& s : standby_) {
    if (s.alive && s.serving_index < 0 && s.replica_of == ps.index) {
      return s.index;
    }
  }
  return -1;
}

int ClusterState::ReplicationFactor() const {
  return options_.config.cluster.standby_ps.empty()
             ? 1
             : options_.config.cluster.replication;
}

bool ClusterState::InSync(const Member& ps, int backup) const {
  return ps.alive && backup >= 0 && ps.report.replicated();
}

void ClusterState::NoteReplication() {
  if (ReplicationFactor() < 2 || epoch_ == 0) return;
  const absl::Time now = clock_->Now();
  for (Member& ps : ps_) {
    const int backup = BackupOf(ps);
    const bool in_sync = InSync(ps, backup);
    if (in_sync) ps.ever_in_sync = true;
    // The first sync after placement is not counted while a backup is
    // named; a shard no standby was free for counts from the start.
    const bool counting = !in_sync && (ps.ever_in_sync || backup < 0);
    const bool open = ps.unreplicated_since != absl::InfinitePast();
    double gap = 0;
    if (counting && !open) ps.unreplicated_since = now;
    if (!counting && open) {
      gap = absl::ToDoubleSeconds(now - ps.unreplicated_since);
      ps.unreplicated_seconds += gap;
      ps.unreplicated_since = absl::InfinitePast();
    }
    if (in_sync) {
      for (proto::ShardRecovery& r : recoveries_) {
        if (r.shard() == ps.index && r.backup_in_sync_seconds() < 0) {
          r.set_backup_in_sync_seconds(absl::ToDoubleSeconds(now - start_));
          SPDLOG_LOGGER_INFO(L(),
                             "shard {} has an in-sync backup again {:.2f} s "
                             "after its {} from {}",
                             ps.index,
                             r.backup_in_sync_seconds() - r.time_seconds(),
                             r.source() == "restart" ? "restart"
                                                     : "take-over",
                             r.from_address());
        }
      }
    }
    const std::string state = in_sync ? "in sync" : backup >= 0 ? "syncing"
                                                                : "none";
    if (state != "none") {
      ps.no_backup_since = absl::InfinitePast();
    } else if (ps.no_backup_since == absl::InfinitePast()) {
      ps.no_backup_since = now;
    }
    if (state == ps.replication_logged || state == "syncing") continue;
    if (state == "none" &&
        now - ps.no_backup_since <
            absl::Seconds(2 * options_.config.heartbeat.interval_s)) {
      continue;  // said on a later call if it lasts
    }
    ps.replication_logged = state;
    if (state == "in sync") {
      SPDLOG_LOGGER_INFO(L(),
                         "shard {} is backed up: standby {} at {} holds an "
                         "in-sync copy{}",
                         ps.index, backup, standby_[backup].address,
                         gap > 0 ? absl::StrFormat(" (%.2f s without one)", gap)
                                 : std::string());
      continue;
    }
    int free = 0;
    for (const Member& s : standby_) {
      free += s.alive && s.serving_index < 0 && s.replica_of < 0;
    }
    SPDLOG_LOGGER_WARN(
        L(),
        "shard {} (ps at {}) has NO BACKUP: no standby is free ({} "
        "configured in cluster.standby_ps, {} spares; {} alive and idle). "
        "Until one is, losing its ps loses the pushes acknowledged since its "
        "last checkpoint. A restarted ps rejoins as a spare and backs it up; "
        "or start one: ps_server --standby --index N",
        ps.index, ps.address, options_.config.cluster.standby_ps.size(),
        Spares(), free);
  }
}

void ClusterState::OpenOutage(const Member& m) {
  proto::MemberOutage outage;
  outage.set_role(MemberRoleName(m.role));
  outage.set_index(m.index);
  outage.set_address(m.address);
  outage.set_start_seconds(absl::ToDoubleSeconds(clock_->Now() - start_));
  outage.set_end_seconds(-1);
  outages_.push_back(std::move(outage));
  if (outages_.size() > kOutagesKept) outages_.erase(outages_.begin());
}

void ClusterState::CloseOutage(const Member& m, const char* how) {
  for (proto::MemberOutage& o : outages_) {
    if (o.end_seconds() >= 0 || o.role() != MemberRoleName(m.role) ||
        o.index() != m.index) {
      continue;
    }
    o.set_end_seconds(absl::ToDoubleSeconds(clock_->Now() - start_));
    o.set_ended_by(how);
  }
}

bool ClusterState::SettleAckedLoss(const Member& ps, bool final) {
  for (auto r = recoveries_.rbegin(); r != recoveries_.rend(); ++r) {
    if (r->shard() != ps.index) continue;
    // Only the shard's latest change, while its new server reports.
    if (r->to_address() != ps.address) return false;
    const bool became_final =
        final && !r->loss_final() &&
        (r->source() == "replica" || !worker_pushes_uncountable_);
    const uint64_t lost = ps.report.acked_pushes_lost() +
                          (final ? ps.report.push_holes() : 0);
    if (lost != r->acked_pushes_lost() || became_final) {
      if (lost > r->acked_pushes_lost() || became_final) {
        SPDLOG_LOGGER_WARN(L(),
                           "shard {} at {}: {} acknowledged pushes lost in its "
                           "{} from {}{}",
                           ps.index, ps.address, lost, r->source(),
                           r->from_address(),
                           became_final ? " (final)"
                           : final      ? " (at least: a worker process that "
                                          "pushed was lost)"
                                        : " so far");
      }
      r->set_acked_pushes_lost(lost);
    }
    // Exact only while every worker process that pushed either pushes on or
    // finished (worker_pushes_uncountable_); from a replica nothing is lost.
    if (final) {
      r->set_loss_final(r->source() == "replica" || !worker_pushes_uncountable_);
    }
    return became_final;
  }
  return false;
}

void ClusterState::RecordRecovery(int shard, const std::string& from,
                                  const std::string& to,
                                  const std::string& source, uint64_t before,
                                  std::optional<uint64_t> after) {
  proto::ShardRecovery r;
  r.set_shard(shard);
  r.set_time_seconds(absl::ToDoubleSeconds(clock_->Now() - start_));
  r.set_from_address(from);
  r.set_to_address(to);
  r.set_source(source);
  r.set_applied_before(before);
  r.set_backup_in_sync_seconds(-1);
  // Acknowledged only once the backup held them: nothing to lose.
  r.set_loss_final(source == "replica");
  if (after.has_value()) {
    r.set_applied_after(*after);
    r.set_lost(before > *after ? before - *after : 0);
    r.set_settled(true);
    if (before > 0 && *after == 0) {
      SPDLOG_LOGGER_ERROR(
          L(),
          "shard {} restarted at {} from INITIAL VALUES, but it held {} "
          "updates: all of them are lost. Was its checkpoint deleted, or "
          "checkpoint.dir changed? Stop the job and restore the checkpoint "
          "to keep them",
          shard, to, before);
    } else if (r.lost() > 0) {
      SPDLOG_LOGGER_WARN(L(),
                         "shard {} restarted at {}: {} updates before, {} "
                         "after: {} lost",
                         shard, to, before, *after, r.lost());
    }
  }
  recoveries_.push_back(std::move(r));
}

void ClusterState::ReplaceShard(Member& dead) {
  if (epoch_ == 0) return;
  const std::vector<StandbySlot> slots = StandbySlots();
  const int picked = PickStandby(slots, dead.index);
  if (picked < 0) {
    SPDLOG_LOGGER_WARN(L(),
                       "ps {} is dead and no standby is free: its blocks are "
                       "unavailable until a ps is started with --index {}",
                       dead.index, dead.index);
    return;
  }
  // A standby that served the shard before (it took it over and died, or
  // was restarted) serves it no longer.
  for (Member& s : standby_) {
    if (s.serving_index == dead.index) s.serving_index = -1;
  }
  Member& standby = standby_[picked];
  const bool from_replica = HoldsReplicaOf(slots[picked], dead.index);
  if (standby.replica_of >= 0 && standby.replica_of != dead.index) {
    SPDLOG_LOGGER_WARN(L(),
                       "standby {} backed up shard {}, which runs unreplicated "
                       "now (no other standby is free)",
                       standby.index, standby.replica_of);
  }
  standby.replica_of = -1;
  standby.serving_index = dead.index;
  RecordRecovery(dead.index, dead.address, standby.address,
                 from_replica ? "replica" : "checkpoint", dead.applied_total,
                 std::nullopt);
  const std::string old_address = dead.address;
  dead.address = standby.address;
  // The standby's process speaks for the shard now; the replaced process's
  // heartbeats are told so.
  Retire(dead);
  dead.key = standby.key;
  dead.incarnation = standby.incarnation;
  CloseOutage(dead, "taken over");
  dead.alive = true;  // give the standby a full timeout to start serving
  dead.last_heartbeat = clock_->Now();
  dead.report.set_replicated(false);  // the new server has no backup yet
  dead.report.set_acked_pushes_lost(0);
  dead.report.set_push_holes(0);
  ++epoch_;
  SPDLOG_LOGGER_WARN(
      L(),
      "ps {} at {} replaced by standby {} at {} (from its {}): placement "
      "epoch {}",
      dead.index, old_address, standby.index, standby.address,
      from_replica ? "in-sync replica" : "checkpoint; updates since are lost",
      epoch_);
}

proto::Partition ClusterState::PartitionOf(const Member& worker) const {
  proto::Partition partition;
  partition.set_part(worker.index);
  partition.set_num_parts(static_cast<int>(workers_.size()));
  for (int p : worker.parts) partition.add_parts(p);
  return partition;
}

void ClusterState::MaybePlace() {
  if (epoch_ > 0) return;
  for (const Member& m : ps_) {
    if (!m.registered) return;
  }
  placement_ = PlaceBlocks(spec_, static_cast<int>(ps_.size()));
  epoch_ = 1;
  std::vector<std::string> shards;
  for (size_t s = 0; s < placement_.size(); ++s) {
    int64_t floats = 0;
    for (uint32_t id : placement_[s]) floats += spec_.blocks()[id].length;
    shards.push_back(absl::StrFormat("ps %d: %d blocks, %.2f MB", s,
                                     placement_[s].size(), floats * 4 / 1e6));
  }
  SPDLOG_LOGGER_INFO(L(), "placement epoch 1: {} blocks over {} shards ({})",
                     spec_.blocks().size(), ps_.size(),
                     absl::StrJoin(shards, "; "));
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
    Member* m = Find(*role, request.index());
    if (m == nullptr || !m->registered) {
      return absl::FailedPreconditionError(absl::StrCat(
          "heartbeat: ", request.role(), " ", request.index(),
          " is not registered with this coordinator; register first"));
    }
    if (!SameKey(request.member_key(), m->key)) {
      for (const std::string& retired : m->retired_keys) {
        if (!SameKey(request.member_key(), retired)) continue;
        // A process that was declared dead and replaced came back (e.g.
        // after SIGSTOP): it stands down.
        response.set_replaced(true);
        response.set_placement_epoch(epoch_);
        response.set_take_over_index(-1);
        response.set_replica_of(-1);
        return response;
      }
      return absl::PermissionDeniedError(absl::StrCat(
          "heartbeat for ", request.role(), " ", request.index(),
          " is not from its registered process: its member_key is ",
          request.member_key().empty() ? "missing" : "wrong",
          ". Only the process that registered as ", request.role(), " ",
          request.index(),
          " (the key is in its registration reply) may report for it; "
          "nothing was changed"));
    }
    if (!m->alive) {
      SPDLOG_LOGGER_INFO(L(), "{} {} is alive again", request.role(), m->index);
      CloseOutage(*m, "alive again");
    }
    const bool was_finished = m->report.finished();
    m->alive = true;
    m->last_heartbeat = clock_->Now();
    last_heard_ = m->last_heartbeat;
    m->report = request.report();
    bool settled = false;
    if (*role == MemberRole::kPs) {
      m->applied_total = m->report.applied_total();
      for (proto::ShardRecovery& r : recoveries_) {
        if (r.shard() != m->index || r.settled() ||
            r.to_address() != m->address) {
          continue;
        }
        // The shard's new server says what it holds: what the change lost.
        r.set_applied_after(m->applied_total);
        r.set_lost(r.applied_before() > m->applied_total
                       ? r.applied_before() - m->applied_total
                       : 0);
        r.set_settled(true);
        SPDLOG_LOGGER_WARN(L(),
                           "shard {} now at {} ({}): {} updates before, {} "
                           "after: {} lost",
                           r.shard(), r.to_address(), r.source(),
                           r.applied_before(), r.applied_after(), r.lost());
        settled = true;
      }
      // Its report after it was told the job is over comes after every
      // worker finished: its push holes are losses then.
      // So is its last report, sent after its server stopped, once every
      // worker finished (the launcher stops the ps after the workers).
      settled = SettleAckedLoss(
                    *m, m->told_stop || (stop_ && m->report.final_report())) ||
                settled;
      // A standby serving this shard lives as long as the shard's heartbeats.
      for (Member& s : standby_) {
        if (s.serving_index == m->index && s.address == m->address) {
          s.alive = true;
          s.last_heartbeat = m->last_heartbeat;
        }
      }
    }
    AssignBackups();
    const bool stopped = MaybeStop();
    if (stopped || settled || m->report.finished() != was_finished) {
      snapshot = TakeSnapshot();
    }
    HeartbeatReply(*m, &response);
    if (*role == MemberRole::kPs && stop_) m->told_stop = true;
  }
  Save(std::move(snapshot));
  return response;
}

void ClusterState::HeartbeatReply(const Member& m,
                                  proto::HeartbeatResponse* response) const {
  response->set_placement_epoch(epoch_);
  response->set_stop(stop_);
  response->set_stop_reason(stop_reason_);
  response->set_take_over_index(m.role == MemberRole::kStandby ? m.serving_index
                                                         : -1);
  response->set_replica_of(m.role == MemberRole::kStandby ? m.replica_of : -1);
  response->set_backup_standby(-1);
  if (m.role == MemberRole::kPs) {
    for (const Member& s : standby_) {
      if (s.alive && s.serving_index < 0 && s.replica_of == m.index) {
        response->set_backup_address(s.address);
        response->set_backup_standby(s.index);
      }
    }
  }
  if (m.role == MemberRole::kWorker) *response->mutable_partition() = PartitionOf(m);
  if (m.role != MemberRole::kWorker) {
    AddWorkerIncarnations(response->mutable_worker_incarnations());
    // Whom ssp/bsp wait for: a dead or finished worker drops out. Under bsp
    // a worker that has not registered yet counts too: were the set to grow
    // as workers arrive, each ps would hear of a newcomer at its own moment,
    // one would close a round without it while another waited for it, and
    // the two shards' rounds would stay a step apart (each waiting for the
    // other's next step). The first rounds wait for every worker instead.
    const bool bsp =
        options_.config.training.consistency == ConsistencyMode::kBsp;
    for (const Member& w : workers_) {
      const bool never_registered = !w.registered && w.incarnation == 0;
      if ((w.registered && w.alive && !w.report.finished()) ||
          (bsp && never_registered)) {
        response->add_active_workers(w.index);
      }
    }
    response->set_active_workers_known(true);
  }
}

namespace {

// A worker's last test figure of `metric` (NaN when it reported none).
// Reports from workers that predate metrics carry only accuracy.
double TestValue(const proto::MemberReport& report, const std::string& metric) {
  const auto it = report.metrics().find(metric);
  return it != report.metrics().end() ? it->second
         : metric == "accuracy"       ? report.accuracy()
                                      : NAN;
}

}  // namespace

bool ClusterState::PushesApplied(const Member& w) const {
  auto holds = [&](const Member& m) {
    if (!m.alive) return false;
    for (const proto::WorkerIncarnation& i : m.report.applied_from()) {
      if (i.worker() == w.index && i.incarnation() == w.incarnation) {
        return true;
      }
    }
    return false;
  };
  return std::any_of(ps_.begin(), ps_.end(), holds) ||
         std::any_of(standby_.begin(), standby_.end(), holds);
}

bool ClusterState::MaybeStop() {
  if (stop_) return false;
  const JobTarget target = TargetOf(options_.config);
  bool any_finished = false, all_done = true;
  // Claims of the target that count: the worker's last evaluation meets it
  // and a ps holds pushes of this process (it trained in this job).
  std::vector<const Member*> claims;
  int evaluating = 0;  // workers that may still confirm a claim
  for (const Member& w : workers_) {
    const double value = TestValue(w.report, target.metric);
    if (w.registered && w.alive && !w.report.finished()) ++evaluating;
    if (target_reached_s_ < 0 && w.registered &&
        ReachedTarget(target.metric, value, target.value) &&
        PushesApplied(w)) {
      target_reached_s_ = absl::ToDoubleSeconds(clock_->Now() - start_);
      target_reached_by_ = w.index;
      target_reached_value_ = value;
    }
    const bool claims_target =
        target.stop && w.registered &&
        ReachedTarget(target.metric, value, target.value) && PushesApplied(w);
    if (!claims_target) {
      first_claim_.erase(w.index);
    } else {
      claims.push_back(&w);
      // The evaluation that first claimed it, per incarnation.
      auto [claim, fresh] = first_claim_.try_emplace(
          w.index, Claim{w.incarnation, w.report.evaluations()});
      if (!fresh && claim->second.incarnation != w.incarnation) {
        claim->second = Claim{w.incarnation, w.report.evaluations()};
      }
    }
    any_finished = any_finished || w.report.finished();
    // A dead worker whose parts went to others no longer holds the job up.
    const bool done = w.report.finished() || (!w.alive && w.parts.empty());
    all_done = all_done && w.registered && done;
  }
  // One claim alone never ends the job: a second evaluation confirms it,
  // another worker's while another still evaluates, else the claimant's own
  // next one.
  const Member* confirmed = nullptr;
  const Member* by = nullptr;
  if (claims.size() >= 2) {
    confirmed = claims[0];
    by = claims[1];
  } else if (claims.size() == 1) {
    const Member& w = *claims[0];
    const bool others_evaluate =
        evaluating - (w.alive && !w.report.finished() ? 1 : 0) > 0;
    if (!others_evaluate &&
        w.report.evaluations() > first_claim_[w.index].evaluations) {
      confirmed = by = &w;
    }
  }
  if (confirmed != nullptr) {
    const double value = TestValue(confirmed->report, target.metric);
    stop_ = true;
    stop_reason_ = absl::StrFormat(
        "worker %d reached test %s %.4f %s target %.4f at step %d",
        confirmed->index, target.metric, value,
        HigherIsBetter(target.metric) ? ">=" : "<=", target.value,
        confirmed->report.step());
    stop_reason_ += by == confirmed
                        ? " (confirmed by its next evaluation)"
                        : absl::StrFormat(" (confirmed by worker %d)", by->index);
  }
  if (!stop_ && any_finished && all_done) {
    stop_ = true;
    stop_reason_ = "every worker finished its steps";
  }
  if (stop_) SPDLOG_LOGGER_INFO(L(), "job done: {}", stop_reason_);
  return stop_;
}

proto::GetPlacementResponse ClusterState::Placement() const {
  absl::MutexLock lock(&mu_);
  proto::GetPlacementResponse response;
  response.set_epoch(epoch_);
  if (epoch_ == 0) {
    std::vector<std::string> missing;
    for (const Member& m : ps_) {
      if (!m.registered) {
        missing.push_back(absl::StrCat("ps ", m.index, " (", m.address, ")"));
      }
    }
    response.set_waiting_for(
        absl::StrCat("registration of ", absl::StrJoin(missing, ", ")));
    return response;
  }
  // Sparse tables' keys go by hash bucket; each ps holds its buckets.
  std::vector<int> owners;
  if (!spec_.sparse_tables().empty()) {
    owners = BucketOwners(spec_.sparse_tables()[0].buckets,
                          static_cast<int>(ps_.size()));
  }
  for (size_t s = 0; s < ps_.size(); ++s) {
    proto::ShardInfo* shard = response.add_shards();
    shard->set_index(static_cast<int>(s));
    shard->set_address(ps_[s].address);
    for (uint32_t id : placement_[s]) shard->add_block_ids(id);
    for (uint32_t b = 0; b < owners.size(); ++b) {
      if (owners[b] == static_cast<int>(s)) shard->add_buckets(b);
    }
  }
  return response;
}

proto::ClusterStatusResponse ClusterState::Status() const {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  proto::ClusterStatusResponse response;
  response.set_placement_epoch(epoch_);
  response.set_uptime_seconds(absl::ToDoubleSeconds(now - start_));
  response.set_stop(stop_);
  response.set_stop_reason(stop_reason_);
  response.set_target_reached_seconds(target_reached_s_);
  response.set_target_reached_by(target_reached_by_);
  response.set_target_reached_value(target_reached_value_);
  for (const auto* group : {&ps_, &workers_, &standby_}) {
    for (const Member& m : *group) {
      proto::MemberStatus* out = response.add_members();
      out->set_role(MemberRoleName(m.role));
      out->set_index(m.index);
      out->set_address(m.address);
      out->set_alive(m.alive);
      out->set_registered(m.registered);
      out->set_seconds_since_heartbeat(
          m.registered ? absl::ToDoubleSeconds(now - m.last_heartbeat) : -1);
      *out->mutable_report() = m.report;
      for (int p : m.parts) out->add_parts(p);
      out->set_serving_index(m.role == MemberRole::kStandby ? m.serving_index : -1);
      out->set_replica_of(m.role == MemberRole::kStandby ? m.replica_of : -1);
      out->set_spare(m.spare);
      out->set_former_shard(m.spare ? m.former_shard : -1);
    }
  }
  uint64_t lost = 0, acked_lost = 0;
  bool final = true;
  for (const proto::ShardRecovery& r : recoveries_) {
    *response.add_recoveries() = r;
    lost += r.lost();
    acked_lost += r.acked_pushes_lost();
    final = final && r.loss_final();
  }
  response.set_updates_lost(lost);
  response.set_acked_pushes_lost(acked_lost);
  response.set_acked_loss_final(final);
  for (const proto::MemberOutage& o : outages_) *response.add_outages() = o;
  response.set_replication_factor(ReplicationFactor());
  if (response.replication_factor() >= 2 && epoch_ > 0) {
    for (const Member& ps : ps_) {
      proto::ShardReplication* r = response.add_shard_replication();
      r->set_shard(ps.index);
      const int backup = BackupOf(ps);
      r->set_backup_standby(backup);
      if (backup >= 0) r->set_backup_address(standby_[backup].address);
      r->set_in_sync(InSync(ps, backup));
      const bool open = ps.unreplicated_since != absl::InfinitePast();
      r->set_unreplicated_seconds(
          ps.unreplicated_seconds +
          (open ? absl::ToDoubleSeconds(now - ps.unreplicated_since) : 0));
      r->set_unreplicated_since(
          open ? absl::ToDoubleSeconds(ps.unreplicated_since - start_) : -1);
    }
  }
  return response;
}

int ClusterState::CheckLiveness() {
  int changed = 0;
  std::optional<Snapshot> snapshot;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    const absl::Duration timeout =
        absl::Seconds(options_.config.heartbeat.timeout_s);
    for (auto* group : {&ps_, &workers_, &standby_}) {
      for (Member& m : *group) {
        if (!m.alive || now - m.last_heartbeat <= timeout) continue;
        m.alive = false;
        ++changed;
        if (m.role == MemberRole::kWorker && m.report.finished()) {
          SPDLOG_LOGGER_INFO(L(), "worker {} at {} left after finishing",
                             m.index, m.address);
          continue;
        }
        SPDLOG_LOGGER_WARN(
            L(),
            "{} {} at {} is dead: no heartbeat for {:.1f} s (timeout {:.1f} s)",
            MemberRoleName(m.role), m.index, m.address,
            absl::ToDoubleSeconds(now - m.last_heartbeat),
            options_.config.heartbeat.timeout_s);
        OpenOutage(m);
        if (m.role == MemberRole::kWorker) HandOffParts(m);
        if (m.role == MemberRole::kPs) ReplaceShard(m);
      }
    }
    if (changed > 0) {
      AssignBackups();
      MaybeStop();
      snapshot = TakeSnapshot();
    }
  }
  Save(std::move(snapshot));
  return changed;
}

int ClusterState::HoldJudgement() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  int given = 0;
  for (auto* group : {&ps_, &workers_, &standby_}) {
    for (Member& m : *group) {
      if (!m.alive) continue;
      m.last_heartbeat = std::max(m.last_heartbeat, now);
      ++given;
    }
  }
  return given;
}

bool ClusterState::HearsNobody(absl::Duration silence) const {
  absl::MutexLock lock(&mu_);
  if (clock_->Now() - last_heard_ <= silence) return false;
  int expected = 0;
  for (const auto* group : {&ps_, &workers_, &standby_}) {
    for (const Member& m : *group) {
      const bool finished =
          m.role == MemberRole::kWorker && m.report.finished();
      if (m.alive && !finished) ++expected;
    }
  }
  return expected >= 2;
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
  state.set_placement_epoch(epoch_);
  state.set_last_incarnation(last_incarnation_);
  state.set_stop(stop_);
  state.set_stop_reason(stop_reason_);
  state.set_worker_pushes_uncountable(worker_pushes_uncountable_);
  for (const auto& shard : placement_) {
    auto* out = state.add_placement();
    for (uint32_t id : shard) out->add_block_ids(id);
  }
  for (const auto* group : {&ps_, &workers_, &standby_}) {
    for (const Member& m : *group) {
      proto::MemberRecord* r = state.add_members();
      r->set_role(MemberRoleName(m.role));
      r->set_index(m.index);
      r->set_address(m.address);
      r->set_registered(m.registered);
      for (int p : m.parts) r->add_parts(p);
      r->set_finished(m.report.finished());
      r->set_serving_index(m.serving_index);
      r->set_applied_total(m.applied_total);
      r->set_replica_of(m.replica_of);
      r->set_member_key(m.key);
      for (const std::string& k : m.retired_keys) r->add_retired_keys(k);
      r->set_incarnation(m.incarnation);
      r->set_push_key(m.push_key);
      r->set_spare(m.spare);
      r->set_former_shard(m.former_shard);
      r->set_unreplicated_seconds(m.unreplicated_seconds);
    }
  }
  for (const proto::ShardRecovery& r : recoveries_) *state.add_recoveries() = r;
  return snapshot;
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
  if (state->placement_size() != 0 &&
      state->placement_size() != static_cast<int>(ps_.size())) {
    return absl::FailedPreconditionError(
        absl::StrCat("coordinator state '", path, "' has ",
                     state->placement_size(), " shards but the config has ",
                     ps_.size(), " ps; move it away to start fresh"));
  }
  epoch_ = state->placement_epoch();
  last_incarnation_ = state->last_incarnation();
  stop_ = state->stop();
  stop_reason_ = state->stop_reason();
  for (const auto& shard : state->placement()) {
    placement_.emplace_back(shard.block_ids().begin(), shard.block_ids().end());
  }
  recoveries_.assign(state->recoveries().begin(), state->recoveries().end());
  worker_pushes_uncountable_ = state->worker_pushes_uncountable();
  int restored = 0;
  for (const proto::MemberRecord& r : state->members()) {
    const std::optional<MemberRole> role = ParseMemberRole(r.role());
    // Spare slots follow the configured standbys, in order.
    if (role == MemberRole::kStandby && r.spare() && r.registered() &&
        r.index() == static_cast<int>(standby_.size()) &&
        Spares() < MaxSpares()) {
      standby_.push_back({MemberRole::kStandby, r.index(), r.address()});
      standby_.back().spare = true;
    }
    Member* m = role.has_value() ? Find(*role, r.index()) : nullptr;
    if (m == nullptr || !r.registered()) continue;
    m->address = r.address();
    m->key = r.member_key();
    m->retired_keys.assign(r.retired_keys().begin(), r.retired_keys().end());
    m->incarnation = r.incarnation();
    m->push_key = r.push_key();
    Touch(*m);  // a full timeout to heartbeat again before being declared dead
    // A state file from before member keys: the member registers again (its
    // heartbeats get FailedPrecondition) and gets a key.
    if (m->key.empty()) m->registered = m->alive = false;
    m->parts.assign(r.parts().begin(), r.parts().end());
    m->report.set_finished(r.finished());
    m->serving_index = r.serving_index();
    m->replica_of = m->role == MemberRole::kStandby ? r.replica_of() : -1;
    m->applied_total = r.applied_total();
    m->spare = r.spare();
    m->former_shard = r.spare() ? r.former_shard() : -1;
    m->unreplicated_seconds = r.unreplicated_seconds();
    ++restored;
  }
  SPDLOG_LOGGER_INFO(L(),
                     "restored state from {}: placement epoch {}, {} members",
                     path, epoch_, restored);
  return absl::OkStatus();
}

}  // namespace downpour::coordinator
