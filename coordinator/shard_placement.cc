// Placement, backups and take-overs of shards.
#include "coordinator/shard_placement.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/sparse_keys.h"
#include "common/status_macros.h"
#include "coordinator/member_identity.h"

namespace downpour::coordinator {
namespace {

spdlog::logger* L() { return Log(Logger::kCoordinator); }

uint32_t SparseBuckets(const ModelSpec& spec) {
  return spec.sparse_tables().empty() ? 0 : spec.sparse_tables()[0].buckets;
}

}  // namespace

ShardPlacement::ShardPlacement(const Config& config, ModelSpec spec,
                               Clock* clock, absl::Time start,
                               Membership* members, RecoveryLog* recoveries)
    : cluster_(config.cluster),
      heartbeat_interval_s_(config.heartbeat.interval_s),
      heartbeat_timeout_s_(config.heartbeat.timeout_s),
      spec_(std::move(spec)),
      blocks_fixed_(
          config.training.consistency != ConsistencyMode::kAsync
              ? "training.consistency ssp and bsp keep per-block clocks and "
                "rounds on the ps, which do not move with a block"
          : config.optimizer.delay_compensation > 0
              ? "optimizer.delay_compensation keeps each worker's pulled "
                "values on the ps, which do not move with a block"
              : ""),
      clock_(clock),
      start_(start),
      members_(members),
      recoveries_(recoveries),
      replication_(config.cluster.ps.size()),
      moves_(SparseBuckets(spec_), static_cast<int>(config.cluster.ps.size())) {
  const ClusterSection& cluster = cluster_;
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

int ShardPlacement::ReplicationFactor() const {
  return cluster_.standby_ps.empty() ? 1 : cluster_.replication;
}

void ShardPlacement::MaybePlace() {
  if (epoch_ > 0) return;
  const std::vector<Member>& ps = members_->ps();
  for (const Member& m : ps) {
    if (!m.registered) return;
  }
  placement_ = PlaceBlocks(spec_, static_cast<int>(ps.size()));
  epoch_ = 1;
  std::vector<std::string> shards;
  for (size_t s = 0; s < placement_.size(); ++s) {
    int64_t floats = 0;
    for (uint32_t id : placement_[s]) floats += spec_.blocks()[id].length;
    shards.push_back(absl::StrFormat("ps %d: %d blocks, %.2f MB", s,
                                     placement_[s].size(), floats * 4 / 1e6));
  }
  SPDLOG_LOGGER_INFO(L(), "placement epoch 1: {} blocks over {} shards ({})",
                     spec_.blocks().size(), ps.size(),
                     absl::StrJoin(shards, "; "));
}

void ShardPlacement::ShardRestarted(Member& ps, const std::string& old_address,
                                    bool new_or_dead, uint64_t applied_total) {
  ++epoch_;
  SPDLOG_LOGGER_INFO(L(), "ps {} restarted at {}: placement epoch {}", ps.index,
                     ps.address, epoch_);
  // A new process serves the shard from its checkpoint: what the old one
  // acknowledged since is counted by it (acked_pushes_lost).
  if (new_or_dead || old_address != ps.address) {
    moves_.ShardGone(ps.index,
                     absl::StrCat("ps ", ps.index,
                                  " restarted (a new process "
                                  "at ",
                                  ps.address, ")"),
                     Uptime());
  }
  if (new_or_dead || old_address != ps.address ||
      applied_total < ps.applied_total) {
    recoveries_->Record(ps.index, old_address, ps.address, "restart",
                        ps.applied_total, applied_total);
  }
  ps.applied_total = applied_total;
  ps.report.set_replicated(false);  // the new process has not synced yet
  // A standby that served this shard (it took it over) no longer does.
  for (Member& s : members_->standby()) {
    if (s.serving_index == ps.index) {
      s.serving_index = -1;
      s.alive = false;
    }
  }
}

std::string ShardPlacement::HandToInSyncBackup(Member& ps,
                                               const std::string& address,
                                               uint64_t applied_total) {
  if (epoch_ == 0) return "";
  const std::vector<StandbySlot> slots = StandbySlots();
  const int picked = PickStandby(slots, ps.index);
  if (picked < 0 || !HoldsReplicaOf(slots[picked], ps.index)) return "";
  SPDLOG_LOGGER_WARN(
      L(),
      "ps {} registers again from {} (a new process, {} updates "
      "restored; the shard last reported {}), and its backup standby "
      "{} holds every acknowledged push: the backup takes over",
      ps.index, address, applied_total, ps.applied_total, picked);
  std::string to = members_->standby()[picked].address;
  ReplaceShard(ps);
  AssignBackups();
  return to;
}

int ShardPlacement::RollBackCopies(const std::string& why) {
  int rolled = 0;
  for (int shard = 0; shard < moves_.shards(); ++shard) {
    rolled += moves_.ShardGone(shard, why, Uptime());
  }
  return rolled;
}

void ShardPlacement::ReplaceShard(Member& dead) {
  if (epoch_ == 0) return;
  const std::vector<StandbySlot> slots = StandbySlots();
  const int picked = PickStandby(slots, dead.index);
  moves_.ShardGone(
      dead.index,
      absl::StrCat("ps ", dead.index, " at ", dead.address, " died",
                   picked < 0 ? ""
                              : absl::StrCat(" (standby ", picked,
                                             " takes the shard over)")),
      Uptime());
  if (picked < 0) {
    SPDLOG_LOGGER_WARN(L(),
                       "ps {} is dead and no standby is free: its blocks are "
                       "unavailable until a ps is started with --index {}",
                       dead.index, dead.index);
    return;
  }
  // A standby that served the shard before (it took it over and died, or
  // was restarted) serves it no longer.
  for (Member& s : members_->standby()) {
    if (s.serving_index == dead.index) s.serving_index = -1;
  }
  Member& standby = members_->standby()[picked];
  const bool from_replica = HoldsReplicaOf(slots[picked], dead.index);
  if (standby.replica_of >= 0 && standby.replica_of != dead.index) {
    SPDLOG_LOGGER_WARN(L(),
                       "standby {} backed up shard {}, which runs unreplicated "
                       "now (no other standby is free)",
                       standby.index, standby.replica_of);
  }
  standby.replica_of = -1;
  standby.serving_index = dead.index;
  recoveries_->Record(dead.index, dead.address, standby.address,
                      from_replica ? "replica" : "checkpoint",
                      dead.applied_total, std::nullopt);
  const std::string old_address = dead.address;
  dead.address = standby.address;
  // The standby's process speaks for the shard now; the replaced process's
  // heartbeats are told so.
  members_->Retire(dead);
  dead.key = standby.key;
  dead.incarnation = standby.incarnation;
  members_->CloseOutage(dead, "taken over");
  dead.alive = true;  // give the standby a full timeout to start serving
  dead.last_heartbeat = clock_->Now();
  dead.lease_heard = standby.lease_heard;  // the standby's process serves it
  dead.report.set_replicated(false);       // the new server has no backup yet
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
  LogFollowers(dead, standby);
}

void ShardPlacement::LogFollowers(const Member& shard, const Member& to) const {
  for (const Member& s : members_->standby()) {
    if (s.replica_of != shard.index || s.index == to.index) continue;
    SPDLOG_LOGGER_INFO(
        L(),
        "standby {} at {} (it held {} updates of shard {}; the promoted "
        "standby {} held {}) backs the shard up from its new primary, which "
        "sends it a full copy first",
        s.index, s.address, s.report.replica_applied_total(), shard.index,
        to.index, to.report.replica_applied_total());
  }
}

void ShardPlacement::EndServedLease(Member& m, const std::string& old_key) {
  const int shard = m.serving_index;
  m.serving_index = -1;
  if (shard < 0 || shard >= static_cast<int>(members_->ps().size()) ||
      old_key.empty()) {
    return;
  }
  Member& ps = members_->ps()[shard];
  // Someone else speaks for the shard by now.
  if (!SameKey(ps.key, old_key) || !ps.alive) return;
  SPDLOG_LOGGER_WARN(L(),
                     "standby {} registered again from {}: its old process, "
                     "which served shard {}, is gone, so the shard fails over "
                     "now (not after the {:.1f} s heartbeat timeout)",
                     m.index, m.address, shard, heartbeat_timeout_s_);
  ps.alive = false;
  ReplaceShard(ps);
}

// A dead shard goes to an idle standby, which loads the shard's checkpoint.
std::vector<StandbySlot> ShardPlacement::StandbySlots() const {
  // A standby silent for longer than this has likely died with the shard
  // it backs up, though it is not judged dead yet.
  const absl::Duration quiet = absl::Seconds(
      std::max(2 * heartbeat_interval_s_, heartbeat_timeout_s_ / 2));
  const absl::Time now = clock_->Now();
  std::vector<StandbySlot> slots;
  for (const Member& s : members_->standby()) {
    slots.push_back({s.alive, s.serving_index, s.replica_of,
                     s.replica_of >= 0 && s.report.has_replica() &&
                         s.report.replica_shard() == s.replica_of,
                     s.address, s.former_shard,
                     s.report.replica_applied_total(),
                     now - s.last_heartbeat < quiet});
  }
  return slots;
}

void ShardPlacement::AssignBackups() {
  if (cluster_.replication < 2 || epoch_ == 0) return;
  std::vector<Member>& ps_members = members_->ps();
  std::vector<Member>& standby = members_->standby();
  for (Member& s : standby) {
    const bool own = s.replica_of >= 0 &&
                     s.replica_of < static_cast<int>(ps_members.size()) &&
                     ps_members[s.replica_of].address == s.address;
    if ((!s.alive || s.serving_index >= 0 || own) && s.replica_of >= 0) {
      SPDLOG_LOGGER_WARN(L(), "standby {} no longer backs up shard {} ({})",
                         s.index, s.replica_of,
                         !s.alive               ? "it is dead"
                         : s.serving_index >= 0 ? "it serves a shard"
                                                : "the shard is served at its "
                                                  "own address");
      s.replica_of = -1;
    }
  }
  for (const Member& ps : ps_members) {
    if (!ps.alive) continue;  // its backups are kept: one takes it over
    // (The loop above freed the backups of dead and serving standbys.)
    while (static_cast<int>(BackupsOf(ps).size()) < cluster_.replication - 1) {
      const int picked = PickBackup(StandbySlots(), ps.index, ps.address);
      if (picked < 0) break;  // none free: fewer backups (logged)
      standby[picked].replica_of = ps.index;
      SPDLOG_LOGGER_INFO(L(), "standby {} at {} backs up shard {} (ps at {})",
                         picked, standby[picked].address, ps.index, ps.address);
    }
  }
  NoteReplication();
}

void ShardPlacement::FollowShard(const Member& ps) {
  for (Member& s : members_->standby()) {
    if (s.serving_index == ps.index && s.address == ps.address) {
      s.alive = true;
      s.last_heartbeat = ps.last_heartbeat;
    }
  }
}

int ShardPlacement::BackupOf(const Member& ps) const {
  const std::vector<int> backups = BackupsOf(ps);
  return backups.empty() ? -1 : backups[0];
}

std::vector<int> ShardPlacement::BackupsOf(const Member& ps) const {
  std::vector<int> backups;
  for (const Member& s : members_->standby()) {
    if (s.alive && s.serving_index < 0 && s.replica_of == ps.index) {
      backups.push_back(s.index);
    }
  }
  return backups;
}

bool ShardPlacement::InSync(const Member& ps, int backup) const {
  return ps.alive && backup >= 0 && ps.report.replicated();
}

void ShardPlacement::NoteReplication() {
  if (ReplicationFactor() < 2 || epoch_ == 0) return;
  const absl::Time now = clock_->Now();
  for (Member& ps : members_->ps()) {
    const int backup = BackupOf(ps);
    // With two backups (replication 3) one in sync is enough not to count
    // the shard unreplicated.
    const bool in_sync =
        InSync(ps, backup) ||
        (ps.alive && backup >= 0 && ps.report.backups_in_sync() > 0);
    const double gap = CountUnreplicated(ps, in_sync, backup, now);
    if (in_sync) recoveries_->NoteBackupInSync(ps.index);
    LogReplication(ps, backup, in_sync, gap, now);
  }
}

double ShardPlacement::CountUnreplicated(const Member& ps, bool in_sync,
                                         int backup, absl::Time now) {
  Replication& r = replication_[ps.index];
  if (in_sync) r.ever_in_sync = true;
  // The first sync after placement is not counted while a backup is
  // named; a shard no standby was free for counts from the start.
  const bool counting = !in_sync && (r.ever_in_sync || backup < 0);
  const bool open = r.unreplicated_since != absl::InfinitePast();
  double gap = 0;
  if (counting && !open) r.unreplicated_since = now;
  if (!counting && open) {
    gap = absl::ToDoubleSeconds(now - r.unreplicated_since);
    r.unreplicated_seconds += gap;
    r.unreplicated_since = absl::InfinitePast();
  }
  return gap;
}

void ShardPlacement::LogReplication(const Member& ps, int backup, bool in_sync,
                                    double gap, absl::Time now) {
  Replication& r = replication_[ps.index];
  const std::string state = in_sync       ? "in sync"
                            : backup >= 0 ? "syncing"
                                          : "none";
  if (state != "none") {
    r.no_backup_since = absl::InfinitePast();
  } else if (r.no_backup_since == absl::InfinitePast()) {
    r.no_backup_since = now;
  }
  if (state == r.logged || state == "syncing") return;
  if (state == "none" &&
      now - r.no_backup_since < absl::Seconds(2 * heartbeat_interval_s_)) {
    return;  // said on a later call if it lasts
  }
  r.logged = state;
  const std::vector<Member>& standby = members_->standby();
  if (state == "in sync") {
    SPDLOG_LOGGER_INFO(L(),
                       "shard {} is backed up: standby {} at {} holds an "
                       "in-sync copy{}",
                       ps.index, backup, standby[backup].address,
                       gap > 0 ? absl::StrFormat(" (%.2f s without one)", gap)
                               : std::string());
    return;
  }
  int free = 0;
  for (const Member& s : standby) {
    free += s.alive && s.serving_index < 0 && s.replica_of < 0;
  }
  SPDLOG_LOGGER_WARN(
      L(),
      "shard {} (ps at {}) has NO BACKUP: no standby is free ({} "
      "configured in cluster.standby_ps, {} spares; {} alive and idle). "
      "Until one is, losing its ps loses the pushes acknowledged since its "
      "last checkpoint. A restarted ps rejoins as a spare and backs it up; "
      "or start one: ps_server --standby --index N",
      ps.index, ps.address, cluster_.standby_ps.size(), members_->Spares(),
      free);
}

proto::GetPlacementResponse ShardPlacement::Describe() const {
  const std::vector<Member>& ps = members_->ps();
  proto::GetPlacementResponse response;
  response.set_epoch(epoch_);
  if (epoch_ == 0) {
    std::vector<std::string> missing;
    for (const Member& m : ps) {
      if (!m.registered) {
        missing.push_back(absl::StrCat("ps ", m.index, " (", m.address, ")"));
      }
    }
    response.set_waiting_for(
        absl::StrCat("registration of ", absl::StrJoin(missing, ", ")));
    return response;
  }
  // Sparse tables' keys go by hash bucket; each ps holds its buckets.
  const std::vector<int>& owners = moves_.owners();
  for (size_t s = 0; s < ps.size(); ++s) {
    proto::ShardInfo* shard = response.add_shards();
    shard->set_index(static_cast<int>(s));
    shard->set_address(ps[s].address);
    for (uint32_t id : placement_[s]) shard->add_block_ids(id);
    for (uint32_t b = 0; b < owners.size(); ++b) {
      if (owners[b] == static_cast<int>(s)) shard->add_buckets(b);
    }
  }
  // The moves in progress, so that a destination (re)starting to serve a
  // switched move's buckets copies their last rows first.
  for (const proto::BucketMove& m : moves_.moves()) {
    if (!moves_.InProgress(m)) continue;
    proto::BucketMove* move = response.add_moves();
    *move = m;
    move->set_from_address(ps[m.from_shard()].address);
  }
  return response;
}

void ShardPlacement::AddTo(const Member& m,
                           proto::HeartbeatResponse* response) const {
  const bool standby = m.role == MemberRole::kStandby;
  response->set_placement_epoch(epoch_);
  response->set_take_over_index(standby ? m.serving_index : -1);
  response->set_replica_of(standby ? m.replica_of : -1);
  response->set_backup_standby(-1);
  const int shard = ShardServedBy(m);
  if (shard >= 0) {
    const std::vector<Member>& ps = members_->ps();
    for (proto::BucketMove& move : moves_.MovesOf(shard, /*in=*/true)) {
      move.set_from_address(ps[move.from_shard()].address);
      *response->add_moves_in() = std::move(move);
    }
    for (proto::BucketMove& move : moves_.MovesOf(shard, /*in=*/false)) {
      move.set_from_address(m.address);
      *response->add_moves_out() = std::move(move);
    }
  }
  if (m.role != MemberRole::kPs) return;
  const std::vector<Member>& standbys = members_->standby();
  for (int b : BackupsOf(m)) {
    response->add_backup_addresses(standbys[b].address);
    response->add_backup_standbys(b);
  }
  // The first backup in the fields replication 2 always sent.
  if (response->backup_standbys_size() > 0) {
    response->set_backup_address(response->backup_addresses(0));
    response->set_backup_standby(response->backup_standbys(0));
  }
}

void ShardPlacement::AddStatus(absl::Time now,
                               proto::ClusterStatusResponse* response) const {
  response->set_placement_epoch(epoch_);
  response->set_replication_factor(ReplicationFactor());
  // In progress first, then the ended ones, newest last.
  for (const proto::BucketMove& m : moves_.moves()) {
    if (moves_.InProgress(m)) *response->add_bucket_moves() = m;
  }
  for (const proto::BucketMove& m : moves_.moves()) {
    if (!moves_.InProgress(m)) *response->add_bucket_moves() = m;
  }
  if (response->replication_factor() < 2 || epoch_ == 0) return;
  for (const Member& ps : members_->ps()) {
    const Replication& rep = replication_[ps.index];
    proto::ShardReplication* r = response->add_shard_replication();
    r->set_shard(ps.index);
    const int backup = BackupOf(ps);
    r->set_backup_standby(backup);
    if (backup >= 0) r->set_backup_address(members_->standby()[backup].address);
    for (int b : BackupsOf(ps)) {
      r->add_backup_standbys(b);
      r->add_backup_addresses(members_->standby()[b].address);
    }
    r->set_in_sync(InSync(ps, backup));
    r->set_backups_in_sync(ps.alive && backup >= 0 ? ps.report.backups_in_sync()
                                                   : 0);
    const bool open = rep.unreplicated_since != absl::InfinitePast();
    r->set_unreplicated_seconds(
        rep.unreplicated_seconds +
        (open ? absl::ToDoubleSeconds(now - rep.unreplicated_since) : 0));
    r->set_unreplicated_since(
        open ? absl::ToDoubleSeconds(rep.unreplicated_since - start_) : -1);
  }
}

void ShardPlacement::SaveTo(proto::CoordinatorState* state) const {
  state->set_placement_epoch(epoch_);
  state->set_model_fingerprint(spec_.Fingerprint());
  for (const auto& shard : placement_) {
    auto* out = state->add_placement();
    for (uint32_t id : shard) out->add_block_ids(id);
  }
  for (proto::MemberRecord& r : *state->mutable_members()) {
    const bool ps = r.role() == MemberRoleName(MemberRole::kPs) &&
                    r.index() >= 0 &&
                    r.index() < static_cast<int>(replication_.size());
    r.set_unreplicated_seconds(ps ? replication_[r.index()].unreplicated_seconds
                                  : 0);
  }
  moves_.SaveTo(state);
}

absl::Status ShardPlacement::SameModel(const proto::CoordinatorState& state,
                                       const std::string& path) const {
  constexpr char fix[] =
      ": delete it (or set coordinator.state_dir to another folder) to start "
      "this job fresh, or run the job it was written for";
  if (state.model_fingerprint() != 0 &&
      state.model_fingerprint() != spec_.Fingerprint()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "coordinator state '", path,
        "' is another model's (block layout fingerprint ",
        absl::Hex(state.model_fingerprint()), "; this config's model is ",
        absl::Hex(spec_.Fingerprint()), ")", fix));
  }
  // A file from before the fingerprint: its blocks must be this model's.
  std::set<uint32_t> ids;
  for (const auto& shard : state.placement()) {
    ids.insert(shard.block_ids().begin(), shard.block_ids().end());
  }
  const size_t blocks = spec_.blocks().size();
  if (!ids.empty() && (ids.size() != blocks || *ids.rbegin() != blocks - 1)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "coordinator state '", path, "' places ", ids.size(),
        " blocks, ids up to ", *ids.rbegin(), ", but this config's model has ",
        blocks, " blocks: it is another model's", fix));
  }
  return absl::OkStatus();
}

