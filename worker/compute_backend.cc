// Out-of-line anchor for ComputeBackend's vtable.
#include "worker/compute_backend.h"

namespace downpour::worker {

ComputeBackend::~ComputeBackend() = default;

}  // namespace downpour::worker
