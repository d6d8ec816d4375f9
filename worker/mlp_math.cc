// Host implementations of the MLP's small kernels.
#include "worker/mlp_math.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace downpour::worker {

void AddBias(const float* bias, int rows, int cols, float* z) {
  for (int r = 0; r < rows; ++r) {
    float* row = z + static_cast<int64_t>(r) * cols;
    for (int c = 0; c < cols; ++c) row[c] += bias[c];
  }
}

void ReluForward(int64_t n, float* a) {
  for (int64_t i = 0; i < n; ++i) a[i] = std::max(a[i], 0.0f);
}

void ReluBackward(const float* a, int64_t n, float* da) {
  for (int64_t i = 0; i < n; ++i) da[i] = a[i] > 0.0f ? da[i] : 0.0f;
}

double SoftmaxCrossEntropy(const float* logits, const int* labels, int rows,
                           int classes, float grad_scale, float* dlogits) {
  double loss_sum = 0.0;
  for (int r = 0; r < rows; ++r) {
    const float* z = logits + static_cast<int64_t>(r) * classes;
    const float max = *std::max_element(z, z + classes);
    float sum = 0.0f;
    for (int c = 0; c < classes; ++c) sum += std::exp(z[c] - max);
    const float log_sum = std::log(sum);
    // loss = logsumexp(z) - z[y] = log_sum - (z[y] - max).
    loss_sum += static_cast<double>(log_sum - (z[labels[r]] - max));
    if (dlogits == nullptr) continue;
    float* dz = dlogits + static_cast<int64_t>(r) * classes;
    const float inv_sum = 1.0f / sum;
    for (int c = 0; c < classes; ++c) {
      dz[c] = grad_scale * std::exp(z[c] - max) * inv_sum;
    }
    dz[labels[r]] -= grad_scale;
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

int64_t CountCorrect(const float* logits, const int* labels, int rows,
                     int classes) {
  int64_t correct = 0;
  for (int r = 0; r < rows; ++r) {
    const float* z = logits + static_cast<int64_t>(r) * classes;
    // max_element returns the first maximum, so ties go to the lowest class.
    const int best = static_cast<int>(std::max_element(z, z + classes) - z);
    if (best == labels[r]) ++correct;
  }
  return correct;
}

absl::Status CheckLabels(const int* labels, int n, int classes) {
  for (int i = 0; i < n; ++i) {
    if (labels[i] < 0 || labels[i] >= classes) {
      return absl::InvalidArgumentError(
          absl::StrCat("label ", labels[i], " of example ", i,
                       " is outside [0, ", classes, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace downpour::worker
