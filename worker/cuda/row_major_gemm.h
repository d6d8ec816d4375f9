// Maps a row-major matrix product onto a column-major BLAS call.
//
// cuBLAS is column-major; the model's matrices are row-major. A row-major
// [rows, cols] array read column-major is its transpose, so C = op(A) * op(B)
// row-major is C^T = op(B)^T * op(A)^T column-major: swap the operands and m
// with n, keep each operand's transpose flag and leading dimension. This lives
// on its own so that row_major_gemm_test.cc checks the mapping with OpenBLAS's
// column-major cblas_sgemm on machines without a GPU.
//
//   ColumnMajorGemm g = ToColumnMajor(false, false, rows, out, in, x, w, z);
//   cublasSgemm(h, g.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N, ..., g.m, g.n,
//               g.k, &one, g.first, g.ld_first, g.second, g.ld_second, &zero,
//               g.c, g.ldc);
#ifndef DOWNPOUR_WORKER_CUDA_ROW_MAJOR_GEMM_H_
#define DOWNPOUR_WORKER_CUDA_ROW_MAJOR_GEMM_H_

namespace downpour::worker::gpu {

// The arguments of a column-major C[m, n] = op(first)[m, k] * op(second)[k, n].
struct ColumnMajorGemm {
  bool trans_first = false;
  bool trans_second = false;
  int m = 0, n = 0, k = 0;
  const float* first = nullptr;
  int ld_first = 0;
  const float* second = nullptr;
  int ld_second = 0;
  float* c = nullptr;
  int ldc = 0;
};

// The column-major call computing row-major c[m, n] = op(a)[m, k] * op(b)[k,
// n], where a is stored [k, m] when trans_a (else [m, k]) and b is stored [n,
// k] when trans_b (else [k, n]): the same convention as CpuBackend's Gemm.
inline ColumnMajorGemm ToColumnMajor(bool trans_a, bool trans_b, int m, int n,
                                     int k, const float* a, const float* b,
                                     float* c) {
  ColumnMajorGemm g;
  g.trans_first = trans_b;
  g.trans_second = trans_a;
  g.m = n;
  g.n = m;
  g.k = k;
  g.first = b;
  g.ld_first = trans_b ? k : n;  // b's row length as stored
  g.second = a;
  g.ld_second = trans_a ? m : k;  // a's row length as stored
  g.c = c;
  g.ldc = n;
  return g;
}

}  // namespace downpour::worker::gpu

#endif  // DOWNPOUR_WORKER_CUDA_ROW_MAJOR_GEMM_H_
