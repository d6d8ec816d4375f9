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
// logits. The target is the class index as a float. REQUIRES: targets[r] an
// integer in [0, classes).
DOWNPOUR_HOST_DEVICE inline float SoftmaxCrossEntropyRow(
    int r, const float* logits, const float* targets, int classes,
    float grad_scale, float* dlogits) {
  const float* z = logits + static_cast<int64_t>(r) * classes;
  float max = z[0];
  for (int c = 1; c < classes; ++c) max = max < z[c] ? z[c] : max;
  float sum = 0.0f;
  for (int c = 0; c < classes; ++c) sum += expf(z[c] - max);
  const float log_sum = logf(sum);
  const int label = static_cast<int>(targets[r]);
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

// Logistic loss of row r's one logit z against a 0/1 target y:
// log(1 + e^z) - y z, computed as max(z, 0) - y z + log1p(e^-|z|) so that no
// exponent overflows; d/dz = sigmoid(z) - y. dlogits may alias logits.
DOWNPOUR_HOST_DEVICE inline float LogisticRow(int r, const float* logits,
                                              const float* targets,
                                              float grad_scale,
                                              float* dlogits) {
  const float z = logits[r];
  const float y = targets[r];
  const float loss = (z > 0.0f ? z : 0.0f) - y * z + log1pf(expf(-fabsf(z)));
  if (dlogits != nullptr) {
    const float sigmoid =
        z >= 0.0f ? 1.0f / (1.0f + expf(-z)) : expf(z) / (1.0f + expf(z));
    dlogits[r] = grad_scale * (sigmoid - y);
  }
  return loss;
}

// Squared error of row r's one output against a real target:
// (z - y)^2, d/dz = 2 (z - y). dlogits may alias logits.
DOWNPOUR_HOST_DEVICE inline float SquaredErrorRow(int r, const float* logits,
                                                  const float* targets,
                                                  float grad_scale,
                                                  float* dlogits) {
  const float diff = logits[r] - targets[r];
  if (dlogits != nullptr) dlogits[r] = grad_scale * 2.0f * diff;
  return diff * diff;
}

// The loss of row r for model task `task` (Task's numbers in
// common/model_spec.h: 0 multiclass, 1 binary, 2 regression); `outputs` is
// the logits per row (classes for multiclass, else 1).
DOWNPOUR_HOST_DEVICE inline float OutputLossRow(int task, int r,
                                                const float* logits,
                                                const float* targets,
                                                int outputs, float grad_scale,
                                                float* dlogits) {
  if (task == 1) return LogisticRow(r, logits, targets, grad_scale, dlogits);
  if (task == 2) {
    return SquaredErrorRow(r, logits, targets, grad_scale, dlogits);
  }
  return SoftmaxCrossEntropyRow(r, logits, targets, outputs, grad_scale,
                                dlogits);
}

// ColumnSums, column c: out[c] = sum over r of m[r][c], rows in order.
DOWNPOUR_HOST_DEVICE inline void ColumnSumAt(int c, const float* m, int rows,
                                             int cols, float* out) {
  float sum = 0.0f;
  for (int r = 0; r < rows; ++r) sum += m[static_cast<int64_t>(r) * cols + c];
  out[c] = sum;
}

// The scaling of a gradient of the summed loss to the mean's, element i:
// a[i] *= scale (CpuBackend::PooledLossAndGradient's loop over grad).
DOWNPOUR_HOST_DEVICE inline void ScaleAt(int64_t i, float scale, float* a) {
  a[i] *= scale;
}

// Pooling of embeddings into MLP inputs (compute_backend.h's PooledBatch),
// element i = r * dim + j: writes component j of every field of input row r,
// x[r][f*dim + j] (x is [rows, fields*dim]): 0, plus value[e] *
// embeddings[slot[e]*dim + j] for each of row r's entries e of field f, in
// entry order.
DOWNPOUR_HOST_DEVICE inline void PoolAt(int64_t i, const int64_t* offsets,
                                        const uint32_t* slot,
                                        const float* value,
                                        const uint16_t* field,
                                        const float* embeddings, int fields,
                                        int dim, float* x) {
  const int64_t r = i / dim;
  const int j = static_cast<int>(i % dim);
  float* row = x + r * fields * dim;
  for (int f = 0; f < fields; ++f) row[f * dim + j] = 0.0f;
  for (int64_t e = offsets[r]; e < offsets[r + 1]; ++e) {
    row[field[e] * dim + j] +=
        value[e] * embeddings[static_cast<int64_t>(slot[e]) * dim + j];
  }
}

// The pooling's backward pass, element i = r * dim + j: for each of row r's
// entries e, adds value[e] * dx[r][field[e]*dim + j] (dx: the gradient of
// the pooled inputs) to embedding_grad[slot[e]*dim + j]. Rows share
// embedding rows, so a device adds atomically (in any order); the host adds
// in order of i, then e.
DOWNPOUR_HOST_DEVICE inline void UnpoolAt(int64_t i, const int64_t* offsets,
                                          const uint32_t* slot,
                                          const float* value,
                                          const uint16_t* field,
                                          const float* dx, int fields, int dim,
                                          float* embedding_grad) {
  const int64_t r = i / dim;
  const int j = static_cast<int>(i % dim);
  const float* row = dx + r * fields * dim;
  for (int64_t e = offsets[r]; e < offsets[r + 1]; ++e) {
    const float term = value[e] * row[field[e] * dim + j];
    float* g = embedding_grad + static_cast<int64_t>(slot[e]) * dim + j;
#if defined(__CUDA_ARCH__)
    atomicAdd(g, term);
#else
    *g += term;
#endif
  }
}

}  // namespace downpour::worker::gpu

#endif  // DOWNPOUR_WORKER_CUDA_KERNEL_MATH_H_
