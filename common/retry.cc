// The one retry loop every daemon uses, so that every wait is bounded and
// talks.
#include "common/retry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/backoff.h"
#include "common/logging.h"

namespace downpour {

bool IsRetryable(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAborted:
      return true;
    default:
      return false;
  }
}

absl::Status RetryFor(const std::string& who, const std::string& what,
                      const RetryOptions& options,
                      const std::function<absl::Status()>& attempt) {
  Clock* const clock = options.clock != nullptr ? options.clock : Clock::Real();
  const absl::Duration timeout = options.timeout;
  const absl::Time start = clock->Now();
  absl::Time next_report = start + absl::Seconds(5);
  Backoff backoff(absl::Milliseconds(50), absl::Seconds(2));
  while (true) {
    absl::Status status = attempt();
    if (status.ok() || !IsRetryable(status)) return status;
    const absl::Time now = clock->Now();
    if (now - start >= timeout) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "%s: gave up waiting for %s after %.0f s: %s", who, what,
          absl::ToDoubleSeconds(now - start), status.message()));
    }
    if (now >= next_report) {
      SPDLOG_LOGGER_WARN(Log(Logger::kRpc),
                         "{}: waiting for {}, not ready after {:.0f} s (last "
                         "error: {}); giving up after {:.0f} s",
                         who, what, absl::ToDoubleSeconds(now - start),
                         std::string(status.message()),
                         absl::ToDoubleSeconds(timeout));
      next_report = now + absl::Seconds(5);
    }
    if (options.should_stop && options.should_stop()) {
      return absl::CancelledError(
          absl::StrCat(who, ": stopped while waiting for ", what));
    }
    clock->SleepFor(std::min(backoff.Next(), timeout - (now - start)));
  }
}

absl::Status RetryFor(const std::string& who, const std::string& what,
                      absl::Duration timeout,
                      const std::function<absl::Status()>& attempt,
                      const std::function<bool()>& should_stop) {
  RetryOptions options;
  options.timeout = timeout;
  options.should_stop = should_stop;
  return RetryFor(who, what, options, attempt);
}

}  // namespace downpour
