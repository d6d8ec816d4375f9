// Host emulation of the CUDA runtime and cuBLAS entry points worker/cuda
// calls (fake_cuda.h). Work queued on a stream runs lazily, in order, when a
// synchronisation needs it; events remember which queued item completes them.
#include <cblas.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <utility>

#include "worker/cuda/fake_cuda.h"

struct CUstream_st {
  std::deque<std::function<void()>> work;
};

struct CUevent_st {
  CUstream_st* stream = nullptr;
  long recorded = 0;   // how many times it was recorded
  long completed = 0;  // the last record whose queued marker has run
};

struct cublasContext {
  cudaStream_t stream = nullptr;
};

namespace downpour::worker::gpu::fake {
namespace {

struct State {
  Devices devices;
  int fail_sgemm = 0, fail_malloc = 0, fail_sync = 0;
  cublasStatus_t sgemm_status = CUBLAS_STATUS_SUCCESS;
  cudaError_t sync_error = cudaSuccess;
  Live live;
  Calls calls;
  CUstream_st legacy;                            // the default stream
  std::map<const char*, size_t> device, pinned;  // start -> bytes
};

State& S() {
  static State* state = new State;
  return *state;
}

CUstream_st* StreamOf(cudaStream_t stream) {
  return stream == nullptr ? &S().legacy : stream;
}

// Counts down an injected failure; true when it fires now.
bool Fires(int* countdown) { return *countdown > 0 && --*countdown == 0; }

void RunOne(CUstream_st* stream) {
  std::function<void()> work = std::move(stream->work.front());
  stream->work.pop_front();
  work();
}

void RunAll(CUstream_st* stream) {
  while (!stream->work.empty()) RunOne(stream);
}

// Runs the event's stream until record number `ticket` has completed.
void RunUntil(CUevent_st* event, long ticket) {
  while (event->completed < ticket && event->stream != nullptr &&
         !event->stream->work.empty()) {
    RunOne(event->stream);
  }
}

bool Within(const std::map<const char*, size_t>& allocations, const void* ptr,
            size_t bytes) {
  const char* p = static_cast<const char*>(ptr);
  auto it = allocations.upper_bound(p);
  if (it == allocations.begin()) return false;
  --it;
  return p + bytes <= it->first + it->second;
}

}  // namespace

bool IsDevice(const void* ptr, size_t bytes) {
  return Within(S().device, ptr, bytes);
}

bool IsPinned(const void* ptr, size_t bytes) {
  return Within(S().pinned, ptr, bytes);
}

void Reset() {
  State& s = S();
  s.devices = Devices();
  s.fail_sgemm = s.fail_malloc = s.fail_sync = 0;
  s.calls = Calls();
}

void SetDevices(const Devices& devices) { S().devices = devices; }

void FailSgemmCall(int n, cublasStatus_t status) {
  S().fail_sgemm = n;
  S().sgemm_status = status;
}

void FailMallocCall(int n) { S().fail_malloc = n; }

void FailSyncCall(int n, cudaError_t error) {
  S().fail_sync = n;
  S().sync_error = error;
}

void Enqueue(cudaStream_t stream, std::function<void()> work) {
  StreamOf(stream)->work.push_back(std::move(work));
}

Live LiveObjects() { return S().live; }

Calls CallsSoFar() { return S().calls; }

}  // namespace downpour::worker::gpu::fake

namespace fake = downpour::worker::gpu::fake;

// The CUDA version the emulated runtime claims to be (13.0).
constexpr int kRuntimeVersion = 13000;

// ---- CUDA runtime ----

cudaError_t cudaGetDeviceCount(int* count) {
  const fake::Devices& d = fake::S().devices;
  if (d.driver_version < kRuntimeVersion) return cudaErrorInsufficientDriver;
  if (d.count == 0) return cudaErrorNoDevice;
  *count = d.count;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  const fake::Devices& d = fake::S().devices;
  if (device < 0 || device >= d.count) return cudaErrorInvalidDevice;
  std::memset(prop, 0, sizeof(*prop));
  std::strncpy(prop->name, d.name.c_str(), sizeof(prop->name) - 1);
  prop->major = d.major;
  prop->minor = d.minor;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
  *version = fake::S().devices.driver_version;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = kRuntimeVersion;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  const fake::Devices& d = fake::S().devices;
  if (d.driver_version < kRuntimeVersion) return cudaErrorInsufficientDriver;
  return device >= 0 && device < d.count ? cudaSuccess : cudaErrorInvalidDevice;
}

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorIllegalAddress:
      return "cudaErrorIllegalAddress";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInsufficientDriver:
      return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    default:
      return "cudaError (emulated)";
  }
}

