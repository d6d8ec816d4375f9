// The coordinator's core: membership, heartbeats, placement, data partitions,
// failure handling and job state.
//
// Plain C++ (no gRPC): the Coordinator service adapter forwards each RPC here, and
// tests drive it directly with an injected clock. With coordinator.state_dir set,
// every change is written to disk (atomically) and a restarted coordinator picks
// up where it was.
#ifndef DOWNPOUR_COORDINATOR_CLUSTER_STATE_H_
#define DOWNPOUR_COORDINATOR_CLUSTER_STATE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/model_spec.h"
#include "coordinator/assignment.h"
#include "coordinator/state_file.h"
#include "proto/coordinator.pb.h"
#include "proto/coordinator_state.pb.h"

namespace downpour::coordinator {

// A member's role. The wire and the state file spell it as MemberRoleName does.
enum class MemberRole { kPs, kWorker, kStandby };

// "ps", "worker" or "standby".
const char* MemberRoleName(MemberRole role);
// The role spelled `name`; nullopt for any other string.
std::optional<MemberRole> ParseMemberRole(absl::string_view name);

// The coordinator's state file in `state_dir`: "<state_dir>/coordinator.state";
// "" when state_dir is "" (no state kept). The launcher removes it to start a
// new job.
std::string StateFilePath(const std::string& state_dir);

// Thread-safe.
class ClusterState {
 public:
  struct Options {
    Config config;
    // Source of time for heartbeats, timeouts and uptime; nullptr =
    // Clock::Real(). Tests advance a FakeClock instead of sleeping. Not owned.
    Clock* clock = nullptr;
    // Asks the daemon at `address` which member incarnation it holds (its
    // Status counter member_incarnation; 0 for none yet), with a short
    // deadline; nullopt when nobody answers there. A registration without the
    // live member's key is refused when the member's registered process still
    // answers at its address as itself. nullptr: nobody answers.
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
  static constexpr size_t kExtraSpares = 4;

  ClusterState(const ClusterState&) = delete;
  ClusterState& operator=(const ClusterState&) = delete;

  // Each registered process gets a secret member key and an incarnation
  // (the response), which its heartbeats must carry.
  //
  // InvalidArgument (nothing changed) for an index outside the config's ps /
  // standby_ps / workers lists, a missing address, or a string over its bound
  // (coordinator/member_identity.h). AlreadyExists when the index belongs to
  // a live member whose registered process still answers at its address as
  // itself (Options::probe) and the request does not carry that member's key:
  // a second daemon never takes a live member's place, and a stranger cannot
  // make a live one stand down. The same process registering again (its key)
  // keeps its key and incarnation; a new process (the old one declared dead,
  // or gone from its address) gets new ones, and the old key is retired: its
  // heartbeats are told `replaced`. A ps that registers again (restarted)
  // gets the placement epoch bumped, so clients re-read the map; the updates
  // its restart lost are recorded (a ShardRecovery). A worker that registers
  // gets its own data part back, plus any part left without a living worker.
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
  // parts, a ps and a standby the workers' incarnations.
  absl::StatusOr<proto::HeartbeatResponse> Heartbeat(
      const proto::HeartbeatRequest& request) ABSL_LOCKS_EXCLUDED(mu_);

  proto::GetPlacementResponse Placement() const ABSL_LOCKS_EXCLUDED(mu_);
  proto::ClusterStatusResponse Status() const ABSL_LOCKS_EXCLUDED(mu_);

  // Marks members silent for longer than heartbeat.timeout_s dead (and logs it),
  // hands a dead worker's data parts to the living workers, and gives a dead
  // shard to an idle standby. Returns how many members changed state.
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

