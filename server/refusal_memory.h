// The pushes the PushGuard refused as outliers, answered (PushResponse.refused:
// not retried) and remembered per worker so that a retry of one (its reply
// lost) gets the same answer rather than "duplicate". Single-threaded: its
// owner (Shard) locks.
#ifndef DOWNPOUR_SERVER_REFUSAL_MEMORY_H_
#define DOWNPOUR_SERVER_REFUSAL_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>

#include "proto/ps.pb.h"

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

  // Answers push `sequence` of `worker` as refused for `why` (remembered when
  // tracked: sequence > 0).
  void Refuse(int32_t worker, uint64_t sequence, const std::string& why,
              proto::PushResponse* response);
  // Acknowledges a push already taken: refused again when it was refused,
  // else response.duplicate.
  void AnswerDuplicate(int32_t worker, uint64_t sequence,
                       proto::PushResponse* response) const;

 private:
  // Per worker: (sequence, why), oldest first.
  std::map<int32_t, std::deque<std::pair<uint64_t, std::string>>> refusals_;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_REFUSAL_MEMORY_H_
