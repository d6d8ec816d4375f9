// The pushes the PushGuard refused as outliers, remembered per worker so that
// a retry of one (its reply lost) gets the same answer rather than
// "duplicate". Single-threaded: its owner (Shard) locks.
#ifndef DOWNPOUR_SERVER_REFUSAL_MEMORY_H_
#define DOWNPOUR_SERVER_REFUSAL_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>

namespace downpour::server {

class RefusalMemory {
 public:
  // The latest refusals kept per worker; older ones are forgotten.
  static constexpr size_t kKept = 16;

  // Remembers that push `sequence` of `worker` was refused, and why.
  void Remember(int32_t worker, uint64_t sequence, std::string why);
  // Why push `sequence` of `worker` was refused, or nullptr when it was not
  // (or is no longer remembered). Valid until the next Remember.
  const std::string* Of(int32_t worker, uint64_t sequence) const;

 private:
  // Per worker: (sequence, why), oldest first.
  std::map<int32_t, std::deque<std::pair<uint64_t, std::string>>> refusals_;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_REFUSAL_MEMORY_H_
