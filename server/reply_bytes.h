// The bytes of sparse replies (Lookup, sparse pulls) a ps builds at once,
// bounded (a quarter of the memory budget, server/memory_budget.h), so that
// many concurrent large reads cannot multiply its memory.
//
//   ReplyBytes replies(budget.reply_bytes());
//   ASSIGN_OR_RETURN(ReplyBytes::Hold hold, replies.Take(bytes, "lookup"));
//   ... build the reply ...            // released when `hold` goes
//
// Thread-safe.
#ifndef DOWNPOUR_SERVER_REPLY_BYTES_H_
#define DOWNPOUR_SERVER_REPLY_BYTES_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace downpour::server {

class ReplyBytes {
 public:
  // Bytes taken until destroyed (movable; empty after a move).
  class Hold {
   public:
    Hold() = default;
    Hold(Hold&& other) noexcept { *this = std::move(other); }
    Hold& operator=(Hold&& other) noexcept;
    ~Hold();
    int64_t bytes() const { return bytes_; }

   private:
    friend class ReplyBytes;
    Hold(ReplyBytes* owner, int64_t bytes) : owner_(owner), bytes_(bytes) {}
    ReplyBytes* owner_ = nullptr;
    int64_t bytes_ = 0;
  };

  // `limit`: the most bytes held at once, > 0.
  explicit ReplyBytes(int64_t limit) : limit_(limit) {}
  ReplyBytes(const ReplyBytes&) = delete;
  ReplyBytes& operator=(const ReplyBytes&) = delete;

  // `bytes` for a reply of `op` ("lookup", "pull"). ResourceExhausted when
  // they exceed the limit alone (ask for fewer keys; the message names
  // both figures); when others hold too many, waits until `until` for them
  // to go, then Unavailable (retry shortly: a worker's client does). Never
  // blocks with until <= now.
  absl::StatusOr<Hold> Take(int64_t bytes, const char* op,
                            absl::Time until = absl::InfinitePast());

  int64_t limit() const { return limit_; }
  int64_t held() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Release(int64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);

  const int64_t limit_;
  mutable absl::Mutex mu_;
  int64_t held_ ABSL_GUARDED_BY(mu_) = 0;
  absl::CondVar freed_;  // signalled on each Release
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_REPLY_BYTES_H_
