// Backend selection: cpu, cuda, or auto (cuda where usable, else cpu).
#include "worker/backend_factory.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "worker/cpu/cpu_backend.h"
#include "worker/cuda/cuda_support.h"
#include "worker/simulated_backend.h"

namespace downpour::worker {
namespace {

spdlog::logger* L() { return Log(Logger::kGpu); }

absl::StatusOr<std::unique_ptr<ComputeBackend>> MakeCuda(
    const ComputeSection& compute, const ModelSpec& spec, int max_batch) {
  absl::StatusOr<std::unique_ptr<ComputeBackend>> backend =
      MakeCudaBackend(spec, max_batch, compute.gpu);
  if (!backend.ok()) {
    return absl::Status(
        backend.status().code(),
        absl::StrCat("compute.device is cuda but GPU ", compute.gpu,
                     " is not usable: ", backend.status().message()));
  }
  return backend;
}

absl::StatusOr<std::unique_ptr<ComputeBackend>> MakeAuto(
    const ComputeSection& compute, const ModelSpec& spec, int max_batch) {
  absl::StatusOr<std::string> gpu = ProbeCudaDevice(compute.gpu);
  if (gpu.ok()) {
    absl::StatusOr<std::unique_ptr<ComputeBackend>> backend =
        MakeCudaBackend(spec, max_batch, compute.gpu);
    if (backend.ok()) {
      SPDLOG_LOGGER_INFO(L(), "compute.device auto: computing on {}", *gpu);
      return backend;
    }
    // A usable GPU that could not hold the backend (e.g. out of memory).
    SPDLOG_LOGGER_WARN(
        L(), "compute.device auto: {} failed ({}); computing on the CPU", *gpu,
        std::string(backend.status().message()));
  } else {
    SPDLOG_LOGGER_INFO(
        L(), "compute.device auto: no usable GPU ({}); computing on the CPU",
        std::string(gpu.status().message()));
  }
  return std::unique_ptr<ComputeBackend>(new CpuBackend(spec, max_batch));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ComputeBackend>> MakeBackend(
    const ComputeSection& compute, const ModelSpec& spec, int max_batch) {
  if (compute.device == ComputeDevice::kCpu) {
    return std::unique_ptr<ComputeBackend>(new CpuBackend(spec, max_batch));
  }
  if (compute.device == ComputeDevice::kCuda) {
    return MakeCuda(compute, spec, max_batch);
  }
  if (compute.device == ComputeDevice::kAuto) {
    return MakeAuto(compute, spec, max_batch);
  }
  if (compute.device == ComputeDevice::kSimulated) {
    if (compute.simulated_step_ms <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "compute.device simulated needs compute.simulated_step_ms > 0, got ",
          compute.simulated_step_ms));
    }
    std::unique_ptr<ComputeBackend> real;
    if (compute.simulated_real_gradients) {
      real = std::make_unique<CpuBackend>(spec, max_batch);
    }
    return std::unique_ptr<ComputeBackend>(new SimulatedBackend(
        spec, max_batch, absl::Milliseconds(compute.simulated_step_ms), nullptr,
        std::move(real)));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("compute.device must be auto, cpu, cuda or simulated, got '",
                   ComputeDeviceName(compute.device), "'"));
}

}  // namespace downpour::worker
