// Host implementations of the MLP's small kernels.
#include "worker/mlp_math.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "worker/cuda/kernel_math.h"

namespace downpour::worker {

void ReluBackward(const float* a, int64_t n, float* da) {
  for (int64_t i = 0; i < n; ++i) da[i] = a[i] > 0.0f ? da[i] : 0.0f;
}

double OutputLoss(Task task, const float* logits, const float* targets,
                  int rows, int outputs, float grad_scale, float* dlogits) {
  double loss_sum = 0.0;
  for (int r = 0; r < rows; ++r) {
    loss_sum += static_cast<double>(
        gpu::OutputLossRow(static_cast<int>(task), r, logits, targets, outputs,
                           grad_scale, dlogits));
  }
  return loss_sum;
}

void ColumnSums(const float* m, int rows, int cols, float* out) {
  std::fill(out, out + cols, 0.0f);
  for (int r = 0; r < rows; ++r) {
    const float* row = m + static_cast<int64_t>(r) * cols;
    for (int c = 0; c < cols; ++c) out[c] += row[c];
  }
}

absl::Status CheckBatch(int batch, int max_batch) {
  if (batch < 1 || batch > max_batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch of ", batch, " examples is outside [1, ", max_batch,
                     "] (the backend's max_batch)"));
  }
  return absl::OkStatus();
}

void Pool(const PooledBatch& batch, int rows, float* x) {
  const int64_t n = static_cast<int64_t>(rows) * batch.dim;
  for (int64_t i = 0; i < n; ++i) {
    gpu::PoolAt(i, batch.offsets, batch.slot, batch.value, batch.field,
                batch.embeddings, batch.fields, batch.dim, x);
  }
}

void Unpool(const PooledBatch& batch, int rows, const float* dx,
            float* embedding_grad) {
  std::fill(embedding_grad, embedding_grad + batch.embedding_rows * batch.dim,
            0.0f);
  const int64_t n = static_cast<int64_t>(rows) * batch.dim;
  for (int64_t i = 0; i < n; ++i) {
    gpu::UnpoolAt(i, batch.offsets, batch.slot, batch.value, batch.field, dx,
                  batch.fields, batch.dim, embedding_grad);
  }
}

absl::Status CheckPooledBatch(const PooledBatch& batch, int rows, int inputs,
                              int outputs) {
  if (outputs != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pooled inputs need a model with one output, this one has ", outputs));
  }
  if (batch.fields < 1 || batch.dim < 1 ||
      static_cast<int64_t>(batch.fields) * batch.dim != inputs) {
    return absl::InvalidArgumentError(
        absl::StrCat(batch.fields, " fields of ", batch.dim,
                     " floats do not make the model's ", inputs, " inputs"));
  }
  if (batch.offsets[0] != 0) {
    return absl::InvalidArgumentError("pooled batch offsets must start at 0");
  }
  for (int r = 0; r < rows; ++r) {
    if (batch.offsets[r + 1] < batch.offsets[r]) {
      return absl::InvalidArgumentError(
          absl::StrCat("pooled batch offsets decrease at row ", r));
    }
    for (int64_t e = batch.offsets[r]; e < batch.offsets[r + 1]; ++e) {
      if (batch.slot[e] >= batch.embedding_rows) {
        return absl::InvalidArgumentError(absl::StrCat(
            "entry ", e, " of the pooled batch names embedding row ",
            batch.slot[e], " of ", batch.embedding_rows));
      }
      if (batch.field[e] >= batch.fields) {
        return absl::InvalidArgumentError(
            absl::StrCat("entry ", e, " of the pooled batch is in field ",
                         batch.field[e], " of ", batch.fields));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace downpour::worker
