// Bounded waiting: retry an operation with backoff, say what we wait for, give up.
//
//   RETURN_IF_ERROR(RetryFor("ps 0", "coordinator at 127.0.0.1:7000", absl::Seconds(60),
//                            [&] { return client.Register(); }));
#ifndef DOWNPOUR_COMMON_RETRY_H_
#define DOWNPOUR_COMMON_RETRY_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace downpour {

// Calls `attempt` until it returns OK or a non-retryable error (see IsRetryable),
// sleeping with capped exponential backoff and jitter (50 ms up to 2 s) between
// tries. Every ~5 s it logs a warning "<who>: waiting for <what>, not ready after
// N s (last error: ...)". After `timeout` it returns DeadlineExceeded
// "<who>: gave up waiting for <what> after N s: <last error>". `should_stop`, when
// given, ends the wait early with Cancelled.
absl::Status RetryFor(const std::string& who, const std::string& what,
                      absl::Duration timeout,
                      const std::function<absl::Status()>& attempt,
                      const std::function<bool()>& should_stop = nullptr);

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_RETRY_H_
