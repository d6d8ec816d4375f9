// Test-only controls of the host emulation of CUDA (fake_cuda_runtime.cc).
//
// Linking fake_cuda_runtime.cc instead of libcudart and libcublas, and
// kernels_emulated.cc instead of kernels.cu, runs the CUDA backend on the CPU
// of a machine with no GPU: "device" memory is host memory; copies, kernels
// and SGEMMs (OpenBLAS, column-major) are queued on their stream and run only
// when something waits for that stream or for an event recorded on it, so a
// missing cudaStreamWaitEvent, or a pinned buffer rewritten before its copy
// ran, gives wrong results instead of going unnoticed. It checks the host
// side (transfers, streams, events, offsets, error paths), not the device.
// Not thread-safe: one test thread.
#ifndef DOWNPOUR_WORKER_CUDA_FAKE_CUDA_H_
#define DOWNPOUR_WORKER_CUDA_FAKE_CUDA_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace downpour::worker::gpu::fake {

// What cudaGetDeviceCount and friends report.
struct Devices {
  // The CUDA version the driver supports; below 13000 (the emulated runtime's,
  // 0 = no driver) device calls fail with cudaErrorInsufficientDriver.
  int driver_version = 13000;
  int count = 1;             // 0: cudaErrorNoDevice
  int major = 9, minor = 0;  // compute capability of every device
  std::string name = "Emulated GPU";
};

// Restores the default Devices and clears every injected failure.
void Reset();
void SetDevices(const Devices& devices);

// The n-th call from now (1 = the next) of cublasSgemm returns `status`; of
// cudaMalloc returns cudaErrorMemoryAllocation; of cudaStreamSynchronize
// returns `error` (as a kernel fault would surface).
void FailSgemmCall(int n, cublasStatus_t status);
void FailMallocCall(int n);
void FailSyncCall(int n, cudaError_t error);

// Queues `work` on `stream` (nullptr: the legacy default stream); for the
// emulated kernels.
void Enqueue(cudaStream_t stream, std::function<void()> work);

// Whether [ptr, ptr + bytes) lies in one live cudaMalloc (device) or
// cudaMallocHost (pinned) allocation. The emulation rejects kernels, SGEMMs
// and copies whose pointers are not where they should be
// (cudaErrorInvalidValue, CUBLAS_STATUS_INVALID_VALUE), e.g. an async copy from
// unpinned memory.
bool IsDevice(const void* ptr, size_t bytes);
bool IsPinned(const void* ptr, size_t bytes);

// CUDA objects alive now, to check that owners free what they create.
struct Live {
  int device_buffers = 0, pinned_buffers = 0, streams = 0, events = 0,
      cublas_handles = 0;
};
Live LiveObjects();

// Calls since the last Reset, to check what crossed the bus and when.
struct Calls {
  int64_t stream_waits = 0;                // cudaStreamWaitEvent
  std::map<size_t, int64_t> h2d_by_bytes;  // host-to-device copies by size
};
Calls CallsSoFar();

}  // namespace downpour::worker::gpu::fake

#endif  // DOWNPOUR_WORKER_CUDA_FAKE_CUDA_H_
