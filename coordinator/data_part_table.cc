// Which worker trains on which data parts.
#include "coordinator/data_part_table.h"

#include "absl/strings/str_join.h"
#include "common/logging.h"

namespace downpour::coordinator {
namespace {

spdlog::logger* L() { return Log(Logger::kCoordinator); }

}  // namespace

std::vector<WorkerSlot> DataPartTable::Slots(
    const std::vector<Member>& workers) const {
  std::vector<WorkerSlot> slots;
  for (const Member& w : workers) {
    slots.push_back({w.alive, w.report.finished(), parts_[w.index]});
  }
  return slots;
}

void DataPartTable::Claim(const std::vector<Member>& workers, int claimant) {
  parts_ = ClaimParts(Slots(workers), claimant);
}

void DataPartTable::HandOff(const std::vector<Member>& workers, int dead) {
  if (workers[dead].report.finished() || parts_[dead].empty()) return;
  const std::vector<PartMove> moves = HandOffParts(Slots(workers), dead);
  if (moves.empty()) {
    SPDLOG_LOGGER_WARN(
        L(), "worker {}'s data parts [{}] wait for a worker: none is alive",
        dead, absl::StrJoin(parts_[dead], ", "));
    return;
  }
  for (const PartMove& move : moves) {
    parts_[move.to].push_back(move.part);
    SPDLOG_LOGGER_INFO(L(), "data part {} of dead worker {} goes to worker {}",
                       move.part, dead, move.to);
  }
  parts_[dead].clear();
}

proto::Partition DataPartTable::PartitionOf(int worker) const {
  proto::Partition partition;
  partition.set_part(worker);
  partition.set_num_parts(static_cast<int>(parts_.size()));
  for (int p : parts_[worker]) partition.add_parts(p);
  return partition;
}

bool DataPartTable::IsWorker(const std::string& role, int index) const {
  return role == MemberRoleName(MemberRole::kWorker) && index >= 0 &&
         index < static_cast<int>(parts_.size());
}

void DataPartTable::AddTo(
    google::protobuf::RepeatedPtrField<proto::MemberStatus>* members) const {
  for (proto::MemberStatus& m : *members) {
    if (!IsWorker(m.role(), m.index())) continue;
    for (int p : parts_[m.index()]) m.add_parts(p);
  }
}

void DataPartTable::SaveTo(proto::CoordinatorState* state) const {
  for (proto::MemberRecord& r : *state->mutable_members()) {
    if (!IsWorker(r.role(), r.index())) continue;
    for (int p : parts_[r.index()]) r.add_parts(p);
  }
}

void DataPartTable::Restore(const proto::CoordinatorState& state) {
  for (const proto::MemberRecord& r : state.members()) {
    if (!r.registered() || !IsWorker(r.role(), r.index())) continue;
    parts_[r.index()].assign(r.parts().begin(), r.parts().end());
  }
}

}  // namespace downpour::coordinator
