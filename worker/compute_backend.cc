// Out-of-line anchor for ComputeBackend's vtable.
#include "worker/compute_backend.h"

#include "absl/strings/str_cat.h"

namespace downpour::worker {

ComputeBackend::~ComputeBackend() = default;

absl::StatusOr<float> ComputeBackend::LossAndGradientInStages(
    const float* params, const float* x, const float* targets, int batch,
    float* grad, const StageHooks& hooks) {
  // One stage: everything awaited, then everything reported.
  absl::Status ready = hooks.await_params(0, hooks.num_params);
  if (!ready.ok()) return ready;
  absl::StatusOr<float> loss = LossAndGradient(params, x, targets, batch, grad);
  if (loss.ok()) hooks.gradient_ready(0, hooks.num_params);
  return loss;
}

absl::StatusOr<float> ComputeBackend::PooledLossAndGradient(
    const float* params, const PooledBatch& batch, const float* offset,
    const float* targets, int rows, float* grad, float* embedding_grad,
    float* out_grad) {
  return absl::UnimplementedError(absl::StrCat(
      "the ", device(),
      " compute backend does not train pooled embeddings (model.type "
      "wide_deep); use compute.device cpu or cuda"));
}

}  // namespace downpour::worker
