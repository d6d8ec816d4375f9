#include "worker/cpu/cpu_backend.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "common/config.h"
#include "common/model_spec.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/dataset.h"

namespace downpour::worker {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;

ModelSpec MakeSpec(const std::string& type, std::vector<int> layers) {
  ModelSection section;
  section.type = type;
  section.layers = std::move(layers);
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(section);
  EXPECT_THAT(spec, IsOk());
  return *spec;
}

std::vector<float> RandomFloats(size_t n, float scale, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& f : v) f = dist(gen);
  return v;
}

std::vector<int> RandomLabels(int n, int classes, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<int> labels(n);
  for (int& y : labels) y = static_cast<int>(gen() % classes);
  return labels;
}

// The model written out directly in double precision, independent of the
// backend: fills logits [batch, classes] and returns the mean softmax
// cross-entropy.
double ReferenceLoss(const std::vector<int>& layers,
                     const std::vector<double>& params, const float* x,
                     const int* labels, int batch,
                     std::vector<double>* logits = nullptr) {
  double total = 0.0;
  for (int r = 0; r < batch; ++r) {
    std::vector<double> a(x + r * layers[0], x + (r + 1) * layers[0]);
    int64_t offset = 0;
    for (size_t l = 0; l + 1 < layers.size(); ++l) {
      const int in = layers[l], out = layers[l + 1];
      std::vector<double> z(out);
      for (int j = 0; j < out; ++j) {
        z[j] = params[offset + in * out + j];  // bias
        for (int i = 0; i < in; ++i)
          z[j] += a[i] * params[offset + i * out + j];
        if (l + 2 < layers.size()) z[j] = std::max(z[j], 0.0);
      }
      offset += in * out + out;
      a = z;
    }
    double max = a[0], sum = 0.0;
    for (double v : a) max = std::max(max, v);
    for (double v : a) sum += std::exp(v - max);
    total += max + std::log(sum) - a[labels[r]];
    if (logits != nullptr) logits->insert(logits->end(), a.begin(), a.end());
  }
  return total / batch;
}

struct GradientCase {
  std::string type;
  std::vector<int> layers;
  int batch;
};

class GradientTest : public ::testing::TestWithParam<GradientCase> {};

