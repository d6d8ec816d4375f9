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

// correct[r] = 1 if labels[r] is the argmax of logits[r] (ties to the lowest
// class), else 0; the caller sums them.


}  // namespace downpour::worker::gpu

#endif  // DOWNPOUR_WORKER_CUDA_KERNELS_H_
