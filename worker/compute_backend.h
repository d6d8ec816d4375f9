// The interface the Downpour loop drives to compute losses and gradients.
//
// A backend evaluates the model that common/model_spec.h lays out (one flat
// float vector: per layer `fc{l}.weight` [in, out] row-major, then `fc{l}.bias`
// [out]; ReLU between layers, softmax cross-entropy on the last) on a device:
// `cpu` (OpenBLAS) or `cuda` (cuBLAS). The loop sees only this interface, as
// LevelDB sees the OS only through `Env`.
//
//   std::unique_ptr<ComputeBackend> backend = ...;
//   absl::StatusOr<float> loss =
//       backend->LossAndGradient(params, x, labels, batch, grad.data());
#ifndef DOWNPOUR_WORKER_COMPUTE_BACKEND_H_
#define DOWNPOUR_WORKER_COMPUTE_BACKEND_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace downpour::worker {

// Not thread-safe: a backend owns scratch buffers; use one per compute thread.
// All pointers are host memory and are not retained after a call returns.
class ComputeBackend {
 public:
  virtual ~ComputeBackend();

  // Mean softmax cross-entropy over the batch. Overwrites grad[0..num_params)
  // with d(loss)/d(params) for every parameter. `params` holds num_params
  // floats, `x` batch * inputs floats (row-major), `labels` batch class
  // indices. InvalidArgument if batch is outside [1, max_batch] or a label is
  // outside [0, classes); grad is then unspecified.
  virtual absl::StatusOr<float> LossAndGradient(const float* params,
                                                const float* x,
                                                const int* labels, int batch,
                                                float* grad) = 0;

  // Sets *loss_sum to the sum of the n examples' losses and *correct to how
  // many have their label as the argmax of the logits (ties go to the lowest
  // class). Works through the examples in chunks, so n may exceed max_batch;
  // n = 0 gives zeros. InvalidArgument if n < 0 or a label is outside
  // [0, classes).
  virtual absl::Status Evaluate(const float* params, const float* x,
                                const int* labels, int n, double* loss_sum,
                                int64_t* correct) = 0;

  // Where the math runs, for logs and the status service: "cpu", "cuda:0", ...
  virtual std::string device() const = 0;

  // The two hooks below are optional hints for backends that keep their own
  // copy of the data in device memory (cuda). Both default to doing nothing
  // (cpu), and a caller that never calls them gets the contracts above.

  // Caching hint for LossAndGradient's `params`. From the first call on, the
  // caller promises that every LossAndGradient call passes parameters with the
  // same values for as long as `generation` stays the same, and calls this with
  // a new value whenever they change (a fresh pull swapped in, a local update).
  // A backend may then skip re-reading params while the generation is
  // unchanged. Evaluate always reads its params.
  virtual void SetParamsGeneration(uint64_t generation) {}

  // Prefetch hint: the caller's next LossAndGradient call passes these same x
  // and labels pointers and this batch. A backend may start copying them to its
  // device now, so that the copy overlaps whatever runs before that call. A
  // next call with other pointers or another batch ignores the hint, and so
  // does the backend if batch or a label is out of range (the call reports it).
  // REQUIRES: x and labels stay unchanged until that next call returns.
  virtual void Prefetch(const float* x, const int* labels, int batch) {}
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_COMPUTE_BACKEND_H_
