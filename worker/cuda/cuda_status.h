// CUDA runtime and cuBLAS return codes as absl::Status, naming the call.
//
//   RETURN_IF_ERROR(
//       CudaStatus(cudaMemcpyAsync(...), "cudaMemcpyAsync (params)"));
//   -> Internal("cudaMemcpyAsync (params): cudaErrorIllegalAddress: an illegal
//      memory access was encountered")
#ifndef DOWNPOUR_WORKER_CUDA_CUDA_STATUS_H_
#define DOWNPOUR_WORKER_CUDA_CUDA_STATUS_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace downpour::worker::gpu {

// OK for cudaSuccess. Otherwise "<call>: <error name>: <description>" with
// code ResourceExhausted for out-of-memory errors, FailedPrecondition for a
// missing or unusable driver or device, Internal for everything else (a
// failed kernel, an illegal address: our bug or a broken GPU).
absl::Status CudaStatus(cudaError_t error, absl::string_view call);

// The same for cuBLAS: OK for CUBLAS_STATUS_SUCCESS; ResourceExhausted for
// CUBLAS_STATUS_ALLOC_FAILED, FailedPrecondition for NOT_INITIALIZED and
// ARCH_MISMATCH, Internal otherwise.
absl::Status CublasStatus(cublasStatus_t status, absl::string_view call);

}  // namespace downpour::worker::gpu

#endif  // DOWNPOUR_WORKER_CUDA_CUDA_STATUS_H_
