// ComputeBackend on one NVIDIA GPU: the MLP's passes as cuBLAS SGEMMs plus
// small CUDA kernels (DeviceMlp), fed through pinned host buffers.
//
//   auto backend = CudaBackend::Create(spec, 128, 0, "cuda:0 (...)");
//   (*backend)->ParamsChanged();  // optional: upload params only on change
//   (*backend)->Prefetch(next_x, next_targets, 128);  // optional: overlap
//   absl::StatusOr<float> loss =
//       (*backend)->LossAndGradient(params, x, targets, 128, grad.data());
//
// Transfers: parameters, minibatches, gradients and losses go through pinned
// host buffers with cudaMemcpyAsync. Work runs on a compute stream; a
// Prefetch'ed minibatch is copied on a second stream into an input slot of its
// own, so the copy overlaps the steps computed before the one that uses it.
// Once the caller uses ParamsChanged, the device copy of the parameters is
// refreshed only after a ParamsChanged call. Each call returns when its results
// are on the host. Build it through MakeCudaBackend (cuda_support.h), which
// checks the device first; this header needs the CUDA toolkit.
//
// PooledLossAndGradient (wide_deep) copies its batch's arrays to the device in
// one packed transfer, then pools, runs the MLP and scatters the gradient back
// to the embedding rows there; its buffers are allocated at its first call and
// grow with the largest batch seen.
#ifndef DOWNPOUR_WORKER_CUDA_CUDA_BACKEND_H_
#define DOWNPOUR_WORKER_CUDA_CUDA_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model_spec.h"
#include "worker/compute_backend.h"
#include "worker/cuda/cuda_resources.h"
#include "worker/cuda/device_mlp.h"

namespace downpour::worker {

// Not thread-safe: one per compute thread (any thread; each call makes its
// GPU current on the calling thread first).
class CudaBackend final : public ComputeBackend {
 public:
  // Allocates device and pinned memory for batches of up to max_batch on GPU
  // `gpu`; `device` is what device() reports ("cuda:0 (NVIDIA H100 ...)").
  // ResourceExhausted when memory runs out; other CUDA and cuBLAS errors as
  // cuda_status.h maps them, naming the call. REQUIRES: max_batch >= 1.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(
      const ModelSpec& spec, int max_batch, int gpu, std::string device);

  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;
  ~CudaBackend() override;

  // ComputeBackend's contracts. Beyond InvalidArgument for bad input, a CUDA
  // or cuBLAS failure is returned as cuda_status.h maps it, naming the call;
  // the backend then re-uploads everything on its next call.
  absl::StatusOr<float> LossAndGradient(const float* params, const float* x,
                                        const float* targets, int batch,
                                        float* grad) override;
  absl::Status Predict(const float* params, const float* x, int n,
                       float* out) override;
  absl::StatusOr<float> PooledLossAndGradient(
      const float* params, const PooledBatch& batch, const float* offset,
      const float* targets, int rows, float* grad, float* embedding_grad,
      float* out_grad) override;
  std::string device() const override { return device_; }
  void ParamsChanged() override;
  // A copy that fails to start is reported by the next LossAndGradient.
  void Prefetch(const float* x, const float* targets, int batch) override;

 private:
  // Input slots: two prefetched minibatches can wait (the next step's and the
  // one after it, as the Downpour loop prefetches), plus one for a minibatch
  // that was not announced.
  static constexpr int kSlots = 3;

  // A minibatch in pinned and device memory, and the Prefetch it holds.
  struct Slot {
    gpu::PinnedArray<float> host_x;
    gpu::PinnedArray<float> host_targets;
    gpu::DeviceArray<float> x;
    gpu::DeviceArray<float> targets;
    gpu::Event copied;  // the last copy out of host_x/host_targets is done
    // The caller's pointers of a pending Prefetch; hint_x is null when the
    // slot is free. hinted_at orders hints, so the oldest is evicted first.
    const float* hint_x = nullptr;
    const float* hint_targets = nullptr;
    int hint_batch = 0;
    uint64_t hinted_at = 0;
  };

  CudaBackend(const ModelSpec& spec, int max_batch, int gpu,
              std::string device);
  absl::Status Allocate(const ModelSpec& spec);
  absl::Status AllocateSlot(Slot* slot);

  absl::StatusOr<double> Step(const float* params, const float* x,
                              const float* targets, int batch, float* grad);
  // PooledLossAndGradient after its checks: the summed loss.
  absl::StatusOr<double> PooledStep(const float* params,
                                    const PooledBatch& batch,
                                    const float* offset, const float* targets,
                                    int rows, float* grad,
                                    float* embedding_grad, float* out_grad);
  absl::Status PredictChunks(const float* params, const float* x, int n,
                             float* out);
  // After a failure: waits for both streams and forgets what is on the device.
  void Recover();
  absl::Status UploadParams(const float* params);
  // The slot holding x and targets on the device for compute_: the one
  // prefetched for them, or one they are copied into now.
  absl::StatusOr<int> InputSlot(const float* x, const float* targets,
                                int batch);
  // The slot whose pending Prefetch has these pointers, or -1.
  int FindHint(const float* x, const float* targets) const;
  // A free slot, or else the one with the oldest hint, which is dropped.
  int TakeSlot();
  // Copies rows examples into slot `slot` through its pinned buffers,
  // enqueued on `stream`.
  absl::Status Stage(const float* x, const float* targets, int rows, int slot,
                     cudaStream_t stream);
  absl::Status CopyToHost(void* host, const void* device, size_t bytes,
                          const char* what);
  absl::Status Synchronize(const char* what);

  // Constant after construction.
  const int64_t num_params_;
  const int inputs_;
  const int classes_;  // outputs per example
  const Task task_;
  // Predict's targets for Stage (which copies targets too): zeros.
  const std::vector<float> no_targets_;
  const int max_batch_;
  const int gpu_;
  const std::string device_;

  // CUDA objects; the streams are declared first so they are destroyed last.
  gpu::Stream compute_;
  gpu::Stream copy_;  // prefetch copies
  Slot slots_[kSlots];
  std::unique_ptr<gpu::DeviceMlp> mlp_;
  gpu::DeviceArray<float> params_, grad_, row_loss_;
  gpu::PinnedArray<float> host_params_, host_grad_, host_row_loss_;
  // max_batch rows of outputs (Predict), or of their gradient (out_grad).
  gpu::PinnedArray<float> host_outputs_;

  // PooledLossAndGradient's, empty until its first call. The pooled inputs
  // and their gradient, [max_batch, inputs] each; and its arrays packed
  // (PooledLayout in cuda_backend.cc) into one buffer each way, so that a step
  // takes one copy to the device and two back, grown when a batch needs more.
  gpu::DeviceArray<float> pooled_x_, pooled_dx_;
  gpu::PinnedArray<char> host_pooled_in_, host_pooled_out_;
  gpu::DeviceArray<char> pooled_in_, pooled_out_;

  // The parameter cache: params_ holds the caller's current values while
  // params_current_, which is only ever true once ParamsChanged was called.
  bool track_changes_ = false;
  bool params_current_ = false;

  uint64_t prefetches_ = 0;  // Prefetch calls so far
  absl::Status prefetch_error_;
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_CUDA_CUDA_BACKEND_H_
