// RAII owners of CUDA objects: streams, events, the cuBLAS handle, device
// memory and pinned (page-locked) host memory.
//
//   ASSIGN_OR_RETURN(Stream stream, CreateStream());
//   ASSIGN_OR_RETURN(auto buf, DeviceArray<float>::Allocate(n, "params"));
//
// Each is move-only and frees its object when destroyed, on the device that was
// current when it was created (the owner makes that device current before
// destroying them). Creation errors name the call and what was being made;
// destruction ignores errors: a destructor cannot return them, and a broken
// context reports itself on the next call that checks.
#ifndef DOWNPOUR_WORKER_CUDA_CUDA_RESOURCES_H_
#define DOWNPOUR_WORKER_CUDA_CUDA_RESOURCES_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace downpour::worker::gpu {

struct StreamDeleter {
  void operator()(cudaStream_t stream) const;
};
struct EventDeleter {
  void operator()(cudaEvent_t event) const;
};
struct CublasDeleter {
  void operator()(cublasHandle_t handle) const;
};
struct DeviceFree {
  void operator()(void* ptr) const;
};
struct PinnedFree {
  void operator()(void* ptr) const;
};

using Stream = std::unique_ptr<CUstream_st, StreamDeleter>;
using Event = std::unique_ptr<CUevent_st, EventDeleter>;
using CublasHandle = std::unique_ptr<cublasContext, CublasDeleter>;

// A stream that does not synchronise with the legacy default stream.
absl::StatusOr<Stream> CreateStream();

// An event; with timing = false (cheaper) it can only order work.
absl::StatusOr<Event> CreateEvent(bool timing = false);

// A cuBLAS handle whose calls are enqueued on `stream`, in the default math
// mode: full FP32 SGEMM, no TF32 (the parity test's bound assumes it).
absl::StatusOr<CublasHandle> CreateCublas(cudaStream_t stream);

// Untyped allocations behind the arrays below; `what` names the buffer in
// errors ("cudaMalloc (fc1 activations, 262144 bytes): ...").
absl::StatusOr<void*> AllocateDevice(size_t bytes, absl::string_view what);
absl::StatusOr<void*> AllocatePinned(size_t bytes, absl::string_view what);

// `size` elements of T in device memory (uninitialised).
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  static absl::StatusOr<DeviceArray> Allocate(size_t size,
                                              absl::string_view what) {
    absl::StatusOr<void*> ptr = AllocateDevice(size * sizeof(T), what);
    if (!ptr.ok()) return ptr.status();
    return DeviceArray(static_cast<T*>(*ptr), size);
  }
  T* data() const { return ptr_.get(); }
  size_t size() const { return size_; }

 private:
  DeviceArray(T* ptr, size_t size) : ptr_(ptr), size_(size) {}
  std::unique_ptr<T, DeviceFree> ptr_;
  size_t size_ = 0;
};

// `size` elements of T in pinned host memory (uninitialised): what
// cudaMemcpyAsync needs to copy without staging and without blocking.
template <typename T>
class PinnedArray {
 public:
  PinnedArray() = default;
  static absl::StatusOr<PinnedArray> Allocate(size_t size,
                                              absl::string_view what) {
    absl::StatusOr<void*> ptr = AllocatePinned(size * sizeof(T), what);
    if (!ptr.ok()) return ptr.status();
    return PinnedArray(static_cast<T*>(*ptr), size);
  }
  T* data() const { return ptr_.get(); }
  size_t size() const { return size_; }

 private:
  PinnedArray(T* ptr, size_t size) : ptr_(ptr), size_(size) {}
  std::unique_ptr<T, PinnedFree> ptr_;
  size_t size_ = 0;
};

}  // namespace downpour::worker::gpu

#endif  // DOWNPOUR_WORKER_CUDA_CUDA_RESOURCES_H_
