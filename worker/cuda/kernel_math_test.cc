// The CUDA kernels' per-thread bodies, run on the host over every index, give
// exactly what the host kernels of worker/mlp_math.h give.
#include "worker/cuda/kernel_math.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "worker/mlp_math.h"

namespace downpour::worker::gpu {
namespace {

constexpr int kRows = 7;
constexpr int kCols = 5;

std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-3, 3);
  std::vector<float> v(n);
  for (float& f : v) f = dist(gen);
  return v;
}

std::vector<int> Labels() {
  std::vector<int> labels(kRows);
  for (int r = 0; r < kRows; ++r) labels[r] = (r * 3) % kCols;
  return labels;
}

TEST(KernelMathTest, AddBiasMatchesHost) {
  const std::vector<float> bias = RandomFloats(kCols, 1);
  std::vector<float> want = RandomFloats(kRows * kCols, 2), got = want;
  AddBias(bias.data(), kRows, kCols, want.data());
  for (int64_t i = 0; i < kRows * kCols; ++i) {
    AddBiasAt(i, bias.data(), kCols, got.data());
  }
  EXPECT_EQ(got, want);
}

TEST(KernelMathTest, ReluForwardAndBackwardMatchHost) {
  std::vector<float> a = RandomFloats(kRows * kCols, 3);
  a[0] = 0.0f;
  a[1] = -0.0f;
  std::vector<float> want = a, got = a;
  ReluForward(want.size(), want.data());
  for (int64_t i = 0; i < static_cast<int64_t>(got.size()); ++i) {
    ReluForwardAt(i, got.data());
  }
  EXPECT_EQ(got, want);

  std::vector<float> da_want = RandomFloats(a.size(), 4), da_got = da_want;
  ReluBackward(want.data(), want.size(), da_want.data());
  for (int64_t i = 0; i < static_cast<int64_t>(a.size()); ++i) {
    ReluBackwardAt(i, want.data(), da_got.data());
  }
  EXPECT_EQ(da_got, da_want);
}

TEST(KernelMathTest, ReluForwardKeepsNaN) {
  float a = std::numeric_limits<float>::quiet_NaN();
  ReluForwardAt(0, &a);
  EXPECT_TRUE(std::isnan(a));
}

TEST(KernelMathTest, SoftmaxCrossEntropyMatchesHost) {
  const std::vector<float> logits = RandomFloats(kRows * kCols, 5);
  const std::vector<int> labels = Labels();
  const float scale = 1.0f / kRows;
  std::vector<float> want(logits.size()), got(logits.size());
  const double want_loss = SoftmaxCrossEntropy(
      logits.data(), labels.data(), kRows, kCols, scale, want.data());
  double got_loss = 0;
  for (int r = 0; r < kRows; ++r) {
    got_loss += SoftmaxCrossEntropyRow(r, logits.data(), labels.data(), kCols,
                                       scale, got.data());
  }
  EXPECT_DOUBLE_EQ(got_loss, want_loss);
  EXPECT_EQ(got, want);

  // In place (dlogits aliasing logits), and loss only.
  std::vector<float> in_place = logits;
  for (int r = 0; r < kRows; ++r) {
    SoftmaxCrossEntropyRow(r, in_place.data(), labels.data(), kCols, scale,
                           in_place.data());
  }
  EXPECT_EQ(in_place, want);
  EXPECT_FLOAT_EQ(SoftmaxCrossEntropyRow(0, logits.data(), labels.data(), kCols,
                                         0.0f, nullptr),
                  SoftmaxCrossEntropy(logits.data(), labels.data(), 1, kCols,
                                      0.0f, nullptr));
}

TEST(KernelMathTest, ColumnSumsMatchHost) {
  const std::vector<float> m = RandomFloats(kRows * kCols, 6);
  std::vector<float> want(kCols), got(kCols, 99.0f);
  ColumnSums(m.data(), kRows, kCols, want.data());
  for (int c = 0; c < kCols; ++c)
    ColumnSumAt(c, m.data(), kRows, kCols, got.data());
  EXPECT_EQ(got, want);
}

TEST(KernelMathTest, CorrectMatchesHostIncludingTies) {
  std::vector<float> logits = RandomFloats(kRows * kCols, 7);
  // Row 1: a tie between classes 1 and 3 (label 3) counts as wrong; row 2: a
  // tie between 0 and 2 (label 0 after the override) counts as right.
  logits[1 * kCols + 1] = logits[1 * kCols + 3] = 10.0f;
  logits[2 * kCols + 0] = logits[2 * kCols + 2] = 10.0f;
  std::vector<int> labels = Labels();
  labels[1] = 3;
  labels[2] = 0;
  int got = 0;
  for (int r = 0; r < kRows; ++r)
    got += CorrectAt(r, logits.data(), labels.data(), kCols);
  EXPECT_EQ(got, CountCorrect(logits.data(), labels.data(), kRows, kCols));
  EXPECT_EQ(CorrectAt(1, logits.data(), labels.data(), kCols), 0);
  EXPECT_EQ(CorrectAt(2, logits.data(), labels.data(), kCols), 1);
}

}  // namespace
}  // namespace downpour::worker::gpu
