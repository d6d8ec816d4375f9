// kernels.h on the host emulation (fake_cuda.h): each "launch" checks that its
// pointers are device memory of the right size (cudaErrorInvalidValue if
// not), then queues a loop over the kernel's threads, running the same
// kernel_math.h functions as the CUDA kernels, on the stream.
#include "worker/cuda/fake_cuda.h"
#include "worker/cuda/kernel_math.h"
#include "worker/cuda/kernels.h"

namespace downpour::worker::gpu {
namespace {

// Whether `count` Ts at ptr are device memory.
template <typename T>
bool OnDevice(const T* ptr, int64_t count) {
  return fake::IsDevice(ptr, static_cast<size_t>(count) * sizeof(T));
}

}  // namespace

cudaError_t LaunchAddBias(const float* bias, int rows, int cols, float* z,
                          cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(rows) * cols;
  if (!OnDevice(bias, cols) || !OnDevice(z, n)) return cudaErrorInvalidValue;
  fake::Enqueue(stream, [=] {
    for (int64_t i = 0; i < n; ++i) {
      AddBiasAt(i, bias, cols, z);
    }
  });
  return cudaSuccess;
}

cudaError_t LaunchReluForward(int64_t n, float* a, cudaStream_t stream) {
  if (!OnDevice(a, n)) return cudaErrorInvalidValue;
  fake::Enqueue(stream, [=] {
    for (int64_t i = 0; i < n; ++i) ReluForwardAt(i, a);
  });
  return cudaSuccess;
}

cudaError_t LaunchReluBackward(const float* a, int64_t n, float* da,
                               cudaStream_t stream) {
  if (!OnDevice(a, n) || !OnDevice(da, n)) return cudaErrorInvalidValue;
  fake::Enqueue(stream, [=] {
    for (int64_t i = 0; i < n; ++i) ReluBackwardAt(i, a, da);
  });
  return cudaSuccess;
}

cudaError_t LaunchOutputLoss(int task, const float* logits,
                             const float* targets, int rows, int outputs,
                             float grad_scale, float* dlogits, float* row_loss,
                             cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(rows) * outputs;
  if (!OnDevice(logits, n) || !OnDevice(targets, rows) ||
      !OnDevice(row_loss, rows) ||
      (dlogits != nullptr && !OnDevice(dlogits, n))) {
    return cudaErrorInvalidValue;
  }
  fake::Enqueue(stream, [=] {
    for (int r = 0; r < rows; ++r) {
      row_loss[r] =
          OutputLossRow(task, r, logits, targets, outputs, grad_scale, dlogits);
    }
  });
  return cudaSuccess;
}

cudaError_t LaunchColumnSums(const float* m, int rows, int cols, float* out,
                             cudaStream_t stream) {
  if (!OnDevice(m, static_cast<int64_t>(rows) * cols) || !OnDevice(out, cols)) {
    return cudaErrorInvalidValue;
  }
  fake::Enqueue(stream, [=] {
    for (int c = 0; c < cols; ++c) ColumnSumAt(c, m, rows, cols, out);
  });
  return cudaSuccess;
}

cudaError_t LaunchScale(int64_t n, float scale, float* a, cudaStream_t stream) {
  if (!OnDevice(a, n)) return cudaErrorInvalidValue;
  fake::Enqueue(stream, [=] {
    for (int64_t i = 0; i < n; ++i) ScaleAt(i, scale, a);
  });
  return cudaSuccess;
}

cudaError_t LaunchPool(const int64_t* offsets, const uint32_t* slot,
                       const float* value, const uint16_t* field,
                       int64_t entries, const float* embeddings,
                       int64_t embedding_rows, int rows, int fields, int dim,
                       float* x, cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(rows) * dim;
  if (!OnDevice(offsets, rows + 1) || !OnDevice(slot, entries) ||
      !OnDevice(value, entries) || !OnDevice(field, entries) ||
      !OnDevice(embeddings, embedding_rows * dim) || !OnDevice(x, n * fields)) {
    return cudaErrorInvalidValue;
  }
  fake::Enqueue(stream, [=] {
    for (int64_t i = 0; i < n; ++i) {
      PoolAt(i, offsets, slot, value, field, embeddings, fields, dim, x);
    }
  });
  return cudaSuccess;
}

cudaError_t LaunchUnpool(const int64_t* offsets, const uint32_t* slot,
                         const float* value, const uint16_t* field,
                         int64_t entries, const float* dx, int rows, int fields,
                         int dim, float* embedding_grad, int64_t embedding_rows,
                         cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(rows) * dim;
  if (!OnDevice(offsets, rows + 1) || !OnDevice(slot, entries) ||
      !OnDevice(value, entries) || !OnDevice(field, entries) ||
      !OnDevice(dx, n * fields) ||
      !OnDevice(embedding_grad, embedding_rows * dim)) {
    return cudaErrorInvalidValue;
  }
  fake::Enqueue(stream, [=] {
    for (int64_t i = 0; i < n; ++i) {
      UnpoolAt(i, offsets, slot, value, field, dx, fields, dim, embedding_grad);
    }
  });
  return cudaSuccess;
}

}  // namespace downpour::worker::gpu
