// The wide & deep model's output for one example (Cheng et al., DLRS 2016),
// in the one order of operations that the worker's evaluation
// (worker/sparse_loop.cc) and an exported or served model
// (model/sparse_model.h SparseScorer) both use, so that they agree bit for
// bit:
//
//   margin = sum_i w_i x_i  +  MLP(pool_1, ..., pool_F)
//   pool_f = sum over the example's entries i of field f of p_i v_i
//
// with w_i the key's weight, v_i its dim-float embedding, and p_i the
// entry's pooling weight: x_i (pooling "sum") or x_i / (the example's count
// of entries of field f) ("mean"). The MLP is model_spec.h's layout
// (fc{l}.weight [in, out] row-major, fc{l}.bias [out], ReLU between layers)
// with one output, whose bias is the model's bias. The wide sum is in double
// in entry order; the pooling and the MLP are in float, each sum in
// ascending index order, as worker/cuda/kernel_math.h's PoolAt pools for
// training.
//
//   WideDeepScratch scratch;
//   PoolingWeights(x, fields, n, num_fields, mean, p, &scratch);
//   float m = WideDeepMargin(layers, params, w, v, x, p, fields, n, dim,
//                            &scratch);
#ifndef DOWNPOUR_MODEL_WIDE_DEEP_MATH_H_
#define DOWNPOUR_MODEL_WIDE_DEEP_MATH_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace downpour::model {

// Buffers reused across examples (one per thread).
struct WideDeepScratch {
  std::vector<int> counts;
  std::vector<float> a, b;
};

// p[i] for the example's n entries (x: values; fields: each entry's field,
// null for all in field 0): x[i], or with `mean` x[i] divided by how many of
// the n entries share field[i].
inline void PoolingWeights(const float* x, const uint16_t* fields, size_t n,
                           int num_fields, bool mean, float* p,
                           WideDeepScratch* scratch) {
  if (!mean) {
    for (size_t i = 0; i < n; ++i) p[i] = x[i];
    return;
  }
  scratch->counts.assign(num_fields, 0);
  for (size_t i = 0; i < n; ++i) ++scratch->counts[fields ? fields[i] : 0];
  for (size_t i = 0; i < n; ++i) {
    p[i] = x[i] / static_cast<float>(scratch->counts[fields ? fields[i] : 0]);
  }
}

// The MLP's one output for the input row a[0..layers[0]) (clobbers a; b is
// scratch).
inline float MlpOutput(const std::vector<int>& layers, const float* params,
                       std::vector<float>* a, std::vector<float>* b) {
  const float* layer = params;
  for (size_t l = 0; l + 1 < layers.size(); ++l) {
    const int in = layers[l], out = layers[l + 1];
    const float* weight = layer;
    const float* bias = layer + static_cast<size_t>(in) * out;
    b->assign(bias, bias + out);
    for (int i = 0; i < in; ++i) {
      const float ai = (*a)[i];
      const float* row = weight + static_cast<size_t>(i) * out;
      for (int o = 0; o < out; ++o) (*b)[o] += ai * row[o];
    }
    if (l + 2 < layers.size()) {
      for (float& z : *b) z = z < 0.0f ? 0.0f : z;
    }
    a->swap(*b);
    layer = bias + out;
  }
  return (*a)[0];
}

// The wide part of one example of n entries: sum_i w[i] * x[i] in double,
// in entry order (training's wide margin and the scorer's alike).
inline double WideSum(const float* w, const float* x, size_t n) {
  double wide = 0;
  for (size_t i = 0; i < n; ++i) wide += static_cast<double>(w[i]) * x[i];
  return wide;
}

// The margin of one example of n entries: w[i] its weight, v[i] its
// embedding (dim floats), x[i] its value, p[i] its pooling weight
// (PoolingWeights), fields[i] its field (null: 0). layers[0] must be
// num_fields * dim. Returns float(wide + deep) with the wide sum in double.
inline float WideDeepMargin(const std::vector<int>& layers, const float* params,
                            const float* w, const float* const* v,
                            const float* x, const float* p,
                            const uint16_t* fields, size_t n, int dim,
                            WideDeepScratch* scratch) {
  const double wide = WideSum(w, x, n);
  scratch->a.assign(layers[0], 0.0f);
  for (size_t i = 0; i < n; ++i) {
    float* pool =
        scratch->a.data() + static_cast<size_t>(fields ? fields[i] : 0) * dim;
    for (int j = 0; j < dim; ++j) pool[j] += p[i] * v[i][j];
  }
  const float deep = MlpOutput(layers, params, &scratch->a, &scratch->b);
  return static_cast<float>(wide + static_cast<double>(deep));
}

}  // namespace downpour::model

#endif  // DOWNPOUR_MODEL_WIDE_DEEP_MATH_H_
