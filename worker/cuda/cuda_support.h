// What the rest of the worker may ask about CUDA, in a header that needs no
// CUDA toolkit: whether this binary has the CUDA backend, whether a GPU is
// usable, and the backend itself.
//
// Built from cuda_support.cc where the toolkit was present at build time, from
// cuda_support_stub.cc otherwise (or with DOWNPOUR_NO_CUDA=1; docs/GPU.md).
//
//   absl::StatusOr<std::string> gpu = ProbeCudaDevice(0);
//   if (!gpu.ok()) ... gpu.status().message() says why not ...
#ifndef DOWNPOUR_WORKER_CUDA_CUDA_SUPPORT_H_
#define DOWNPOUR_WORKER_CUDA_CUDA_SUPPORT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/model_spec.h"
#include "worker/compute_backend.h"

namespace downpour::worker {

// Whether this binary was built with the CUDA backend.
bool CudaBuilt();

// What device() of a CUDA backend on GPU `gpu` would report, e.g.
// "cuda:0 (NVIDIA H100 80GB HBM3)", when that GPU is usable. Otherwise
// FailedPrecondition saying exactly why: built without CUDA; no NVIDIA driver
// or one too old for this CUDA runtime (cudaErrorInsufficientDriver); no
// device; index out of range (and how many devices there are); a GPU older
// than the compiled kernels (compute capability < 8.0); any other
// cudaGetDeviceCount / cudaGetDeviceProperties error by name.
absl::StatusOr<std::string> ProbeCudaDevice(int gpu);

// A CudaBackend (cuda_backend.h) on GPU `gpu` for batches of up to max_batch,
// after ProbeCudaDevice(gpu) succeeded: its FailedPrecondition otherwise;
// ResourceExhausted when device or pinned memory runs out; other CUDA errors
// naming the call. REQUIRES: max_batch >= 1.
absl::StatusOr<std::unique_ptr<ComputeBackend>> MakeCudaBackend(
    const ModelSpec& spec, int max_batch, int gpu);

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_CUDA_CUDA_SUPPORT_H_
