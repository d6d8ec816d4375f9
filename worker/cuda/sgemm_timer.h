// Times the MLP's SGEMMs on a GPU, for bench/gpu_bench; CUDA-free header.
//
// Built from sgemm_timer.cc with the CUDA toolkit, sgemm_timer_stub.cc
// without (every call then fails as ProbeCudaDevice does).
#ifndef DOWNPOUR_WORKER_CUDA_SGEMM_TIMER_H_
#define DOWNPOUR_WORKER_CUDA_SGEMM_TIMER_H_

#include "absl/status/statusor.h"
#include "common/model_spec.h"

namespace downpour::worker {

// Seconds per training step of `batch` examples, from CUDA events around
// `iterations` steps on one stream, after a warm-up.
struct SgemmTiming {
  // 2*m*n*k summed over the step's SGEMMs (forward, dW, dA).
  double flops_per_step = 0;
  // The same SGEMMs (shapes, transposes, leading dimensions) issued straight
  // to cuBLAS back to back: cuBLAS's own rate for them.
  double direct_seconds = 0;
  // DeviceMlp Forward + Backward: the backend's SGEMMs with its kernels in
  // between, no host transfers.
  double device_step_seconds = 0;
};

// FailedPrecondition when GPU `gpu` is not usable (ProbeCudaDevice's reason);
// other CUDA errors naming the call. REQUIRES: batch, iterations >= 1.
absl::StatusOr<SgemmTiming> TimeMlpSgemm(const ModelSpec& spec, int batch,
                                         int gpu, int iterations);

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_CUDA_SGEMM_TIMER_H_
