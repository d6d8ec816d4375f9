// LoopStats: WorkerStats under one mutex, and the refusal log.
#include "worker/loop_stats.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"

namespace downpour::worker {
namespace {

spdlog::logger* L() { return Log(Logger::kWorker); }

}  // namespace

LoopStats::LoopStats(int worker_index, int batch_size)
    : worker_index_(worker_index), batch_size_(batch_size) {}

void LoopStats::Start(absl::Time start) {
  absl::MutexLock lock(&mu_);
  start_ = start;
}

void LoopStats::CountPushed(const PushReport& report, int64_t steps,
                            bool pulled) {
  absl::MutexLock lock(&mu_);
  if (pulled) ++stats_.pulls;
  if (report.refused > 0) {
    // Answered, not applied (on at least one shard): no examples counted.
    stats_.refused_steps += steps;
    for (const std::string& line : refusal_log_.Record(
             "refused",
             absl::StrCat("worker ", worker_index_, ": a push of ", steps,
                          " steps was refused and dropped (its "
                          "examples are not counted): ",
                          report.refused_why))) {
      SPDLOG_LOGGER_WARN(L(), "{}", line);
    }
  } else {
    ++stats_.pushes;
    stats_.pushed_steps += steps;
    stats_.examples += steps * batch_size_;
  }
  staleness_.Merge(report.staleness);
  const StalenessSummary summary = staleness_.Summary();
  stats_.mean_staleness = summary.mean;
  stats_.staleness_p50 = summary.p50;
  stats_.staleness_p99 = summary.p99;
  stats_.staleness_max = summary.max;
}

void LoopStats::CountPull() {
  absl::MutexLock lock(&mu_);
  ++stats_.pulls;
}

void LoopStats::CountLocalExamples(int64_t examples) {
  absl::MutexLock lock(&mu_);
  stats_.examples += examples;
}

void LoopStats::AddWaitPush(absl::Duration waited) {
  absl::MutexLock lock(&mu_);
  wait_push_time_ += waited;
}

void LoopStats::AddWaitPull(absl::Duration waited) {
  absl::MutexLock lock(&mu_);
  wait_pull_time_ += waited;
}

void LoopStats::AddStepTime(absl::Duration compute, absl::Duration wait_pull) {
  absl::MutexLock lock(&mu_);
  compute_time_ += compute;
  wait_pull_time_ += wait_pull;
}

void LoopStats::StepDone(int64_t steps, float loss) {
  absl::MutexLock lock(&mu_);
  stats_.step = steps;
  stats_.loss =
      std::isnan(stats_.loss) ? loss : 0.95 * stats_.loss + 0.05 * loss;
}

void LoopStats::SetDiverged(std::string message) {
  absl::MutexLock lock(&mu_);
  stats_.diverged = std::move(message);
}

void LoopStats::SetPlannedSteps(int64_t steps) {
  absl::MutexLock lock(&mu_);
  stats_.planned_steps = steps;
}

void LoopStats::Evaluated(double accuracy, double test_loss,
                          std::vector<std::pair<std::string, double>> metrics) {
  absl::MutexLock lock(&mu_);
  stats_.accuracy = accuracy;
  ++stats_.evaluations;
  stats_.test_loss = test_loss;
  stats_.metrics = std::move(metrics);
}

void LoopStats::UpdateRates() {
  absl::MutexLock lock(&mu_);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  if (seconds <= 0) return;
  stats_.examples_per_sec = stats_.examples / seconds;
  stats_.share_compute = absl::ToDoubleSeconds(compute_time_) / seconds;
  stats_.share_wait_pull = absl::ToDoubleSeconds(wait_pull_time_) / seconds;
  stats_.share_wait_push = absl::ToDoubleSeconds(wait_push_time_) / seconds;
}

WorkerStats LoopStats::Finish() {
  absl::MutexLock lock(&mu_);
  stats_.finished = true;
  return stats_;
}

WorkerStats LoopStats::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

StalenessHistogram LoopStats::staleness() const {
  absl::MutexLock lock(&mu_);
  return staleness_;
}

}  // namespace downpour::worker
