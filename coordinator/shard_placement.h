// Where the model lives: the blocks and sparse buckets of each shard, the
// placement epoch, the standbys that back shards up (replication) and the
// take-overs of dead or restarted shards. Placement is computed once every ps
// of the config has registered (epoch 1); the epoch rises whenever a shard
// moves, so clients holding an old map get FAILED_PRECONDITION from the ps and
// re-read it. A part of ClusterState, which calls it under its lock.
//
//   ShardPlacement placement(config, spec, clock, start, &members,
//   &recoveries); placement.MaybePlace();          // after a ps registered
//   placement.ReplaceShard(dead_ps); // a standby takes the shard over
//   placement.AssignBackups();       // after any change of the standbys
#ifndef DOWNPOUR_COORDINATOR_SHARD_PLACEMENT_H_
#define DOWNPOUR_COORDINATOR_SHARD_PLACEMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/model_spec.h"
#include "coordinator/assignment.h"
#include "coordinator/bucket_moves.h"
#include "coordinator/membership.h"
#include "coordinator/recovery_log.h"
#include "proto/coordinator.pb.h"
#include "proto/coordinator_state.pb.h"

namespace downpour::coordinator {

// Single-threaded: ClusterState calls it under its lock.
class ShardPlacement {
 public:
  // `config` is copied from; `clock`, `members` and `recoveries` are not
  // owned and must outlive it. `start` is uptime zero. Warns when
  // cluster.replication 2 has fewer standbys than shards.
  ShardPlacement(const Config& config, ModelSpec spec, Clock* clock,
                 absl::Time start, Membership* members,
                 RecoveryLog* recoveries);

  ShardPlacement(const ShardPlacement&) = delete;
  ShardPlacement& operator=(const ShardPlacement&) = delete;

  // 0 until placed.
  uint64_t epoch() const { return epoch_; }
  // cluster.replication in effect: 1 without standby_ps.
  int ReplicationFactor() const;

  // Places the blocks (epoch 1) once every ps has registered.
  void MaybePlace();
  // Ps `ps` registered again after placement from `old_address`: the epoch
  // rises, the restart is recorded when the shard may have lost updates (a
  // new or dead process, another address, or fewer than `applied_total`
  // updates), and a standby serving the shard stops.
  void ShardRestarted(Member& ps, const std::string& old_address,
                      bool new_or_dead, uint64_t applied_total);
  // A new process registers for ps `ps` (from `address`, `applied_total`
  // updates restored) while the shard's backup holds an in-sync copy: the
  // backup takes over (logged). Returns the backup's address; "" when not
  // placed yet or no backup holds one (nothing changed).
  std::string HandToInSyncBackup(Member& ps, const std::string& address,
                                 uint64_t applied_total);
  // Dead shard `dead` goes to a standby (PickStandby: of its backups, the
  // in-sync one that holds the most), which serves it from its replica or
  // the checkpoint; the epoch rises. The shard's other backups stay its
  // backups and follow the new primary (which sends them a full cut first).
  // Logged either way.
  void ReplaceShard(Member& dead);
  // The job ended: every bucket move still in "copy" rolls back with `why`
  // (the owners do not change). Returns how many.
  int RollBackCopies(const std::string& why);
  // Standby `m` registered from a new process while its old one (`old_key`)
  // served a shard: that process is gone, so the shard fails over now
  // instead of after heartbeat.timeout_s.
  void EndServedLease(Member& m, const std::string& old_key);
  // Replication: gives every live shard with fewer than
  // cluster.replication - 1 backups free standbys until it has them (or none
  // is free), and frees the backups of dead or serving standbys; then notes
  // each shard's replication (time without an in-sync backup, logged changes).
  void AssignBackups();
  // A standby serving `ps`'s shard lives as long as the shard's heartbeats.
  void FollowShard(const Member& ps);

  // The standby backing up shard `ps` (-1: none): the first of BackupsOf.
  int BackupOf(const Member& ps) const;
  // Every live standby backing up shard `ps`, by index (cluster.replication
  // 3 names up to two).
  std::vector<int> BackupsOf(const Member& ps) const;
  // Shard `ps` has an in-sync backup (standby `backup`, BackupOf).
  bool InSync(const Member& ps, int backup) const;

  // A ps joined the job (Membership::AddPs, psctl add-ps): its shard holds
  // no blocks and no buckets until moves bring some; the epoch rises.
  void AddShard();

