// The MLP's small CUDA kernels, one per host kernel of worker/mlp_math.h with
// the same arguments (device pointers) and semantics; each thread runs the
// matching function of kernel_math.h. Compiled by nvcc (kernels.cu).
//
// Each call enqueues one kernel on `stream` and returns cudaGetLastError():
// launch errors (and earlier asynchronous errors still pending) show here;
// errors while the kernel runs show at the next synchronisation. No-op for
// empty inputs.
#ifndef DOWNPOUR_WORKER_CUDA_KERNELS_H_
#define DOWNPOUR_WORKER_CUDA_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace downpour::worker::gpu {

// z[r][c] += bias[c].
cudaError_t LaunchAddBias(const float* bias, int rows, int cols, float* z,
                          cudaStream_t stream);

// a[i] = max(a[i], 0), in place.
cudaError_t LaunchReluForward(int64_t n, float* a, cudaStream_t stream);

// da[i] = 0 wherever a[i] <= 0, in place.
cudaError_t LaunchReluBackward(const float* a, int64_t n, float* da,
                               cudaStream_t stream);

// Per row: row_loss[r] = logsumexp(logits[r]) - logits[r][labels[r]], and
// unless dlogits is null, dlogits[r] = grad_scale * (softmax - onehot). The
// caller sums row_loss (in double on the host, as the CPU path does).
// REQUIRES: every label in [0, classes) (checked on the host first).
cudaError_t LaunchOutputLoss(int task, const float* logits,
                             const float* targets, int rows, int outputs,
                             float grad_scale, float* dlogits, float* row_loss,
                             cudaStream_t stream);

// out[c] = sum over r of m[r][c].
cudaError_t LaunchColumnSums(const float* m, int rows, int cols, float* out,
                             cudaStream_t stream);

// a[i] *= scale, in place.
cudaError_t LaunchScale(int64_t n, float scale, float* a, cudaStream_t stream);

// The pooled inputs x [rows, fields*dim] of a PooledBatch
// (worker/compute_backend.h) whose arrays are on the device: one thread per
// element r * dim + j. `entries` (offsets[rows]) and `embedding_rows` are the
// lengths of slot/value/field and of embeddings (in rows of dim floats).
// REQUIRES: offsets, slots and fields valid (CheckPooledBatch on the host).
cudaError_t LaunchPool(const int64_t* offsets, const uint32_t* slot,
                       const float* value, const uint16_t* field,
                       int64_t entries, const float* embeddings,
                       int64_t embedding_rows, int rows, int fields, int dim,
                       float* x, cudaStream_t stream);

// The pooling's backward pass: adds what dx (the pooled inputs' gradient,
// [rows, fields*dim]) sends to each embedding row into embedding_grad
// [embedding_rows, dim], which the caller zeroes first
// (cudaMemsetAsync). One thread per element r * dim + j; rows sharing an
// embedding row add to it atomically, in any order. Arguments as LaunchPool.
cudaError_t LaunchUnpool(const int64_t* offsets, const uint32_t* slot,
                         const float* value, const uint16_t* field,
                         int64_t entries, const float* dx, int rows, int fields,
                         int dim, float* embedding_grad, int64_t embedding_rows,
                         cudaStream_t stream);

}  // namespace downpour::worker::gpu

#endif  // DOWNPOUR_WORKER_CUDA_KERNELS_H_
