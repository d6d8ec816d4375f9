// Who is in the cluster: the ps, standby and worker members of the config and
// the spares that rejoined, each member's identity (key, incarnation, retired
// keys), its liveness and the outages of members declared dead. A part of
// ClusterState, which calls it under its lock and decides what a death means
// (a worker's data parts move, a shard is taken over).
//
//   Membership members(config.cluster, clock, clock->Now());
//   Member* m = members.Find(MemberRole::kWorker, 2);
//   members.Admit(*m, request.member_key());  // a new process: new key
//   members.Touch(*m);                        // registered and alive now
#ifndef DOWNPOUR_COORDINATOR_MEMBERSHIP_H_
#define DOWNPOUR_COORDINATOR_MEMBERSHIP_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/config.h"
#include "proto/coordinator.pb.h"
#include "proto/coordinator_state.pb.h"

namespace downpour::coordinator {

// A member's role. The wire and the state file spell it as MemberRoleName does.
enum class MemberRole { kPs, kWorker, kStandby };

// "ps", "worker" or "standby".
const char* MemberRoleName(MemberRole role);
// The role spelled `name`; nullopt for any other string.
std::optional<MemberRole> ParseMemberRole(absl::string_view name);

// One member slot of the config (or a spare slot) and what the coordinator
// knows of the process registered in it. Data parts live in DataPartTable.
struct Member {
  MemberRole role = MemberRole::kPs;
  int index = 0;
  std::string address;
  bool registered = false;
  bool alive = false;
  absl::Time last_heartbeat = absl::InfinitePast();
  // When this coordinator process last heard the member's registered
  // process itself (its registration or a heartbeat): its lease runs from
  // here (LeaseAllowsTakeOver). A stalled coordinator's grace does not move
  // it; a restore from the state file of a coordinator that stopped in order
  // clears it (CoordinatorState.stopped_cleanly: the job was stopped), so a
  // resumed job's processes register at once, while after a crash or a kill
  // the restored members, which may still run, keep a lease.
  absl::Time lease_heard = absl::InfinitePast();
  proto::MemberReport report;
  int serving_index = -1;      // standby: the shard it took over
  int replica_of = -1;         // standby: the shard it backs up
  uint64_t applied_total = 0;  // ps: the shard's updates last reported
  // The registered process's secret and incarnation; the keys of the
  // processes it replaced, newest last (at most Membership::kRetiredKeys).
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
  // Ps: a heartbeat reply told it the job is over, so its next report
  // comes after every worker finished (its push holes are losses).
  bool told_stop = false;
  // Workers: a slot beyond cluster.workers taken with ps_worker --join, and
  // a worker drained by psctl drain-worker (sticky: it counts as finished,
  // whatever its heartbeats report, until a --join reuses the slot).
  bool joined = false;
  bool drained = false;
  // A drained worker's own last report said it finished (it ended its step
  // and is leaving): what ClusterStatus shows as its report's `finished`.
  bool reported_finished = false;
};

// Whether a registration of `role` `index` from `address` may take the place
// of the member registered at `serving`, whose last heartbeat reached the
// coordinator `silent` ago. Liveness is the member's own lease: OK once
// `lease` (heartbeat.timeout_s) ran out without a heartbeat (the new process
// gets a new incarnation, which fences the old one); no probe of the address
// decides it, so connections that starve the member's port cannot make a
// heartbeating member look dead. While the lease runs: AlreadyExists for a
// ps (this daemon rejoins as a spare and takes the shard over once the old
// server is declared dead, or backs it up), Unavailable for a worker or a
// standby (the registration is retried and succeeds once the old process
// stayed silent that long). A refusal is logged as a WARN.
absl::Status LeaseAllowsTakeOver(MemberRole role, int index,
                                 const std::string& address,
                                 const std::string& serving,
                                 absl::Duration silent, absl::Duration lease);

// Single-threaded: ClusterState calls it under its lock.
class Membership {
 public:
  // Spare slots (ps that rejoined as standbys) beyond cluster.standby_ps: at
  // most this many more than there are ps.
  static constexpr size_t kExtraSpares = 4;
  static constexpr size_t kRetiredKeys = 8;
  static constexpr size_t kOutagesKept = 64;

  // The members of `cluster`, none registered yet. `clock` is not owned;
  // `start` is uptime zero (outage times count from it).
  Membership(const ClusterSection& cluster, Clock* clock, absl::Time start);

  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  std::vector<Member>& ps() { return ps_; }
  const std::vector<Member>& ps() const { return ps_; }
  std::vector<Member>& standby() { return standby_; }
  const std::vector<Member>& standby() const { return standby_; }
  std::vector<Member>& workers() { return workers_; }
  const std::vector<Member>& workers() const { return workers_; }

  // A ps joined the running job (psctl add-ps): a new ps slot after the
  // others, at `address`, not registered yet. Returns its index.
  int AddPs(const std::string& address);
  // The index of the ps that joined from `address`; -1 for none.
  int JoinedPsAt(const std::string& address) const;
  // The ps slots that joined (AddPs) and the worker slots that joined
  // (JoinWorker) in the saved `state`, added again; call before the parts
  // restore anything. Returns how many.
  int RestoreJoined(const proto::CoordinatorState& state);

  // Worker slots in all (WorkerSlots: cluster.max_workers).
  int worker_slots() const { return worker_slots_; }
  // A worker joined (ps_worker --join): the slot it takes, the first in
  // [cluster.workers count, worker_slots()) never used or drained and not
  // alive, made a fresh joined member there (not drained, no report, its
  // old key retired); nullptr when every slot is taken.
  Member* JoinWorker(const std::string& address);

