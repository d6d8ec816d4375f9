// The coordinator's core: membership, heartbeats, placement, data partitions,
// failure handling and job state, each in a part of its own (see below).
//
// Plain C++ (no gRPC): the Coordinator service adapter forwards each RPC here,
// and tests drive it directly with an injected clock. With
// coordinator.state_dir set, every change is written to disk (atomically) and a
// restarted coordinator picks up where it was.
#ifndef DOWNPOUR_COORDINATOR_CLUSTER_STATE_H_
#define DOWNPOUR_COORDINATOR_CLUSTER_STATE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/model_spec.h"
#include "coordinator/data_part_table.h"
#include "coordinator/job_progress.h"
#include "coordinator/membership.h"
#include "coordinator/recovery_log.h"
#include "coordinator/shard_placement.h"
#include "coordinator/state_file.h"
#include "proto/coordinator.pb.h"
#include "proto/coordinator_state.pb.h"

namespace downpour::coordinator {

// Thread-safe. The conductor of the coordinator: it keeps the one lock and the
// order of each request's steps; the work is done by its parts (Membership,
// DataPartTable, RecoveryLog, ShardPlacement, JobProgress), called under it.
class ClusterState {
 public:
  struct Options {
    Config config;
    // Source of time for heartbeats, timeouts and uptime; nullptr =
    // Clock::Real(). Tests advance a FakeClock instead of sleeping. Not owned.
    Clock* clock = nullptr;
    // Asks the daemon at `address` which member incarnation it holds (its
    // Status counter member_incarnation; 0 for none yet), with a short
    // deadline; nullopt when nobody answers there. A standby or spare, which
    // may be made a shard's backup, registers only an address where a
    // daemon answers; a registration from a live member's own address is let
    // in before the lease runs out only when the daemon there answers as
    // another process. Silence decides nothing (leases do). nullptr: not
    // asked (unit tests).
    std::function<std::optional<uint64_t>(const std::string& address)> probe;
  };

  // Loads the saved state from coordinator.state_dir when there is one (no file
  // there is a first start). Errors (never Unavailable): InvalidArgument for a
  // bad model; FailedPrecondition when the file cannot be read or was written
  // for another number of ps, DataLoss when it cannot be parsed; each message
  // names the file and says how to start fresh.
  static absl::StatusOr<std::unique_ptr<ClusterState>> Create(Options options);

  // Spare slots (ps that rejoined as standbys) beyond cluster.standby_ps: at
  // most this many more than there are ps.
  static constexpr size_t kExtraSpares = Membership::kExtraSpares;
  // Ps that join a running job (--join, psctl add-ps): at most this many.
  static constexpr size_t kMaxJoinedPs = 64;

  ClusterState(const ClusterState&) = delete;
  ClusterState& operator=(const ClusterState&) = delete;

  // Each registered process gets a secret member key and an incarnation
  // (the response), which its heartbeats must carry.
  //
  // InvalidArgument (nothing changed) for an index outside the config's ps /
  // standby_ps / workers lists, a missing address, or a string over its bound
  // (coordinator/member_identity.h). While the index belongs to a member
  // that heartbeated within its lease (heartbeat.timeout_s) and the request
  // does not carry that member's key, AlreadyExists for a ps and Unavailable
  // (retried) for a standby: a second daemon never takes a live member's
  // place, and a stranger cannot make a live one stand down. The same
  // process registering again (its key) keeps its key and incarnation; a new
  // process (the old one silent for its lease) gets new ones, and the old
  // key is retired: its
  // heartbeats are told `replaced`. A ps that registers again (restarted)
  // gets the placement epoch bumped, so clients re-read the map; the updates
  // its restart lost are recorded (a ShardRecovery). A worker that registers
  // gets its own data part back, plus any part left without a living worker.
  // A worker that joins (RegisterWorkerRequest.join) gets the next free slot
  // of cluster.max_workers (RegisterWorkerResponse.index; ResourceExhausted
  // naming cluster.max_workers when none is free) and parts from the workers
  // holding the most (DataPartTable::Join), as it does when it registers
  // again (restarted: join false, its index). A drained worker registering
  // again without join: FailedPrecondition (its slot stays drained).
  absl::StatusOr<proto::RegisterServerResponse> RegisterServer(
      const proto::RegisterServerRequest& request) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<proto::RegisterWorkerResponse> RegisterWorker(
      const proto::RegisterWorkerRequest& request) ABSL_LOCKS_EXCLUDED(mu_);

