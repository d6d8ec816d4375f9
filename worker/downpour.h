// The Downpour SGD loop of one worker (Dean et al., 2012).
//
// The compute thread runs minibatch steps on a ComputeBackend. Every n_fetch
// steps it fetches fresh parameters: by default (training.fetch after_push)
// it waits for its pushes in flight to be acknowledged and pulls before the
// next step, so each gradient is computed on parameters that hold the
// worker's own updates; with training.fetch overlap it asks the fetch thread
// and carries on with the parameters it has, and the new values are swapped
// in at a step boundary once they arrive (double buffering). The gradients of
// n_push steps are summed, at full weight, and handed to the client's
// StartPush, which sends them while the next steps compute; the client keeps
// up to training.max_pushes_in_flight pushes in flight and, when that many
// are, StartPush waits for one to be acknowledged (backpressure): no step's
// gradient is dropped, merged into a later push or scaled down. The loop keeps
// the tickets and waits on them: for the acks it counts, before a fetch
// after_push or bsp pull, and at the end.
//
// training.fetch layerwise (async): the step runs on the backend's
// LossAndGradientInStages. Blocks are grouped in the order backprop
// finishes them (about Options::layer_group_floats a group); a few send
// threads push each group's gradient as soon as it is complete and pull the
// group's blocks right after the ack, and the next step's forward pass waits
// only for the pieces it is about to read. Every gradient is still computed on parameters that hold the
// worker's own previous update, as with after_push.
//
// training.consistency bsp: after each push the compute thread waits for its
// acknowledgement (the ps acknowledges once the round is applied) and pulls
// synchronously, so every step computes on the parameters of the last round.
// training.warmstart_steps (DistBelief's warmstart): a worker other than 0
// first polls the ps until worker 0 has pushed that many steps.
#ifndef DOWNPOUR_WORKER_DOWNPOUR_H_
#define DOWNPOUR_WORKER_DOWNPOUR_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/config.h"
#include "common/counters.h"
#include "common/log_throttle.h"
#include "common/model_spec.h"
#include "worker/compute_backend.h"
#include "worker/dataset.h"
#include "worker/epoch_budget.h"
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
  WorkerStats stats() const override ABSL_LOCKS_EXCLUDED(stats_mu_);
  // The histogram behind stats()'s staleness figures (Status's raw buckets).
  StalenessHistogram staleness() const override ABSL_LOCKS_EXCLUDED(stats_mu_);

 private:
  // A summed gradient handed to the client, not yet waited for.
  struct PushInFlight {
    PushTicket ticket = 0;
    int steps = 0;  // steps summed into it
  };

  void FetchThread();
  // training.fetch layerwise: the groups' threads and the hooks the step
  // gives the backend.
  bool layerwise() const {
    return !options_.no_communication && !bsp() &&
           options_.training.fetch == FetchMode::kLayerwise;
  }
  void StartLayerwise() ABSL_LOCKS_EXCLUDED(layer_mu_);
  void LayerThread() ABSL_LOCKS_EXCLUDED(layer_mu_);
  // Blocks until every block overlapping params[begin, end) holds the values
  // for step `step`; Cancelled once Stop() is called, the first push or pull
  // error once one failed.
  absl::Status AwaitBlocks(int64_t step, int64_t begin, int64_t end)
      ABSL_LOCKS_EXCLUDED(layer_mu_);
  // grad[begin, end) of step `step` is final: each block it completes joins
  // the open group, which is handed to the send threads once it holds
  // layer_group_floats; a block with a non-finite or too large value is
  // recorded in layer_bad_ and nothing more of the step is handed off.
  void GradientReady(int64_t step, int64_t begin, int64_t end)
      ABSL_LOCKS_EXCLUDED(layer_mu_);
  // Hands the open group of step `step` to the send threads (`last`: the
  // step's last group).
  void HandOffGroup(int64_t step, bool last) ABSL_LOCKS_EXCLUDED(layer_mu_);
  // Counts step layer_step_ as pushed and pulled once its last group is
  // handed off and every group finished.
  void MaybeCountStep() ABSL_EXCLUSIVE_LOCKS_REQUIRED(layer_mu_);
  // The first block whose floats reach past offset `begin` (blocks are in
  // offset order): where a range starting at `begin` begins.
  size_t FirstBlockEndingAfter(int64_t begin) const {
    return static_cast<size_t>(
        std::upper_bound(block_ends_.begin(), block_ends_.end(), begin) -
        block_ends_.begin());
  }
  // Waits until every group handed off has been pushed and pulled (or one
  // failed), then stops the send threads.
  void StopLayerwise() ABSL_LOCKS_EXCLUDED(layer_mu_);
  // "" if every value of grad_[begin, end) is finite and within
  // optimizer.max_gradient_value, else what is wrong.
  std::string CheckGradient(int64_t begin, int64_t end) const;
  absl::Status Step(int64_t step, const std::vector<int>& order, int64_t* cursor);
  void FillBatch(const std::vector<int>& order, int64_t cursor, float* x, float* y) const;
  // Tells the backend that params_ holds new values (a GPU copy is refreshed).
  void ParamsChanged() { backend_->ParamsChanged(); }
  absl::Status Evaluate(const float* params);
  // The error of a non-finite loss or gradient at `step`: names the likely
  // causes and the config keys that help.
  absl::Status Diverged(int64_t step, const std::string& what) const;
  void SetError(const absl::Status& status) ABSL_LOCKS_EXCLUDED(comm_mu_);
  absl::Status error() const ABSL_LOCKS_EXCLUDED(comm_mu_);
  void MaybeSwapParams() ABSL_LOCKS_EXCLUDED(comm_mu_);
  // Starts the accumulated gradient's push (StartPush waits while the client
  // has max_pushes_in_flight in flight) and sums the next steps into a spare
  // buffer. False if a push failed.
  bool HandOffGradient() ABSL_LOCKS_EXCLUDED(comm_mu_);
  // Waits for the pushes handed off, oldest first: all of them (`all`), or
  // those that have ended. Counts each acknowledged push in stats_, records
  // the first failure (SetError) and keeps the buffers for reuse.
  void CollectPushes(bool all) ABSL_LOCKS_EXCLUDED(comm_mu_, stats_mu_);
  absl::Status Flush() ABSL_LOCKS_EXCLUDED(comm_mu_);
  // fetch after_push and bsp: waits until every push handed off is
  // acknowledged, then pulls the parameters (in bsp: of the round just
  // applied) into params_. False if a push or the pull failed.
  bool SyncAfterPush() ABSL_LOCKS_EXCLUDED(comm_mu_);
  // Warmstart: a worker other than 0 polls the ps until worker 0 has pushed
  // training.warmstart_steps steps (or the versions stop advancing for
  // warmstart_patience).
  absl::Status WaitForWarmstart();
  bool bsp() const {
    return options_.training.consistency == ConsistencyMode::kBsp;
  }
  // Pulls wait for the pushes in flight and block the compute thread
  // (training.fetch after_push, and always in bsp) instead of overlapping it.
  bool fetch_after_push() const {
    return bsp() || options_.training.fetch == FetchMode::kAfterPush;
  }
  // The run's last step: training.steps, or the epoch budget's.
  int64_t TotalSteps(const EpochBudget& budget) const;
  // Refreshes the rates and time shares in stats_.
  void UpdateRates() ABSL_LOCKS_EXCLUDED(stats_mu_);

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
  std::deque<PushInFlight> pushes_;  // handed off, not yet waited for
  // Gradient buffers of pushes waited for, for the next accum_.
  std::vector<std::vector<float>> spare_;
  std::vector<float> batch_x_;
  std::vector<float> batch_y_;
  // The next step's batch, filled and handed to backend_->Prefetch one step
  // early (a GPU backend copies it while the current step computes); valid
  // while the cursor is still next_cursor_ (a new epoch resets the cursor).
  std::vector<float> next_x_;
  std::vector<float> next_y_;
  std::vector<float> test_outputs_;  // Evaluate's scratch
  int64_t next_cursor_ = -1;

  // training.fetch layerwise.
  std::vector<int64_t> block_ends_;  // by block id: offset + length
  int64_t layer_group_floats_ = 1;   // Options' or its default
  std::vector<std::thread> layer_threads_;
  // Compute thread only: what the step has yet to report.
  std::vector<int64_t> block_left_;  // floats, by block id
  std::vector<uint32_t> open_group_;  // complete blocks not yet handed off
  int64_t open_floats_ = 0;
  std::string layer_bad_;      // the step's first bad block
  absl::Duration layer_wait_;  // the step's time in AwaitBlocks
  // Shared with the send threads.
  struct Group {
    int64_t step = 0;
    std::vector<uint32_t> ids;
  };
  absl::Mutex layer_mu_;
  std::deque<Group> queue_ ABSL_GUARDED_BY(layer_mu_);  // handed off, not taken
  int sending_ ABSL_GUARDED_BY(layer_mu_) = 0;  // groups taken, not finished
  // By block id: params_ hold the values step fresh_for_ computes on.
  std::vector<int64_t> fresh_for_ ABSL_GUARDED_BY(layer_mu_);
  // The step whose groups are handed off now: how many, how many finished,
  // whether its last one was, and what its pushes came to.
  int64_t layer_step_ ABSL_GUARDED_BY(layer_mu_) = 0;
  int step_groups_ ABSL_GUARDED_BY(layer_mu_) = 0;
  int step_finished_ ABSL_GUARDED_BY(layer_mu_) = 0;
  bool step_closed_ ABSL_GUARDED_BY(layer_mu_) = false;
  PushReport step_report_ ABSL_GUARDED_BY(layer_mu_);
  bool layer_failed_ ABSL_GUARDED_BY(layer_mu_) = false;
  bool layer_stop_ ABSL_GUARDED_BY(layer_mu_) = false;

  // Shared with the fetch thread.
  mutable absl::Mutex comm_mu_;
  bool fetch_wanted_ ABSL_GUARDED_BY(comm_mu_) = false;
  bool fetched_ ABSL_GUARDED_BY(comm_mu_) = false;  // back_ holds newer values
  std::vector<float> back_ ABSL_GUARDED_BY(comm_mu_);
  std::vector<uint64_t> back_versions_ ABSL_GUARDED_BY(comm_mu_);
  bool comm_done_ ABSL_GUARDED_BY(comm_mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(comm_mu_);

  mutable absl::Mutex stats_mu_;
  WorkerStats stats_ ABSL_GUARDED_BY(stats_mu_);
  absl::Time start_ ABSL_GUARDED_BY(stats_mu_) = absl::InfinitePast();
  absl::Duration compute_time_ ABSL_GUARDED_BY(stats_mu_);
  absl::Duration wait_pull_time_ ABSL_GUARDED_BY(stats_mu_);
  absl::Duration wait_push_time_ ABSL_GUARDED_BY(stats_mu_);
  StalenessHistogram staleness_ ABSL_GUARDED_BY(stats_mu_);
  // Adds a step's or push's report to the figures: `steps` steps applied, or
  // refused when report.refused (logged, throttled).
  void CountPushed(const PushReport& report, int64_t steps, bool pulled)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(stats_mu_);
  LogThrottle refusal_log_{{}};
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_DOWNPOUR_H_
