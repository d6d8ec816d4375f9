// The per-thread bodies of the CUDA kernels in kernels.cu: one function per
// element, row or column of the host kernels in worker/mlp_math.h, with the
// same semantics and the same order of floating-point operations.
//
// They are `__host__ __device__` under nvcc and plain inline functions under
// the host compiler, so kernel_math_test.cc checks them against mlp_math.h on
// machines without a GPU. Matrices are row-major [rows, cols].
#ifndef DOWNPOUR_WORKER_CUDA_KERNEL_MATH_H_
#define DOWNPOUR_WORKER_CUDA_KERNEL_MATH_H_

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define DOWNPOUR_HOST_DEVICE __host__ __device__
#else
#define DOWNPOUR_HOST_DEVICE
#endif

namespace downpour::worker::gpu {

// AddBias, element i of z: z[i] += bias[i % cols].
DOWNPOUR_HOST_DEVICE inline void AddBiasAt(int64_t i, const float* bias,
                                           int cols, float* z) {
  z[i] += bias[i % cols];
}

// ReluForward, element i: a[i] = max(a[i], 0) as std::max computes it (a NaN
// stays NaN, so a diverging model is still noticed).
DOWNPOUR_HOST_DEVICE inline void ReluForwardAt(int64_t i, float* a) {
  a[i] = a[i] < 0.0f ? 0.0f : a[i];
}

// ReluBackward, element i: da[i] = 0 unless a[i] > 0.
DOWNPOUR_HOST_DEVICE inline void ReluBackwardAt(int64_t i, const float* a,
                                                float* da) {
  da[i] = a[i] > 0.0f ? da[i] : 0.0f;
}

// SoftmaxCrossEntropy, row r: returns that row's loss, and writes its
// dlogits row (scaled by grad_scale) unless dlogits is null. dlogits may alias
// logits. REQUIRES: labels[r] in [0, classes).
DOWNPOUR_HOST_DEVICE inline float SoftmaxCrossEntropyRow(
    int r, const float* logits, const int* labels, int classes,
    float grad_scale, float* dlogits) {
  const float* z = logits + static_cast<int64_t>(r) * classes;
  float max = z[0];
  for (int c = 1; c < classes; ++c) max = max < z[c] ? z[c] : max;
  float sum = 0.0f;
  for (int c = 0; c < classes; ++c) sum += expf(z[c] - max);
  const float log_sum = logf(sum);
  const int label = labels[r];
  // Read before dlogits (which may alias z) is written.
  const float loss = log_sum - (z[label] - max);
  if (dlogits != nullptr) {
    float* dz = dlogits + static_cast<int64_t>(r) * classes;
    const float inv_sum = 1.0f / sum;
    for (int c = 0; c < classes; ++c) {
      dz[c] = grad_scale * expf(z[c] - max) * inv_sum;
    }
    dz[label] -= grad_scale;
  }
  return loss;
}

// ColumnSums, column c: out[c] = sum over r of m[r][c], rows in order.
DOWNPOUR_HOST_DEVICE inline void ColumnSumAt(int c, const float* m, int rows,
                                             int cols, float* out) {
  float sum = 0.0f;
  for (int r = 0; r < rows; ++r) sum += m[static_cast<int64_t>(r) * cols + c];
  out[c] = sum;
}

// CountCorrect, row r: 1 if labels[r] is the row's argmax (ties go to the
// lowest class, as std::max_element), else 0.
DOWNPOUR_HOST_DEVICE inline int CorrectAt(int r, const float* logits,
                                          const int* labels, int classes) {
  const float* z = logits + static_cast<int64_t>(r) * classes;
  int best = 0;
  for (int c = 1; c < classes; ++c) {
    if (z[best] < z[c]) best = c;
  }
  return best == labels[r] ? 1 : 0;
}

}  // namespace downpour::worker::gpu

#endif  // DOWNPOUR_WORKER_CUDA_KERNEL_MATH_H_
