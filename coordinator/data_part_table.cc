// Which worker trains on which data parts.
#include "coordinator/data_part_table.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"

namespace downpour::coordinator {
namespace {

spdlog::logger* L() { return Log(Logger::kCoordinator); }

bool WellFormed(const proto::PartPosition& p) {
  return p.segment() >= 0 && p.offset() >= -1 && p.epoch() >= 0 &&
         p.examples() >= 0;
}

// Whether `a` is before `b` in the order a reader goes through its part.
bool Behind(const proto::PartPosition& a, const proto::PartPosition& b) {
  return std::make_tuple(a.epoch(), a.segment(), a.offset(), a.examples()) <
         std::make_tuple(b.epoch(), b.segment(), b.offset(), b.examples());
}

// " (from epoch 1, segment 2, offset 4096)", or "" for the part's start.
std::string FromWhere(const std::map<int, proto::PartPosition>& positions,
                      int part) {
  const auto it = positions.find(part);
  if (it == positions.end()) return "";
  return absl::StrFormat(" (from epoch %d, segment %d, offset %d)",
                         it->second.epoch(), it->second.segment(),
                         it->second.offset());
}

}  // namespace

std::vector<WorkerSlot> DataPartTable::Slots(
    const std::vector<Member>& workers) const {
  std::vector<WorkerSlot> slots;
  for (const Member& w : workers) {
    slots.push_back(
        {w.alive, w.report.finished() || w.drained, parts_[w.index]});
  }
  return slots;
}

void DataPartTable::Claim(const std::vector<Member>& workers, int claimant) {
  std::vector<std::vector<int>> claimed =
      ClaimParts(Slots(workers), claimant, layout_);
  // Slots without a member yet (not joined) hold nothing.
  for (size_t i = 0; i < claimed.size(); ++i) parts_[i] = std::move(claimed[i]);
}

void DataPartTable::Join(const std::vector<Member>& workers, int joiner) {
  Claim(workers, joiner);
  for (const PartMove& move : BalanceParts(Slots(workers), joiner)) {
    std::vector<int>& from = parts_[move.from];
    from.erase(std::find(from.begin(), from.end(), move.part));
    parts_[joiner].push_back(move.part);
    SPDLOG_LOGGER_INFO(L(), "data part {} of worker {} goes to worker {}{}",
                       move.part, move.from, joiner,
                       FromWhere(positions_, move.part));
  }
}

std::vector<PartMove> DataPartTable::Drain(const std::vector<Member>& workers,
                                           int drained) {
  const std::vector<PartMove> moves = HandOffParts(Slots(workers), drained);
  for (const PartMove& move : moves) {
    parts_[move.to].push_back(move.part);
    SPDLOG_LOGGER_INFO(
        L(), "data part {} of drained worker {} goes to worker {}{}", move.part,
        drained, move.to, FromWhere(positions_, move.part));
  }
  if (!moves.empty()) parts_[drained].clear();
  return moves;
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
    SPDLOG_LOGGER_INFO(
        L(), "data part {} of dead worker {} goes to worker {}{}", move.part,
        dead, move.to, FromWhere(positions_, move.part));
  }
  parts_[dead].clear();
}

bool DataPartTable::Holds(int worker, int part) const {
  const std::vector<int>& held = parts_[worker];
  return std::find(held.begin(), held.end(), part) != held.end();
}

bool DataPartTable::NotePositions(
    int worker,
    const google::protobuf::RepeatedPtrField<proto::PartPosition>& positions) {
  bool changed = false;
  for (const proto::PartPosition& p : positions) {
    if (!Holds(worker, p.part()) || !WellFormed(p)) {
      SPDLOG_LOGGER_DEBUG(L(), "worker {}: ignored position of part {}: {}",
                          worker, p.part(), "not its part or malformed");
      continue;
    }
    const auto [it, fresh] = positions_.try_emplace(p.part(), p);
    if (fresh) {
      changed = true;
    } else if (Behind(p, it->second)) {
      SPDLOG_LOGGER_DEBUG(L(), "worker {}: ignored position of part {}: {}",
                          worker, p.part(), "behind the saved one");
    } else if (Behind(it->second, p)) {
      it->second = p;
      changed = true;
    }  // else the same position again
  }
  return changed;
}

proto::Partition DataPartTable::PartitionOf(int worker) const {
  proto::Partition partition;
  partition.set_part(worker);
  partition.set_num_parts(static_cast<int>(parts_.size()));
  for (int p : parts_[worker]) {
    partition.add_parts(p);
    const auto it = positions_.find(p);
    if (it != positions_.end()) *partition.add_positions() = it->second;
  }
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
  for (const auto& [part, position] : positions_) {
    *state->add_part_positions() = position;
  }
}

void DataPartTable::Restore(const proto::CoordinatorState& state) {
  for (const proto::MemberRecord& r : state.members()) {
    if (!r.registered() || !IsWorker(r.role(), r.index())) continue;
    parts_[r.index()].assign(r.parts().begin(), r.parts().end());
  }
  for (const proto::PartPosition& p : state.part_positions()) {
    if (p.part() < 0 || p.part() >= static_cast<int>(parts_.size())) continue;
    if (WellFormed(p)) positions_[p.part()] = p;
  }
}

}  // namespace downpour::coordinator
