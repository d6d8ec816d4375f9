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

void RefusalMemory::Refuse(int32_t worker, uint64_t sequence,
                           const std::string& why,
                           proto::PushResponse* response) {
  if (sequence > 0) Remember(worker, sequence, why);
  response->set_refused(why);
}

void RefusalMemory::AnswerDuplicate(int32_t worker, uint64_t sequence,
                                    proto::PushResponse* response) const {
  if (const std::string* why = Of(worker, sequence)) {
    response->set_refused(*why);  // a retry of a refused push
  } else {
    response->set_duplicate(true);
  }
}

}  // namespace downpour::server
