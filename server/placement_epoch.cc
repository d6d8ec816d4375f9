// PlacementEpoch: a request's placement epoch against the one served.
#include "server/placement_epoch.h"

#include "absl/strings/str_cat.h"

namespace downpour::server {

absl::Status PlacementEpoch::Check(const char* op,
                                   uint64_t request_epoch) const {
  if (value_ == 0) {
    return absl::UnavailableError(absl::StrCat(
        op, ": ps ", index_,
        " holds no blocks yet (waiting for the coordinator's placement)"));
  }
  if (request_epoch < value_) {
    return absl::FailedPreconditionError(absl::StrCat(
        op, ": stale placement epoch ", request_epoch, "; ps ", index_,
        " serves epoch ", value_, ": re-read the placement"));
  }
  if (request_epoch > value_) {
    return absl::UnavailableError(absl::StrCat(
        op, ": ps ", index_, " is at placement epoch ", value_,
        ", behind the request's ", request_epoch, "; retry shortly"));
  }
  return absl::OkStatus();
}

}  // namespace downpour::server
