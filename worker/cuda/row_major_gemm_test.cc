#include "worker/cuda/row_major_gemm.h"

#include <cblas.h>

#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace downpour::worker::gpu {
namespace {

struct GemmCase {
  bool trans_a, trans_b;
  int m, n, k;
};

// c[m, n] = op(a) * op(b) with a, b row-major as ToColumnMajor describes them,
// in double, one element at a time.
std::vector<float> Naive(const GemmCase& t, const std::vector<float>& a,
                         const std::vector<float>& b) {
  std::vector<float> c(t.m * t.n);
  for (int i = 0; i < t.m; ++i) {
    for (int j = 0; j < t.n; ++j) {
      double sum = 0;
      for (int p = 0; p < t.k; ++p) {
        const float av = t.trans_a ? a[p * t.m + i] : a[i * t.k + p];
        const float bv = t.trans_b ? b[j * t.k + p] : b[p * t.n + j];
        sum += static_cast<double>(av) * bv;
      }
      c[i * t.n + j] = static_cast<float>(sum);
    }
  }
  return c;
}

TEST(RowMajorGemmTest, ColumnMajorCallComputesTheRowMajorProduct) {
  // The MLP's three kinds of product (forward, dW, dA) and their mirrors, on
  // shapes where no two of m, n, k are equal so a swapped dimension shows.
  const GemmCase cases[] = {
      {false, false, 5, 7, 3},     {true, false, 5, 7, 3},
      {false, true, 5, 7, 3},      {true, true, 5, 7, 3},
      {false, false, 64, 10, 128}, {true, false, 784, 256, 64},
      {false, true, 64, 784, 256}, {false, false, 1, 9, 2},
  };
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (const GemmCase& t : cases) {
    SCOPED_TRACE(::testing::Message()
                 << "trans_a " << t.trans_a << " trans_b " << t.trans_b << " m "
                 << t.m << " n " << t.n << " k " << t.k);
    std::vector<float> a(t.m * t.k), b(t.k * t.n), c(t.m * t.n, -7.0f);
    for (float& v : a) v = dist(gen);
    for (float& v : b) v = dist(gen);
    const ColumnMajorGemm g = ToColumnMajor(t.trans_a, t.trans_b, t.m, t.n, t.k,
                                            a.data(), b.data(), c.data());
    cblas_sgemm(CblasColMajor, g.trans_first ? CblasTrans : CblasNoTrans,
                g.trans_second ? CblasTrans : CblasNoTrans, g.m, g.n, g.k, 1.0f,
                g.first, g.ld_first, g.second, g.ld_second, 0.0f, g.c, g.ldc);
    const std::vector<float> want = Naive(t, a, b);
    for (int i = 0; i < t.m * t.n; ++i) {
      ASSERT_NEAR(c[i], want[i], 1e-4f * (1 + t.k)) << "element " << i;
    }
  }
}

}  // namespace
}  // namespace downpour::worker::gpu