const char* cudaGetErrorString(cudaError_t error) {
  return error == cudaSuccess ? "no error" : "emulated failure";
}

cudaError_t cudaGetLastError() { return cudaSuccess; }

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  if (fake::Fires(&fake::S().fail_malloc)) return cudaErrorMemoryAllocation;
  *ptr = std::malloc(bytes == 0 ? 1 : bytes);
  std::memset(*ptr, 0xff, bytes);  // NaN floats: reads before writes show
  ++fake::S().live.device_buffers;
  fake::S().device[static_cast<const char*>(*ptr)] = bytes;
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  if (fake::S().device.erase(static_cast<const char*>(ptr)) == 0) {
    return cudaErrorInvalidValue;
  }
  --fake::S().live.device_buffers;
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
  *ptr = std::malloc(bytes == 0 ? 1 : bytes);
  ++fake::S().live.pinned_buffers;
  fake::S().pinned[static_cast<const char*>(*ptr)] = bytes;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  if (fake::S().pinned.erase(static_cast<const char*>(ptr)) == 0) {
    return cudaErrorInvalidValue;
  }
  --fake::S().live.pinned_buffers;
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
  if (!fake::IsDevice(ptr, bytes)) return cudaErrorInvalidValue;
  std::memset(ptr, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes,
                            cudaStream_t stream) {
  if (!fake::IsDevice(ptr, bytes)) return cudaErrorInvalidValue;
  fake::Enqueue(stream, [=] { std::memset(ptr, value, bytes); });
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes,
                            cudaMemcpyKind kind, cudaStream_t stream) {
  // Asynchronous copies need pinned host memory on the host side.
  const bool ok = kind == cudaMemcpyHostToDevice
                      ? fake::IsDevice(dst, bytes) && fake::IsPinned(src, bytes)
                      : kind == cudaMemcpyDeviceToHost &&
                            fake::IsDevice(src, bytes) &&
                            fake::IsPinned(dst, bytes);
  if (!ok) return cudaErrorInvalidValue;
  if (kind == cudaMemcpyHostToDevice) ++fake::S().calls.h2d_by_bytes[bytes];
  // Reads src when the stream gets there, as a DMA engine would.
  fake::Enqueue(stream, [=] { std::memcpy(dst, src, bytes); });
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  *stream = new CUstream_st;
  ++fake::S().live.streams;
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  fake::RunAll(stream);
  delete stream;
  --fake::S().live.streams;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  fake::RunAll(fake::StreamOf(stream));
  if (fake::Fires(&fake::S().fail_sync)) return fake::S().sync_error;
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  *event = new CUevent_st;
  ++fake::S().live.events;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  --fake::S().live.events;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  event->stream = fake::StreamOf(stream);
  const long ticket = ++event->recorded;
  fake::Enqueue(stream, [event, ticket] { event->completed = ticket; });
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  fake::RunUntil(event, event->recorded);
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                unsigned int) {
  const long ticket = event->recorded;
  ++fake::S().calls.stream_waits;
  fake::Enqueue(stream, [event, ticket] { fake::RunUntil(event, ticket); });
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) {
  *ms = 0;
  return cudaSuccess;
}

// ---- cuBLAS ----

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  *handle = new cublasContext;
  ++fake::S().live.cublas_handles;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  delete handle;
  --fake::S().live.cublas_handles;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) {
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t ta,
                              cublasOperation_t tb, int m, int n, int k,
                              const float* alpha, const float* a, int lda,
                              const float* b, int ldb, const float* beta,
                              float* c, int ldc) {
  if (fake::Fires(&fake::S().fail_sgemm)) return fake::S().sgemm_status;
  // Column-major operands: an untransposed [rows, cols] one spans ld * cols.
  const size_t f = sizeof(float);
  if (!fake::IsDevice(a, f * lda * (ta == CUBLAS_OP_N ? k : m)) ||
      !fake::IsDevice(b, f * ldb * (tb == CUBLAS_OP_N ? n : k)) ||
      !fake::IsDevice(c, f * ldc * n)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const float al = *alpha, be = *beta;  // host pointer mode: read at the call
  fake::Enqueue(handle->stream, [=] {
    cblas_sgemm(CblasColMajor, ta == CUBLAS_OP_T ? CblasTrans : CblasNoTrans,
                tb == CUBLAS_OP_T ? CblasTrans : CblasNoTrans, m, n, k, al, a,
                lda, b, ldb, be, c, ldc);
  });
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    default:
      return "CUBLAS_STATUS (emulated)";
  }
}

const char* cublasGetStatusString(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? "success" : "emulated failure";
}
