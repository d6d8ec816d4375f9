// Which worker trains on which data parts, and where in each part its reader
// is: worker i starts with part i (and i + W, i + 2W, ... with
// cluster.max_workers), a worker that joins takes parts from those holding
// the most, a drained worker's parts go to the others, a dead worker's parts go
// to the living workers, and a worker that registers again takes its own part
// back (the rules are coordinator/assignment.h's). Each part keeps the last
// position its holder reported, which moves with the part and is handed to the
// next holder (proto::Partition.positions). A part of ClusterState, which calls
// it under its lock.
//
//   DataPartTable parts(/*workers=*/2);
//   parts.Claim(members.workers(), 0);     // worker 0 registered: part 0
//   parts.NotePositions(0, report.positions());  // where it reads part 0
//   parts.HandOff(members.workers(), 1);   // worker 1 died: its parts move
#ifndef DOWNPOUR_COORDINATOR_DATA_PART_TABLE_H_
#define DOWNPOUR_COORDINATOR_DATA_PART_TABLE_H_

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "coordinator/assignment.h"
#include "coordinator/membership.h"
#include "proto/coordinator.pb.h"
#include "proto/coordinator_state.pb.h"

namespace downpour::coordinator {

// Single-threaded: ClusterState calls it under its lock. `workers` arguments
// are Membership::workers(), entry i for worker i.
class DataPartTable {
 public:
  // `workers` workers and as many parts, none held yet (no worker joins).
  explicit DataPartTable(size_t workers) : DataPartTable(workers, workers) {}
  // `configured` workers (cluster.workers) and `slots` worker slots and data
  // parts (WorkerSlots: cluster.max_workers), none held yet.
  DataPartTable(size_t configured, size_t slots)
      : layout_{static_cast<int>(configured), static_cast<int>(slots)},
        parts_(slots) {}

  // The parts worker `worker` trains on. REQUIRES: a worker's index.
  const std::vector<int>& parts(int worker) const { return parts_[worker]; }

  // Worker `claimant` registered: it takes its own part back (and its home
  // parts nobody holds) and adopts the parts of dead workers that had not
  // finished (ClaimParts).
  void Claim(const std::vector<Member>& workers, int claimant);
  // Worker `joiner` joined (ps_worker --join): it adopts the parts of dead
  // workers (Claim), then takes parts from the workers holding the most
  // until the parts are even (BalanceParts), each move logged. Each part's
  // saved position goes with it.
  void Join(const std::vector<Member>& workers, int joiner);
  // Worker `drained` leaves (psctl drain-worker): its parts go to the alive
  // unfinished workers, fewest parts first (HandOffParts), each move logged;
  // returns the moves. Empty when it holds none or nobody can take them
  // (then it keeps them).
  std::vector<PartMove> Drain(const std::vector<Member>& workers, int drained);
  // Worker `dead` died: its parts go to the living workers (HandOffParts),
  // each move logged; nothing when it finished or holds none, and a WARN when
  // no worker can take them (they wait with it).
  void HandOff(const std::vector<Member>& workers, int dead);

  // Worker `worker`'s heartbeat reported `positions`: each becomes its part's
  // saved position when the worker holds that part now, the position is
  // well-formed (0 <= segment, -1 <= offset, 0 <= epoch, 0 <= examples) and it
  // is not behind the saved one (epoch, then segment, offset and examples);
  // others are ignored: a stale report of a part that moved, a forged one, or
  // a reader that went back (saving that would train its data twice after a
  // resume). The same position again is accepted (a worker that registered
  // again reports where it was told to start). True when a saved position
  // changed. REQUIRES: a worker's index.
  bool NotePositions(
      int worker,
      const google::protobuf::RepeatedPtrField<proto::PartPosition>& positions);

  // Worker `worker`'s partition: its index, the number of parts, its parts
  // and the saved positions of those parts that have one.
  proto::Partition PartitionOf(int worker) const;

  // Adds each worker's parts to its entry in `members` (role "worker").
  void AddTo(
      google::protobuf::RepeatedPtrField<proto::MemberStatus>* members) const;
  // Adds each worker's parts to its record in `state` (Membership::SaveTo's),
  // and the parts' saved positions (state->part_positions).
  void SaveTo(proto::CoordinatorState* state) const;
  // The parts of each registered worker recorded in `state`, and the
  // positions of parts of this job (others are dropped).
  void Restore(const proto::CoordinatorState& state);

 private:
  std::vector<WorkerSlot> Slots(const std::vector<Member>& workers) const;
  bool IsWorker(const std::string& role, int index) const;
  bool Holds(int worker, int part) const;

  // Constant after construction.
  const PartLayout layout_;

  std::vector<std::vector<int>> parts_;  // entry i: worker i's parts
  // The last position reported of each part that has one, by part.
  std::map<int, proto::PartPosition> positions_;
};

}  // namespace downpour::coordinator

#endif  // DOWNPOUR_COORDINATOR_DATA_PART_TABLE_H_
