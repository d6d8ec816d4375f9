// Rate-limits log lines that a remote client can trigger over and over (a
// refused push, a refused registration): per key, the first few events of
// each interval are logged in full, the rest only counted, and one summary
// line per interval says how many were left out.
//
//   LogThrottle throttle({});  // 5 in full per 10 s per key
//   for (const std::string& line :
//        throttle.Record("ps 0: pushes refused", message)) {
//     SPDLOG_LOGGER_WARN(log, "{}", line);
//   }
//   // later: "ps 0: pushes refused: 12345 more in the last 10s (last: ...)"
//
// Memory is bounded: at most Options::max_keys keys and the overflow key are
// tracked (when full, keys whose interval ended are forgotten; events of
// further keys share the overflow key), and each keeps one message of at most
// kMaxMessageLength characters.
#ifndef DOWNPOUR_COMMON_LOG_THROTTLE_H_
#define DOWNPOUR_COMMON_LOG_THROTTLE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "spdlog/spdlog.h"

namespace downpour {

// Thread-safe.
class LogThrottle {
 public:
  struct Options {
    // Events per key and interval logged in full.
    int full_per_interval = 5;
    absl::Duration interval = absl::Seconds(10);
    // Keys tracked at once; events of other keys count under kOverflowKey.
    size_t max_keys = 64;
    // Time source (tests inject a FakeClock); null = Clock::Real().
    Clock* clock = nullptr;
  };

  // The key that events of keys past Options::max_keys are counted under.
  static constexpr absl::string_view kOverflowKey = "other log lines";
  // Longer messages are cut to this many characters (with "...").
  static constexpr size_t kMaxMessageLength = 512;

  explicit LogThrottle(Options options);
  LogThrottle(const LogThrottle&) = delete;
  LogThrottle& operator=(const LogThrottle&) = delete;

  // Records one event of `key` described by `message` and returns the lines
  // to log now, in order: the summary of this key's previous interval when
  // that interval ended with events left out, then `message` itself while
  // this interval has logged fewer than full_per_interval.
  std::vector<std::string> Record(absl::string_view key,
                                  absl::string_view message)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Summaries of every key whose interval has ended with events left out
  // (and forgets those keys): for a periodic caller, so that the count of a
  // burst that stopped is not held until the next event.
  std::vector<std::string> Flush() ABSL_LOCKS_EXCLUDED(mu_);

  // Record, writing the lines to `log` at `level`.
  void Log(spdlog::logger* log, spdlog::level::level_enum level,
           absl::string_view key, absl::string_view message)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Keys tracked now (for tests of the bound).
  size_t num_keys() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct KeyState {
    absl::Time window_start;
    int64_t logged = 0;      // events of this window logged in full
    int64_t suppressed = 0;  // events of this window only counted
    std::string last;        // the newest suppressed message
  };

  std::string Summary(absl::string_view key, const KeyState& state) const;
  // Forgets every key whose interval has ended, appending the summaries of
  // those with events left out.
  void SweepLocked(absl::Time now, std::vector<std::string>* lines)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const Options options_;
  Clock* const clock_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, KeyState> keys_ ABSL_GUARDED_BY(mu_);
};

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_LOG_THROTTLE_H_
