// The element-wise and row-wise kernels of the MLP, as plain functions on host
// arrays. Matrices are row-major [rows, cols]; a batch is one example per row.
//
// The CPU backend calls these between its SGEMMs; the CUDA backend mirrors each
// one as a kernel, so each does one small thing and states its exact semantics.
// Together with the SGEMMs they form the forward and backward pass:
//
//   Z = A_prev * W;  AddBias(b, ...);  ReluForward(...)     (hidden layers)
//   loss = SoftmaxCrossEntropy(logits, labels, ..., 1/batch, dZ)
//   dW = A_prev^T * dZ;  ColumnSums(dZ, ...) -> db;  dA_prev = dZ * W^T
//   ReluBackward(A_prev, ..., dA_prev) -> dZ_prev
#ifndef DOWNPOUR_WORKER_MLP_MATH_H_
#define DOWNPOUR_WORKER_MLP_MATH_H_

#include <cstdint>

#include "absl/status/status.h"

namespace downpour::worker {

// z[r][c] += bias[c] for every row r.
void AddBias(const float* bias, int rows, int cols, float* z);

// a[i] = max(a[i], 0) for i in [0, n), in place.
void ReluForward(int64_t n, float* a);

// da[i] = 0 wherever a[i] <= 0, where `a` is ReluForward's output; this turns
// the gradient w.r.t. a layer's activations into the gradient w.r.t. its
// pre-activations, in place.
void ReluBackward(const float* a, int64_t n, float* da);

// For each row r: loss_r = logsumexp(logits[r]) - logits[r][labels[r]],
// computed stably by subtracting the row's maximum before exponentiating.
// Returns the sum of loss_r over the rows (in double). If dlogits is not null,
// also writes dlogits[r][c] = grad_scale * (softmax(logits[r])[c] - (c ==
// labels[r])); use grad_scale = 1/rows for the gradient of the mean loss.
// dlogits may alias logits. REQUIRES: every label in [0, classes).
double SoftmaxCrossEntropy(const float* logits, const int* labels, int rows,
                           int classes, float grad_scale, float* dlogits);

// out[c] = sum over r of m[r][c] (overwrites out): the bias gradient from dZ.
void ColumnSums(const float* m, int rows, int cols, float* out);

// How many rows have their label as the argmax of the row; ties go to the
// lowest index. REQUIRES: every label in [0, classes).
int64_t CountCorrect(const float* logits, const int* labels, int rows,
                     int classes);

// InvalidArgument naming the first example whose label is outside [0, classes).
absl::Status CheckLabels(const int* labels, int n, int classes);

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_MLP_MATH_H_
