// CudaBackend: transfers and streams around DeviceMlp.
#include "worker/cuda/cuda_backend.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "worker/cuda/cuda_status.h"
#include "worker/cuda/kernels.h"
#include "worker/mlp_math.h"

namespace downpour::worker {

using gpu::CudaStatus;

namespace {

// Makes *array (a gpu::DeviceArray or gpu::PinnedArray) hold at least `size`
// elements: when it is smaller, reallocates it (uninitialised) to `size` or
// half as much again as before, whichever is more, so that slowly growing
// batches reallocate rarely.
template <typename Array>
absl::Status Reserve(size_t size, absl::string_view what, Array* array) {
  if (array->size() >= size) return absl::OkStatus();
  const size_t grown = std::max(size, array->size() + array->size() / 2);
  *array = Array();  // freed first: the old and the new need not coexist
  ASSIGN_OR_RETURN(*array, Array::Allocate(grown, what));
  return absl::OkStatus();
}

// Each array in a packed buffer starts at a multiple of cudaMalloc's
// alignment, as if it had a buffer of its own.
constexpr size_t kPackAlign = 256;

// Appends `count` Ts to a packed buffer of *bytes bytes; returns where they
// start.
template <typename T>
size_t Pack(int64_t count, size_t* bytes) {
  const size_t start = (*bytes + kPackAlign - 1) / kPackAlign * kPackAlign;
  *bytes = start + static_cast<size_t>(count) * sizeof(T);
  return start;
}

// The array of Ts at byte `at` of a packed buffer.
template <typename T>
T* Packed(char* buffer, size_t at) {
  return reinterpret_cast<T*>(buffer + at);
}

// Where PooledLossAndGradient's arrays lie in its packed buffers, in bytes:
// the batch going to the device (`offset` only when the caller gave one), and
// the results coming back (out_grad, DeviceMlp::dlogits(), comes on its own).
struct PooledLayout {
  PooledLayout(int rows, int64_t entries, int64_t embedding_floats,
               int64_t num_params, bool has_offset)
      : offsets(Pack<int64_t>(rows + 1, &in_bytes)),
        slot(Pack<uint32_t>(entries, &in_bytes)),
        value(Pack<float>(entries, &in_bytes)),
        field(Pack<uint16_t>(entries, &in_bytes)),
        embeddings(Pack<float>(embedding_floats, &in_bytes)),
        offset(has_offset ? Pack<float>(rows, &in_bytes) : 0),
        targets(Pack<float>(rows, &in_bytes)),
        grad(Pack<float>(num_params, &out_bytes)),
        embedding_grad(Pack<float>(embedding_floats, &out_bytes)),
        row_loss(Pack<float>(rows, &out_bytes)) {}

