// CUDA kernels mirroring worker/mlp_math.h: one thread per element (bias,
// ReLU, scaling, pooling), per row (softmax cross-entropy, argmax) or per
// column (bias gradient), each running the matching function of
// kernel_math.h. A minibatch has few rows and the MLP's rows are short, so one
// thread per row or column is plenty next to the SGEMMs around these kernels.
#include <cuda_runtime.h>

#include "worker/cuda/kernel_math.h"
#include "worker/cuda/kernels.h"

namespace downpour::worker::gpu {
namespace {

constexpr int kThreads = 256;

// Enough blocks of kThreads for n threads (n > 0).
unsigned int Blocks(int64_t n) {
  return static_cast<unsigned int>((n + kThreads - 1) / kThreads);
}

__device__ int64_t ThreadIndex() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__global__ void AddBiasKernel(const float* bias, int64_t n, int cols,
                              float* z) {
  const int64_t i = ThreadIndex();
  if (i < n) AddBiasAt(i, bias, cols, z);
}

__global__ void ReluForwardKernel(int64_t n, float* a) {
  const int64_t i = ThreadIndex();
  if (i < n) ReluForwardAt(i, a);
}

__global__ void ReluBackwardKernel(const float* a, int64_t n, float* da) {
  const int64_t i = ThreadIndex();
  if (i < n) ReluBackwardAt(i, a, da);
}

__global__ void OutputLossKernel(int task, const float* logits,
                                 const float* targets, int rows, int outputs,
                                 float grad_scale, float* dlogits,
                                 float* row_loss) {
  const int64_t r = ThreadIndex();
  if (r < rows) {
    row_loss[r] = OutputLossRow(task, static_cast<int>(r), logits, targets,
                                outputs, grad_scale, dlogits);
  }
}

__global__ void ColumnSumsKernel(const float* m, int rows, int cols,
                                 float* out) {
  const int64_t c = ThreadIndex();
  if (c < cols) ColumnSumAt(static_cast<int>(c), m, rows, cols, out);
}

__global__ void ScaleKernel(int64_t n, float scale, float* a) {
  const int64_t i = ThreadIndex();
  if (i < n) ScaleAt(i, scale, a);
}

__global__ void PoolKernel(const int64_t* offsets, const uint32_t* slot,
                           const float* value, const uint16_t* field,
                           const float* embeddings, int64_t n, int fields,
                           int dim, float* x) {
  const int64_t i = ThreadIndex();
  if (i < n) PoolAt(i, offsets, slot, value, field, embeddings, fields, dim, x);
}

__global__ void UnpoolKernel(const int64_t* offsets, const uint32_t* slot,
                             const float* value, const uint16_t* field,
                             const float* dx, int64_t n, int fields, int dim,
                             float* embedding_grad) {
  const int64_t i = ThreadIndex();
  if (i < n) {
    UnpoolAt(i, offsets, slot, value, field, dx, fields, dim, embedding_grad);
  }
}

}  // namespace

cudaError_t LaunchAddBias(const float* bias, int rows, int cols, float* z,
                          cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(rows) * cols;
  if (n <= 0) return cudaSuccess;
  AddBiasKernel<<<Blocks(n), kThreads, 0, stream>>>(bias, n, cols, z);
  return cudaGetLastError();
}

cudaError_t LaunchReluForward(int64_t n, float* a, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ReluForwardKernel<<<Blocks(n), kThreads, 0, stream>>>(n, a);
  return cudaGetLastError();
}

cudaError_t LaunchReluBackward(const float* a, int64_t n, float* da,
                               cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ReluBackwardKernel<<<Blocks(n), kThreads, 0, stream>>>(a, n, da);
  return cudaGetLastError();
}

cudaError_t LaunchOutputLoss(int task, const float* logits,
                             const float* targets, int rows, int outputs,
                             float grad_scale, float* dlogits, float* row_loss,
                             cudaStream_t stream) {
  if (rows <= 0 || outputs <= 0) return cudaSuccess;
  OutputLossKernel<<<Blocks(rows), kThreads, 0, stream>>>(
      task, logits, targets, rows, outputs, grad_scale, dlogits, row_loss);
  return cudaGetLastError();
}

cudaError_t LaunchColumnSums(const float* m, int rows, int cols, float* out,
                             cudaStream_t stream) {
  if (cols <= 0) return cudaSuccess;
  ColumnSumsKernel<<<Blocks(cols), kThreads, 0, stream>>>(m, rows, cols, out);
  return cudaGetLastError();
}

cudaError_t LaunchScale(int64_t n, float scale, float* a, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ScaleKernel<<<Blocks(n), kThreads, 0, stream>>>(n, scale, a);
  return cudaGetLastError();
}

cudaError_t LaunchPool(const int64_t* offsets, const uint32_t* slot,
                       const float* value, const uint16_t* field,
                       int64_t entries, const float* embeddings,
                       int64_t embedding_rows, int rows, int fields, int dim,
                       float* x, cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(rows) * dim;
  if (n <= 0) return cudaSuccess;
  PoolKernel<<<Blocks(n), kThreads, 0, stream>>>(offsets, slot, value, field,
                                                 embeddings, n, fields, dim, x);
  return cudaGetLastError();
}

cudaError_t LaunchUnpool(const int64_t* offsets, const uint32_t* slot,
                         const float* value, const uint16_t* field,
                         int64_t entries, const float* dx, int rows, int fields,
                         int dim, float* embedding_grad, int64_t embedding_rows,
                         cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(rows) * dim;
  if (n <= 0) return cudaSuccess;
  UnpoolKernel<<<Blocks(n), kThreads, 0, stream>>>(
      offsets, slot, value, field, dx, n, fields, dim, embedding_grad);
  return cudaGetLastError();
}

}  // namespace downpour::worker::gpu
