// Device probing and construction of the CUDA backend.
#include "worker/cuda/cuda_support.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "worker/cuda/cuda_backend.h"

namespace downpour::worker {
namespace {

// The oldest compute capability the kernels are compiled for (sm_80; BUILD).
constexpr int kMinMajor = 8;

// "13.0" from 13000.
std::string CudaVersion(int version) {
  return absl::StrCat(version / 1000, ".", (version % 1000) / 10);
}

std::string ErrorName(cudaError_t error) {
  return absl::StrCat(cudaGetErrorName(error), ": ", cudaGetErrorString(error));
}

// Why cudaGetDeviceCount failed, in words.
absl::Status CountError(cudaError_t error) {
  if (error == cudaErrorInsufficientDriver) {
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    if (driver == 0) {
      return absl::FailedPreconditionError(
          "no NVIDIA driver is loaded, so no GPU is usable "
          "(cudaGetDeviceCount: cudaErrorInsufficientDriver)");
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "the NVIDIA driver supports CUDA ", CudaVersion(driver),
        " but this binary's CUDA runtime is ", CudaVersion(runtime),
        "; update the driver (cudaGetDeviceCount: "
        "cudaErrorInsufficientDriver)"));
  }
  if (error == cudaErrorNoDevice) {
    return absl::FailedPreconditionError(
        "no CUDA device is present (cudaGetDeviceCount: cudaErrorNoDevice)");
  }
  return absl::FailedPreconditionError(
      absl::StrCat("cudaGetDeviceCount: ", ErrorName(error)));
}

}  // namespace

bool CudaBuilt() { return true; }

absl::StatusOr<std::string> ProbeCudaDevice(int gpu) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) return CountError(error);
  if (count == 0) {
    return absl::FailedPreconditionError("no CUDA device is present");
  }
  if (gpu < 0 || gpu >= count) {
    return absl::FailedPreconditionError(absl::StrCat(
        "GPU index ", gpu, " is out of range (", count,
        count == 1 ? " device" : " devices", ": 0..", count - 1, ")"));
  }
  cudaDeviceProp prop;
  const cudaError_t props = cudaGetDeviceProperties(&prop, gpu);
  if (props != cudaSuccess) {
    return absl::FailedPreconditionError(
        absl::StrCat("cudaGetDeviceProperties(", gpu, "): ", ErrorName(props)));
  }
  if (prop.major < kMinMajor) {
    return absl::FailedPreconditionError(absl::StrCat(
        "GPU ", gpu, " (", prop.name, ") has compute capability ", prop.major,
        ".", prop.minor, "; this build's kernels need ", kMinMajor,
        ".0 or newer (sm_80, sm_90)"));
  }
  return absl::StrCat("cuda:", gpu, " (", prop.name, ")");
}

absl::StatusOr<std::unique_ptr<ComputeBackend>> MakeCudaBackend(
    const ModelSpec& spec, int max_batch, int gpu) {
  ASSIGN_OR_RETURN(std::string device, ProbeCudaDevice(gpu));
  absl::StatusOr<std::unique_ptr<CudaBackend>> backend =
      CudaBackend::Create(spec, max_batch, gpu, device);
  if (!backend.ok()) {
    return absl::Status(backend.status().code(),
                        absl::StrCat(device, ": ", backend.status().message()));
  }
  SPDLOG_LOGGER_INFO(Log(Logger::kGpu),
                     "{}: cuBLAS SGEMM backend ready for batches of up to {}",
                     device, max_batch);
  return std::unique_ptr<ComputeBackend>(*std::move(backend));
}

}  // namespace downpour::worker