absl::Status ShardPlacement::Restore(const proto::CoordinatorState& state,
                                     const std::string& path) {
  const size_t shards = members_->ps().size();
  if (state.placement_size() != 0 &&
      state.placement_size() != static_cast<int>(shards)) {
    return absl::FailedPreconditionError(
        absl::StrCat("coordinator state '", path, "' has ",
                     state.placement_size(), " shards but the config has ",
                     shards, " ps; move it away to start fresh"));
  }
  RETURN_IF_ERROR(SameModel(state, path));
  epoch_ = state.placement_epoch();
  for (const auto& shard : state.placement()) {
    placement_.emplace_back(shard.block_ids().begin(), shard.block_ids().end());
  }
  replication_.resize(shards);  // with the ps that joined
  while (moves_.shards() < static_cast<int>(shards)) moves_.AddShard();
  for (const proto::MemberRecord& r : state.members()) {
    if (r.role() != MemberRoleName(MemberRole::kPs) || !r.registered() ||
        r.index() < 0 || r.index() >= static_cast<int>(shards)) {
      continue;
    }
    replication_[r.index()].unreplicated_seconds = r.unreplicated_seconds();
  }
  moves_.Restore(state, Uptime());
  return absl::OkStatus();
}

void ShardPlacement::AddShard() {
  placement_.emplace_back();
  replication_.emplace_back();
  moves_.AddShard();
  ++epoch_;
  const Member& ps = members_->ps().back();
  SPDLOG_LOGGER_INFO(L(),
                     "ps {} joins the job from {}: a shard with no blocks and "
                     "no buckets (psctl add-ps moves buckets to it); placement "
                     "epoch {}",
                     ps.index, ps.address, epoch_);
}