  // nullptr for an index outside the members of `role`.
  Member* Find(MemberRole role, int index);
  const Member* Find(MemberRole role, int index) const;

  // --- Identity -------------------------------------------------------------

  // InvalidArgument ("register: worker index 5 is not in the config (2 in
  // cluster.workers: valid indices are 0 to 1)") when Find would fail. A
  // worker slot that joined is found.
  absl::Status CheckIndex(MemberRole role, int index) const;
  // Whether worker `index` may be drained (psctl drain-worker); OK changes
  // nothing. InvalidArgument naming the valid indices for no such worker;
  // FailedPrecondition for one that never registered, one drained already,
  // one that finished, and when no other alive worker trains to take its
  // parts ("worker 1 is the last one training: ...").
  absl::Status MayDrain(int index) const;
  // InvalidArgument when `index` is not one of cluster.standby_ps.
  absl::Status CheckConfiguredStandby(int index) const;

  enum class KeyMatch { kCurrent, kRetired, kNone };
  // Whose key `key` is: `m`'s registered process's, a process it replaced,
  // or nobody's.
  KeyMatch Identify(const Member& m, const std::string& key) const;

  // Gives `m` a new process's identity (key, incarnation, a worker's push
  // key) unless `key` is its current one; returns whether the process is new.
  bool Admit(Member& m, const std::string& key);
  // Moves m's key to its retired keys.
  void Retire(Member& m);
  // Every registered worker's incarnation and its push key's digest (never
  // the key), in index order, for `to`: nothing unless `to` serves a shard
  // or is named a shard's backup (ServesOrBacksUp), so a spare or idle
  // standby, which a stranger with the ps role can register as, learns
  // nothing of the workers.
  void AddWorkerIncarnations(
      const Member& to,
      google::protobuf::RepeatedPtrField<proto::WorkerIncarnation>* out) const;
  // A ps (its own shard), or a standby that took a shard over or backs one up.
  static bool ServesOrBacksUp(const Member& m);

  // --- Liveness -------------------------------------------------------------

  // Marks `m` registered and alive now; ends its outage if it was dead.
  void Touch(Member& m);
  // A heartbeat of m's registered process carrying `report`: alive now (a
  // dead member's outage ends, logged "alive again"). A drained worker stays
  // finished whatever it reports.
  void Heard(Member& m, const proto::MemberReport& report);
  // Marks every live member silent for longer than `timeout` dead, in the
  // order ps, workers, standbys, and returns how many. A finished worker
  // just leaves; for any other, its death is logged, its outage opened and
  // `on_death` called at once (before the next member is judged).
  int ExpireSilent(absl::Duration timeout,
                   const std::function<void(Member&)>& on_death);
  // Every live member gets a fresh timeout from now; returns how many.
  int HoldJudgement();
  // True when at least two live members (finished workers aside) are
  // expected to heartbeat and nothing was heard from any for over `silence`.
  bool HearsNobody(absl::Duration silence) const;
  // Outages: `m` was declared dead; `m` lives again (`how`).
  void OpenOutage(const Member& m);
  void CloseOutage(const Member& m, const char* how);

  // --- Spares ---------------------------------------------------------------

  // Spare slots registered (after the config's standby_ps), and the most.
  size_t Spares() const { return standby_.size() - configured_standbys_; }
  size_t MaxSpares() const { return ps_.size() + kExtraSpares; }
  // The spare slot for `request`: its own (its key), one at its address
  // (the same daemon restarted), a dead one, or a new one (standby().size());
  // -1 when full.
  int SpareSlotFor(const proto::RegisterServerRequest& request) const;
  // True when `slot`, picked earlier, was taken meanwhile by another spare.
  bool SpareSlotTaken(int slot, const std::string& address) const;
  // The standby in `slot`, a new spare slot at `address` when `slot` is
  // standby().size(). REQUIRES: slot <= standby().size().
  Member& SpareSlot(int slot, const std::string& address);

  // --- Reports --------------------------------------------------------------

  // The workers a ps waits for (ssp/bsp): registered, alive and unfinished;
  // under bsp also those that never registered.
  void AddActiveWorkers(bool bsp, proto::HeartbeatResponse* response) const;
  // Every member (ps, workers, standbys; without data parts) and outage.
  void AddStatus(absl::Time now, proto::ClusterStatusResponse* response) const;
  // The last incarnation and a record of every member, in the order ps,
  // workers, standbys (without data parts and replication figures); the
  // addresses of the ps that joined (added_ps).
  void SaveTo(proto::CoordinatorState* state) const;
  // Restores the members registered in `state` (each gets a full timeout to
  // heartbeat again); returns how many.
  int Restore(const proto::CoordinatorState& state);

 private:
  // Constant after construction.
  Clock* const clock_;
  const absl::Time start_;
  const size_t configured_standbys_;
  const size_t configured_ps_;
  const size_t configured_workers_;
  const int worker_slots_;

  std::vector<Member> ps_;
  std::vector<Member> standby_;
  std::vector<Member> workers_;
  // The last incarnation issued.
  uint64_t last_incarnation_ = 0;
  // The last registration or heartbeat accepted from any member (not moved
  // by HoldJudgement).
  absl::Time last_heard_;
  // Members declared dead, oldest first (at most kOutagesKept).
  std::vector<proto::MemberOutage> outages_;
};

}  // namespace downpour::coordinator

#endif  // DOWNPOUR_COORDINATOR_MEMBERSHIP_H_
