// sgemm_timer.h without the CUDA toolkit: there is nothing to time.
#include "worker/cuda/cuda_support.h"
#include "worker/cuda/sgemm_timer.h"

namespace downpour::worker {

absl::StatusOr<SgemmTiming> TimeMlpSgemm(const ModelSpec&, int, int gpu, int) {
  return ProbeCudaDevice(gpu).status();
}

}  // namespace downpour::worker
