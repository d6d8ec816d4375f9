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
  const int labels[] = {1, 3};
  std::vector<float> dlogits(8);
  const double loss =
      SoftmaxCrossEntropy(logits.data(), labels, 2, 4, 0.5f, dlogits.data());
  EXPECT_NEAR(loss, 2 * std::log(4.0), 1e-6);
  const float p = 0.5f * 0.25f;  // grad_scale * softmax
  EXPECT_THAT(dlogits, Pointwise(FloatNear(1e-7),
                                 std::vector<float>{p, p - 0.5f, p, p, p, p, p,
                                                    p - 0.5f}));
}

TEST(MlpMathTest, SoftmaxCrossEntropyIsStableForHugeLogits) {
  const std::vector<float> logits = {1000, 0, -1000};
  const int label = 1;
  std::vector<float> dlogits(3);
  const double loss =
      SoftmaxCrossEntropy(logits.data(), &label, 1, 3, 1.0f, dlogits.data());
  EXPECT_NEAR(loss, 1000.0, 1e-3);
  EXPECT_THAT(dlogits,
              Pointwise(FloatNear(1e-6), std::vector<float>{1, -1, 0}));
}

TEST(MlpMathTest, SoftmaxCrossEntropyMayWriteOverLogits) {
  std::vector<float> z = {1, 2, 3};
  std::vector<float> separate(3);
  const int label = 0;
  const double a =
      SoftmaxCrossEntropy(z.data(), &label, 1, 3, 1.0f, separate.data());
  const double b = SoftmaxCrossEntropy(z.data(), &label, 1, 3, 1.0f, z.data());
  EXPECT_EQ(a, b);
  EXPECT_EQ(z, separate);
}

TEST(MlpMathTest, ColumnSumsOverwrite) {
  const std::vector<float> m = {1, 2, 3, 4, 5, 6};
  std::vector<float> out = {100, 100, 100};
  ColumnSums(m.data(), 2, 3, out.data());
  EXPECT_THAT(out, ElementsAre(5, 7, 9));
}

TEST(MlpMathTest, CountCorrectBreaksTiesToLowestClass) {
  const std::vector<float> logits = {1, 5, 2,   // argmax 1
                                     7, 7, 0,   // tie: 0
                                     0, 0, 9};  // argmax 2
  const int labels[] = {1, 1, 2};
  EXPECT_EQ(CountCorrect(logits.data(), labels, 3, 3), 2);
}

TEST(MlpMathTest, CheckLabelsNamesTheFirstBadExample) {
  const int good[] = {0, 2, 1};
  EXPECT_THAT(CheckLabels(good, 3, 3), IsOk());
  const int bad[] = {0, 3, -1};
  EXPECT_THAT(CheckLabels(bad, 3, 3),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("label 3 of example 1 is outside [0, 3)")));
}

}  // namespace
}  // namespace downpour::worker
