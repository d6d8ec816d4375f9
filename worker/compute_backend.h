// The interface the Downpour loop drives to compute losses and gradients.
//
// A backend evaluates the model that common/model_spec.h lays out (one flat
// float vector: per layer `fc{l}.weight` [in, out] row-major, then `fc{l}.bias`
// [out]; ReLU between layers, the task's loss on the last) on a device:
// `cpu` (OpenBLAS) or `cuda` (cuBLAS). The loop sees only this interface, as
// LevelDB sees the OS only through `Env`.
//
//   std::unique_ptr<ComputeBackend> backend = ...;
//   absl::StatusOr<float> loss =
//       backend->LossAndGradient(params, x, targets, batch, grad.data());
#ifndef DOWNPOUR_WORKER_COMPUTE_BACKEND_H_
#define DOWNPOUR_WORKER_COMPUTE_BACKEND_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace downpour::worker {

// The minibatch of a model whose MLP inputs are pooled embeddings
// (model.type wide_deep): input row r of the MLP is, for each field f in
// 0..fields-1, the dim floats
//   x[r][f*dim + j] = sum over r's entries e with field[e] == f of
//                     value[e] * embeddings[slot[e]*dim + j]
// (0 where row r has no entry of field f), summed in entry order. Mean
// pooling is the caller's: it divides each value by the count of its row's
// entries of its field. Host memory, borrowed for the call.
struct PooledBatch {
  // rows + 1 entries, offsets[0] == 0: row r's entries are
  // [offsets[r], offsets[r + 1]).
  const int64_t* offsets = nullptr;
  const uint32_t* slot = nullptr;     // per entry: its row of `embeddings`
  const float* value = nullptr;       // per entry: its weight in the pool
  const uint16_t* field = nullptr;    // per entry: < fields
  const float* embeddings = nullptr;  // embedding_rows * dim
  int64_t embedding_rows = 0;
  int fields = 0;
  int dim = 0;
};

// What LossAndGradientInStages tells its caller and waits for, so that the
// parameters' transfers overlap the step (training.fetch layerwise). Ranges
// are [begin, end) of the flat parameter vector.
struct StageHooks {
  // Blocks until params[begin, end) hold the values the step is to compute
  // on. Called before the call first reads any float of the range; a non-OK
  // status ends the call with it.
  std::function<absl::Status(int64_t begin, int64_t end)> await_params;
  // grad[begin, end) is final, and the call reads params[begin, end) no
  // more: the caller may send that gradient and overwrite those parameters.
  // Every float of grad is reported exactly once per call.
  std::function<void(int64_t begin, int64_t end)> gradient_ready;
  // The parameters' count (ModelSpec::num_params()).
  int64_t num_params = 0;
  // Offsets where a layer's weight may be cut into row chunks, ascending (the
  // ps blocks' starts): each chunk is awaited and reported on its own.
  std::vector<int64_t> cuts;
};

// Not thread-safe: a backend owns scratch buffers; use one per compute thread.
// All pointers are host memory and are not retained after a call returns.
class ComputeBackend {
 public:
  virtual ~ComputeBackend();

  // The mean of the model task's loss over the batch (softmax cross-entropy,
  // logistic loss or squared error; worker/mlp_math.h's OutputLoss).
  // Overwrites grad[0..num_params) with d(loss)/d(params) for every
  // parameter. `params` holds num_params floats, `x` batch * inputs floats
  // (row-major), `targets` batch targets (class indices, 0/1 or values).
  // InvalidArgument if batch is outside [1, max_batch] or a target does not
  // fit the task (CheckTargets); grad is then unspecified.
  virtual absl::StatusOr<float> LossAndGradient(const float* params,
                                                const float* x,
                                                const float* targets, int batch,
                                                float* grad) = 0;

  // LossAndGradient in stages, for a caller whose parameters arrive and
  // whose gradients leave piece by piece (wait-free backpropagation, Zhang
  // et al., ATC 2017): the same loss and gradient (up to the order of float
  // sums), with hooks.await_params before each piece of params is read and
  // hooks.gradient_ready as soon as a piece of grad is final, last layer
  // first. A backend that does not cut its step (the default) awaits all of
  // params, runs LossAndGradient and reports all of grad.
  virtual absl::StatusOr<float> LossAndGradientInStages(
      const float* params, const float* x, const float* targets, int batch,
      float* grad, const StageHooks& hooks);

  // The model's raw outputs for n examples: out[i * outputs + o] is example
  // i's logit o (multiclass: one per class; binary: one logit) or its
  // predicted value (regression); model/metrics.h turns them into
  // probabilities and metrics. Works through the examples in chunks, so n
  // may exceed max_batch; n = 0 writes nothing. InvalidArgument if n < 0.
  virtual absl::Status Predict(const float* params, const float* x, int n,
                               float* out) = 0;

  // One training step of wide_deep's deep part: gathers batch.offsets'
  // rows of pooled inputs (PooledBatch), runs the MLP, adds offset[r] (the
  // wide part's margin of row r; null: 0) to its one output, and takes the
  // task's loss (binary or regression: one output). Writes
  //   grad[0..num_params): d(mean loss)/d(params), as LossAndGradient;
  //   embedding_grad[0..embedding_rows*dim): d(summed loss)/d(embeddings),
  //     the scatter of the inputs' gradient back through the pooling
  //     (overwritten; rows no entry uses get 0);
  //   out_grad[0..batch): d(summed loss)/d(output of row r), from which the
  //     caller takes the wide part's gradient.
  // Returns the mean loss. InvalidArgument as LossAndGradient, and when the
  // model has more than one output or its inputs are not fields * dim, or a
  // slot or field is out of range. Sums over entries and rows may run in any
  // order (a device scatters with atomic adds), so results may differ from
  // the CPU's in the last bits. The default: Unimplemented.
  virtual absl::StatusOr<float> PooledLossAndGradient(
      const float* params, const PooledBatch& batch, const float* offset,
      const float* targets, int rows, float* grad, float* embedding_grad,
      float* out_grad);

  // Where the math runs, for logs and the status service: "cpu", "cuda:0", ...
  virtual std::string device() const = 0;

  // The two hooks below are optional hints for backends that keep their own
  // copy of the data in device memory (cuda). Both default to doing nothing
  // (cpu), and a caller that never calls them gets the contracts above.

  // Caching hint for LossAndGradient's `params`. From its first call on, the
  // caller promises to call it again whenever the values it passes as params
  // change (fresh values swapped in, a local update), before the next
  // LossAndGradient. A backend may then re-read params only after a call.
  // Predict always reads its params.
  virtual void ParamsChanged() {}

  // Prefetch hint: a coming LossAndGradient call will pass these x and targets
  // pointers and this batch, typically the call after the next one (the
  // Downpour loop prefetches step k+1's batch just before computing step k), so
  // a backend may start copying them to its device now and overlap the copy
  // with the calls in between. Those calls, with other pointers, and Predict
  // leave the hint in place; a hint that never comes true costs only its copy,
  // and one with an out-of-range batch or label is ignored (the call reports
  // it). The first LossAndGradient call with these pointers consumes the hint;
  // a later Prefetch of the same pointers replaces it. REQUIRES: when that
  // first call is made, x and targets hold the values they had here.
  virtual void Prefetch(const float* x, const float* targets, int batch) {}
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_COMPUTE_BACKEND_H_
