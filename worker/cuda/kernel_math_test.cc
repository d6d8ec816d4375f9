// The CUDA kernels' per-thread bodies, run on the host over every index, give
// exactly what the host kernels of worker/mlp_math.h give.
#include "worker/cuda/kernel_math.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "common/model_spec.h"
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

// Class indices as floats, as the backends take them.
std::vector<float> Labels() {
  std::vector<float> labels(kRows);
  for (int r = 0; r < kRows; ++r)
    labels[r] = static_cast<float>((r * 3) % kCols);
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
  const std::vector<float> labels = Labels();
  const float scale = 1.0f / kRows;
  std::vector<float> want(logits.size()), got(logits.size());
  const double want_loss =
      OutputLoss(Task::kMulticlass, logits.data(), labels.data(), kRows, kCols,
                 scale, want.data());
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
                  OutputLoss(Task::kMulticlass, logits.data(), labels.data(), 1,
                             kCols, 0.0f, nullptr));
  // OutputLossRow dispatches task 0 here.
  EXPECT_EQ(
      OutputLossRow(0, 3, logits.data(), labels.data(), kCols, 0.0f, nullptr),
      SoftmaxCrossEntropyRow(3, logits.data(), labels.data(), kCols, 0.0f,
                             nullptr));
}

// One logit a row, including ones large enough to overflow a naive exp.
std::vector<float> SingleLogits() {
  std::vector<float> z = RandomFloats(kRows, 8);
  z[0] = 0.0f;
  z[1] = 60.0f;
  z[2] = -60.0f;
  z[3] = 100.0f;
  return z;
}

TEST(KernelMathTest, LogisticRowMatchesHostAndTheDefinition) {
  const std::vector<float> logits = SingleLogits();
  std::vector<float> targets(kRows);
  for (int r = 0; r < kRows; ++r) targets[r] = static_cast<float>(r % 2);
  targets[3] = 0.0f;  // a confident wrong answer: loss ~100
  ASSERT_TRUE(CheckTargets(Task::kBinary, targets.data(), kRows, 1).ok());
  const float scale = 1.0f / kRows;
  std::vector<float> want(kRows), got(kRows, NAN);
  const double want_loss =
      OutputLoss(Task::kBinary, logits.data(), targets.data(), kRows, 1, scale,
                 want.data());
  double got_loss = 0;
  for (int r = 0; r < kRows; ++r) {
    const float row =
        LogisticRow(r, logits.data(), targets.data(), scale, got.data());
    got_loss += row;
    EXPECT_EQ(row, OutputLossRow(1, r, logits.data(), targets.data(), 1, 0.0f,
                                 nullptr))
        << r;
    // The definition, in double: log(1 + e^z) - y z and sigmoid(z) - y.
    const double z = logits[r], y = targets[r];
    const double loss =
        std::max(z, 0.0) - y * z + std::log1p(std::exp(-std::fabs(z)));
    const double sigmoid = 1.0 / (1.0 + std::exp(-z));
    EXPECT_NEAR(row, loss, 1e-6 * std::max(1.0, loss)) << r;
    EXPECT_NEAR(got[r], scale * (sigmoid - y), 1e-7) << r;
    EXPECT_TRUE(std::isfinite(row) && std::isfinite(got[r])) << r;
  }
  EXPECT_DOUBLE_EQ(got_loss, want_loss);
  EXPECT_EQ(got, want);
  EXPECT_NEAR(LogisticRow(0, logits.data(), targets.data(), 1.0f, nullptr),
              std::log(2.0), 1e-7);

  std::vector<float> in_place = logits;
  for (int r = 0; r < kRows; ++r) {
    LogisticRow(r, in_place.data(), targets.data(), scale, in_place.data());
  }
  EXPECT_EQ(in_place, want);
}

TEST(KernelMathTest, SquaredErrorRowMatchesHostAndTheDefinition) {
  const std::vector<float> logits = SingleLogits();
  const std::vector<float> targets = RandomFloats(kRows, 9);
  const float scale = 1.0f / kRows;
  std::vector<float> want(kRows), got(kRows, NAN);
  const double want_loss =
      OutputLoss(Task::kRegression, logits.data(), targets.data(), kRows, 1,
                 scale, want.data());
  double got_loss = 0;
  for (int r = 0; r < kRows; ++r) {
    const float row =
        SquaredErrorRow(r, logits.data(), targets.data(), scale, got.data());
    got_loss += row;
    EXPECT_EQ(row, OutputLossRow(2, r, logits.data(), targets.data(), 1, 0.0f,
                                 nullptr))
        << r;
    const double diff = static_cast<double>(logits[r]) - targets[r];
    EXPECT_NEAR(row, diff * diff, 1e-6 * std::max(1.0, diff * diff)) << r;
    EXPECT_NEAR(got[r], scale * 2 * diff, 1e-6 * std::max(1.0, std::fabs(diff)))
        << r;
  }
  EXPECT_DOUBLE_EQ(got_loss, want_loss);
  EXPECT_EQ(got, want);

  std::vector<float> in_place = logits;
  for (int r = 0; r < kRows; ++r) {
    SquaredErrorRow(r, in_place.data(), targets.data(), scale, in_place.data());
  }
  EXPECT_EQ(in_place, want);
}

TEST(KernelMathTest, ColumnSumsMatchHost) {
  const std::vector<float> m = RandomFloats(kRows * kCols, 6);
  std::vector<float> want(kCols), got(kCols, 99.0f);
  ColumnSums(m.data(), kRows, kCols, want.data());
  for (int c = 0; c < kCols; ++c)
    ColumnSumAt(c, m.data(), kRows, kCols, got.data());
  EXPECT_EQ(got, want);
}

// CpuBackend::PooledLossAndGradient scales the summed loss's parameter
// gradient by 1 / rows as a float; ScaleAt does the same, exactly.
TEST(KernelMathTest, ScaleAtMatchesTheCpuScaling) {
  const std::vector<float> g = RandomFloats(kRows * kCols, 10);
  const float scale = 1.0f / static_cast<float>(kRows);
  std::vector<float> want = g, got = g;
  for (float& v : want) v *= scale;
  for (int64_t i = 0; i < static_cast<int64_t>(got.size()); ++i) {
    ScaleAt(i, scale, got.data());
  }
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace downpour::worker::gpu
