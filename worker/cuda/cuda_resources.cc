// Creation (checked) and destruction (best effort) of CUDA objects.
#include "worker/cuda/cuda_resources.h"

#include "absl/strings/str_cat.h"
#include "worker/cuda/cuda_status.h"

namespace downpour::worker::gpu {

void StreamDeleter::operator()(cudaStream_t stream) const {
  cudaStreamDestroy(stream);
}
void EventDeleter::operator()(cudaEvent_t event) const {
  cudaEventDestroy(event);
}
void CublasDeleter::operator()(cublasHandle_t handle) const {
  cublasDestroy(handle);
}
void DeviceFree::operator()(void* ptr) const { cudaFree(ptr); }
void PinnedFree::operator()(void* ptr) const { cudaFreeHost(ptr); }

absl::StatusOr<Stream> CreateStream() {
  cudaStream_t stream = nullptr;
  absl::Status status =
      CudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                 "cudaStreamCreateWithFlags");
  if (!status.ok()) return status;
  return Stream(stream);
}

absl::StatusOr<Event> CreateEvent(bool timing) {
  cudaEvent_t event = nullptr;
  absl::Status status = CudaStatus(
      cudaEventCreateWithFlags(
          &event, timing ? cudaEventDefault : cudaEventDisableTiming),
      "cudaEventCreateWithFlags");
  if (!status.ok()) return status;
  return Event(event);
}

absl::StatusOr<CublasHandle> CreateCublas(cudaStream_t stream) {
  cublasHandle_t raw = nullptr;
  absl::Status status = CublasStatus(cublasCreate(&raw), "cublasCreate");
  if (!status.ok()) return status;
  CublasHandle handle(raw);
  status = CublasStatus(cublasSetStream(raw, stream), "cublasSetStream");
  if (!status.ok()) return status;
  status = CublasStatus(cublasSetMathMode(raw, CUBLAS_DEFAULT_MATH),
                        "cublasSetMathMode");
  if (!status.ok()) return status;
  return handle;
}

absl::StatusOr<void*> AllocateDevice(size_t bytes, absl::string_view what) {
  void* ptr = nullptr;
  absl::Status status =
      CudaStatus(cudaMalloc(&ptr, bytes),
                 absl::StrCat("cudaMalloc (", what, ", ", bytes, " bytes)"));
  if (!status.ok()) return status;
  return ptr;
}

absl::StatusOr<void*> AllocatePinned(size_t bytes, absl::string_view what) {
  void* ptr = nullptr;
  absl::Status status = CudaStatus(
      cudaMallocHost(&ptr, bytes),
      absl::StrCat("cudaMallocHost (", what, ", ", bytes, " bytes)"));
  if (!status.ok()) return status;
  return ptr;
}

}  // namespace downpour::worker::gpu