double ShardPlacement::Uptime() const {
  return absl::ToDoubleSeconds(clock_->Now() - start_);
}

int ShardPlacement::ShardServedBy(const Member& m) const {
  if (m.role == MemberRole::kPs) return m.index;
  if (m.role == MemberRole::kStandby) return m.serving_index;
  return -1;
}

absl::StatusOr<proto::MoveBucketsResponse> ShardPlacement::MoveBuckets(
    const proto::MoveBucketsRequest& request) {
  if (epoch_ == 0) {
    return absl::FailedPreconditionError(
        "move buckets: the placement is not made yet (every ps of cluster.ps "
        "must register first); try again once the job runs");
  }
  const std::vector<Member>& ps = members_->ps();
  RETURN_IF_ERROR(CheckMoveShardsAlive(request));
  proto::MoveBucketsResponse response;
  ASSIGN_OR_RETURN(const std::vector<BucketMoves::Planned> plan,
                   PlanMoves(request));
  const BucketMoves::Blocks blocks = BlockOwners();
  const std::string reason =
      request.balance()
          ? (request.drain_shard() >= 0
                 ? absl::StrCat("drain shard ", request.drain_shard())
                 : std::string("balance"))
          : std::string("psctl move-buckets");
  std::vector<std::string> lines;
  for (const BucketMoves::Planned& p : plan) {
    ASSIGN_OR_RETURN(
        std::vector<proto::BucketMove> started,
        moves_.Start(p.buckets, p.to, reason, Uptime(), p.blocks, blocks));
    for (proto::BucketMove& m : started) {
      lines.push_back(absl::StrFormat("move %d: %s from shard %d to shard %d",
                                      m.id(), DescribeMoved(m), m.from_shard(),
                                      m.to_shard()));
      m.set_from_address(ps[m.from_shard()].address);
      *response.add_started() = std::move(m);
    }
  }
  response.set_plan(lines.empty()
                        ? "nothing to move: the buckets and blocks are even"
                        : absl::StrJoin(lines, "\n"));
  return response;
}

