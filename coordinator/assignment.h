// Who trains on which data part, and which standby takes a dead shard over:
// pure functions over a view of the members, as PlaceBlocks
// (common/model_spec.h) is for blocks. ClusterState calls them under its lock
// and applies the result.
//
//   // Worker 0 is alive with part 0; worker 1 died holding part 1.
//   std::vector<WorkerSlot> workers = {{true, false, {0}}, {false, false,
//   {1}}}; ClaimParts(workers, 0);    // {{0, 1}, {}}: worker 0 adopts part 1
//   HandOffParts(workers, 1);  // {{/*part=*/1, /*to=*/0}}
#ifndef DOWNPOUR_COORDINATOR_ASSIGNMENT_H_
#define DOWNPOUR_COORDINATOR_ASSIGNMENT_H_

#include <cstdint>
#include <string>
#include <vector>

namespace downpour::coordinator {

// What the assignment needs to know of worker i (entry i of the vector).
struct WorkerSlot {
  bool alive = false;
  bool finished = false;   // done with its steps (its parts need no one)
  std::vector<int> parts;  // the data parts it trains on
};

// How the data parts are laid out over the worker slots: `configured`
// workers (cluster.workers) and `num_parts` parts (WorkerSlots: at least
// `configured`). Configured worker i's home parts are i, i + configured,
// i + 2 * configured, ... below num_parts; a worker that joined (index >=
// configured) has none. -1 for either: workers.size() (no worker joins).
struct PartLayout {
  int configured = -1;
  int num_parts = -1;
};

// Worker `claimant` registers (again): a configured one takes its own part
// (its index) back from whoever adopted it and its other home parts that
// nobody holds (a part an alive or finished worker holds stays there); a
// joined one keeps the parts it holds. Either adopts every part held by a
// dead worker that has not finished. Returns every worker's parts afterwards
// (entry i for worker i); the claimant's are sorted and hold no duplicates.
// REQUIRES: 0 <= claimant < workers.size().
std::vector<std::vector<int>> ClaimParts(const std::vector<WorkerSlot>& workers,
                                         int claimant, PartLayout layout = {});

struct PartMove {
  int part = 0;
  int to = 0;     // the worker that adopts it
  int from = -1;  // the worker that gave it (BalanceParts)
};

// Worker `joiner` joined: while the alive unfinished worker holding the most
// parts (the lowest index on a tie) holds at least two more than the joiner,
// one of its parts moves to the joiner: the part numbered like the joiner
// when it holds that one, else its highest. The moves in order (`from` set);
// empty when no worker holds two parts more. REQUIRES: 0 <= joiner <
// workers.size().
std::vector<PartMove> BalanceParts(const std::vector<WorkerSlot>& workers,
                                   int joiner);

// Worker `dead` has died: each of its parts, in order, goes to the alive
// worker other than `dead` that has not finished and holds the fewest parts at
// that moment (the lowest index on a tie). Empty when `dead` finished or holds
// no part, or when no worker can take them (the parts then wait with it).
// Also how a drained worker's parts go (psctl drain-worker). REQUIRES: 0 <=
// dead < workers.size().
std::vector<PartMove> HandOffParts(const std::vector<WorkerSlot>& workers,
                                   int dead);

// What the assignment needs to know of standby i (entry i of the vector).
struct StandbySlot {
  bool alive = false;
  int serving_index = -1;        // the shard it took over, -1 while idle
  int replica_of = -1;           // the shard it backs up, -1 for none
  bool replica_in_sync = false;  // it reported a full copy of replica_of
  std::string address;           // where it serves
  int former_shard = -1;  // a spare: the shard it served before it rejoined
  // The updates its replica holds (MemberReport.replica_applied_total).
  uint64_t replica_applied = 0;
  // It heartbeated lately (a standby that died with the shard's primary has
  // not, though it is not judged dead yet).
  bool responsive = true;
};

// True when `standby` holds an in-sync copy of shard `shard`: taking the
// shard over from it loses nothing.
inline bool HoldsReplicaOf(const StandbySlot& standby, int shard) {
  return standby.replica_of == shard && standby.replica_in_sync;
}

// The standby that takes dead shard `shard` over: the shard's backup when it
// holds an in-sync copy (nothing is lost; of several such backups, with
// cluster.replication 3, a responsive one first, then the one holding the
// most updates, then the lowest index); else the shard's backup all the
// same (it reports its sync on its next heartbeat, and takes over from the
// checkpoint when its copy is not whole); else the first alive idle one (it
// loads the checkpoint); else the first alive one that backs up another
// shard (that shard runs unreplicated until another standby comes). -1 when
// none is alive and free.
int PickStandby(const std::vector<StandbySlot>& standbys, int shard);

// The standby to become shard `shard`'s backup (served at `shard_address`):
// an alive one that serves nothing and backs up nothing, the shard's former
// server first (a restarted ps that rejoined as a spare), never one at
// `shard_address` itself (the shard's own process, restarted there); -1 when
// none.
int PickBackup(const std::vector<StandbySlot>& standbys, int shard,
               const std::string& shard_address);

}  // namespace downpour::coordinator

#endif  // DOWNPOUR_COORDINATOR_ASSIGNMENT_H_
