// The dense MLP's forward pass on the CPU, one copy shared by training
// (worker/cpu/cpu_backend.h, and its kernels through worker/mlp_math.h) and
// inference (model/dense_model.h: `predict` and the serving daemon):
//
//   Z = A_prev * W  (OpenBLAS SGEMM);  AddBias(b, ...);  ReluForward(...)
//
// for each linear layer, without the ReLU after the last one (the logits).
// Matrices are row-major [rows, cols]; a batch is one example per row.
//
//   DenseLayout layout(spec);
//   std::vector<std::vector<float>> act = layout.Scratch(128);
//   const float* logits = DenseForward(layout, params, x, 128, &act);
#ifndef DOWNPOUR_MODEL_DENSE_FORWARD_H_
#define DOWNPOUR_MODEL_DENSE_FORWARD_H_

#include <cstdint>
#include <vector>

#include "common/model_spec.h"

namespace downpour::model {

// z[r][c] += bias[c] for every row r.
void AddBias(const float *bias, int rows, int cols, float *z);

// a[i] = max(a[i], 0) for i in [0, n), in place.
void ReluForward(int64_t n, float *a);

// Where a dense MLP's tensors lie in its flat parameter vector
// (common/model_spec.h: fc{l}.weight [fan_in, fan_out] then fc{l}.bias for
// each layer). A plain value.
struct DenseLayout {
  explicit DenseLayout(const ModelSpec &spec);

  // Linear layers: layers.size() - 1.
  int num_layers() const { return static_cast<int>(layers.size()) - 1; }
  // Scratch for DenseForward of up to `rows` rows: one buffer per linear
  // layer, [rows, layers[l + 1]].
  std::vector<std::vector<float>> Scratch(int rows) const;

  std::vector<int> layers;             // widths, inputs first
  std::vector<int64_t> weight_offset;  // per linear layer
  std::vector<int64_t> bias_offset;
};

// Runs `rows` examples x ([rows, layers[0]]) through the model whose flat
// parameters are `params`: (*act)[l] receives linear layer l's output (after
// ReLU for hidden layers), the last one the logits [rows, layers.back()],
// which it returns. Single-threaded; the caller owns the scratch.
// REQUIRES: rows >= 1 and each (*act)[l] holds rows * layers[l + 1] floats.
const float *DenseForward(const DenseLayout &layout, const float *params,
                          const float *x, int rows,
                          std::vector<std::vector<float>> *act);

}  // namespace downpour::model

#endif  // DOWNPOUR_MODEL_DENSE_FORWARD_H_