absl::StatusOr<std::vector<BucketMoves::Planned>> ShardPlacement::PlanMoves(
    const proto::MoveBucketsRequest& request) const {
  if (!request.balance()) {
    if (request.blocks_size() > 0) RETURN_IF_ERROR(CheckBlocksMayMove());
    return std::vector<BucketMoves::Planned>{
        {-1,
         request.to_shard(),
         {request.buckets().begin(), request.buckets().end()},
         {request.blocks().begin(), request.blocks().end()}}};
  }
  const std::vector<Member>& ps = members_->ps();
  std::vector<bool> live;
  for (const Member& m : ps) live.push_back(m.alive);
  const int drain = request.drain_shard();
  if (drain >= static_cast<int>(ps.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "drain: shard ", drain, " does not exist (", ps.size(), " shards)"));
  }
  if (drain >= 0 && !placement_[drain].empty()) {
    RETURN_IF_ERROR(CheckBlocksMayMove());
  }
  // Where blocks may not move, a balance evens the buckets only.
  return moves_.Plan(
      live, drain,
      blocks_fixed_.empty() ? BlockOwners() : BucketMoves::Blocks());
}

BucketMoves::Blocks ShardPlacement::BlockOwners() const {
  BucketMoves::Blocks blocks;
  blocks.owners.assign(spec_.blocks().size(), -1);
  for (const BlockSpec& b : spec_.blocks()) blocks.floats.push_back(b.length);
  for (size_t s = 0; s < placement_.size(); ++s) {
    for (uint32_t id : placement_[s]) {
      if (id < blocks.owners.size()) blocks.owners[id] = static_cast<int>(s);
    }
  }
  return blocks;
}

