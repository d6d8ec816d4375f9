// cuda_support.h in a build without the CUDA toolkit (or DOWNPOUR_NO_CUDA=1).
#include "absl/status/status.h"
#include "worker/cuda/cuda_support.h"

namespace downpour::worker {
namespace {

absl::Status NotBuilt() {
  return absl::FailedPreconditionError(
      "this binary was built without CUDA support (no CUDA toolkit at build "
      "time, or DOWNPOUR_NO_CUDA=1); rebuild where /usr/local/cuda (or "
      "$CUDA_PATH) holds the toolkit to use a GPU (docs/GPU.md)");
}

}  // namespace

bool CudaBuilt() { return false; }

absl::StatusOr<std::string> ProbeCudaDevice(int) { return NotBuilt(); }

absl::StatusOr<std::unique_ptr<ComputeBackend>> MakeCudaBackend(
    const ModelSpec&, int, int) {
  return NotBuilt();
}

}  // namespace downpour::worker
