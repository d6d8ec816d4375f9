// The placement epoch a shard serves (0: none yet, before the coordinator's
// first placement) and the check of a request's epoch against it: a request
// is served only at the epoch its sender read the placement at. Plain; its
// owner (Shard) locks.
#ifndef DOWNPOUR_SERVER_PLACEMENT_EPOCH_H_
#define DOWNPOUR_SERVER_PLACEMENT_EPOCH_H_

#include <cstdint>

#include "absl/status/status.h"

namespace downpour::server {

class PlacementEpoch {
 public:
  // `index` names the shard in messages.
  explicit PlacementEpoch(int index) : index_(index) {}

  uint64_t value() const { return value_; }
  bool placed() const { return value_ != 0; }
  void Set(uint64_t epoch) { value_ = epoch; }

  // OK when `request_epoch` is the epoch served. Unavailable before the
  // first placement, or for a newer epoch (this shard has not caught up yet:
  // retry); FailedPrecondition for an older one (re-read the placement).
  // `op` ("pull", "push") begins the message.
  absl::Status Check(const char* op, uint64_t request_epoch) const;

 private:
  const int index_;
  uint64_t value_ = 0;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_PLACEMENT_EPOCH_H_
