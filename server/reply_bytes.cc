// ReplyBytes: a byte count under a mutex, with a bounded wait for room.
#include "server/reply_bytes.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace downpour::server {

ReplyBytes::Hold& ReplyBytes::Hold::operator=(Hold&& other) noexcept {
  if (this != &other) {
    if (owner_ != nullptr) owner_->Release(bytes_);
    owner_ = std::exchange(other.owner_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

ReplyBytes::Hold::~Hold() {
  if (owner_ != nullptr) owner_->Release(bytes_);
}

absl::StatusOr<ReplyBytes::Hold> ReplyBytes::Take(int64_t bytes, const char* op,
                                                  absl::Time until) {
  if (bytes > limit_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        op, ": its reply needs ", bytes, " bytes, over the ", limit_,
        " bytes this ps builds replies in at once (a quarter of "
        "eviction.memory_budget_mb): ask for fewer keys per request"));
  }
  absl::MutexLock lock(&mu_);
  while (held_ + bytes > limit_ && absl::Now() < until) {
    freed_.WaitWithDeadline(&mu_, until);
  }
  if (held_ + bytes > limit_) {
    return absl::UnavailableError(absl::StrCat(
        op, ": this ps is building ", held_, " bytes of replies, and ", bytes,
        " more would pass its bound of ", limit_,
        " (a quarter of eviction.memory_budget_mb): retry shortly"));
  }
  held_ += bytes;
  return Hold(this, bytes);
}

int64_t ReplyBytes::held() const {
  absl::MutexLock lock(&mu_);
  return held_;
}

void ReplyBytes::Release(int64_t bytes) {
  absl::MutexLock lock(&mu_);
  held_ -= bytes;
  freed_.SignalAll();
}

}  // namespace downpour::server
