// Consistency: ssp clocks and bsp rounds, plain bookkeeping without locks.
#include "server/consistency.h"

#include <algorithm>
#include <limits>

namespace downpour::server {

Consistency::Consistency(Mode mode, int max_staleness)
    : mode_(mode), max_staleness_(max_staleness) {}

bool Consistency::Gated(int worker) const {
  return mode_ != Mode::kAsync && active_known_ && active_.count(worker) > 0;
}

void Consistency::SetActiveWorkers(const std::vector<int>& workers) {
  // No clock moves here: a newcomer's pushes carry its clock, which starts
  // where the coordinator put it (RegisterWorkerResponse.start_clock), the
  // same on every shard.
  active_ = std::set<int>(workers.begin(), workers.end());
  active_known_ = true;
}

int64_t Consistency::clock(int worker, uint32_t block) const {
  auto w = clocks_.find(worker);
  if (w == clocks_.end()) return 0;
  auto b = w->second.find(block);
  return b == w->second.end() ? 0 : b->second;
}

int64_t Consistency::OthersMin(int worker, uint32_t block, int* who) const {
  int64_t min = std::numeric_limits<int64_t>::max();
  for (int v : active_) {
    if (v == worker) continue;
    const int64_t c = clock(v, block);
    if (c < min) {
      min = c;
      *who = v;
    }
  }
  return min;
}

int64_t Consistency::ClockBefore(int worker, uint32_t block,
                                 uint64_t push_clock) const {
  return push_clock > 0 ? static_cast<int64_t>(push_clock) - 1
                        : clock(worker, block);
}

std::optional<Consistency::Wait> Consistency::SspWaitFor(
    int worker, const std::vector<uint32_t>& blocks,
    uint64_t push_clock) const {
  if (mode_ != Mode::kSsp || !Gated(worker)) return std::nullopt;
  for (uint32_t b : blocks) {
    int slowest = worker;
    const int64_t min = OthersMin(worker, b, &slowest);
    const int64_t mine = ClockBefore(worker, b, push_clock);
    // The clock before this push against the others': the slowest (lead
    // <= 0) may always push, so with every worker's clocks coming from its
    // own pushes, the same on every shard, no cycle of waits can form.
    if (slowest != worker && mine - min > max_staleness_) {
      return Wait{b, slowest, mine, min};
    }
  }
  return std::nullopt;
}

int64_t Consistency::SspApplied(int worker, const std::vector<uint32_t>& blocks,
                                uint64_t push_clock) {
  const bool gated = Gated(worker);
  int64_t lead = 0;
  for (uint32_t b : blocks) {
    const int64_t before = ClockBefore(worker, b, push_clock);
    if (gated) {
      int slowest = worker;
      const int64_t min = OthersMin(worker, b, &slowest);
      if (slowest != worker) lead = std::max(lead, before - min);
    }
    clocks_[worker][b] = before + 1;
  }
  return lead;
}

Consistency::Contribution Consistency::BspContribute(
    int worker, uint64_t sequence,
    const std::vector<BlockGradient>& gradients) {
  auto it = pending_.find(worker);
  if (it != pending_.end()) {
    // A retry of the contribution already in waits without adding it again; a
    // newer push waits for that round to apply and joins the next.
    return it->second.sequence == sequence ? Contribution::kPending
                                           : Contribution::kBusy;
  }
  Pending& pending = pending_[worker];
  pending.sequence = sequence;
  for (const BlockGradient& g : gradients) {
    Round& round = rounds_[g.block];
    if (round.sum.empty()) round.sum.assign(g.floats, 0.0f);
    // Decoded (or, for float32, copied: the bytes may be unaligned) first.
    if (decoded_.size() < g.floats) decoded_.resize(g.floats);
    DecodeFloats(static_cast<const char*>(g.data),
                 static_cast<int64_t>(g.floats), g.encoding, decoded_.data());
    for (size_t i = 0; i < g.floats; ++i) round.sum[i] += decoded_[i];
    round.contributors[worker] = sequence;
    pending.blocks.insert(g.block);
  }
  if (pending.blocks.empty()) pending_.erase(worker);
  return Contribution::kAdded;
}

std::vector<uint32_t> Consistency::BspCompleteRounds() const {
  std::vector<uint32_t> complete;
  for (const auto& [b, round] : rounds_) {
    if (!round.contributors.empty() && BspWaitingFor(b).empty()) {
      complete.push_back(b);
    }
  }
  return complete;
}

std::vector<int> Consistency::BspContributors(uint32_t block) const {
  std::vector<int> workers;
  auto it = rounds_.find(block);
  if (it == rounds_.end()) return workers;
  for (const auto& [w, sequence] : it->second.contributors)
    workers.push_back(w);
  return workers;
}

std::vector<int> Consistency::BspWaitingFor(uint32_t block) const {
  std::vector<int> waiting;
  auto it = rounds_.find(block);
  for (int w : active_) {
    if (it == rounds_.end() || it->second.contributors.count(w) == 0) {
      waiting.push_back(w);
    }
  }
  return waiting;
}

std::vector<std::pair<int, uint64_t>> Consistency::BspTakeRound(
    uint32_t block, std::vector<float>* mean) {
  std::vector<std::pair<int, uint64_t>> done;
  auto it = rounds_.find(block);
  if (it == rounds_.end()) return done;
  Round& round = it->second;
  const float n = static_cast<float>(round.contributors.size());
  *mean = std::move(round.sum);
  for (float& v : *mean) v /= n;
  for (const auto& [w, sequence] : round.contributors) {
    auto p = pending_.find(w);
    if (p == pending_.end() || p->second.sequence != sequence) continue;
    p->second.blocks.erase(block);
    if (p->second.blocks.empty()) {
      done.emplace_back(w, sequence);
      pending_.erase(p);
    }
  }
  rounds_.erase(it);
  return done;
}

}  // namespace downpour::server
