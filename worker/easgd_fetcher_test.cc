// The elastic averaging math of training.mode easgd, through the Downpour
// loop against an in-process ps (FakePsClient applies a push as plain SGD,
// here at learning rate 1, as the ps's DenseOptimizer does under easgd).
#include "worker/easgd_fetcher.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/model_spec.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "worker/compute_backend.h"
#include "worker/dataset.h"
#include "worker/downpour.h"
#include "worker/testing/fake_ps_client.h"

namespace downpour::worker {
namespace {

using ::downpour::testing::IsOk;

// Every gradient element is 1; every prediction is class 0.
class OnesBackend : public ComputeBackend {
 public:
  explicit OnesBackend(int64_t n) : n_(n) {}
  absl::StatusOr<float> LossAndGradient(const float*, const float*,
                                        const float*, int,
                                        float* grad) override {
    std::fill(grad, grad + n_, 1.0f);
    return 1.0f;
  }
  absl::Status Predict(const float*, const float*, int n, float* out) override {
    std::fill(out, out + static_cast<int64_t>(n) * 3, 0.0f);
    return absl::OkStatus();
  }
  std::string device() const override { return "test"; }

 private:
  const int64_t n_;
};

class EasgdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ModelSection model;
    model.layers = {8, 16, 3};
    spec_ = std::make_unique<ModelSpec>(ModelSpec::Create(model).value());
    train_ = MakeSynthetic(256, 8, 3, 5);
    options_.training.batch_size = 32;
    options_.training.mode = TrainingMode::kEasgd;
    options_.training.easgd_alpha = 0.25;
    options_.training.easgd_tau = 2;
    options_.training.steps = 4;
    options_.training.eval_every_steps = 0;
    options_.optimizer.type = OptimizerType::kSgd;
    options_.optimizer.learning_rate = 0.01;
  }

  std::unique_ptr<ModelSpec> spec_;
  Dataset train_;
  DownpourLoop::Options options_;
};

// With every gradient 1, lr 0.01, tau 2, alpha 0.25 and x = c = c0 at the
// start, every element follows
//   steps 1-2: x = c0 - 0.02
//   exchange:  d = 0.25 (x - c) = -0.005;  x = c0 - 0.015;  c = c0 - 0.005
//   steps 3-4: x = c0 - 0.035
//   exchange:  d = 0.25 (x - c) = -0.0075;                  c = c0 - 0.0125
// Without the worker's half of the elastic step (x kept at c0 - 0.02 after
// the first exchange) the center would end at c0 - 0.01375; without the
// center's half it would stay at c0.
TEST_F(EasgdTest, CenterAndCopyMoveTowardEachOther) {
  const std::vector<float> c0 = spec_->InitAll(1);
  FakePsClient ps(c0, spec_->blocks().size(), /*learning_rate=*/1.0f);
  OnesBackend backend(spec_->num_params());
  DownpourLoop loop(*spec_, &backend, &ps, &train_, nullptr, options_);
  ASSERT_THAT(loop.Run(), IsOk());
  const std::vector<float> center = ps.params();
  ASSERT_EQ(center.size(), c0.size());
  for (size_t i = 0; i < c0.size(); ++i) {
    ASSERT_NEAR(center[i], c0[i] - 0.0125f, 1e-6f) << "parameter " << i;
  }
  // One push per exchange, none per step; each carried tau steps' examples.
  EXPECT_EQ(ps.pushes(), 2);
  const WorkerStats stats = loop.stats();
  EXPECT_EQ(stats.pushes, 2);
  EXPECT_EQ(stats.pushed_steps, 4);
  EXPECT_EQ(stats.examples, 4 * 32);
}

// Steps left over at the end are exchanged by the flush, so no local work is
// lost: 3 steps with tau 2 exchange after step 2 and once more at the end.
TEST_F(EasgdTest, FlushExchangesTheStepsLeftOver) {
  options_.training.steps = 3;
  const std::vector<float> c0 = spec_->InitAll(1);
  FakePsClient ps(c0, spec_->blocks().size(), 1.0f);
  OnesBackend backend(spec_->num_params());
  DownpourLoop loop(*spec_, &backend, &ps, &train_, nullptr, options_);
  ASSERT_THAT(loop.Run(), IsOk());
  EXPECT_EQ(ps.pushes(), 2);
  EXPECT_EQ(loop.stats().pushed_steps, 3);
  // Second exchange: x = c0 - 0.025, c = c0 - 0.005, d = -0.005.
  EXPECT_NEAR(ps.params()[0], c0[0] - 0.01f, 1e-6f);
}

TEST(EasgdAlphaTest, ZeroMeansNinetyPercentSharedByTheWorkers) {
  TrainingSection training;
  EXPECT_DOUBLE_EQ(EasgdAlpha(training, 16), 0.9 / 16);
  training.easgd_alpha = 0.3;
  EXPECT_DOUBLE_EQ(EasgdAlpha(training, 16), 0.3);
}

}  // namespace
}  // namespace downpour::worker
