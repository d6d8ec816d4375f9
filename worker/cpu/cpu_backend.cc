// The MLP's forward and backward pass as OpenBLAS SGEMMs plus mlp_math kernels.
#include "worker/cpu/cpu_backend.h"

#include <cblas.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/mlp_math.h"

namespace downpour::worker {
namespace {

// c[m, n] = a[m, k] * b[k, n] (beta = 0), with a and/or b optionally transposed
// in memory: a is stored [k, m] when trans_a, b is stored [n, k] when trans_b.
void Gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a,
          const float* b, float* c) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a,
              trans_a ? m : k, b, trans_b ? k : n, 0.0f, c, n);
}

// The same with strides and beta: c = a * b + beta * c, where a, b and c
// have leading dimensions lda, ldb and ldc (submatrices of wider ones).
void GemmStrided(bool trans_a, int m, int n, int k, const float* a, int lda,
                 const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, CblasNoTrans,
              m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}

// One layer of a staged step: its shape, where its weight and bias sit in the
// flat parameter vector, and the row chunks its weight is cut into.
struct StagedLayer {
  int fan_in;
  int fan_out;
  int64_t weight;
  int64_t bias;
  const std::vector<int>& rows;  // chunk bounds, 0 first and fan_in last

  // Where weight row r starts in the flat parameter vector.
  int64_t RowStart(int r) const {
    return weight + static_cast<int64_t>(r) * fan_out;
  }
};

// Calls visit(r0, r1, first) for each chunk [r0, r1) of layer's weight rows,
// last rows first (the order the backward pass sends them in); `first` for
// the first call. Returns visit's first error, stopping there.
template <typename Visit>
absl::Status ForEachChunkLastFirst(const StagedLayer& layer, Visit visit) {
  const std::vector<int>& rows = layer.rows;
  for (size_t c = rows.size() - 1; c > 0; --c) {
    RETURN_IF_ERROR(visit(rows[c - 1], rows[c], c + 1 == rows.size()));
  }
  return absl::OkStatus();
}

