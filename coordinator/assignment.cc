// Data-part and standby assignment; no state, no locks, no logging.
#include "coordinator/assignment.h"

#include <algorithm>
#include <utility>

namespace downpour::coordinator {

namespace {

bool HeldByAnyone(const std::vector<std::vector<int>>& parts, int part) {
  for (const std::vector<int>& held : parts) {
    if (std::find(held.begin(), held.end(), part) != held.end()) return true;
  }
  return false;
}

}  // namespace

std::vector<std::vector<int>> ClaimParts(const std::vector<WorkerSlot>& workers,
                                         int claimant, PartLayout layout) {
  const int n = static_cast<int>(workers.size());
  const int configured = layout.configured >= 0 ? layout.configured : n;
  const int num_parts = layout.num_parts >= 0 ? layout.num_parts : n;
  const bool joined = claimant >= configured;
  std::vector<std::vector<int>> parts(workers.size());
  std::vector<int> claimed;
  if (joined) {
    claimed = workers[claimant].parts;
  } else {
    claimed.push_back(claimant);
  }
  for (int i = 0; i < n; ++i) {
    if (i == claimant) continue;
    const WorkerSlot& other = workers[i];
    for (int p : other.parts) {
      if (!joined && p == claimant) continue;  // its own part comes back
      if (!other.alive && !other.finished) {
        claimed.push_back(p);  // a dead worker's part waits for a taker
      } else {
        parts[i].push_back(p);
      }
    }
  }
  // Its other home parts (max_workers above the configured workers), where
  // no other worker holds them.
  for (int home = claimant + configured; !joined && home < num_parts;
       home += configured) {
    if (!HeldByAnyone(parts, home)) claimed.push_back(home);
  }
  std::sort(claimed.begin(), claimed.end());
  claimed.erase(std::unique(claimed.begin(), claimed.end()), claimed.end());
  parts[claimant] = std::move(claimed);
  return parts;
}

std::vector<PartMove> BalanceParts(const std::vector<WorkerSlot>& workers,
                                   int joiner) {
  std::vector<std::vector<int>> held(workers.size());
  for (size_t i = 0; i < workers.size(); ++i) held[i] = workers[i].parts;
  std::vector<PartMove> moves;
  for (;;) {
    int donor = -1;
    for (size_t i = 0; i < workers.size(); ++i) {
      const WorkerSlot& w = workers[i];
      if (static_cast<int>(i) == joiner || !w.alive || w.finished) continue;
      if (donor < 0 || held[i].size() > held[donor].size()) {
        donor = static_cast<int>(i);
      }
    }
    if (donor < 0 || held[donor].size() < held[joiner].size() + 2) break;
    std::vector<int>& from = held[donor];
    auto it = std::find(from.begin(), from.end(), joiner);
    if (it == from.end()) it = std::max_element(from.begin(), from.end());
    moves.push_back({*it, joiner, donor});
    held[joiner].push_back(*it);
    from.erase(it);
  }
  return moves;
}

std::vector<PartMove> HandOffParts(const std::vector<WorkerSlot>& workers,
                                   int dead) {
  const WorkerSlot& from = workers[dead];
  if (from.finished || from.parts.empty()) return {};
  // Candidates in index order, with the number of parts each holds so far.
  std::vector<std::pair<int, size_t>> living;
  for (size_t i = 0; i < workers.size(); ++i) {
    const WorkerSlot& w = workers[i];
    if (static_cast<int>(i) != dead && w.alive && !w.finished) {
      living.emplace_back(static_cast<int>(i), w.parts.size());
    }
  }
  if (living.empty()) return {};
  std::vector<PartMove> moves;
  for (int part : from.parts) {
    auto to = std::min_element(
        living.begin(), living.end(),
        [](const auto& a, const auto& b) { return a.second < b.second; });
    ++to->second;
    moves.push_back({part, to->first});
  }
  return moves;
}

namespace {

// Of the shard's backups that hold an in-sync copy, the one to promote:
// responsive first, then the most updates held (lowest index on a tie); -1
// when none holds one.
int BestHolder(const std::vector<StandbySlot>& standbys, int shard) {
  int best = -1;
  for (size_t i = 0; i < standbys.size(); ++i) {
    const StandbySlot& s = standbys[i];
    if (!s.alive || s.serving_index >= 0 || !HoldsReplicaOf(s, shard)) {
      continue;
    }
    if (best >= 0) {
      const StandbySlot& b = standbys[best];
      if (b.responsive != s.responsive) {
        if (b.responsive) continue;
      } else if (s.replica_applied <= b.replica_applied) {
        continue;
      }
    }
    best = static_cast<int>(i);
  }
  return best;
}

}  // namespace

int PickStandby(const std::vector<StandbySlot>& standbys, int shard) {
  const int holder = BestHolder(standbys, shard);
  if (holder >= 0) return holder;
  int idle = -1, backup = -1, own = -1;
  for (size_t i = 0; i < standbys.size(); ++i) {
    const StandbySlot& s = standbys[i];
    if (!s.alive || s.serving_index >= 0) continue;
    // A responsive backup of the shard before one that went quiet.
    if (s.replica_of == shard &&
        (own < 0 || (s.responsive && !standbys[own].responsive))) {
      own = static_cast<int>(i);
    }
    if (s.replica_of < 0 && idle < 0) idle = static_cast<int>(i);
    if (s.replica_of >= 0 && s.replica_of != shard && backup < 0) {
      backup = static_cast<int>(i);
    }
  }
  // The shard's own backup whose sync the coordinator has not heard of yet
  // (its report comes with its next heartbeat): it takes over from its copy
  // when that is whole, else from the checkpoint, as an idle one would.
  if (own >= 0) return own;
  if (idle >= 0) return idle;
  if (backup >= 0) return backup;
  // The shard's own backup, not (yet) in sync: better than nothing.
  for (size_t i = 0; i < standbys.size(); ++i) {
    if (standbys[i].alive && standbys[i].serving_index < 0) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

int PickBackup(const std::vector<StandbySlot>& standbys, int shard,
               const std::string& shard_address) {
  int first = -1;
  for (size_t i = 0; i < standbys.size(); ++i) {
    const StandbySlot& s = standbys[i];
    if (!s.alive || s.serving_index >= 0 || s.replica_of >= 0 ||
        s.address == shard_address) {
      continue;
    }
    if (s.former_shard == shard) return static_cast<int>(i);
    if (first < 0) first = static_cast<int>(i);
  }
  return first;
}

}  // namespace downpour::coordinator
