// The factorization machine's output for one example (Rendle, ICDM 2010),
// in the one summation order that the worker's training and evaluation
// (worker/sparse_loop.cc) and a served or exported model
// (model/sparse_model.h SparseScorer) all use, so that their outputs agree
// bit for bit:
//
//   margin = bias + sum_i w_i x_i
//          + 1/2 sum_f ((sum_i v_if x_i)^2 - sum_i (v_if x_i)^2)
//
// over the example's entries i (key, value x_i) in their order, with w_i the
// key's linear weight and v_i its k-float embedding; every sum in double.
// The pairwise term is O(n k) by Rendle's identity.
//
//   std::vector<double> s(k);
//   double m = FmMargin(bias, w.data(), v.data(), x, n, k, s.data());
//   // d = dloss/dmargin: grad w_i = d x_i, grad v_if = d x_i (s_f - v_if x_i)
#ifndef DOWNPOUR_MODEL_FM_MATH_H_
#define DOWNPOUR_MODEL_FM_MATH_H_

#include <cstddef>

namespace downpour::model {

// w[i]: entry i's linear weight; v[i]: its embedding (k floats); x[i]: its
// value. s (k doubles) receives sum_i v_if x_i per factor f, which the
// gradient needs. Returns the margin unrounded.
inline double FmMargin(double bias, const float* w, const float* const* v,
                       const float* x, size_t n, int k, double* s) {
  double linear = bias;
  for (size_t i = 0; i < n; ++i) linear += static_cast<double>(w[i]) * x[i];
  double pairs = 0;
  for (int f = 0; f < k; ++f) {
    double sum = 0, squares = 0;
    for (size_t i = 0; i < n; ++i) {
      const double t = static_cast<double>(v[i][f]) * x[i];
      sum += t;
      squares += t * t;
    }
    s[f] = sum;
    pairs += sum * sum - squares;
  }
  return linear + 0.5 * pairs;
}

}  // namespace downpour::model

#endif  // DOWNPOUR_MODEL_FM_MATH_H_
