// The Downpour SGD loop of one worker (Dean et al., 2012).
//
// The compute thread runs minibatch steps on a ComputeBackend. Every n_fetch steps
// it asks the fetch thread for fresh parameters and carries on with the ones it
// has; the new values are swapped in at the next step boundary once they arrive
// (double buffering). Gradients are accumulated locally and every n_push steps
// handed to the push thread; if a push is still in flight, accumulation simply
// continues, so compute never waits for the network (a gradient that summed more
// than n_push steps that way is scaled back to n_push steps' worth).
#ifndef DOWNPOUR_WORKER_DOWNPOUR_H_
#define DOWNPOUR_WORKER_DOWNPOUR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/config.h"
#include "common/model_spec.h"
#include "worker/compute_backend.h"
#include "worker/dataset.h"
#include "worker/ps_client.h"

namespace downpour::worker {

// Figures the worker reports (heartbeats, Status, progress lines).
struct WorkerStats {
  int64_t step = 0;
  int64_t examples = 0;
  double examples_per_sec = 0;
  double loss = NAN;      // mean training loss over recent steps
  double accuracy = NAN;  // last test accuracy
  double test_loss = NAN;
  double mean_staleness = 0;  // steps the parameters lagged when used
  int64_t pulls = 0;
  int64_t pushes = 0;
  int64_t pushed_steps = 0;  // steps whose gradient went into a push
  bool finished = false;
};

// Run() on one thread; Stop() and stats() from any thread.
class DownpourLoop {
 public:
  struct Options {
    TrainingSection training;
    int worker_index = 0;
    // Communication off: no pulls or pushes after the first pull; the worker
    // applies its own gradient locally with `local_learning_rate` (benchmarks).
    bool no_communication = false;
    double local_learning_rate = 0.05;
  };

  // Borrows everything; they must outlive the loop.
  DownpourLoop(const ModelSpec& spec, ComputeBackend* backend, PsClient* client,
               const Dataset* train, const Dataset* test, Options options);
  ~DownpourLoop();

  // Trains until the configured steps/epochs are done or Stop() is called, then
  // pushes what it owes, pulls the final parameters and evaluates them on the
  // test set. Returns the first error of the compute, fetch or push path.
  absl::Status Run();

  void Stop() { stop_.store(true); }

  // Trains on `data` from the next step on (a new epoch starts over it): the
  // coordinator handed this worker another data part, or took one back.
  // Thread-safe.
  void ReplaceTrainingData(std::shared_ptr<const Dataset> data)
      ABSL_LOCKS_EXCLUDED(data_mu_);
  WorkerStats stats() const ABSL_LOCKS_EXCLUDED(stats_mu_);

 private:
  void FetchThread();
  void PushThread();
  absl::Status Step(int64_t step, const std::vector<int>& order, int64_t* cursor);
  void FillBatch(const std::vector<int>& order, int64_t cursor, float* x, int* y) const;
  // Tells the backend that params_ holds new values (a GPU copy is refreshed).
  void ParamsChanged() { backend_->ParamsChanged(); }
  absl::Status Evaluate(const float* params);
  void SetError(const absl::Status& status) ABSL_LOCKS_EXCLUDED(comm_mu_);
  absl::Status error() const ABSL_LOCKS_EXCLUDED(comm_mu_);
  void MaybeSwapParams() ABSL_LOCKS_EXCLUDED(comm_mu_);
  void HandOffGradient() ABSL_LOCKS_EXCLUDED(comm_mu_);
  void ScaleLaggingGradient();
  absl::Status Flush() ABSL_LOCKS_EXCLUDED(comm_mu_);
  int64_t TotalSteps() const;

  // Constant after construction.
  const ModelSpec& spec_;
  ComputeBackend* const backend_;
  PsClient* const client_;
  std::shared_ptr<const Dataset> train_;  // compute thread only
  const Dataset* const test_;
  const Options options_;

  std::atomic<bool> stop_{false};

  absl::Mutex data_mu_;
  std::shared_ptr<const Dataset> next_train_ ABSL_GUARDED_BY(data_mu_);
  std::atomic<bool> has_next_train_{false};

  // Compute thread only.
  std::vector<float> params_;          // the front buffer compute reads
  std::vector<uint64_t> versions_;     // block versions of params_
  std::vector<float> grad_;            // this step's gradient
  std::vector<float> accum_;           // gradients since the last hand-off
  std::vector<uint64_t> accum_versions_;
  int accum_steps_ = 0;
  std::vector<float> batch_x_;
  std::vector<int> batch_y_;
  // The next step's batch, filled and handed to backend_->Prefetch one step
  // early (a GPU backend copies it while the current step computes); valid
  // while the cursor is still next_cursor_ (a new epoch resets the cursor).
  std::vector<float> next_x_;
  std::vector<int> next_y_;
  int64_t next_cursor_ = -1;

  // Shared with the fetch and push threads.
  mutable absl::Mutex comm_mu_;
  bool fetch_wanted_ ABSL_GUARDED_BY(comm_mu_) = false;
  bool fetched_ ABSL_GUARDED_BY(comm_mu_) = false;  // back_ holds newer values
  std::vector<float> back_ ABSL_GUARDED_BY(comm_mu_);
  std::vector<uint64_t> back_versions_ ABSL_GUARDED_BY(comm_mu_);
  bool push_pending_ ABSL_GUARDED_BY(comm_mu_) = false;
  std::vector<float> outbox_ ABSL_GUARDED_BY(comm_mu_);
  std::vector<uint64_t> outbox_versions_ ABSL_GUARDED_BY(comm_mu_);
  bool comm_done_ ABSL_GUARDED_BY(comm_mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(comm_mu_);

  mutable absl::Mutex stats_mu_;
  WorkerStats stats_ ABSL_GUARDED_BY(stats_mu_);
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_DOWNPOUR_H_