  // FailedPrecondition for a member that never registered (it should register
  // first: the coordinator may have restarted without state); InvalidArgument
  // for a bad role or a string over its bound; PermissionDenied ("heartbeat
  // for worker 2 is not from its registered process") when member_key is not
  // the member's current or a retired key; nothing is changed by any error.
  // A retired key (a process that was replaced) gets only `replaced`. The
  // reply tells a standby which shard to take over, a worker its current data
  // parts and their saved positions (a worker's report of its positions is
  // kept as DataPartTable::NotePositions says), a ps and a standby the
  // workers' incarnations.
  absl::StatusOr<proto::HeartbeatResponse> Heartbeat(
      const proto::HeartbeatRequest& request) ABSL_LOCKS_EXCLUDED(mu_);

  proto::GetPlacementResponse Placement() const ABSL_LOCKS_EXCLUDED(mu_);

  // Starts live bucket moves (psctl move-buckets, add-ps, drain-ps; saved):
  // ShardPlacement::MoveBuckets's errors, nothing started on one.
  absl::StatusOr<proto::MoveBucketsResponse> MoveBuckets(
      const proto::MoveBucketsRequest& request) ABSL_LOCKS_EXCLUDED(mu_);
  proto::ClusterStatusResponse Status() const ABSL_LOCKS_EXCLUDED(mu_);

