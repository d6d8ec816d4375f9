// The MLP's passes as cuBLAS SGEMMs and kernels, mirroring CpuBackend.
#include "worker/cuda/device_mlp.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/cuda/cuda_status.h"
#include "worker/cuda/kernels.h"
#include "worker/cuda/row_major_gemm.h"

namespace downpour::worker::gpu {

DeviceMlp::DeviceMlp(const ModelSpec& spec, cudaStream_t stream)
    : layers_(spec.layers()),
      task_(spec.task()),
      num_params_(spec.num_params()),
      stream_(stream) {
  // ModelSpec lists fc{l}.weight then fc{l}.bias for each layer.
  const std::vector<TensorSpec>& tensors = spec.tensors();
  for (int l = 0; l < num_layers(); ++l) {
    weight_offset_.push_back(tensors[2 * l].offset);
    bias_offset_.push_back(tensors[2 * l + 1].offset);
  }
}

absl::StatusOr<std::unique_ptr<DeviceMlp>> DeviceMlp::Create(
    const ModelSpec& spec, int max_batch, cudaStream_t stream) {
  std::unique_ptr<DeviceMlp> mlp(new DeviceMlp(spec, stream));
  ASSIGN_OR_RETURN(mlp->cublas_, CreateCublas(stream));
  for (int l = 0; l < mlp->num_layers(); ++l) {
    const size_t size = static_cast<size_t>(max_batch) * mlp->layers_[l + 1];
    const std::string name = absl::StrCat("fc", l + 1);
    ASSIGN_OR_RETURN(auto act, DeviceArray<float>::Allocate(
                                   size, absl::StrCat(name, " activations")));
    ASSIGN_OR_RETURN(auto delta, DeviceArray<float>::Allocate(
                                     size, absl::StrCat(name, " deltas")));
    mlp->act_.push_back(std::move(act));
    mlp->delta_.push_back(std::move(delta));
  }
  return mlp;
}

absl::Status DeviceMlp::Gemm(bool trans_a, bool trans_b, int m, int n, int k,
                             const float* a, const float* b, float* c,
                             const char* what) {
  const ColumnMajorGemm g = ToColumnMajor(trans_a, trans_b, m, n, k, a, b, c);
  const float one = 1.0f, zero = 0.0f;
  return CublasStatus(
      cublasSgemm(cublas_.get(), g.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N,
                  g.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N, g.m, g.n, g.k,
                  &one, g.first, g.ld_first, g.second, g.ld_second, &zero, g.c,
                  g.ldc),
      absl::StrCat("cublasSgemm (", what, ")"));
}

absl::Status DeviceMlp::Forward(const float* params, const float* x, int rows) {
  const float* in = x;
  for (int l = 0; l < num_layers(); ++l) {
    const int fan_in = layers_[l], fan_out = layers_[l + 1];
    const std::string name = absl::StrCat("fc", l + 1, " forward");
    float* out = act_[l].data();
    RETURN_IF_ERROR(Gemm(false, false, rows, fan_out, fan_in, in,
                         params + weight_offset_[l], out, name.c_str()));
    RETURN_IF_ERROR(CudaStatus(
        LaunchAddBias(params + bias_offset_[l], rows, fan_out, out, stream_),
        absl::StrCat("AddBias kernel (", name, ")")));
    if (l + 1 < num_layers()) {
      RETURN_IF_ERROR(CudaStatus(
          LaunchReluForward(static_cast<int64_t>(rows) * fan_out, out, stream_),
          absl::StrCat("ReluForward kernel (", name, ")")));
    }
    in = out;
  }
  return absl::OkStatus();
}

absl::Status DeviceMlp::Backward(const float* params, const float* x,
                                 const float* targets, int rows,
                                 float* row_loss, float* grad,
                                 const BackwardOptions& options) {
  if (options.offset != nullptr) {
    if (layers_.back() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("an output offset needs a model with one output, this "
                       "one has ",
                       layers_.back()));
    }
    // One output a row: the offsets are a bias over a single row of `rows`.
    RETURN_IF_ERROR(CudaStatus(
        LaunchAddBias(options.offset, 1, rows, act_.back().data(), stream_),
        "AddBias kernel (output offset)"));
  }
  const float mean = 1.0f / static_cast<float>(rows);
  RETURN_IF_ERROR(CudaStatus(
      LaunchOutputLoss(static_cast<int>(task_), logits(), targets, rows,
                       layers_.back(), options.summed ? 1.0f : mean,
                       delta_.back().data(), row_loss, stream_),
      "OutputLoss kernel"));
  for (int l = num_layers() - 1; l >= 0; --l) {
    const int fan_in = layers_[l], fan_out = layers_[l + 1];
    const std::string name = absl::StrCat("fc", l + 1, " backward");
    const float* in = l == 0 ? x : act_[l - 1].data();
    const float* dz = delta_[l].data();
    // dW = in^T * dZ: [fan_in, rows] * [rows, fan_out].
    RETURN_IF_ERROR(Gemm(true, false, fan_in, fan_out, rows, in, dz,
                         grad + weight_offset_[l],
                         absl::StrCat(name, " dW").c_str()));
    RETURN_IF_ERROR(CudaStatus(
        LaunchColumnSums(dz, rows, fan_out, grad + bias_offset_[l], stream_),
        absl::StrCat("ColumnSums kernel (", name, " db)")));
    // dA_prev = dZ * W^T: [rows, fan_out] * [fan_out, fan_in].
    if (l == 0) {
      if (options.dx != nullptr) {
        RETURN_IF_ERROR(Gemm(false, true, rows, fan_in, fan_out, dz,
                             params + weight_offset_[l], options.dx,
                             absl::StrCat(name, " dX").c_str()));
      }
      break;
    }
    float* da = delta_[l - 1].data();
    RETURN_IF_ERROR(Gemm(false, true, rows, fan_in, fan_out, dz,
                         params + weight_offset_[l], da,
                         absl::StrCat(name, " dA").c_str()));
    RETURN_IF_ERROR(CudaStatus(
        LaunchReluBackward(act_[l - 1].data(),
                           static_cast<int64_t>(rows) * fan_in, da, stream_),
        absl::StrCat("ReluBackward kernel (", name, ")")));
  }
  if (options.summed) {
    // The parameters' gradient of the summed loss, scaled to the mean's.
    RETURN_IF_ERROR(CudaStatus(LaunchScale(num_params_, mean, grad, stream_),
                               "Scale kernel (gradient of the mean loss)"));
  }
  return absl::OkStatus();
}

}  // namespace downpour::worker::gpu
