// The element-wise and row-wise kernels of the MLP, as plain functions on host
// arrays. Matrices are row-major [rows, cols]; a batch is one example per row.
//
// The CPU backend calls these between its SGEMMs; the CUDA backend mirrors each
// one as a kernel, so each does one small thing and states its exact semantics.
// The forward pass's kernels (AddBias, ReluForward) and CheckTargets live in
// model/ (model/dense_forward.h, model/metrics.h), shared with inference, and
// are named here for the worker.
// Together with the SGEMMs they form the forward and backward pass:
//
//   Z = A_prev * W;  AddBias(b, ...);  ReluForward(...)     (hidden layers)
//   loss = OutputLoss(task, logits, targets, ..., 1/batch, dZ)
//   dW = A_prev^T * dZ;  ColumnSums(dZ, ...) -> db;  dA_prev = dZ * W^T
//   ReluBackward(A_prev, ..., dA_prev) -> dZ_prev
#ifndef DOWNPOUR_WORKER_MLP_MATH_H_
#define DOWNPOUR_WORKER_MLP_MATH_H_

#include <cstdint>

#include "absl/status/status.h"
#include "common/model_spec.h"
#include "model/dense_forward.h"
#include "model/metrics.h"
#include "worker/compute_backend.h"

namespace downpour::worker {

// z[r][c] += bias[c] for every row r; a[i] = max(a[i], 0) in place.
using model::AddBias;
using model::ReluForward;

// da[i] = 0 wherever a[i] <= 0, where `a` is ReluForward's output; this turns
// the gradient w.r.t. a layer's activations into the gradient w.r.t. its
// pre-activations, in place.
void ReluBackward(const float* a, int64_t n, float* da);

// The task's loss summed over the rows (in double): softmax cross-entropy
// (kMulticlass, `outputs` logits a row, targets are class indices), logistic
// loss (kBinary, one logit, targets 0 or 1) or squared error (kRegression).
// If dlogits is not null, also writes d(loss_r)/d(logits[r]) * grad_scale;
// use grad_scale = 1/rows for the gradient of the mean loss. dlogits may alias
// logits. The per-row math is worker/cuda/kernel_math.h's OutputLossRow, the
// same the CUDA kernel runs. REQUIRES: CheckTargets(task, targets, rows,
// outputs) is OK.
double OutputLoss(Task task, const float* logits, const float* targets,
                  int rows, int outputs, float grad_scale, float* dlogits);

// out[c] = sum over r of m[r][c] (overwrites out): the bias gradient from dZ.
void ColumnSums(const float* m, int rows, int cols, float* out);

// InvalidArgument naming the first example whose target the task cannot
// take (model/metrics.h).
using model::CheckTargets;

// InvalidArgument unless 1 <= batch <= max_batch (a backend's max_batch).
absl::Status CheckBatch(int batch, int max_batch);

// The pooled inputs [rows, fields*dim] of `batch`'s first `rows` rows into x
// (kernel_math.h's PoolAt for every element, in order).
void Pool(const PooledBatch& batch, int rows, float* x);

// The pooling's backward pass: embedding_grad[0..embedding_rows*dim) set to
// the gradient that dx (the pooled inputs' gradient, [rows, fields*dim])
// sends back to the embedding rows (kernel_math.h's UnpoolAt, in order).
void Unpool(const PooledBatch& batch, int rows, const float* dx,
            float* embedding_grad);

// InvalidArgument naming the first problem of `batch` for a model of
// `inputs` inputs and `outputs` outputs: outputs other than 1, inputs other
// than fields * dim, offsets not starting at 0 or decreasing, a slot at or
// past embedding_rows, a field at or past fields.
absl::Status CheckPooledBatch(const PooledBatch& batch, int rows, int inputs,
                              int outputs);

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_MLP_MATH_H_
