// The MLP's forward and backward pass on one GPU: cuBLAS SGEMMs plus the
// kernels of kernels.h, in the order CpuBackend runs OpenBLAS and mlp_math.
//
//   ASSIGN_OR_RETURN(auto mlp, DeviceMlp::Create(spec, max_batch, stream));
//   RETURN_IF_ERROR(mlp->Forward(d_params, d_x, rows));
//   RETURN_IF_ERROR(
//       mlp->Backward(d_params, d_x, d_labels, rows, d_loss, d_grad));
//
// Every pointer is device memory. Calls only enqueue work on the stream given
// to Create; nothing here copies to or from the host or waits for the GPU, so
// results are ready once the caller synchronises that stream. The device that
// was current at Create must be current at every call. Not thread-safe.
#ifndef DOWNPOUR_WORKER_CUDA_DEVICE_MLP_H_
#define DOWNPOUR_WORKER_CUDA_DEVICE_MLP_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model_spec.h"
#include "worker/cuda/cuda_resources.h"

namespace downpour::worker::gpu {

// What DeviceMlp::Backward takes and gives beyond the mean loss's parameter
// gradient; the defaults are a plain training step. Device pointers.
struct BackwardOptions {
  // One float per row (null: none), added to each row's one output before the
  // loss (wide_deep's wide margin); logits() then include it. REQUIRES: a
  // model with one output.
  const float* offset = nullptr;
  // Whether dlogits() and dx are of the summed loss rather than the mean
  // (CpuBackend::PooledLossAndGradient's choice); grad is of the mean loss
  // either way.
  bool summed = false;
  // [rows, inputs] (null: not computed): d loss / d x, one more SGEMM.
  float* dx = nullptr;
};

class DeviceMlp {
 public:
  // Allocates activations and deltas for max_batch rows and a cuBLAS handle on
  // `stream` (borrowed; it must outlive the DeviceMlp). ResourceExhausted when
  // device memory runs out; other CUDA errors as cuda_status.h maps them.
  // REQUIRES: max_batch >= 1.
  static absl::StatusOr<std::unique_ptr<DeviceMlp>> Create(
      const ModelSpec& spec, int max_batch, cudaStream_t stream);

  DeviceMlp(const DeviceMlp&) = delete;
  DeviceMlp& operator=(const DeviceMlp&) = delete;

  // Enqueues the forward pass of `rows` examples x [rows, inputs] through the
  // flat parameter vector `params` (model_spec.h's layout); the logits
  // [rows, classes] land in logits(). REQUIRES: 1 <= rows <= max_batch.
  absl::Status Forward(const float* params, const float* x, int rows);
  const float* logits() const { return act_.back().data(); }

  // After Forward with the same params, x and rows: enqueues the task's loss
  // on logits() (row_loss[r] = example r's loss; kernel_math.h's
  // OutputLossRow) and the backward pass, overwriting grad[0..num_params)
  // with the gradient of the mean loss, and what `options` asks for: as
  // CpuBackend's Backward and PooledLossAndGradient, in the same order. Once
  // per Forward (an offset is added to logits() in place). InvalidArgument
  // for an offset on a model with more than one output. REQUIRES: targets
  // valid for the task (CheckTargets on the host).
  absl::Status Backward(const float* params, const float* x,
                        const float* targets, int rows, float* row_loss,
                        float* grad, const BackwardOptions& options = {});
  // d loss / d logits of the last Backward, [rows, classes]: of the mean loss,
  // or of the summed loss with options.summed.
  const float* dlogits() const { return delta_.back().data(); }

 private:
  DeviceMlp(const ModelSpec& spec, cudaStream_t stream);
  int num_layers() const { return static_cast<int>(layers_.size()) - 1; }

  // c[m, n] = op(a) * op(b) for row-major a, b, c as CpuBackend's Gemm;
  // `what` names the product in errors ("fc2 backward dW").
  absl::Status Gemm(bool trans_a, bool trans_b, int m, int n, int k,
                    const float* a, const float* b, float* c, const char* what);

  // Constant after construction.
  const std::vector<int> layers_;
  const Task task_;
  const int64_t num_params_;
  cudaStream_t const stream_;
  // Per linear layer: where its weight and bias start in the flat vector.
  std::vector<int64_t> weight_offset_;
  std::vector<int64_t> bias_offset_;
  CublasHandle cublas_;
  // Device scratch, max_batch rows each, as in CpuBackend: act_[l] is linear
  // layer l's output (after ReLU for hidden layers; the logits for the last),
  // delta_[l] is d loss / d (layer l's pre-activation).
  std::vector<DeviceArray<float>> act_;
  std::vector<DeviceArray<float>> delta_;
};

}  // namespace downpour::worker::gpu

#endif  // DOWNPOUR_WORKER_CUDA_DEVICE_MLP_H_
