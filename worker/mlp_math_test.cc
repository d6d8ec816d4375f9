#include "worker/mlp_math.h"

#include <cmath>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::worker {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;

TEST(MlpMathTest, AddBiasAddsToEveryRow) {
  std::vector<float> z = {1, 2, 3, 4, 5, 6};
  const float bias[] = {10, 20, 30};
  AddBias(bias, 2, 3, z.data());
  EXPECT_THAT(z, ElementsAre(11, 22, 33, 14, 25, 36));
}

TEST(MlpMathTest, ReluForwardAndBackward) {
  std::vector<float> a = {-1, 0, 2, -0.5f};
  ReluForward(4, a.data());
  EXPECT_THAT(a, ElementsAre(0, 0, 2, 0));
  std::vector<float> da = {5, 6, 7, 8};
  ReluBackward(a.data(), 4, da.data());
  EXPECT_THAT(da, ElementsAre(0, 0, 7, 0));
}

TEST(MlpMathTest, SoftmaxCrossEntropyOfUniformLogitsIsLogClasses) {
  const std::vector<float> logits = {0, 0, 0, 0, 3, 3, 3, 3};
  const float labels[] = {1, 3};
  std::vector<float> dlogits(8);
  const double loss = OutputLoss(Task::kMulticlass, logits.data(), labels, 2, 4,
                                 0.5f, dlogits.data());
  EXPECT_NEAR(loss, 2 * std::log(4.0), 1e-6);
  const float p = 0.5f * 0.25f;  // grad_scale * softmax
  EXPECT_THAT(dlogits, Pointwise(FloatNear(1e-7),
                                 std::vector<float>{p, p - 0.5f, p, p, p, p, p,
                                                    p - 0.5f}));
}

TEST(MlpMathTest, SoftmaxCrossEntropyIsStableForHugeLogits) {
  const std::vector<float> logits = {1000, 0, -1000};
  const float label = 1;
  std::vector<float> dlogits(3);
  const double loss = OutputLoss(Task::kMulticlass, logits.data(), &label, 1, 3,
                                 1.0f, dlogits.data());
  EXPECT_NEAR(loss, 1000.0, 1e-3);
  EXPECT_THAT(dlogits,
              Pointwise(FloatNear(1e-6), std::vector<float>{1, -1, 0}));
}

TEST(MlpMathTest, SoftmaxCrossEntropyMayWriteOverLogits) {
  std::vector<float> z = {1, 2, 3};
  std::vector<float> separate(3);
  const float label = 0;
  const double a = OutputLoss(Task::kMulticlass, z.data(), &label, 1, 3, 1.0f,
                              separate.data());
  const double b =
      OutputLoss(Task::kMulticlass, z.data(), &label, 1, 3, 1.0f, z.data());
  EXPECT_EQ(a, b);
  EXPECT_EQ(z, separate);
}

TEST(MlpMathTest, ColumnSumsOverwrite) {
  const std::vector<float> m = {1, 2, 3, 4, 5, 6};
  std::vector<float> out = {100, 100, 100};
  ColumnSums(m.data(), 2, 3, out.data());
  EXPECT_THAT(out, ElementsAre(5, 7, 9));
}

TEST(MlpMathTest, LogisticLossAndGradient) {
  // loss = log(1 + e^z) - y z; d/dz = sigmoid(z) - y.
  const std::vector<float> z = {0.0f, 2.0f, -30.0f, 80.0f};
  const std::vector<float> y = {1, 0, 1, 0};
  std::vector<float> dz(4);
  const double loss =
      OutputLoss(Task::kBinary, z.data(), y.data(), 4, 1, 0.5f, dz.data());
  const double want = std::log(2.0) + std::log1p(std::exp(2.0)) +
                      (30 + std::log1p(std::exp(-30.0))) + 80;
  EXPECT_NEAR(loss, want, 1e-4);
  const float s2 = 1 / (1 + std::exp(-2.0f));
  EXPECT_THAT(dz,
              Pointwise(FloatNear(1e-6),
                        std::vector<float>{-0.25f, 0.5f * s2, -0.5f, 0.5f}));
}

TEST(MlpMathTest, SquaredErrorAndGradient) {
  const std::vector<float> z = {1.0f, 4.0f};
  const std::vector<float> y = {3.0f, 4.5f};
  std::vector<float> dz(2);
  const double loss =
      OutputLoss(Task::kRegression, z.data(), y.data(), 2, 1, 0.5f, dz.data());
  EXPECT_NEAR(loss, 4.0 + 0.25, 1e-6);
  EXPECT_THAT(dz, Pointwise(FloatNear(1e-6), std::vector<float>{-2.0f, -0.5f}));
}

TEST(MlpMathTest, CheckBatchTakesOneToMaxBatch) {
  EXPECT_THAT(CheckBatch(1, 4), IsOk());
  EXPECT_THAT(CheckBatch(4, 4), IsOk());
  EXPECT_THAT(CheckBatch(0, 4), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CheckBatch(5, 4),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("batch of 5 examples is outside [1, 4]")));
}

TEST(MlpMathTest, CheckTargetsNamesTheFirstBadExample) {
  const float good[] = {0, 2, 1};
  EXPECT_THAT(CheckTargets(Task::kMulticlass, good, 3, 3), IsOk());
  const float bad[] = {0, 3, -1};
  EXPECT_THAT(CheckTargets(Task::kMulticlass, bad, 3, 3),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("target 3 of example 1 is not a class index "
                                 "in [0, 3)")));
  const float half[] = {0.5f};
  EXPECT_THAT(CheckTargets(Task::kMulticlass, half, 1, 3),
              StatusIs(absl::StatusCode::kInvalidArgument));
  const float binary[] = {0, 1, 2};
  EXPECT_THAT(CheckTargets(Task::kBinary, binary, 2, 1), IsOk());
  EXPECT_THAT(CheckTargets(Task::kBinary, binary, 3, 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("target 2 of example 2 is not 0 or 1")));
  const float real[] = {-3.5f, 1e6f, NAN};
  EXPECT_THAT(CheckTargets(Task::kRegression, real, 2, 1), IsOk());
  EXPECT_THAT(CheckTargets(Task::kRegression, real, 3, 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("example 2 is not a finite value")));
}

}  // namespace
}  // namespace downpour::worker