  // Declared first: the members below are initialised in order from them.
  size_t in_bytes = 0, out_bytes = 0;
  const size_t offsets, slot, value, field, embeddings, offset, targets;
  const size_t grad, embedding_grad, row_loss;
};

// Packs the batch (and `offset` when given) into host_in as `at` lays it out.
void PackPooledBatch(const PooledLayout& at, const PooledBatch& batch,
                     const float* offset, const float* targets, int rows,
                     char* const host_in) {
  const int64_t entries = batch.offsets[rows];
  const int64_t embedding_floats = batch.embedding_rows * batch.dim;
  auto put = [host_in](size_t at, const void* from, size_t bytes) {
    if (bytes > 0) std::memcpy(host_in + at, from, bytes);
  };
  put(at.offsets, batch.offsets, (rows + 1) * sizeof(int64_t));
  put(at.slot, batch.slot, entries * sizeof(uint32_t));
  put(at.value, batch.value, entries * sizeof(float));
  put(at.field, batch.field, entries * sizeof(uint16_t));
  put(at.embeddings, batch.embeddings, embedding_floats * sizeof(float));
  if (offset != nullptr) put(at.offset, offset, rows * sizeof(float));
  put(at.targets, targets, rows * sizeof(float));
}

// Gathers the pooled inputs x [rows, fields*dim] from the packed batch `in`
// on the device.
absl::Status Pool(const PooledLayout& at, const PooledBatch& batch, int rows,
                  char* const in, float* x, cudaStream_t stream) {
  return CudaStatus(
      gpu::LaunchPool(Packed<const int64_t>(in, at.offsets),
                      Packed<const uint32_t>(in, at.slot),
                      Packed<const float>(in, at.value),
                      Packed<const uint16_t>(in, at.field), batch.offsets[rows],
                      Packed<const float>(in, at.embeddings),
                      batch.embedding_rows, rows, batch.fields, batch.dim, x,
                      stream),
      "Pool kernel");
}

// Scatters the pooled inputs' gradient dx into the embedding gradient of the
// packed results `out`, zeroed first.
absl::Status Unpool(const PooledLayout& at, const PooledBatch& batch, int rows,
                    char* const in, const float* dx, char* const out,
                    cudaStream_t stream) {
  const int64_t embedding_floats = batch.embedding_rows * batch.dim;
  float* const d_embedding_grad = Packed<float>(out, at.embedding_grad);
  RETURN_IF_ERROR(
      CudaStatus(cudaMemsetAsync(d_embedding_grad, 0,
                                 embedding_floats * sizeof(float), stream),
                 "cudaMemsetAsync (embedding gradient)"));
  return CudaStatus(
      gpu::LaunchUnpool(Packed<const int64_t>(in, at.offsets),
                        Packed<const uint32_t>(in, at.slot),
                        Packed<const float>(in, at.value),
                        Packed<const uint16_t>(in, at.field),
                        batch.offsets[rows], dx, rows, batch.fields, batch.dim,
                        d_embedding_grad, batch.embedding_rows, stream),
      "Unpool kernel");
}

// Copies the results out of the packed host buffer host_out and the output
// gradient (host_outputs) to the caller's arrays; returns the summed loss.
double UnpackPooledResults(const PooledLayout& at, char* const host_out,
                           const float* host_outputs, int rows,
                           int64_t num_params, int64_t embedding_floats,
                           float* grad, float* embedding_grad,
                           float* out_grad) {
  std::memcpy(grad, host_out + at.grad, num_params * sizeof(float));
  if (embedding_floats > 0) {
    std::memcpy(embedding_grad, host_out + at.embedding_grad,
                embedding_floats * sizeof(float));
  }
  std::memcpy(out_grad, host_outputs, rows * sizeof(float));
  const float* row_loss = Packed<const float>(host_out, at.row_loss);
  double loss_sum = 0.0;  // in double and in row order, as the CPU path sums
  for (int r = 0; r < rows; ++r) loss_sum += row_loss[r];
  return loss_sum;
}

}  // namespace

CudaBackend::CudaBackend(const ModelSpec& spec, int max_batch, int gpu,
                         std::string device)
    : num_params_(spec.num_params()),
      inputs_(spec.layers().front()),
      classes_(spec.layers().back()),
      task_(spec.task()),
      no_targets_(max_batch, 0.0f),
      max_batch_(max_batch),
      gpu_(gpu),
      device_(std::move(device)) {}

CudaBackend::~CudaBackend() {
  // The members free device memory, events and streams on the current device,
  // and nothing may still be using them.
  if (cudaSetDevice(gpu_) != cudaSuccess) return;
  if (compute_ != nullptr) cudaStreamSynchronize(compute_.get());
  if (copy_ != nullptr) cudaStreamSynchronize(copy_.get());
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(
    const ModelSpec& spec, int max_batch, int gpu, std::string device) {
  RETURN_IF_ERROR(
      CudaStatus(cudaSetDevice(gpu), absl::StrCat("cudaSetDevice(", gpu, ")")));
  std::unique_ptr<CudaBackend> backend(
      new CudaBackend(spec, max_batch, gpu, std::move(device)));
  RETURN_IF_ERROR(backend->Allocate(spec));
  return backend;
}

absl::Status CudaBackend::AllocateSlot(Slot* slot) {
  const size_t x_size = static_cast<size_t>(max_batch_) * inputs_;
  ASSIGN_OR_RETURN(slot->host_x,
                   gpu::PinnedArray<float>::Allocate(x_size, "minibatch"));
  ASSIGN_OR_RETURN(slot->host_targets,
                   gpu::PinnedArray<float>::Allocate(max_batch_, "targets"));
  ASSIGN_OR_RETURN(slot->x,
                   gpu::DeviceArray<float>::Allocate(x_size, "minibatch"));
  ASSIGN_OR_RETURN(slot->targets,
                   gpu::DeviceArray<float>::Allocate(max_batch_, "targets"));
  ASSIGN_OR_RETURN(slot->copied, gpu::CreateEvent());
  return absl::OkStatus();
}

absl::Status CudaBackend::Allocate(const ModelSpec& spec) {
  using gpu::DeviceArray;
  using gpu::PinnedArray;
  ASSIGN_OR_RETURN(compute_, gpu::CreateStream());
  ASSIGN_OR_RETURN(copy_, gpu::CreateStream());
  for (Slot& slot : slots_) RETURN_IF_ERROR(AllocateSlot(&slot));
  ASSIGN_OR_RETURN(mlp_,
                   gpu::DeviceMlp::Create(spec, max_batch_, compute_.get()));
  ASSIGN_OR_RETURN(params_,
                   DeviceArray<float>::Allocate(num_params_, "parameters"));
  ASSIGN_OR_RETURN(grad_,
                   DeviceArray<float>::Allocate(num_params_, "gradient"));
  ASSIGN_OR_RETURN(row_loss_,
                   DeviceArray<float>::Allocate(max_batch_, "losses"));
  ASSIGN_OR_RETURN(host_params_,
                   PinnedArray<float>::Allocate(num_params_, "parameters"));
  ASSIGN_OR_RETURN(host_grad_,
                   PinnedArray<float>::Allocate(num_params_, "gradient"));
  ASSIGN_OR_RETURN(host_row_loss_,
                   PinnedArray<float>::Allocate(max_batch_, "losses"));
  ASSIGN_OR_RETURN(host_outputs_,
                   PinnedArray<float>::Allocate(
                       static_cast<size_t>(max_batch_) * classes_, "outputs"));
  return absl::OkStatus();
}

void CudaBackend::ParamsChanged() {
  track_changes_ = true;
  params_current_ = false;
}

void CudaBackend::Prefetch(const float* x, const float* targets, int batch) {
  if (!CheckBatch(batch, max_batch_).ok() ||
      !CheckTargets(task_, targets, batch, classes_).ok()) {
    return;  // LossAndGradient will say what is wrong
  }
  // New values behind the same pointers replace the old hint in its slot.
  int slot = FindHint(x, targets);
  if (slot < 0) slot = TakeSlot();
  Slot& s = slots_[slot];
  s.hint_x = nullptr;
  // Every call is synchronous, so no kernel still reads this slot.
  absl::Status status =
      CudaStatus(cudaSetDevice(gpu_), "cudaSetDevice (prefetch)");
  if (status.ok()) status = Stage(x, targets, batch, slot, copy_.get());
  if (!status.ok()) {
    if (prefetch_error_.ok()) prefetch_error_ = status;
    return;
  }
  s.hint_x = x;
  s.hint_targets = targets;
  s.hint_batch = batch;
  s.hinted_at = ++prefetches_;
}

int CudaBackend::FindHint(const float* x, const float* targets) const {
  for (int i = 0; i < kSlots; ++i) {
    if (slots_[i].hint_x == x && slots_[i].hint_targets == targets) return i;
  }
  return -1;
}

int CudaBackend::TakeSlot() {
  int oldest = 0;
  for (int i = 0; i < kSlots; ++i) {
    if (slots_[i].hint_x == nullptr) return i;
    if (slots_[i].hinted_at < slots_[oldest].hinted_at) oldest = i;
  }
  slots_[oldest].hint_x = nullptr;
  return oldest;
}

absl::Status CudaBackend::Stage(const float* x, const float* targets, int rows,
                                int slot, cudaStream_t stream) {
  Slot& s = slots_[slot];
  // The pinned buffers may still feed an earlier copy; wait for it.
  RETURN_IF_ERROR(CudaStatus(cudaEventSynchronize(s.copied.get()),
                             "cudaEventSynchronize (minibatch slot)"));
  const size_t x_bytes = static_cast<size_t>(rows) * inputs_ * sizeof(float);
  const size_t label_bytes = static_cast<size_t>(rows) * sizeof(float);
  std::memcpy(s.host_x.data(), x, x_bytes);
  std::memcpy(s.host_targets.data(), targets, label_bytes);
  RETURN_IF_ERROR(
      CudaStatus(cudaMemcpyAsync(s.x.data(), s.host_x.data(), x_bytes,
                                 cudaMemcpyHostToDevice, stream),
                 "cudaMemcpyAsync (minibatch to the device)"));
  RETURN_IF_ERROR(
      CudaStatus(cudaMemcpyAsync(s.targets.data(), s.host_targets.data(),
                                 label_bytes, cudaMemcpyHostToDevice, stream),
                 "cudaMemcpyAsync (targets to the device)"));
  return CudaStatus(cudaEventRecord(s.copied.get(), stream),
                    "cudaEventRecord (minibatch copied)");
}

absl::StatusOr<int> CudaBackend::InputSlot(const float* x, const float* targets,
                                           int batch) {
  int slot = FindHint(x, targets);
  if (slot >= 0) {
    Slot& s = slots_[slot];
    s.hint_x = nullptr;  // consumed (or, with another batch, wrong)
    if (s.hint_batch == batch) {
      RETURN_IF_ERROR(
          CudaStatus(cudaStreamWaitEvent(compute_.get(), s.copied.get(), 0),
                     "cudaStreamWaitEvent (prefetched minibatch)"));
      return slot;
    }
  } else {
    slot = TakeSlot();
  }
  RETURN_IF_ERROR(Stage(x, targets, batch, slot, compute_.get()));
  return slot;
}

absl::Status CudaBackend::UploadParams(const float* params) {
  const size_t bytes = static_cast<size_t>(num_params_) * sizeof(float);
  // Earlier copies out of host_params_ finished: every call synchronises.
  std::memcpy(host_params_.data(), params, bytes);
  RETURN_IF_ERROR(
      CudaStatus(cudaMemcpyAsync(params_.data(), host_params_.data(), bytes,
                                 cudaMemcpyHostToDevice, compute_.get()),
                 "cudaMemcpyAsync (parameters to the device)"));
  params_current_ = track_changes_;
  return absl::OkStatus();
}

absl::Status CudaBackend::CopyToHost(void* host, const void* device,
                                     size_t bytes, const char* what) {
  return CudaStatus(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost,
                                    compute_.get()),
                    absl::StrCat("cudaMemcpyAsync (", what, " to the host)"));
}

absl::Status CudaBackend::Synchronize(const char* what) {
  return CudaStatus(cudaStreamSynchronize(compute_.get()),
                    absl::StrCat("cudaStreamSynchronize (", what, ")"));
}

void CudaBackend::Recover() {
  cudaStreamSynchronize(compute_.get());
  cudaStreamSynchronize(copy_.get());
  params_current_ = false;
  for (Slot& slot : slots_) slot.hint_x = nullptr;
}

absl::StatusOr<float> CudaBackend::LossAndGradient(const float* params,
                                                   const float* x,
                                                   const float* targets,
                                                   int batch, float* grad) {
  RETURN_IF_ERROR(CheckBatch(batch, max_batch_));
  RETURN_IF_ERROR(CheckTargets(task_, targets, batch, classes_));
  absl::StatusOr<double> loss_sum = Step(params, x, targets, batch, grad);
  if (!loss_sum.ok()) {
    Recover();
    return loss_sum.status();
  }
  return static_cast<float>(*loss_sum / batch);
}

absl::StatusOr<double> CudaBackend::Step(const float* params, const float* x,
                                         const float* targets, int batch,
                                         float* grad) {
  if (!prefetch_error_.ok())
    return std::exchange(prefetch_error_, absl::OkStatus());
  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(gpu_), "cudaSetDevice"));
  if (!params_current_) RETURN_IF_ERROR(UploadParams(params));
  ASSIGN_OR_RETURN(const int slot, InputSlot(x, targets, batch));
  const Slot& in = slots_[slot];
  RETURN_IF_ERROR(mlp_->Forward(params_.data(), in.x.data(), batch));
  RETURN_IF_ERROR(mlp_->Backward(params_.data(), in.x.data(), in.targets.data(),
                                 batch, row_loss_.data(), grad_.data()));
  const size_t grad_bytes = static_cast<size_t>(num_params_) * sizeof(float);
  RETURN_IF_ERROR(
      CopyToHost(host_grad_.data(), grad_.data(), grad_bytes, "gradient"));
  RETURN_IF_ERROR(CopyToHost(host_row_loss_.data(), row_loss_.data(),
                             batch * sizeof(float), "losses"));
  RETURN_IF_ERROR(Synchronize("LossAndGradient"));
  std::memcpy(grad, host_grad_.data(), grad_bytes);
  double loss_sum = 0.0;  // in double and in row order, as the CPU path sums
  for (int r = 0; r < batch; ++r) loss_sum += host_row_loss_.data()[r];
  return loss_sum;
}

