// The `training` section of the config: how workers step, fetch and push,
// the consistency between them, when they stop and what the job aims at.
#ifndef DOWNPOUR_COMMON_CONFIG_TRAINING_H_
#define DOWNPOUR_COMMON_CONFIG_TRAINING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/config_data.h"
#include "common/config_model.h"
#include "common/config_optimizer.h"

namespace downpour {

// Name and Parse of each choice as config.h describes for every choice.
// training.fetch.
enum class FetchMode { kAfterPush, kOverlap, kLayerwise };
const char* FetchModeName(FetchMode fetch);
absl::StatusOr<FetchMode> ParseFetchMode(absl::string_view name);

// training.consistency (server/consistency.h).
enum class ConsistencyMode { kAsync, kSsp, kBsp };
const char* ConsistencyModeName(ConsistencyMode mode);
absl::StatusOr<ConsistencyMode> ParseConsistencyMode(absl::string_view name);

// training.mode (worker/easgd_fetcher.h).
enum class TrainingMode { kDownpour, kEasgd };
const char* TrainingModeName(TrainingMode mode);
absl::StatusOr<TrainingMode> ParseTrainingMode(absl::string_view name);

struct TrainingSection {
  // "downpour" (default): workers push gradients that the ps applies with
  // optimizer.type. "easgd", elastic averaging SGD (Zhang et al., 2015): each
  // worker steps its own copy of the parameters with optimizer.type locally
  // and every easgd_tau steps pulls the center (the ps's parameters), moves
  // its copy toward it by easgd_alpha, x -= alpha (x - center), and pushes
  // the same elastic difference, which the ps adds to the center as it is
  // (center += alpha (x - center); server/optimizer.h DenseOptimizer).
  // Dense models, async, after_push only. Default kDownpour.
  TrainingMode mode = TrainingMode::kDownpour;
  // easgd: the moving rate alpha in (0, 1); 0 = the paper's 0.9 / workers
  // (beta = 0.9 shared by the workers). Default 0.
  double easgd_alpha = 0.0;
  // easgd: local steps between two exchanges with the center, >= 1. Default 4.
  int easgd_tau = 4;

  int batch_size = 64;  // examples per step, >= 1
  int n_fetch = 1;      // pull fresh parameters every n_fetch steps, >= 1
  // How a worker fetches: "after_push" (default) waits, every n_fetch steps,
  // until its pushes in flight are acknowledged and then pulls before it
  // computes on: every gradient is computed on parameters that include the
  // worker's own updates, which keeps staleness near the number of other
  // workers. "overlap" pulls in the background while it computes and swaps
  // the new values in when they arrive (DistBelief's double buffering): no
  // step waits for a pull, but gradients are about twice as stale. bsp always
  // fetches after_push. "layerwise" gives after_push's staleness without its
  // wait (wait-free backpropagation): each group of blocks is pushed as soon
  // as backprop has its gradient, last layer first, and pulled right after
  // its acknowledgement, and the next forward pass computes with each piece
  // as it arrives; async only, n_fetch = n_push = 1. Default kAfterPush.
  FetchMode fetch = FetchMode::kAfterPush;
  int n_push = 1;  // push the accumulated gradient every n_push steps, >= 1
  // Pushes a worker may have in flight at once; when that many are, its compute
  // thread waits for one to be acknowledged (backpressure). >= 1, default 1.
  int max_pushes_in_flight = 1;
  // "async" (Downpour), "ssp" (bounded staleness) or "bsp". Default kAsync.
  // ssp: a worker's push to a block waits while it is more than max_staleness
  // pushes ahead of the slowest active worker on that block; bsp: each block
  // is updated once per round with the mean of every active worker's push
  // (requires n_fetch == n_push and max_pushes_in_flight == 1).
  ConsistencyMode consistency = ConsistencyMode::kAsync;
  int max_staleness = 0;  // ssp only: largest allowed clock lead, >= 0
  // Passes over the worker's partition; the worker stops after `epochs` or
  // `steps`, whichever is set (steps wins when both are > 0). Default 10
  // epochs.
  int epochs = 10;
  int64_t steps = 0;
  // The job stops as soon as a worker's test accuracy reaches this (0 = off).
  // Shorthand for target_metric accuracy, target_value this, stop_at_target
  // true.
  double target_accuracy = 0.0;
  // The test metric the job aims at: "accuracy", "logloss" (multiclass,
  // binary), "auc" (binary), "rmse", "mae", "r2" (regression). The summary
  // says when a worker first reached target_value; with stop_at_target the
  // job stops there. "" = the task's main metric (accuracy, auc, rmse).
  std::string target_metric;
  // The value to reach: at least this for accuracy, auc and r2, at most this
  // for logloss, rmse and mae. 0 = no target. Default 0.
  double target_value = 0.0;
  // Stop the job once a worker's test metric reaches target_value. Default
  // true.
  bool stop_at_target = true;
  // Evaluate test accuracy every this many steps (0 = only at the end). Default
  // 200.
  int eval_every_steps = 200;
  // Seed for the data split, shuffling and anything else random.
  uint64_t seed = 42;
  // DistBelief's warmstart: worker 0 trains alone for this many steps before
  // the other workers start (async only). >= 0, default 0 (off).
  int64_t warmstart_steps = 0;
  // How long a worker waits for an unreachable ps shard (pulls fail, pushes
  // cannot be delivered) before it gives up: it computes no step meanwhile,
  // says what it waits for (log and Status waiting_for), and past the limit
  // exits 1 naming the shard, so the job is not reported done. Seconds, >= 0;
  // 0 = wait forever. Default 300.
  double outage_timeout_s = 300;
};

// What the job aims at: training.target_metric (or the task's main metric)
// and target_value with stop_at_target; else the older target_accuracy
// (accuracy, stopping there); else nothing (metric "").
struct JobTarget {
  std::string metric;
  double value = 0;
  bool stop = false;  // the job stops once a worker reaches it
};

// True when `value` of `metric` is at or past `target`: at least it for
// accuracy, auc and r2, at most it for the others. False for NaN or an empty
// metric.
bool ReachedTarget(const std::string& metric, double value, double target);

// Internal to the config loader (common/config.cc).
namespace config_internal {
struct ConfigField;
// The section's keys bound to `training`, in docs/CONFIG.md's order.
std::vector<ConfigField> TrainingKeys(TrainingSection* training);
// The rules between the section's keys (when workers stop, what bsp and
// layerwise need), and its targets against the model's task and the data's
// test examples: InvalidArgument naming the keys.
absl::Status CheckTraining(const TrainingSection& training, Task task,
                           const DataSection& data);
// training.mode easgd against the model and the optimizer: a dense model, a
// dense rule the worker can step with, none of the factors that only mean
// something for stale gradients on the ps. InvalidArgument naming the keys.
absl::Status CheckTrainingMode(const TrainingSection& training,
                               const ModelSection& model,
                               const OptimizerSection& optimizer);
}  // namespace config_internal

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_CONFIG_TRAINING_H_