// The analytic gradient (float) matches central differences of the double
// reference, |analytic - numeric| <= 1e-5 + 1e-3 * |numeric|, and the loss
// matches to 1e-5 relative.
TEST_P(GradientTest, MatchesFiniteDifferences) {
  const GradientCase& c = GetParam();
  const ModelSpec spec = MakeSpec(c.type, c.layers);
  const std::vector<float> params = RandomFloats(spec.num_params(), 0.5f, 1);
  const std::vector<float> x = RandomFloats(c.batch * c.layers[0], 1.0f, 2);
  const std::vector<int> labels = RandomLabels(c.batch, c.layers.back(), 3);

  CpuBackend backend(spec, c.batch);
  // NaN everywhere, so a parameter whose gradient is never written shows up.
  std::vector<float> grad(spec.num_params(),
                          std::numeric_limits<float>::quiet_NaN());
  absl::StatusOr<float> loss = backend.LossAndGradient(
      params.data(), x.data(), labels.data(), c.batch, grad.data());
  ASSERT_THAT(loss, IsOk());

  std::vector<double> p(params.begin(), params.end());
  const double reference =
      ReferenceLoss(c.layers, p, x.data(), labels.data(), c.batch);
  EXPECT_NEAR(*loss, reference, 1e-5 * std::abs(reference));

  constexpr double kEps = 1e-6;
  for (int64_t i = 0; i < spec.num_params(); ++i) {
    const double saved = p[i];
    p[i] = saved + kEps;
    const double plus =
        ReferenceLoss(c.layers, p, x.data(), labels.data(), c.batch);
    p[i] = saved - kEps;
    const double minus =
        ReferenceLoss(c.layers, p, x.data(), labels.data(), c.batch);
    p[i] = saved;
    const double numeric = (plus - minus) / (2 * kEps);
    EXPECT_NEAR(grad[i], numeric, 1e-5 + 1e-3 * std::abs(numeric))
        << "parameter " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, GradientTest,
                         ::testing::Values(GradientCase{"mlp", {5, 4, 3}, 6},
                                           GradientCase{"mlp", {7, 6, 5, 4}, 9},
                                           GradientCase{"softmax", {6, 4}, 5},
                                           GradientCase{"mlp", {3, 2}, 1}));

TEST(CpuBackendTest, EvaluateAgreesWithLossAndGradient) {
  const std::vector<int> layers = {12, 10, 8, 5};
  const ModelSpec spec = MakeSpec("mlp", layers);
  constexpr int kN = 37;
  const std::vector<float> params = RandomFloats(spec.num_params(), 0.5f, 4);
  const std::vector<float> x = RandomFloats(kN * layers[0], 1.0f, 5);
  const std::vector<int> labels = RandomLabels(kN, layers.back(), 6);

  CpuBackend whole(spec, kN);
  std::vector<float> grad(spec.num_params());
  absl::StatusOr<float> loss = whole.LossAndGradient(
      params.data(), x.data(), labels.data(), kN, grad.data());
  ASSERT_THAT(loss, IsOk());

  CpuBackend chunked(spec, 8);  // five chunks, the last of 5 examples
  double loss_sum = -1;
  int64_t correct = -1;
  ASSERT_THAT(chunked.Evaluate(params.data(), x.data(), labels.data(), kN,
                               &loss_sum, &correct),
              IsOk());
  EXPECT_NEAR(loss_sum / kN, *loss, 1e-5 * *loss);

  std::vector<double> logits;
  ReferenceLoss(layers, std::vector<double>(params.begin(), params.end()),
                x.data(), labels.data(), kN, &logits);
  int64_t expected_correct = 0;
  for (int r = 0; r < kN; ++r) {
    const auto row = logits.begin() + r * layers.back();
    if (std::max_element(row, row + layers.back()) - row == labels[r]) {
      ++expected_correct;
    }
  }
  EXPECT_EQ(correct, expected_correct);
}

TEST(CpuBackendTest, EvaluateOfNothingIsZero) {
  const ModelSpec spec = MakeSpec("softmax", {4, 3});
  CpuBackend backend(spec, 2);
  const std::vector<float> params(spec.num_params(), 0.0f);
  double loss_sum = -1;
  int64_t correct = -1;
  EXPECT_THAT(
      backend.Evaluate(params.data(), nullptr, nullptr, 0, &loss_sum, &correct),
      IsOk());
  EXPECT_EQ(loss_sum, 0.0);
  EXPECT_EQ(correct, 0);
}

TEST(CpuBackendTest, RejectsBadBatchesAndLabels) {
  const ModelSpec spec = MakeSpec("mlp", {4, 3, 2});
  CpuBackend backend(spec, 4);
  EXPECT_EQ(backend.device(), "cpu");
  const std::vector<float> params(spec.num_params(), 0.1f);
  const std::vector<float> x(8 * 4, 1.0f);
  std::vector<int> labels = {0, 1, 0, 1, 0, 1, 0, 1};
  std::vector<float> grad(spec.num_params());

  EXPECT_THAT(
      backend.LossAndGradient(params.data(), x.data(), labels.data(), 0,
                              grad.data()),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[1, 4]")));
  EXPECT_THAT(
      backend.LossAndGradient(params.data(), x.data(), labels.data(), 5,
                              grad.data()),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_batch")));
  labels[2] = 2;
  EXPECT_THAT(backend.LossAndGradient(params.data(), x.data(), labels.data(), 4,
                                      grad.data()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("label 2 of example 2 is outside [0, 2)")));
  labels[2] = 0;
  labels[6] = -1;
  double loss_sum;
  int64_t correct;
  EXPECT_THAT(
      backend.Evaluate(params.data(), x.data(), labels.data(), 8, &loss_sum,
                       &correct),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("example 6")));
  EXPECT_THAT(backend.Evaluate(params.data(), x.data(), labels.data(), -1,
                               &loss_sum, &correct),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

struct TrainCase {
  std::string type;
  std::vector<int> layers;
};

class TrainTest : public ::testing::TestWithParam<TrainCase> {};

// 300 steps of plain SGD (lr 0.1, batch 32) on Gaussian blobs: the test loss
// falls to under a third and the test accuracy passes 0.9.
TEST_P(TrainTest, SgdLearnsSyntheticBlobs) {
  const TrainCase& c = GetParam();
  const ModelSpec spec = MakeSpec(c.type, c.layers);
  constexpr int kTrain = 1000, kTest = 500, kBatch = 32;
  const Dataset data =
      MakeSynthetic(kTrain + kTest, c.layers[0], c.layers.back(), 7);
  const float* test_x = data.x.data() + kTrain * data.dim;
  const int* test_y = data.y.data() + kTrain;

  CpuBackend backend(spec, kBatch);
  std::vector<float> params = spec.InitAll(1);
  std::vector<float> grad(spec.num_params());
  double initial_loss;
  int64_t correct;
  ASSERT_THAT(backend.Evaluate(params.data(), test_x, test_y, kTest,
                               &initial_loss, &correct),
              IsOk());
  for (int step = 0; step < 300; ++step) {
    const int start = (step * kBatch) % (kTrain - kBatch);
    ASSERT_THAT(
        backend.LossAndGradient(params.data(), data.x.data() + start * data.dim,
                                data.y.data() + start, kBatch, grad.data()),
        IsOk());
    for (size_t i = 0; i < params.size(); ++i) params[i] -= 0.1f * grad[i];
  }
  double final_loss;
  ASSERT_THAT(backend.Evaluate(params.data(), test_x, test_y, kTest,
                               &final_loss, &correct),
              IsOk());
  EXPECT_LT(final_loss, initial_loss / 3);
  EXPECT_GT(static_cast<double>(correct) / kTest, 0.9);
}

INSTANTIATE_TEST_SUITE_P(Models, TrainTest,
                         ::testing::Values(TrainCase{"mlp", {20, 32, 16, 4}},
                                           TrainCase{"softmax", {20, 4}}));

}  // namespace
}  // namespace downpour::worker