  // Live bucket moves (BucketMoves). MoveBuckets starts the moves a request
  // asks for (each logged): FailedPrecondition before placement or while a
  // shard to balance over is dead, else BucketMoves::Start's and Plan's
  // errors.
  absl::StatusOr<proto::MoveBucketsResponse> MoveBuckets(
      const proto::MoveBucketsRequest& request);
  // The move_progress of the heartbeat of `m` (a ps, or a standby serving a
  // shard); a move that switches raises the epoch. True when there is a
  // change to save.
  bool NoteMoveProgress(const Member& m);
  const BucketMoves& bucket_moves() const { return moves_; }

  // The placement map: each shard's address, blocks and buckets; while not
  // placed, the epoch 0 and which ps it waits for.
  proto::GetPlacementResponse Describe() const;
  // The epoch, and for a standby the shard it serves and backs up, for a ps
  // its backup.
  void AddTo(const Member& m, proto::HeartbeatResponse* response) const;
  // The epoch, the replication factor and each shard's replication.
  void AddStatus(absl::Time now, proto::ClusterStatusResponse* response) const;
  // The epoch, the placement and each ps record's unreplicated seconds
  // (Membership::SaveTo's records).
  void SaveTo(proto::CoordinatorState* state) const;
  // FailedPrecondition, naming `path`, when `state` has another number of
  // shards than the config (nothing changed then).
  absl::Status Restore(const proto::CoordinatorState& state,
                       const std::string& path);

 private:
  // Per shard (cluster.replication 2): the time without an in-sync backup.
  // Counted once the shard first had one, or from placement while no standby
  // was free for it; unreplicated_since is the open period's start
  // (InfinitePast: none open). logged: the state last logged.
  struct Replication {
    bool ever_in_sync = false;
    double unreplicated_seconds = 0;
    absl::Time unreplicated_since = absl::InfinitePast();
    std::string logged;
    // Since when it has had no backup named (a WARN waits a moment, so that
    // the standbys registering at start or a restart rejoining as a spare
    // are not reported).
    absl::Time no_backup_since = absl::InfinitePast();
  };
  // Per shard: whether it has an in-sync backup now; counts the time without
  // one, logs each change (WARN when it loses it, with the fix), and stamps
  // recoveries with the time a backup was in sync again.
  void NoteReplication();
  // Shard `ps`'s time without an in-sync backup; returns the period that
  // ended now (0: none).
  double CountUnreplicated(const Member& ps, bool in_sync, int backup,
                           absl::Time now);
  // Logs shard `ps`'s replication state when it changed.
  void LogReplication(const Member& ps, int backup, bool in_sync, double gap,
                      absl::Time now);
  std::vector<StandbySlot> StandbySlots() const;
  // Logs the backups of `shard` other than `to` (just promoted), which now
  // follow `to`.
  void LogFollowers(const Member& shard, const Member& to) const;
  // FailedPrecondition naming the first dead shard the request's moves
  // would copy from or to.
  absl::Status CheckMoveShardsAlive(
      const proto::MoveBucketsRequest& request) const;
  // FailedPrecondition, naming `path` and the fix, when the saved state is
  // another model's (its fingerprint, or its block ids in older files).
  absl::Status SameModel(const proto::CoordinatorState& state,
                         const std::string& path) const;
  // The moves `request` asks for: its own, or BucketMoves::Plan's.
  absl::StatusOr<std::vector<BucketMoves::Planned>> PlanMoves(
      const proto::MoveBucketsRequest& request) const;
  // The dense blocks as BucketMoves plans them: each one's shard and floats.
  BucketMoves::Blocks BlockOwners() const;
  // FailedPrecondition naming why when a move of dense blocks is refused
  // for this job (blocks_fixed_).
  absl::Status CheckBlocksMayMove() const;
  // The dense blocks of the moves that switched change shards.
  void SwitchBlocks(const std::vector<proto::BucketMove>& switched);
  // Seconds since start_ (BucketMove's times).
  double Uptime() const;
  // The shard `m` serves (a ps its own, a standby the one it took over; -1).
  int ShardServedBy(const Member& m) const;

  // Constant after construction.
  const ClusterSection cluster_;
  const double heartbeat_interval_s_;
  const double heartbeat_timeout_s_;
  const ModelSpec spec_;
  // Why dense blocks may not move in this job ("": they may): per-block
  // state the ps keeps for ssp/bsp rounds or delay compensation does not
  // travel with a block.
  const std::string blocks_fixed_;
  Clock* const clock_;
  const absl::Time start_;
  Membership* const members_;
  RecoveryLog* const recoveries_;

  uint64_t epoch_ = 0;
  std::vector<std::vector<uint32_t>> placement_;  // block ids per shard
  std::vector<Replication> replication_;          // entry i: shard i
  BucketMoves moves_;
};

}  // namespace downpour::coordinator

#endif  // DOWNPOUR_COORDINATOR_SHARD_PLACEMENT_H_