absl::StatusOr<float> CudaBackend::PooledLossAndGradient(
    const float* params, const PooledBatch& batch, const float* offset,
    const float* targets, int rows, float* grad, float* embedding_grad,
    float* out_grad) {
  RETURN_IF_ERROR(CheckBatch(rows, max_batch_));
  RETURN_IF_ERROR(CheckTargets(task_, targets, rows, classes_));
  RETURN_IF_ERROR(CheckPooledBatch(batch, rows, inputs_, classes_));
  absl::StatusOr<double> loss_sum = PooledStep(
      params, batch, offset, targets, rows, grad, embedding_grad, out_grad);
  if (!loss_sum.ok()) {
    Recover();
    return loss_sum.status();
  }
  return static_cast<float>(*loss_sum / rows);
}

absl::StatusOr<double> CudaBackend::PooledStep(
    const float* params, const PooledBatch& batch, const float* offset,
    const float* targets, int rows, float* grad, float* embedding_grad,
    float* out_grad) {
  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(gpu_), "cudaSetDevice"));
  const int64_t entries = batch.offsets[rows];
  const int64_t embedding_floats = batch.embedding_rows * batch.dim;
  const PooledLayout at(rows, entries, embedding_floats, num_params_,
                        offset != nullptr);
  const size_t inputs_size = static_cast<size_t>(max_batch_) * inputs_;
  RETURN_IF_ERROR(Reserve(inputs_size, "pooled inputs", &pooled_x_));
  RETURN_IF_ERROR(Reserve(inputs_size, "pooled inputs' gradient", &pooled_dx_));
  RETURN_IF_ERROR(Reserve(at.in_bytes, "pooled batch", &host_pooled_in_));
  RETURN_IF_ERROR(Reserve(at.in_bytes, "pooled batch", &pooled_in_));
  RETURN_IF_ERROR(Reserve(at.out_bytes, "pooled gradients", &host_pooled_out_));
  RETURN_IF_ERROR(Reserve(at.out_bytes, "pooled gradients", &pooled_out_));
  if (!params_current_) RETURN_IF_ERROR(UploadParams(params));

  // The batch, packed and copied at once. Earlier copies out of
  // host_pooled_in_ finished: every call synchronises.
  PackPooledBatch(at, batch, offset, targets, rows, host_pooled_in_.data());
  char* const in = pooled_in_.data();
  RETURN_IF_ERROR(
      CudaStatus(cudaMemcpyAsync(in, host_pooled_in_.data(), at.in_bytes,
                                 cudaMemcpyHostToDevice, compute_.get()),
                 "cudaMemcpyAsync (pooled batch to the device)"));
  char* const out = pooled_out_.data();

  // Gather, MLP (the loss's gradient of the summed loss, back to the pooled
  // inputs; the parameters' scaled to the mean's), scatter.
  RETURN_IF_ERROR(Pool(at, batch, rows, in, pooled_x_.data(), compute_.get()));
  RETURN_IF_ERROR(mlp_->Forward(params_.data(), pooled_x_.data(), rows));
  gpu::BackwardOptions options;
  if (offset != nullptr) options.offset = Packed<const float>(in, at.offset);
  options.summed = true;
  options.dx = pooled_dx_.data();
  RETURN_IF_ERROR(mlp_->Backward(params_.data(), pooled_x_.data(),
                                 Packed<const float>(in, at.targets), rows,
                                 Packed<float>(out, at.row_loss),
                                 Packed<float>(out, at.grad), options));
  RETURN_IF_ERROR(
      Unpool(at, batch, rows, in, pooled_dx_.data(), out, compute_.get()));

  RETURN_IF_ERROR(CopyToHost(host_pooled_out_.data(), out, at.out_bytes,
                             "pooled gradients"));
  RETURN_IF_ERROR(CopyToHost(host_outputs_.data(), mlp_->dlogits(),
                             rows * sizeof(float), "output gradient"));
  RETURN_IF_ERROR(Synchronize("PooledLossAndGradient"));
  return UnpackPooledResults(at, host_pooled_out_.data(), host_outputs_.data(),
                             rows, num_params_, embedding_floats, grad,
                             embedding_grad, out_grad);
}