 private:
  struct Member {
    MemberRole role = MemberRole::kPs;
    int index = 0;
    std::string address;
    bool registered = false;
    bool alive = false;
    absl::Time last_heartbeat = absl::InfinitePast();
    proto::MemberReport report;
    std::vector<int> parts;  // workers: data parts trained on
    int serving_index = -1;  // standby: the shard it took over
    int replica_of = -1;     // standby: the shard it backs up
    uint64_t applied_total = 0;  // ps: the shard's updates last reported
    // The registered process's secret and incarnation; the keys of the
    // processes it replaced, newest last (at most kRetiredKeys).
    std::string key;
    uint64_t incarnation = 0;
    // Workers: the key their pushes carry, issued with the incarnation and
    // told to the ps members only (WorkerIncarnation.push_key).
    uint64_t push_key = 0;
    std::vector<std::string> retired_keys;
    // Standby: a spare (a ps that rejoined as a standby at its own address,
    // numbered after the config's standby_ps) and the shard it served.
    bool spare = false;
    int former_shard = -1;
    // Ps (cluster.replication 2): the time without an in-sync backup. Counted
    // once the shard first had one, or from placement while no standby was
    // free for it; unreplicated_since is the open period's start
    // (InfinitePast: none open). replication_logged: the state last logged.
    bool ever_in_sync = false;
    double unreplicated_seconds = 0;
    absl::Time unreplicated_since = absl::InfinitePast();
    std::string replication_logged;
    // Since when it has had no backup named (a WARN waits a moment, so that
    // the standbys registering at start or a restart rejoining as a spare
    // are not reported).
    absl::Time no_backup_since = absl::InfinitePast();
    // Ps: a heartbeat reply told it the job is over, so its next report
    // comes after every worker finished (its push holes are losses).
    bool told_stop = false;
  };
  static constexpr size_t kRetiredKeys = 8;

  // The state to save, numbered in the order it was taken.
  struct Snapshot {
    uint64_t sequence = 0;
    proto::CoordinatorState state;
  };

  ClusterState(Options options, ModelSpec spec);

