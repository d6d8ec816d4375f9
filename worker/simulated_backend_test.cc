#include "worker/simulated_backend.h"

#include <cmath>
#include <memory>
#include <vector>

#include "common/config.h"
#include "common/model_spec.h"
#include "common/testing/fake_clock.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/cpu/cpu_backend.h"

namespace downpour::worker {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;

ModelSpec Spec() {
  ModelSection model;
  model.layers = {4, 3, 2};
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(model);
  EXPECT_THAT(spec, IsOk());
  return *spec;
}

TEST(SimulatedBackendTest, AStepSleepsItsTimeAndWritesTheFixedGradient) {
  FakeClock clock;
  const ModelSpec spec = Spec();
  SimulatedBackend backend(spec, 8, absl::Milliseconds(200), &clock);
  std::vector<float> grad(spec.num_params(), NAN);
  const std::vector<float> labels = {0, 1, 1};
  absl::StatusOr<float> loss =
      backend.LossAndGradient(nullptr, nullptr, labels.data(), 3, grad.data());
  ASSERT_THAT(loss, IsOk());
  EXPECT_FLOAT_EQ(*loss, std::log(2.0f));
  EXPECT_EQ(clock.slept(), absl::Milliseconds(200));
  for (size_t i = 0; i < grad.size(); ++i) {
    ASSERT_TRUE(std::isfinite(grad[i])) << i;
    EXPECT_EQ(grad[i], i % 2 == 0 ? 1e-6f : -1e-6f) << i;
  }
  ASSERT_THAT(
      backend.LossAndGradient(nullptr, nullptr, labels.data(), 3, grad.data()),
      IsOk());
  EXPECT_EQ(clock.slept(), absl::Milliseconds(400));
}

// compute.simulated_real_gradients: the real backend's loss, gradient and
// predictions, the step padded to its time (the fake clock does not move
// while the CPU computes, so all of it is sleep here).
TEST(SimulatedBackendTest, WithARealBackendItsGradientPaddedToTheStepTime) {
  FakeClock clock;
  const ModelSpec spec = Spec();
  SimulatedBackend backend(spec, 8, absl::Milliseconds(200), &clock,
                           std::make_unique<CpuBackend>(spec, 8));
  CpuBackend reference(spec, 8);
  std::vector<float> params(spec.num_params());
  for (size_t i = 0; i < params.size(); ++i)
    params[i] = 0.01f * (i % 7) - 0.03f;
  const std::vector<float> x = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f,
                                0.7f, 0.8f, 0.9f, 1.0f, 1.1f, 1.2f};
  const std::vector<float> labels = {0, 1, 1};
  std::vector<float> grad(spec.num_params(), NAN), want(spec.num_params());
  absl::StatusOr<float> loss = backend.LossAndGradient(
      params.data(), x.data(), labels.data(), 3, grad.data());
  absl::StatusOr<float> want_loss = reference.LossAndGradient(
      params.data(), x.data(), labels.data(), 3, want.data());
  ASSERT_THAT(loss, IsOk());
  ASSERT_THAT(want_loss, IsOk());
  EXPECT_FLOAT_EQ(*loss, *want_loss);
  EXPECT_EQ(grad, want);
  EXPECT_EQ(clock.slept(), absl::Milliseconds(200));
  std::vector<float> out(3 * 2), want_out(3 * 2);
  ASSERT_THAT(backend.Predict(params.data(), x.data(), 3, out.data()), IsOk());
  ASSERT_THAT(reference.Predict(params.data(), x.data(), 3, want_out.data()),
              IsOk());
  EXPECT_EQ(out, want_out);
  EXPECT_THAT(backend.device(), HasSubstr("real gradients on the CPU"));
}

// training.fetch layerwise on the simulated device: the real backend's
// stages, each piece taking its share of the step. Without waits the step
// takes the step time; the forward pass's third passes before the first
// gradient is reported; a wait for values adds to the step instead of
// hiding in it.
TEST(SimulatedBackendTest, StagesShareTheStepTimeAndWaitsAddToIt) {
  FakeClock clock;
  const ModelSpec spec = Spec();
  SimulatedBackend backend(spec, 8, absl::Milliseconds(300), &clock,
                           std::make_unique<CpuBackend>(spec, 8));
  std::vector<float> params(spec.num_params(), 0.01f);
  const std::vector<float> x(12, 0.5f);
  const std::vector<float> labels = {0, 1, 1};
  std::vector<float> grad(spec.num_params()), want(spec.num_params());
  CpuBackend reference(spec, 8);
  ASSERT_THAT(reference.LossAndGradient(params.data(), x.data(), labels.data(),
                                        3, want.data()),
              IsOk());
  for (const absl::Duration wait :
       {absl::ZeroDuration(), absl::Milliseconds(50)}) {
    const absl::Duration slept_before = clock.slept();
    const absl::Time start = clock.Now();
    absl::Time first_report = absl::InfinitePast();
    bool waited = false;
    StageHooks hooks;
    hooks.num_params = spec.num_params();
    hooks.await_params = [&](int64_t, int64_t) {
      if (!waited) clock.SleepFor(wait);  // the first piece's values are late
      waited = true;
      return absl::OkStatus();
    };
    hooks.gradient_ready = [&](int64_t, int64_t) {
      if (first_report == absl::InfinitePast()) first_report = clock.Now();
    };
    ASSERT_THAT(
        backend.LossAndGradientInStages(params.data(), x.data(), labels.data(),
                                        3, grad.data(), hooks),
        IsOk());
    EXPECT_EQ(grad, want);
    EXPECT_NEAR(absl::ToDoubleMilliseconds(clock.slept() - slept_before),
                300 + absl::ToDoubleMilliseconds(wait), 0.01);
    EXPECT_GE(absl::ToDoubleMilliseconds(first_report - start),
              100 + absl::ToDoubleMilliseconds(wait) - 0.01);
  }
}

TEST(SimulatedBackendTest, RejectsBadBatchesAndLabelsWithoutSleeping) {
  FakeClock clock;
  const ModelSpec spec = Spec();
  SimulatedBackend backend(spec, 2, absl::Milliseconds(50), &clock);
  std::vector<float> grad(spec.num_params());
  const std::vector<float> labels = {0, 2, 1};
  EXPECT_THAT(
      backend.LossAndGradient(nullptr, nullptr, labels.data(), 3, grad.data()),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("batch 3 is outside [1, 2]")));
  EXPECT_THAT(
      backend.LossAndGradient(nullptr, nullptr, labels.data(), 2, grad.data()),
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          HasSubstr("target 2 of example 1 is not a class index in [0, 2)")));
  EXPECT_EQ(clock.slept(), absl::ZeroDuration());
}

TEST(SimulatedBackendTest, PredictIsImmediateAndUniform) {
  FakeClock clock;
  SimulatedBackend backend(Spec(), 2, absl::Milliseconds(50), &clock);
  std::vector<float> out(200, NAN);
  ASSERT_THAT(backend.Predict(nullptr, nullptr, 100, out.data()), IsOk());
  for (float v : out) EXPECT_EQ(v, 0.0f);
  EXPECT_EQ(clock.slept(), absl::ZeroDuration());
  EXPECT_EQ(backend.device(), "simulated (50 ms per step)");
}

}  // namespace
}  // namespace downpour::worker