absl::Status CudaBackend::Predict(const float* params, const float* x, int n,
                                  float* out) {
  if (n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot predict ", n, " examples"));
  }
  if (n == 0) return absl::OkStatus();
  absl::Status status = PredictChunks(params, x, n, out);
  if (!status.ok()) Recover();
  return status;
}

absl::Status CudaBackend::PredictChunks(const float* params, const float* x,
                                        int n, float* out) {
  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(gpu_), "cudaSetDevice"));
  RETURN_IF_ERROR(UploadParams(params));
  params_current_ = false;  // these need not be the caller's training params
  // A free slot if there is one, so that pending Prefetches stay valid.
  const int slot = TakeSlot();
  const Slot& in = slots_[slot];
  for (int start = 0; start < n; start += max_batch_) {
    const int rows = std::min(max_batch_, n - start);
    RETURN_IF_ERROR(Stage(x + static_cast<int64_t>(start) * inputs_,
                          no_targets_.data(), rows, slot, compute_.get()));
    RETURN_IF_ERROR(mlp_->Forward(params_.data(), in.x.data(), rows));
    const size_t bytes = static_cast<size_t>(rows) * classes_ * sizeof(float);
    RETURN_IF_ERROR(
        CopyToHost(host_outputs_.data(), mlp_->logits(), bytes, "outputs"));
    RETURN_IF_ERROR(Synchronize("Predict"));
    std::memcpy(out + static_cast<int64_t>(start) * classes_,
                host_outputs_.data(), bytes);
  }
  return absl::OkStatus();
}

}  // namespace downpour::worker