absl::Status ShardPlacement::CheckBlocksMayMove() const {
  if (blocks_fixed_.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "move dense blocks: ", blocks_fixed_,
      "; the blocks stay where they are (buckets of sparse rows still move)"));
}

void ShardPlacement::SwitchBlocks(
    const std::vector<proto::BucketMove>& switched) {
  for (const proto::BucketMove& m : switched) {
    if (m.blocks_size() == 0) continue;
    const std::set<uint32_t> moved(m.blocks().begin(), m.blocks().end());
    std::vector<uint32_t>& from = placement_[m.from_shard()];
    from.erase(std::remove_if(from.begin(), from.end(),
                              [&](uint32_t id) { return moved.count(id) > 0; }),
               from.end());
    std::vector<uint32_t>& to = placement_[m.to_shard()];
    to.insert(to.end(), moved.begin(), moved.end());
    std::sort(to.begin(), to.end());
  }
}

absl::Status ShardPlacement::CheckMoveShardsAlive(
    const proto::MoveBucketsRequest& request) const {
  const std::vector<Member>& ps = members_->ps();
  std::vector<int> shards;
  if (request.balance()) {
    for (const Member& m : ps) shards.push_back(m.index);
  } else {
    if (request.to_shard() >= 0 &&
        request.to_shard() < static_cast<int>(ps.size())) {
      shards.push_back(request.to_shard());
    }
    for (uint32_t b : request.buckets()) {
      if (b < moves_.buckets()) shards.push_back(moves_.owners()[b]);
    }
    const std::vector<int> block_owners = BlockOwners().owners;
    for (uint32_t b : request.blocks()) {
      if (b < block_owners.size() && block_owners[b] >= 0) {
        shards.push_back(block_owners[b]);
      }
    }
  }
  for (int s : shards) {
    if (ps[s].alive) continue;
    return absl::FailedPreconditionError(absl::StrCat(
        "move buckets: shard ", s, " (ps at ", ps[s].address,
        ") is dead: wait until it is back or taken over (psctl status), "
        "then ask again"));
  }
  return absl::OkStatus();
}

bool ShardPlacement::NoteMoveProgress(const Member& m) {
  const int shard = ShardServedBy(m);
  if (shard < 0 || m.report.move_progress_size() == 0) return false;
  const BucketMoves::Changes changes =
      moves_.Progress(shard, m.report.move_progress(), epoch_ + 1, Uptime());
  if (changes.switched > 0) {
    SwitchBlocks(changes.switched_moves);
    ++epoch_;
    SPDLOG_LOGGER_INFO(L(), "placement epoch {}: buckets switched to shard {}",
                       epoch_, shard);
  }
  return changes.changed;
}

}  // namespace downpour::coordinator