  // psctl drain-worker: worker `index`'s data parts go to the alive
  // unfinished other workers (DataPartTable::Drain), and it is marked
  // drained (saved): finished for the job whatever it reports, told
  // HeartbeatResponse.drained, its death moves nothing. Errors (nothing
  // changed): Membership::MayDrain's.
  absl::StatusOr<proto::DrainWorkerResponse> DrainWorker(int index)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Marks members silent for longer than heartbeat.timeout_s dead (and logs
  // it), hands a dead worker's data parts to the living workers, and gives a
  // dead shard to an idle standby while the job runs (a ps silent after the
  // job ended is waited for: it writes the final checkpoint). Returns how
  // many members changed state.
  int CheckLiveness() ABSL_LOCKS_EXCLUDED(mu_);

  // The coordinator itself stalled for `stalled` (a pause, SIGSTOP, CPU
  // starvation): every live member gets a fresh heartbeat.timeout_s before it
  // is judged, so nobody is declared dead for the coordinator's own silence.
  void GiveGrace(absl::Duration stalled) ABSL_LOCKS_EXCLUDED(mu_);

  // True when at least two live members (finished workers aside) are
  // expected to heartbeat and no member's registration or heartbeat has
  // arrived for longer than `silence`: the
  // coordinator hears nobody, which is far likelier its own network cut off
  // than every member dead at once (coordinator/coordinator_node.cc then
  // holds its judgement with HoldJudgement).
  bool HearsNobody(absl::Duration silence) const ABSL_LOCKS_EXCLUDED(mu_);

  // Every live member gets a fresh heartbeat.timeout_s before it is judged
  // (as GiveGrace, without its log line); returns how many.
  int HoldJudgement() ABSL_LOCKS_EXCLUDED(mu_);

  // Saves the state as it is now (no-op without coordinator.state_dir). The
  // coordinator calls it as it stops, after its last heartbeat: the workers'
  // final positions are not left to the save throttle (PositionSaveDue).
  // Marks the state stopped_cleanly: a coordinator restored from it gives the
  // members no lease (their processes stopped with the job).
  void SaveNow() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The state to save, numbered in the order it was taken.
  struct Snapshot {
    uint64_t sequence = 0;
    proto::CoordinatorState state;
  };

  ClusterState(Options options, ModelSpec spec);

  // Whether a registration of `role` `index` carrying `key` may go on:
  // InvalidArgument for an index outside the config; while the member's
  // registered process holds its lease (it heartbeated within
  // heartbeat.timeout_s), AlreadyExists for a ps and Unavailable otherwise
  // (LeaseAllowsTakeOver), unless the request comes from the member's own
  // address and a daemon answers there as another process (Options::probe:
  // restarted in place, the old process lost its port). No answer never
  // ends a lease. OK does not change anything.
  absl::Status MayRegister(MemberRole role, int index, const std::string& key,
                           const std::string& address) ABSL_LOCKS_EXCLUDED(mu_);
  // Unavailable unless a daemon answers at `address` (Options::probe).
  absl::Status AnswersAt(const std::string& address) const;
  // A new ps process for a shard whose backup holds an in-sync copy: the
  // backup takes over (saved) and the registration is refused
  // (AlreadyExists). OK: nothing changed.
  absl::Status HandToInSyncBackup(const proto::RegisterServerRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A ps started with --join: the next shard index (a new ps slot and shard,
  // saved), or the one it got before from the same address; the request to
  // register with that index. FailedPrecondition before placement.
  absl::StatusOr<proto::RegisterServerRequest> Join(
      const proto::RegisterServerRequest& request) ABSL_LOCKS_EXCLUDED(mu_);
  // A worker started with --join: the slot it takes (Membership::JoinWorker,
  // reserved at once) and the request to register with that index.
  // ResourceExhausted when every slot is taken.
  absl::StatusOr<proto::RegisterWorkerRequest> JoinWorker(
      const proto::RegisterWorkerRequest& request) ABSL_LOCKS_EXCLUDED(mu_);
  // A ps whose shard is served elsewhere registers as a spare standby.
  absl::StatusOr<proto::RegisterServerResponse> RegisterSpare(
      const proto::RegisterServerRequest& request) ABSL_LOCKS_EXCLUDED(mu_);
  // Standby `m` registered: its process's identity; a new process's old
  // report and backup role go, and its old process's shard fails over.
  void AdmitStandby(Member& m, const std::string& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  proto::RegisterServerResponse ServerResponse(const Member& m) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A ps heartbeat's report: settles the shard's recoveries; true when that
  // is a change to save.
  bool NoteShardReport(Member& ps) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // JobProgress::MaybeStop; when the job stops just now, the bucket moves
  // still copying roll back. True when it stopped just now.
  bool MaybeStopJob() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HeartbeatReply(const Member& m, proto::HeartbeatResponse* response) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A streaming worker's parts move on with every heartbeat: a change of
  // positions alone is saved at most once per heartbeat.interval_s over all
  // workers (true when one is due now), so the state file is not rewritten
  // for each worker's each heartbeat; any later snapshot holds them too.
  bool PositionSaveDue() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Persistence (no-ops without coordinator.state_dir). A change takes a
  // snapshot under mu_ and saves it after releasing mu_, so that the fsync
  // does not stall heartbeats; StateFile drops a snapshot older than the one
  // on disk.
  std::optional<Snapshot> TakeSnapshot() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Save(std::optional<Snapshot> snapshot) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Load() ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  const Options options_;
  Clock* const clock_;
  const absl::Time start_;
  const std::unique_ptr<StateFile> state_file_;  // null without state_dir

  // State below is protected by mu_. Each part is single-threaded; the
  // parts are declared before those that refer to them.
  mutable absl::Mutex mu_;
  Membership members_ ABSL_GUARDED_BY(mu_);
  DataPartTable parts_ ABSL_GUARDED_BY(mu_);
  RecoveryLog recoveries_ ABSL_GUARDED_BY(mu_);
  ShardPlacement placement_ ABSL_GUARDED_BY(mu_);
  JobProgress progress_ ABSL_GUARDED_BY(mu_);
  uint64_t snapshots_ ABSL_GUARDED_BY(mu_) = 0;  // sequence of the last one
  // PositionSaveDue: no position-only save before this time.
  absl::Time next_position_save_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace downpour::coordinator

#endif  // DOWNPOUR_COORDINATOR_CLUSTER_STATE_H_
