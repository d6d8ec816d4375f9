// Bounded waiting: which errors are worth retrying, and the one retry loop
// every daemon uses to retry an operation with backoff, say what it waits for,
// and give up.
//
//   RETURN_IF_ERROR(RetryFor("ps 0", "coordinator at 127.0.0.1:7000",
//                            absl::Seconds(60),
//                            [&] { return client.Register(); }));
//
//   RetryOptions options;            // or with a FakeClock, in tests
//   options.timeout = absl::Seconds(10);
//   options.clock = &clock;
//   absl::Status s = RetryFor("worker 0", "ps 1", options, attempt);
#ifndef DOWNPOUR_COMMON_RETRY_H_
#define DOWNPOUR_COMMON_RETRY_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace downpour {

// True for codes worth retrying (after re-reading the placement, for the ps
// client): UNAVAILABLE, DEADLINE_EXCEEDED, FAILED_PRECONDITION (stale epoch),
// ABORTED. Everything else (a rejected gradient, an unknown block, our bug) is
// returned to the caller at once.
bool IsRetryable(const absl::Status& status);

// How RetryFor waits.
struct RetryOptions {
  // Give up once this much time has passed (on `clock`) since the first try.
  // Default 60 s.
  absl::Duration timeout = absl::Seconds(60);
  // When given, checked after each retryable failure: true ends the wait with
  // Cancelled. Default none.
  std::function<bool()> should_stop;
  // Where time is read and backoff sleeps happen; nullptr = Clock::Real().
  // Tests pass a FakeClock so the whole schedule runs at once.
  Clock* clock = nullptr;
};

// Calls `attempt` until it returns OK or a non-retryable error (see
// IsRetryable; that error is returned as is), sleeping with capped exponential
// backoff and jitter (50 ms up to 2 s, never past the timeout) between tries.
// Every ~5 s it logs a warning "<who>: waiting for <what>, not ready after N s
// (last error: ...)". Once `options.timeout` has passed it returns
// DeadlineExceeded "<who>: gave up waiting for <what> after N s: <last error>".
// When `options.should_stop` returns true it returns Cancelled
// "<who>: stopped while waiting for <what>".
absl::Status RetryFor(const std::string& who, const std::string& what,
                      const RetryOptions& options,
                      const std::function<absl::Status()>& attempt);

// The same on the real clock.
absl::Status RetryFor(const std::string& who, const std::string& what,
                      absl::Duration timeout,
                      const std::function<absl::Status()>& attempt,
                      const std::function<bool()>& should_stop = nullptr);

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_RETRY_H_
