// The admission and displacement policy (see connection_share.h).
#include "rpc/connection_share.h"

#include <algorithm>

namespace downpour {

ConnectionShare::ConnectionShare(Limits limits)
    : limits_{std::max(1, limits.max_total),
              std::max(1, limits.max_per_address)} {}

ConnectionShare::Admission ConnectionShare::Admit(
    const std::string& address) const {
  Admission admission;
  const auto own = holders_.find(address);
  if (own != holders_.end() && own->second.held >= limits_.max_per_address) {
    // Its share is full: only its own connections make room, so a flood
    // from one address displaces nobody else's.
    if (own->second.pending.empty()) return admission;
    admission.admit = true;
    admission.displace = own->second.pending.begin()->second;
    return admission;
  }
  admission.admit = true;
  if (size() < limits_.max_total) return admission;
  const Holder* largest = LargestWithPending();
  if (largest == nullptr) {
    admission.admit = false;
    return admission;
  }
  admission.displace = largest->pending.begin()->second;
  return admission;
}

const ConnectionShare::Holder* ConnectionShare::LargestWithPending() const {
  const Holder* largest = nullptr;
  for (const auto& [address, holder] : holders_) {
    if (holder.pending.empty()) continue;
    if (largest == nullptr || holder.held > largest->held ||
        (holder.held == largest->held &&
         *holder.pending.begin() < *largest->pending.begin())) {
      largest = &holder;
    }
  }
  return largest;
}

void ConnectionShare::Add(uint64_t id, const std::string& address) {
  entries_[id] = {address, 0, true};
  Holder& holder = holders_[address];
  ++holder.held;
  holder.pending.insert({0, id});
}

void ConnectionShare::SetProgress(uint64_t id, int progress) {
  const auto it = entries_.find(id);
  if (it == entries_.end() || it->second.progress == progress) return;
  Entry& entry = it->second;
  if (entry.pending) {
    std::set<Rank>& pending = holders_[entry.address].pending;
    pending.erase({entry.progress, id});
    pending.insert({progress, id});
  }
  entry.progress = progress;
}

void ConnectionShare::MarkAnswering(uint64_t id) {
  const auto it = entries_.find(id);
  if (it == entries_.end() || !it->second.pending) return;
  holders_[it->second.address].pending.erase({it->second.progress, id});
  it->second.pending = false;
}

void ConnectionShare::Remove(uint64_t id) {
  const auto it = entries_.find(id);
  if (it == entries_.end()) return;
  const auto holder = holders_.find(it->second.address);
  holder->second.pending.erase({it->second.progress, id});
  if (--holder->second.held == 0) holders_.erase(holder);
  entries_.erase(it);
}

}  // namespace downpour
