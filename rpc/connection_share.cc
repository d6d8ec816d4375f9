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
    admission.displace = *own->second.pending.begin();
    return admission;
  }
  admission.admit = true;
  if (size() < limits_.max_total) return admission;
  const Holder* largest = LargestWithPending();
  if (largest == nullptr) {
    admission.admit = false;
    return admission;
  }
  admission.displace = *largest->pending.begin();
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
  address_of_[id] = address;
  Holder& holder = holders_[address];
  ++holder.held;
  holder.pending.insert(id);
}

void ConnectionShare::MarkAnswering(uint64_t id) {
  const auto it = address_of_.find(id);
  if (it == address_of_.end()) return;
  holders_[it->second].pending.erase(id);
}

void ConnectionShare::Remove(uint64_t id) {
  const auto it = address_of_.find(id);
  if (it == address_of_.end()) return;
  const auto holder = holders_.find(it->second);
  holder->second.pending.erase(id);
  if (--holder->second.held == 0) holders_.erase(holder);
  address_of_.erase(it);
}

}  // namespace downpour
