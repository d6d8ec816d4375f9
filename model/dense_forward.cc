// The dense MLP's forward pass: OpenBLAS SGEMMs plus the bias and ReLU kernels.
#include "model/dense_forward.h"

#include <cblas.h>

#include <algorithm>

namespace downpour::model {

void AddBias(const float *bias, int rows, int cols, float *z) {
  for (int r = 0; r < rows; ++r) {
    float *row = z + static_cast<int64_t>(r) * cols;
    for (int c = 0; c < cols; ++c) row[c] += bias[c];
  }
}

void ReluForward(int64_t n, float *a) {
  for (int64_t i = 0; i < n; ++i) a[i] = std::max(a[i], 0.0f);
}

DenseLayout::DenseLayout(const ModelSpec &spec) : layers(spec.layers()) {
  // ModelSpec lists fc{l}.weight then fc{l}.bias for each layer.
  const std::vector<TensorSpec> &tensors = spec.tensors();
  for (int l = 0; l < num_layers(); ++l) {
    weight_offset.push_back(tensors[2 * l].offset);
    bias_offset.push_back(tensors[2 * l + 1].offset);
  }
}

std::vector<std::vector<float>> DenseLayout::Scratch(int rows) const {
  std::vector<std::vector<float>> act;
  for (int l = 0; l < num_layers(); ++l) {
    act.emplace_back(static_cast<size_t>(rows) * layers[l + 1]);
  }
  return act;
}

const float *DenseForward(const DenseLayout &layout, const float *params,
                          const float *x, int rows,
                          std::vector<std::vector<float>> *act) {
  const float *in = x;
  for (int l = 0; l < layout.num_layers(); ++l) {
    const int fan_in = layout.layers[l], fan_out = layout.layers[l + 1];
    float *out = (*act)[l].data();
    // out[rows, fan_out] = in[rows, fan_in] * W[fan_in, fan_out].
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, fan_out,
                fan_in, 1.0f, in, fan_in, params + layout.weight_offset[l],
                fan_out, 0.0f, out, fan_out);
    AddBias(params + layout.bias_offset[l], rows, fan_out, out);
    if (l + 1 < layout.num_layers()) {
      ReluForward(static_cast<int64_t>(rows) * fan_out, out);
    }
    in = out;
  }
  return in;
}

}  // namespace downpour::model
