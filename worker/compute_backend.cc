// Out-of-line anchor for ComputeBackend's vtable.
#include "worker/compute_backend.h"

#include "absl/strings/str_cat.h"

namespace downpour::worker {

ComputeBackend::~ComputeBackend() = default;

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
