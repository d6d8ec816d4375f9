// RefusalMemory: the latest outlier refusals per worker.
#include "server/refusal_memory.h"

namespace downpour::server {

void RefusalMemory::Remember(int32_t worker, uint64_t sequence,
                             std::string why) {
  std::deque<std::pair<uint64_t, std::string>>& kept = refusals_[worker];
  if (kept.size() >= kKept) kept.pop_front();
  kept.emplace_back(sequence, std::move(why));
}

const std::string* RefusalMemory::Of(int32_t worker, uint64_t sequence) const {
  const auto it = refusals_.find(worker);
  if (it == refusals_.end()) return nullptr;
  for (const auto& [refused, why] : it->second) {
    if (refused == sequence) return &why;
  }
  return nullptr;
}

}  // namespace downpour::server
