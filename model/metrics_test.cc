#include "model/metrics.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace downpour::model {
namespace {

TEST(MetricsTest, MulticlassAccuracyAndLogloss) {
  // Two examples, three classes: the first right, the second wrong.
  const std::vector<float> out = {2, 0, 0, 0, 0, 1};
  const std::vector<float> y = {0, 1};
  const Metrics m =
      ComputeMetrics(Task::kMulticlass, out.data(), y.data(), 2, 3);
  EXPECT_DOUBLE_EQ(m.accuracy, 0.5);
  const double l0 = std::log(std::exp(2.0) + 2) - 2;
  const double l1 = std::log(2 + std::exp(1.0));
  EXPECT_NEAR(m.logloss, (l0 + l1) / 2, 1e-6);
  EXPECT_TRUE(std::isnan(m.auc));
  EXPECT_TRUE(std::isnan(m.rmse));
}

TEST(MetricsTest, AucCountsTiesAsHalf) {
  // Pairs (pos, neg): (0.9 > 0.1), (0.9 > 0.5), (0.5 = 0.5) -> 2.5 of 3... with
  // labels 1, 0, 1, 0 and scores 0.9, 0.5, 0.5, 0.1.
  EXPECT_NEAR(Auc({0.9f, 0.5f, 0.5f, 0.1f}, {1, 0, 1, 0}), 3.5 / 4, 1e-12);
  EXPECT_DOUBLE_EQ(Auc({0.1f, 0.2f}, {0, 1}), 1.0);
  EXPECT_DOUBLE_EQ(Auc({0.2f, 0.1f}, {0, 1}), 0.0);
  EXPECT_TRUE(std::isnan(Auc({0.2f, 0.1f}, {1, 1})));
}

TEST(MetricsTest, BinaryFromLogits) {
  const std::vector<float> out = {3, -1, 0.5f, -2};
  const std::vector<float> y = {1, 0, 0, 1};
  const Metrics m = ComputeMetrics(Task::kBinary, out.data(), y.data(), 4, 1);
  EXPECT_DOUBLE_EQ(m.accuracy, 0.5);
  EXPECT_NEAR(m.auc, Auc({3, -1, 0.5f, -2}, {1, 0, 0, 1}), 1e-12);
  double logloss = 0;
  for (int i = 0; i < 4; ++i) {
    const double p = 1 / (1 + std::exp(-double{out[i]}));
    logloss -= y[i] == 1 ? std::log(p) : std::log(1 - p);
  }
  EXPECT_NEAR(m.logloss, logloss / 4, 1e-9);
  EXPECT_TRUE(std::isnan(m.r2));
}

TEST(MetricsTest, SaturatedCountsProbabilitiesWithin1e6Of0Or1) {
  // sigmoid(13.8) = 1 - 1.0e-6 (just short of the bound), sigmoid(13.9)
  // beyond it; -30 and 40 round to exactly 0 and 1 in float.
  const std::vector<float> out = {13.8f, 13.9f, -13.9f, -30, 40, 0.5f, -2, 1};
  const std::vector<float> y = {1, 1, 0, 1, 0, 0, 1, 1};
  const Metrics m = ComputeMetrics(Task::kBinary, out.data(), y.data(), 8, 1);
  EXPECT_DOUBLE_EQ(m.saturated, 4.0 / 8);
  EXPECT_DOUBLE_EQ(m.Get("saturated"), 4.0 / 8);
  // Reported: the task's metrics, then the share.
  const auto reported = m.Reported(Task::kBinary);
  ASSERT_EQ(reported.size(), 4u);
  EXPECT_EQ(reported.back().first, "saturated");
  EXPECT_EQ(m.Named(Task::kBinary).size(), 3u);
  // Multiclass and regression measure none.
  const std::vector<float> z = {20, 0, 0, 1, 0, 0};
  const std::vector<float> c = {0, 0};
  EXPECT_TRUE(std::isnan(
      ComputeMetrics(Task::kMulticlass, z.data(), c.data(), 2, 3).saturated));
  EXPECT_TRUE(std::isnan(
      ComputeMetrics(Task::kRegression, out.data(), y.data(), 8, 1).saturated));
}

TEST(MetricsTest, SaturationWarningNamesTheShareAndTheKeyToLower) {
  EXPECT_EQ(SaturationWarning(NAN, ModelType::kFm), "");
  EXPECT_EQ(SaturationWarning(0.01, ModelType::kFm), "");  // 1 %: not more
  const std::string fm = SaturationWarning(1202.0 / 1210, ModelType::kFm);
  EXPECT_NE(fm.find("99.3 % of the test predictions are saturated"),
            std::string::npos)
      << fm;
  EXPECT_NE(fm.find("lower fm.learning_rate"), std::string::npos) << fm;
  EXPECT_NE(SaturationWarning(0.02, ModelType::kWideDeep)
                .find("lower wide_deep.mlp_learning_rate"),
            std::string::npos);
  EXPECT_NE(SaturationWarning(0.02, ModelType::kSparseLinear)
                .find("lower optimizer.learning_rate"),
            std::string::npos);
  EXPECT_NE(SaturationWarning(0.5, ModelType::kMlp)
                .find("lower optimizer.learning_rate"),
            std::string::npos);
}

TEST(MetricsTest, Regression) {
  const std::vector<float> out = {1, 2, 4};
  const std::vector<float> y = {1, 3, 5};
  const Metrics m =
      ComputeMetrics(Task::kRegression, out.data(), y.data(), 3, 1);
  EXPECT_NEAR(m.rmse, std::sqrt(2.0 / 3), 1e-12);
  EXPECT_NEAR(m.mae, 2.0 / 3, 1e-12);
  // mean 3, SS_tot = 4 + 0 + 4 = 8, SS_res = 2.
  EXPECT_NEAR(m.r2, 1 - 2.0 / 8, 1e-12);
  EXPECT_TRUE(std::isnan(m.accuracy));
  ASSERT_EQ(m.Named(Task::kRegression).size(), 3u);
  EXPECT_EQ(m.Named(Task::kRegression)[0].first, "rmse");
}

TEST(MetricsTest, PredictionsAreProbabilities) {
  std::vector<float> out = {1, 2, 3};
  OutputsToPredictions(Task::kMulticlass, 1, 3, out.data());
  EXPECT_NEAR(out[0] + out[1] + out[2], 1.0, 1e-6);
  EXPECT_GT(out[2], out[1]);
  std::vector<float> logit = {0};
  OutputsToPredictions(Task::kBinary, 1, 1, logit.data());
  EXPECT_FLOAT_EQ(logit[0], 0.5f);
}

}  // namespace
}  // namespace downpour::model
