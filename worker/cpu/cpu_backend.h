// ComputeBackend on the CPU: OpenBLAS SGEMM plus the mlp_math kernels; the
// forward pass is model/dense_forward.h's, the one inference runs too.
//
//   CpuBackend backend(spec, /*max_batch=*/128);
//   absl::StatusOr<float> loss =
//       backend.LossAndGradient(params, x, targets, 128, grad.data());
//
// All activation and gradient buffers are allocated once in the constructor; a
// step allocates nothing. OpenBLAS's own thread count is the caller's choice
// (openblas_set_num_threads(1) or OPENBLAS_NUM_THREADS=1 for one thread per
// worker).
#ifndef DOWNPOUR_WORKER_CPU_CPU_BACKEND_H_
#define DOWNPOUR_WORKER_CPU_CPU_BACKEND_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model_spec.h"
#include "model/dense_forward.h"
#include "worker/compute_backend.h"

namespace downpour::worker {

// The model of `spec`: layers[0] inputs, ReLU hidden layers, layers.back()
// classes (two layers give softmax regression). Not thread-safe; one per
// compute thread.
class CpuBackend : public ComputeBackend {
 public:
  // Keeps a copy of the layout it needs; `spec` need not outlive the backend.
  // REQUIRES: max_batch >= 1.
  CpuBackend(const ModelSpec& spec, int max_batch);

  CpuBackend(const CpuBackend&) = delete;
  CpuBackend& operator=(const CpuBackend&) = delete;

  absl::StatusOr<float> LossAndGradient(const float* params, const float* x,
                                        const float* targets, int batch,
                                        float* grad) override;
  // Each layer's weight cut into row chunks at hooks.cuts, the chunks of a
  // weight last rows first in both passes: the forward pass adds each
  // chunk's share (K-split SGEMM) once it is awaited; the backward pass
  // computes every delta first, then reports the gradients in the order the
  // forward pass awaits the parameters (first layer first, each chunk as
  // soon as it is computed), so what the next step needs first leaves first.
  absl::StatusOr<float> LossAndGradientInStages(
      const float* params, const float* x, const float* targets, int batch,
      float* grad, const StageHooks& hooks) override;
  absl::Status Predict(const float* params, const float* x, int n,
                       float* out) override;
  absl::StatusOr<float> PooledLossAndGradient(
      const float* params, const PooledBatch& batch, const float* offset,
      const float* targets, int rows, float* grad, float* embedding_grad,
      float* out_grad) override;
  std::string device() const override { return "cpu"; }

  int max_batch() const { return max_batch_; }

 private:
  int num_layers() const { return static_cast<int>(layers_.size()) - 1; }

  // Runs rows examples through the model; returns the logits [rows, classes].
  const float* Forward(const float* params, const float* x, int rows);
  // Back-propagates delta_.back() (d loss / d logits) through the model and
  // writes every parameter's gradient into grad, and d loss / d x into dx
  // [rows, inputs] unless it is null.
  void Backward(const float* params, const float* x, int rows, float* grad,
                float* dx = nullptr);

  // Layer l's weight rows cut at `cuts`: ascending row bounds, 0 first and
  // fan_in last.
  std::vector<int> RowChunks(int l, const std::vector<int64_t>& cuts) const;

  // Constant after construction.
  const std::vector<int> layers_;
  const Task task_;
  const int max_batch_;
  const int64_t tensors_floats_;  // spec.num_params()
  // Per linear layer: where its weight and bias start in the flat vector.
  const model::DenseLayout layout_;

  // Scratch, max_batch_ rows each. act_[l]: output of linear layer l (after
  // ReLU for hidden layers; the logits for the last). delta_[l]: d loss / d
  // (layer l's pre-activation).
  std::vector<std::vector<float>> act_;
  std::vector<std::vector<float>> delta_;
  // PooledLossAndGradient only (sized on first use): the pooled inputs and
  // their gradient, [max_batch_, inputs] each.
  std::vector<float> pooled_;
  std::vector<float> pooled_grad_;
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_CPU_CPU_BACKEND_H_