  // Whether a registration of `role` `index` carrying `key` may go on:
  // InvalidArgument for an index outside the config, AlreadyExists while the
  // member's registered process answers at its address as itself (probed
  // without the lock). OK does not change anything.
  absl::Status MayRegister(MemberRole role, int index, const std::string& key,
                           const std::string& address) ABSL_LOCKS_EXCLUDED(mu_);
  // Gives `m` a new process's identity unless `key` is its current one;
  // returns whether the process is new.
  bool Admit(Member& m, const std::string& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves m's key to its retired keys.
  void Retire(Member& m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddWorkerIncarnations(
      google::protobuf::RepeatedPtrField<proto::WorkerIncarnation>* out) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Member* Find(MemberRole role, int index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks `m` registered and alive now; ends its outage if it was dead.
  void Touch(Member& m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybePlace() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Decides whether the job is over; true when it stopped it just now. A
  // worker's claim to have reached training.target counts once a ps holds
  // pushes of its process (PushesApplied) and is confirmed by a second
  // evaluation: another counting claim's while another worker still
  // evaluates, else the claimant's own next one.
  bool MaybeStop() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True when a live ps or standby reports pushes of `worker`'s registered
  // incarnation applied (MemberReport.applied_from).
  bool PushesApplied(const Member& worker) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ClaimParts(Member& worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandOffParts(Member& dead) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReplaceShard(Member& dead) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Replication: gives every live shard without a backup a free standby,
  // and frees the backups of dead or serving standbys; then NoteReplication.
  void AssignBackups() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Per shard: whether it has an in-sync backup now; counts the time without
  // one, logs each change (WARN when it loses it, with the fix), and stamps
  // recoveries with the time a backup was in sync again.
  void NoteReplication() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The standby backing up shard `ps` (-1: none).
  int BackupOf(const Member& ps) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A ps whose shard is served elsewhere registers as a spare standby.
  absl::StatusOr<proto::RegisterServerResponse> RegisterSpare(
      const proto::RegisterServerRequest& request) ABSL_LOCKS_EXCLUDED(mu_);
  // The spare slot for `request`: its own (its key), one at its address
  // (the same daemon restarted), a dead one, or a new one; -1 when full.
  int SpareSlotFor(const proto::RegisterServerRequest& request) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Standby `m` registered from a new process while its old one served a
  // shard (it took one over): that process is gone, so the shard fails over
  // now instead of after heartbeat.timeout_s. `old_key`: the old process's.
  void EndServedLease(Member& m, const std::string& old_key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Outages: `m` was declared dead; `m` lives again (`how`).
  void OpenOutage(const Member& m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CloseOutage(const Member& m, const char* how)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The losses shard `ps`'s current server reports, onto its latest
  // recovery; true when that made the figure final (a change to save).
  bool SettleAckedLoss(const Member& ps, bool final)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // cluster.replication in effect: 1 without standby_ps.
  int ReplicationFactor() const;
  // Shard `ps` has an in-sync backup (standby `backup`, BackupOf).
  bool InSync(const Member& ps, int backup) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Spare slots registered (after the config's standby_ps), and the most.
  size_t Spares() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return standby_.size() - options_.config.cluster.standby_ps.size();
  }
  size_t MaxSpares() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return ps_.size() + kExtraSpares;
  }
  std::vector<StandbySlot> StandbySlots() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records a shard served by someone new; `after` set when already known.
  void RecordRecovery(int shard, const std::string& from,
                      const std::string& to, const std::string& source,
                      uint64_t before, std::optional<uint64_t> after)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HeartbeatReply(const Member& m, proto::HeartbeatResponse* response) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  proto::Partition PartitionOf(const Member& worker) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

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
  const ModelSpec spec_;
  const absl::Time start_;
  // The last registration or heartbeat accepted from any member (not moved
  // by GiveGrace or HoldJudgement).
  absl::Time last_heard_ ABSL_GUARDED_BY(mu_);
  const std::unique_ptr<StateFile> state_file_;  // null without state_dir

  // State below is protected by mu_.
  mutable absl::Mutex mu_;
  std::vector<Member> ps_ ABSL_GUARDED_BY(mu_);
  std::vector<Member> standby_ ABSL_GUARDED_BY(mu_);
  std::vector<Member> workers_ ABSL_GUARDED_BY(mu_);
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  // The last worker incarnation issued.
  uint64_t last_incarnation_ ABSL_GUARDED_BY(mu_) = 0;
  // A worker process that had pushes acknowledged was replaced by a new one
  // before it finished (killed, crashed). A shard recovered from a checkpoint
  // counts lost pushes from the gaps in each worker process's sequences as
  // that process pushes on; a process that never pushes again leaves no gap
  // to see, so from then on every such count is a lower bound ("at least"):
  // loss_final stays false for recoveries not from a replica.
  bool worker_pushes_uncountable_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::vector<uint32_t>> placement_ ABSL_GUARDED_BY(mu_);
  // Per worker index, the evaluation that first claimed training.target
  // (MaybeStop): a claim counts once a second evaluation confirms it.
  struct Claim {
    uint64_t incarnation = 0;
    uint64_t evaluations = 0;
  };
  std::map<int, Claim> first_claim_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::string stop_reason_ ABSL_GUARDED_BY(mu_);
  // When a report first met the job's target (ClusterStatusResponse
  // .target_reached_*): uptime seconds (-1: not yet), by whom, its value.
  double target_reached_s_ ABSL_GUARDED_BY(mu_) = -1;
  int target_reached_by_ ABSL_GUARDED_BY(mu_) = -1;
  double target_reached_value_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t snapshots_ ABSL_GUARDED_BY(mu_) = 0;  // sequence of the last one
  // Members declared dead, oldest first (at most kOutagesKept).
  std::vector<proto::MemberOutage> outages_ ABSL_GUARDED_BY(mu_);
  static constexpr size_t kOutagesKept = 64;
  // Every take-over and restart of a shard, oldest first.
  std::vector<proto::ShardRecovery> recoveries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace downpour::coordinator

#endif  // DOWNPOUR_COORDINATOR_CLUSTER_STATE_H_