// One layer's forward pass: out = sum over chunks of in[:, r0:r1] *
// W[r0:r1, :], the chunks last rows first (the order the backward pass sends
// them in), each once its parameters arrived; then the bias and, but for the
// last layer, the ReLU.
absl::Status StagedForward(const StagedLayer& layer, const float* params,
                           const float* in, int batch, bool relu, float* out,
                           const StageHooks& hooks) {
  const int fan_in = layer.fan_in, fan_out = layer.fan_out;
  RETURN_IF_ERROR(ForEachChunkLastFirst(
      layer, [&](int r0, int r1, bool first) -> absl::Status {
        RETURN_IF_ERROR(
            hooks.await_params(layer.RowStart(r0), layer.RowStart(r1)));
        GemmStrided(false, batch, fan_out, r1 - r0, in + r0, fan_in,
                    params + layer.RowStart(r0), fan_out, first ? 0.0f : 1.0f,
                    out, fan_out);
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(hooks.await_params(layer.bias, layer.bias + fan_out));
  AddBias(params + layer.bias, batch, fan_out, out);
  if (relu) {
    ReluForward(static_cast<int64_t>(batch) * fan_out, out);
  }
  return absl::OkStatus();
}

// One layer's gradients from its input and its delta dz, the weight's chunks
// last rows first and then the bias, each reported as soon as it is final.
void StagedGradient(const StagedLayer& layer, const float* layer_in,
                    const float* dz, int batch, float* grad,
                    const StageHooks& hooks) {
  const int fan_in = layer.fan_in, fan_out = layer.fan_out;
  // The visit cannot fail.
  (void)ForEachChunkLastFirst(layer, [&](int r0, int r1, bool) {
    // dW[r0:r1, :] = in[:, r0:r1]^T * dZ.
    GemmStrided(true, r1 - r0, fan_out, batch, layer_in + r0, fan_in, dz,
                fan_out, 0.0f, grad + layer.RowStart(r0), fan_out);
    hooks.gradient_ready(layer.RowStart(r0), layer.RowStart(r1));
    return absl::OkStatus();
  });
  ColumnSums(dz, batch, fan_out, grad + layer.bias);
  hooks.gradient_ready(layer.bias, layer.bias + fan_out);
}

}  // namespace

CpuBackend::CpuBackend(const ModelSpec& spec, int max_batch)
    : layers_(spec.layers()),
      task_(spec.task()),
      max_batch_(max_batch),
      tensors_floats_(spec.num_params()),
      layout_(spec),
      act_(layout_.Scratch(max_batch)),
      delta_(layout_.Scratch(max_batch)) {}

const float* CpuBackend::Forward(const float* params, const float* x,
                                 int rows) {
  return model::DenseForward(layout_, params, x, rows, &act_);
}

void CpuBackend::Backward(const float* params, const float* x, int rows,
                          float* grad, float* dx) {
  for (int l = num_layers() - 1; l >= 0; --l) {
    const int fan_in = layers_[l], fan_out = layers_[l + 1];
    const float* in = l == 0 ? x : act_[l - 1].data();
    const float* dz = delta_[l].data();
    // dW = in^T * dZ: [fan_in, rows] * [rows, fan_out].
    Gemm(true, false, fan_in, fan_out, rows, in, dz,
         grad + layout_.weight_offset[l]);
    ColumnSums(dz, rows, fan_out, grad + layout_.bias_offset[l]);
    // dA_prev = dZ * W^T: [rows, fan_out] * [fan_out, fan_in].
    if (l == 0) {
      if (dx != nullptr) {
        Gemm(false, true, rows, fan_in, fan_out, dz,
             params + layout_.weight_offset[l], dx);
      }
      break;
    }
    float* da = delta_[l - 1].data();
    Gemm(false, true, rows, fan_in, fan_out, dz,
         params + layout_.weight_offset[l], da);
    ReluBackward(act_[l - 1].data(), static_cast<int64_t>(rows) * fan_in, da);
  }
}

absl::StatusOr<float> CpuBackend::LossAndGradient(const float* params,
                                                  const float* x,
                                                  const float* targets,
                                                  int batch, float* grad) {
  RETURN_IF_ERROR(CheckBatch(batch, max_batch_));
  RETURN_IF_ERROR(CheckTargets(task_, targets, batch, layers_.back()));
  const float* logits = Forward(params, x, batch);
  const double loss_sum =
      OutputLoss(task_, logits, targets, batch, layers_.back(),
                 1.0f / static_cast<float>(batch), delta_.back().data());
  Backward(params, x, batch, grad);
  return static_cast<float>(loss_sum / batch);
}

std::vector<int> CpuBackend::RowChunks(int l,
                                       const std::vector<int64_t>& cuts) const {
  const int fan_in = layers_[l], fan_out = layers_[l + 1];
  const int64_t begin = layout_.weight_offset[l];
  const int64_t end = begin + static_cast<int64_t>(fan_in) * fan_out;
  std::vector<int> rows = {0};
  for (int64_t cut : cuts) {
    if (cut <= begin || cut >= end) continue;
    // A row a cut splits goes with the chunk below it.
    const int row = static_cast<int>((cut - begin) / fan_out);
    if (row > rows.back()) rows.push_back(row);
  }
  rows.push_back(fan_in);
  return rows;
}

absl::StatusOr<float> CpuBackend::LossAndGradientInStages(
    const float* params, const float* x, const float* targets, int batch,
    float* grad, const StageHooks& hooks) {
  RETURN_IF_ERROR(CheckBatch(batch, max_batch_));
  RETURN_IF_ERROR(CheckTargets(task_, targets, batch, layers_.back()));
  const int layers = num_layers();
  std::vector<std::vector<int>> chunks(layers);
  for (int l = 0; l < layers; ++l) chunks[l] = RowChunks(l, hooks.cuts);
  std::vector<StagedLayer> staged;
  for (int l = 0; l < layers; ++l) {
    staged.push_back({layers_[l], layers_[l + 1], layout_.weight_offset[l],
                      layout_.bias_offset[l], chunks[l]});
  }
  const float* in = x;
  for (int l = 0; l < layers; ++l) {
    RETURN_IF_ERROR(StagedForward(staged[l], params, in, batch, l + 1 < layers,
                                  act_[l].data(), hooks));
    in = act_[l].data();
  }
  const double loss_sum =
      OutputLoss(task_, in, targets, batch, layers_.back(),
                 1.0f / static_cast<float>(batch), delta_.back().data());
  // Backward in two passes. First the deltas, last layer down (each
  // weight's use here comes before any gradient is reported). Then the
  // gradients in the order the next forward pass reads the parameters,
  // first layer first and, within a weight, last rows first: the pieces
  // the next step needs first leave first.
  for (int l = layers - 1; l > 0; --l) {
    const int fan_in = layers_[l], fan_out = layers_[l + 1];
    float* da = delta_[l - 1].data();
    Gemm(false, true, batch, fan_in, fan_out, delta_[l].data(),
         params + layout_.weight_offset[l], da);
    ReluBackward(act_[l - 1].data(), static_cast<int64_t>(batch) * fan_in, da);
  }
  for (int l = 0; l < layers; ++l) {
    const float* layer_in = l == 0 ? x : act_[l - 1].data();
    StagedGradient(staged[l], layer_in, delta_[l].data(), batch, grad, hooks);
  }
  return static_cast<float>(loss_sum / batch);
}

absl::StatusOr<float> CpuBackend::PooledLossAndGradient(
    const float* params, const PooledBatch& batch, const float* offset,
    const float* targets, int rows, float* grad, float* embedding_grad,
    float* out_grad) {
  RETURN_IF_ERROR(CheckBatch(rows, max_batch_));
  RETURN_IF_ERROR(CheckTargets(task_, targets, rows, layers_.back()));
  RETURN_IF_ERROR(
      CheckPooledBatch(batch, rows, layers_.front(), layers_.back()));
  const size_t inputs_size = static_cast<size_t>(max_batch_) * layers_.front();
  if (pooled_.size() != inputs_size) {
    pooled_.resize(inputs_size);
    pooled_grad_.resize(inputs_size);
  }
  Pool(batch, rows, pooled_.data());
  float* logits = act_.back().data();
  Forward(params, pooled_.data(), rows);
  if (offset != nullptr) {
    for (int r = 0; r < rows; ++r) logits[r] += offset[r];
  }
  // The gradient of the summed loss, back to the inputs; the parameters'
  // then scaled to the mean's.
  float* dlogits = delta_.back().data();
  const double loss_sum =
      OutputLoss(task_, logits, targets, rows, 1, 1.0f, dlogits);
  std::copy(dlogits, dlogits + rows, out_grad);
  Backward(params, pooled_.data(), rows, grad, pooled_grad_.data());
  const float scale = 1.0f / static_cast<float>(rows);
  const int64_t n = tensors_floats_;
  for (int64_t i = 0; i < n; ++i) grad[i] *= scale;
  Unpool(batch, rows, pooled_grad_.data(), embedding_grad);
  return static_cast<float>(loss_sum / rows);
}

absl::Status CpuBackend::Predict(const float* params, const float* x, int n,
                                 float* out) {
  if (n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot predict ", n, " examples"));
  }
  const int outputs = layers_.back();
  for (int start = 0; start < n; start += max_batch_) {
    const int rows = std::min(max_batch_, n - start);
    const float* logits =
        Forward(params, x + static_cast<int64_t>(start) * layers_[0], rows);
    std::copy(logits, logits + static_cast<int64_t>(rows) * outputs,
              out + static_cast<int64_t>(start) * outputs);
  }
  return absl::OkStatus();
}

}  // namespace downpour::worker
