// The figures a Downpour loop reports (WorkerStats) and the one place that
// counts a push's acknowledgement or refusal into them.
#ifndef DOWNPOUR_WORKER_LOOP_STATS_H_
#define DOWNPOUR_WORKER_LOOP_STATS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/counters.h"
#include "common/log_throttle.h"
#include "worker/push_pipeline.h"
#include "worker/training_loop.h"

namespace downpour::worker {

// Thread-safe: the compute thread, a fetcher's threads and readers of stats()
// share it. Every method takes mu_ for itself.
class LoopStats {
 public:
  // `worker_index` names the worker in the refusal log; `batch_size` turns
  // applied steps into examples.
  LoopStats(int worker_index, int batch_size);
  LoopStats(const LoopStats&) = delete;
  LoopStats& operator=(const LoopStats&) = delete;

  // The run began at `start`: the rates and time shares count from there.
  void Start(absl::Time start) ABSL_LOCKS_EXCLUDED(mu_);

  // Adds a step's or push's report to the figures: `steps` steps applied, or
  // refused when report.refused (logged, throttled); `pulled`: the report's
  // round trip brought fresh parameters too (training.fetch layerwise).
  void CountPushed(const PushReport& report, int64_t steps, bool pulled)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A fresh parameter set swapped in or pulled.
  void CountPull() ABSL_LOCKS_EXCLUDED(mu_);
  // Communication off: `examples` applied by the worker itself.
  void CountLocalExamples(int64_t examples) ABSL_LOCKS_EXCLUDED(mu_);

  void AddWaitPush(absl::Duration waited) ABSL_LOCKS_EXCLUDED(mu_);
  void AddWaitPull(absl::Duration waited) ABSL_LOCKS_EXCLUDED(mu_);
  // A step's wall time: computing, and waiting for its parameters.
  void AddStepTime(absl::Duration compute, absl::Duration wait_pull)
      ABSL_LOCKS_EXCLUDED(mu_);

  // `steps` steps are computed; `loss` joins the running mean.
  void StepDone(int64_t steps, float loss) ABSL_LOCKS_EXCLUDED(mu_);
  void SetDiverged(std::string message) ABSL_LOCKS_EXCLUDED(mu_);
  void SetPlannedSteps(int64_t steps) ABSL_LOCKS_EXCLUDED(mu_);
  // A test evaluation: the main figures and the task's named metrics.
  void Evaluated(double accuracy, double test_loss,
                 std::vector<std::pair<std::string, double>> metrics)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Refreshes the rates and time shares.
  void UpdateRates() ABSL_LOCKS_EXCLUDED(mu_);
  // Marks the run finished and returns the figures.
  WorkerStats Finish() ABSL_LOCKS_EXCLUDED(mu_);

  WorkerStats stats() const ABSL_LOCKS_EXCLUDED(mu_);
  StalenessHistogram staleness() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Constant after construction.
  const int worker_index_;
  const int batch_size_;

  // State below is protected by mu_.
  mutable absl::Mutex mu_;
  WorkerStats stats_ ABSL_GUARDED_BY(mu_);
  absl::Time start_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Duration compute_time_ ABSL_GUARDED_BY(mu_);
  absl::Duration wait_pull_time_ ABSL_GUARDED_BY(mu_);
  absl::Duration wait_push_time_ ABSL_GUARDED_BY(mu_);
  StalenessHistogram staleness_ ABSL_GUARDED_BY(mu_);
  LogThrottle refusal_log_{{}};  // thread-safe itself
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_LOOP_STATS_H_
