// What a ps knows about its own checkpoint writes, for its Status, `psctl
// health` and the log: counts, the last error, the age of the last good one.
//
//   CheckpointHealth health(&counters);
//   health.Record(shard->WriteCheckpoint(), clock->Now());  // logs as needed
//   response->set_last_checkpoint_error(health.last_error());
#ifndef DOWNPOUR_SERVER_CHECKPOINT_HEALTH_H_
#define DOWNPOUR_SERVER_CHECKPOINT_HEALTH_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/counters.h"

namespace downpour::server {

// Thread-safe.
class CheckpointHealth {
 public:
  // A failure that repeats the one logged last is not logged again; a count of
  // repeats is, at most this often.
  static constexpr absl::Duration kSummaryInterval = absl::Seconds(60);

  // What Record logged.
  enum class Logged {
    kNothing,
    kError,      // ERROR: a failure unlike the last one logged
    kSummary,    // ERROR: "still failing: N more failures ..."
    kRecovered,  // INFO: the first success after failures
  };

  // Sets the counters "checkpoints_written" and "checkpoint_failures" (0) in
  // `counters`, which must outlive this object.
  explicit CheckpointHealth(Counters* counters);

  CheckpointHealth(const CheckpointHealth&) = delete;
  CheckpointHealth& operator=(const CheckpointHealth&) = delete;

  // Counts the outcome of one checkpoint attempt made at `now` and logs it
  // without flooding: a failure at ERROR once per distinct error, then a count
  // of repeats per kSummaryInterval; the first success after failures at INFO.
  Logged Record(const absl::Status& result, absl::Time now)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The error of the last attempt; "" when it succeeded or none was made.
  std::string last_error() const ABSL_LOCKS_EXCLUDED(mu_);

  // Seconds from the last successful attempt to `now`; nullopt before one.
  std::optional<double> age_seconds(absl::Time now) const
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  Counters* const counters_;

  mutable absl::Mutex mu_;
  std::string last_error_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Time> last_success_ ABSL_GUARDED_BY(mu_);
  // The failure logged last, when, and how many repeats since ("" = none
  // since the last success).
  std::string logged_error_ ABSL_GUARDED_BY(mu_);
  absl::Time logged_at_ ABSL_GUARDED_BY(mu_);
  int64_t repeats_ ABSL_GUARDED_BY(mu_) = 0;
  // Failures since the last success.
  int64_t failures_in_a_row_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_CHECKPOINT_HEALTH_H_
