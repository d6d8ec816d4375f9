// What a worker's training loop offers the worker daemon: the dense
// Downpour loop (worker/downpour.h) and the sparse one (worker/sparse_loop.h).
#ifndef DOWNPOUR_WORKER_TRAINING_LOOP_H_
#define DOWNPOUR_WORKER_TRAINING_LOOP_H_

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/counters.h"

namespace downpour::worker {

// Figures the worker reports (heartbeats, Status, progress lines).
struct WorkerStats {
  int64_t step = 0;  // steps computed
  // Examples whose gradients the ps acknowledged (applied): a push's ack adds
  // its steps times the batch size. Steps computed but not yet acknowledged
  // are not counted.
  int64_t examples = 0;
  double examples_per_sec = 0;  // `examples` over wall time since Run began
  double loss = NAN;            // mean training loss over recent steps
  double accuracy = NAN;        // last test accuracy (NaN for regression)
  uint64_t evaluations = 0;     // test evaluations so far
  double test_loss = NAN;       // last test loss (the training loss's kind)
  // The last test metrics of the model task, main first ("accuracy",
  // "logloss"; "auc", "logloss", "accuracy"; "rmse", "mae", "r2"); empty
  // before the first evaluation.
  std::vector<std::pair<std::string, double>> metrics;
  // Staleness over every block update the ps acknowledged since Run began:
  // the updates applied to a block between the pull the gradient was computed
  // on and the push that applied it. Mean, nearest-rank p50 and p99 (exact up
  // to 255, see StalenessHistogram) and exact max; 0 before the first ack.
  double mean_staleness = 0;
  double staleness_p50 = 0;
  double staleness_p99 = 0;
  double staleness_max = 0;
  int64_t pulls = 0;
  int64_t pushes = 0;        // pushes acknowledged by the ps
  int64_t pushed_steps = 0;  // steps whose gradient those pushes carried
  // Steps whose gradient a ps's push guard refused as an outlier, on any of
  // its shards (robustness.norm_refuse_factor): answered, but not applied
  // there, so counted in none of the figures above (pushes, pushed_steps,
  // examples), though other shards may have applied their part.
  int64_t refused_steps = 0;
  // Sparse models: keys those pushes carried, each one row update on a ps.
  int64_t row_updates = 0;
  // Shares of wall time since Run began: computing steps (and evaluating),
  // waiting for a pull the compute thread needs (the first and the final
  // one), waiting for a push to complete (backpressure and the final flush).
  double share_compute = 0;
  double share_wait_pull = 0;
  double share_wait_push = 0;
  // Streamed data: waiting for the reader thread to parse the next rows.
  double share_wait_data = 0;
  // Examples counted in `examples`, by the epoch they were read in (index:
  // 0-based epoch).
  std::vector<int64_t> epoch_examples;
  // The steps Run takes in all, as known now (a dense worker's change when
  // it adopts a part); 0 when not known ahead (streamed data).
  int64_t planned_steps = 0;
  bool finished = false;
  // Set when training diverged: the error Run returns, naming the knobs.
  std::string diverged;
};

// Run() on one thread; Stop(), stats() and staleness() from any thread.
class TrainingLoop {
 public:
  virtual ~TrainingLoop() = default;
  // Trains until done or stopped, then evaluates the final parameters.
  virtual absl::Status Run() = 0;
  virtual void Stop() = 0;
  virtual WorkerStats stats() const = 0;
  // The histogram behind stats()'s staleness figures.
  virtual StalenessHistogram staleness() const = 0;
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_TRAINING_LOOP_H_
