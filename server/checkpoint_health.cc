// CheckpointHealth: counting checkpoint attempts and logging failures once.
#include "server/checkpoint_health.h"

#include "common/logging.h"

namespace downpour::server {
namespace {

spdlog::logger* L() { return Log(Logger::kServer); }

}  // namespace

CheckpointHealth::CheckpointHealth(Counters* counters) : counters_(counters) {
  counters_->stats().checkpoints_written.Increment(0);
  counters_->stats().checkpoint_failures.Increment(0);
}

CheckpointHealth::Logged CheckpointHealth::Record(const absl::Status& result,
                                                  absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (result.ok()) {
    counters_->stats().checkpoints_written.Increment();
    last_error_.clear();
    last_success_ = now;
    const int64_t failures = failures_in_a_row_;
    failures_in_a_row_ = 0;
    logged_error_.clear();
    repeats_ = 0;
    if (failures == 0) return Logged::kNothing;
    SPDLOG_LOGGER_INFO(
        L(), "checkpoint written again after {} failed attempt(s)", failures);
    return Logged::kRecovered;
  }
  counters_->stats().checkpoint_failures.Increment();
  last_error_ = std::string(result.message());
  ++failures_in_a_row_;
  // The text alone tells errors apart: the same cause gives the same message.
  if (last_error_ != logged_error_) {
    logged_error_ = last_error_;
    logged_at_ = now;
    repeats_ = 0;
    SPDLOG_LOGGER_ERROR(L(),
                        "checkpoint failed (the ps keeps serving; its last "
                        "good checkpoint gets older): {}",
                        last_error_);
    return Logged::kError;
  }
  ++repeats_;
  if (now - logged_at_ < kSummaryInterval) return Logged::kNothing;
  SPDLOG_LOGGER_ERROR(
      L(), "checkpoint still failing: {} more failure(s) in {} s: {}", repeats_,
      absl::ToInt64Seconds(now - logged_at_), last_error_);
  logged_at_ = now;
  repeats_ = 0;
  return Logged::kSummary;
}

std::string CheckpointHealth::last_error() const {
  absl::MutexLock lock(&mu_);
  return last_error_;
}

std::optional<double> CheckpointHealth::age_seconds(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  if (!last_success_.has_value()) return std::nullopt;
  return absl::ToDoubleSeconds(now - *last_success_);
}

}  // namespace downpour::server
