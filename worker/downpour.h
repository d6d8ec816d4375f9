// The Downpour SGD loop of one worker (Dean et al., 2012).
//
// The compute thread runs minibatch steps on a ComputeBackend, in order:
// the batch, fetch-if-due, compute, push, count. How fresh parameters come in
// and gradients go out is one Fetcher (worker/fetcher.h) per mode, chosen
// once at construction (worker/fetcher_factory.h): training.fetch after_push
// (the default, and always with training.consistency bsp) waits for its
// pushes and pulls every n_fetch steps; overlap pulls on a fetch thread into
// a double buffer; layerwise pushes and pulls groups of blocks as backprop
// finishes them. The gradients of n_push steps are summed, at full weight,
// and handed to the client's StartPush, which sends them while the next
// steps compute; the client keeps up to training.max_pushes_in_flight pushes
// in flight and, when that many are, StartPush waits for one to be
// acknowledged (backpressure): no step's gradient is dropped, merged into a
// later push or scaled down. training.mode easgd is one more Fetcher
// (worker/easgd_fetcher.h): the steps update a local copy, and an elastic
// exchange with the center every easgd_tau steps replaces the pushes.
//
// training.warmstart_steps (DistBelief's warmstart): a worker other than 0
// first polls the ps until worker 0 has pushed that many steps.
#ifndef DOWNPOUR_WORKER_DOWNPOUR_H_
#define DOWNPOUR_WORKER_DOWNPOUR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/config.h"
#include "common/counters.h"
#include "common/model_spec.h"
#include "worker/compute_backend.h"
#include "worker/dataset.h"
#include "worker/epoch_budget.h"
#include "worker/fetcher.h"
#include "worker/loop_stats.h"
#include "worker/ps_client.h"
#include "worker/training_loop.h"

namespace downpour::worker {

// Run() on one thread; Stop() and stats() from any thread.
class DownpourLoop : public TrainingLoop {
 public:
  struct Options {
    TrainingSection training;
    // Named in the message of a diverged run (the knobs to turn).
    OptimizerSection optimizer;
    int num_workers = 1;  // workers in the job, for the same message
    int worker_index = 0;
    // Communication off: no pulls or pushes after the first pull; the worker
    // applies its own gradient locally with `local_learning_rate` (benchmarks).
    bool no_communication = false;
    double local_learning_rate = 0.05;
    // Warmstart: how long the block versions may stand still before a waiting
    // worker starts anyway (rpc.connect_timeout_s), and how often it polls.
    absl::Duration warmstart_patience = absl::Seconds(60);
    absl::Duration warmstart_poll = absl::Milliseconds(200);
    // training.fetch layerwise: blocks are grouped up to about this many
    // floats. 0: half the model, two groups a step, which measured best on
    // the MNIST MLP (docs/BENCHMARKS.md): each more group costs a round
    // trip's work on a core the step's compute shares.
    int64_t layer_group_floats = 0;
  };

  // Borrows everything; they must outlive the loop.
  DownpourLoop(const ModelSpec& spec, ComputeBackend* backend, PsClient* client,
               const Dataset* train, const Dataset* test, Options options);
  // Shares the training set: it lives while the loop trains on it, whoever
  // else lets go of it (a worker's DataParts drops its set as soon as the
  // coordinator moves the parts, before the loop has taken up the next).
  DownpourLoop(const ModelSpec& spec, ComputeBackend* backend, PsClient* client,
               std::shared_ptr<const Dataset> train, const Dataset* test,
               Options options);
  ~DownpourLoop() override;

  // Trains until the configured steps/epochs are done or Stop() is called, then
  // pushes what it owes, pulls the final parameters and evaluates them on the
  // test set. Returns the first error of the compute, fetch or push path.
  absl::Status Run() override;

  void Stop() override { stop_.store(true); }

  // Trains on `data` from the next step on (a new epoch starts over it): the
  // coordinator handed this worker another data part, or took one back.
  // Thread-safe.
  void ReplaceTrainingData(std::shared_ptr<const Dataset> data)
      ABSL_LOCKS_EXCLUDED(data_mu_);
  WorkerStats stats() const override { return stats_.stats(); }
  // The histogram behind stats()'s staleness figures (Status's raw buckets).
  StalenessHistogram staleness() const override { return stats_.staleness(); }

 private:
  // What the fetcher borrows (called once, in the constructor).
  FetchContext FetchContextOf();
  absl::Status Step(int64_t step, const std::vector<int>& order,
                    int64_t* cursor);
  // Fills the step's batch at *cursor (prefetched during the last step when
  // it can), advances the cursor and prefetches the next step's batch.
  void NextBatch(const std::vector<int>& order, int64_t* cursor);
  void FillBatch(const std::vector<int>& order, int64_t cursor, float* x,
                 float* y) const;
  // Takes up the training set ReplaceTrainingData handed over, if any: the
  // budget's epochs left run over it, from a new epoch at `step`.
  void AdoptNextTrainingData(int64_t step, EpochBudget* budget, int64_t* total,
                             int64_t* next_epoch_step)
      ABSL_LOCKS_EXCLUDED(data_mu_);
  // Sizes the buffers, waits for the warmstart and pulls the first
  // parameters.
  absl::Status Prepare();
  // The steps, from the first to the last or Stop(); the first error of a
  // step, of the fetcher's paths or of an evaluation.
  absl::Status RunSteps();
  // After the flush: pulls the final parameters, evaluates and logs them.
  absl::Status Finish();
  absl::Status Evaluate(const float* params);
  // The error of a non-finite loss or gradient at `step`: names the likely
  // causes and the config keys that help.
  absl::Status Diverged(int64_t step, const std::string& what) const;
  // Warmstart: a worker other than 0 polls the ps until worker 0 has pushed
  // training.warmstart_steps steps (or the versions stop advancing for
  // warmstart_patience).
  absl::Status WaitForWarmstart();
  // The run's last step: training.steps, or the epoch budget's.
  int64_t TotalSteps(const EpochBudget& budget) const;

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

  LoopStats stats_;  // thread-safe

  // Compute thread only (and the fetcher's threads, as it says).
  StepBuffers buffers_;
  std::vector<float> batch_x_;
  std::vector<float> batch_y_;
  // The next step's batch, filled and handed to backend_->Prefetch one step
  // early (a GPU backend copies it while the current step computes); valid
  // while the cursor is still next_cursor_ (a new epoch resets the cursor).
  std::vector<float> next_x_;
  std::vector<float> next_y_;
  std::vector<float> test_outputs_;  // Evaluate's scratch
  int64_t next_cursor_ = -1;

  // The fetch mode's part: borrows the members above, so it is declared
  // (and destroyed, with its threads) after them.
  const std::unique_ptr<Fetcher> fetcher_;
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_DOWNPOUR_H_
