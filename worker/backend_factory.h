// Chooses and builds the worker's compute backend from the config's
// `compute` section (common/config.h): `cpu`, `cuda`, `auto` or `simulated`.
//
//   absl::StatusOr<std::unique_ptr<ComputeBackend>> backend =
//       MakeBackend(config.compute, spec, config.training.batch_size);
//   if (!backend.ok()) Die(who, std::string(backend.status().message()), 2);
//   ... (*backend)->device() ...   // "cpu" or "cuda:0 (NVIDIA H100 ...)"
#ifndef DOWNPOUR_WORKER_BACKEND_FACTORY_H_
#define DOWNPOUR_WORKER_BACKEND_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/config.h"
#include "common/model_spec.h"
#include "worker/compute_backend.h"

namespace downpour::worker {

// A backend for batches of up to max_batch examples on compute.device:
//   cpu   CpuBackend (OpenBLAS); never touches CUDA.
//   cuda  CudaBackend on GPU compute.gpu, or FailedPrecondition saying
//         exactly why that GPU is not usable (built without CUDA; no or too
//         old NVIDIA driver, i.e. cudaErrorInsufficientDriver; no device;
//         index out of range; compute capability too old), or the CUDA error
//         that stopped its creation (ResourceExhausted when out of memory).
//   auto  the CUDA backend when GPU compute.gpu is usable, else CpuBackend;
//         logs (logger "gpu") which one and, for the CPU, why.
//   simulated  SimulatedBackend sleeping compute.simulated_step_ms per step
//         (InvalidArgument when that is not > 0).
// InvalidArgument for any other device string. REQUIRES: max_batch >= 1.
absl::StatusOr<std::unique_ptr<ComputeBackend>> MakeBackend(
    const ComputeSection& compute, const ModelSpec& spec, int max_batch);

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_BACKEND_FACTORY_H_
