#include "worker/downpour.h"

#include <functional>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "worker/cpu/cpu_backend.h"
#include "worker/testing/fake_ps_client.h"

namespace downpour::worker {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;

class DownpourLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ModelSection model;
    model.layers = {8, 16, 3};
    auto spec = ModelSpec::Create(model);
    ASSERT_TRUE(spec.ok());
    spec_ = std::make_unique<ModelSpec>(*spec);
    const Dataset all = MakeSynthetic(1200, 8, 3, 5);
    train_ = all;
    train_.x.resize(1000 * 8);
    train_.y.resize(1000);
    test_ = all;
    test_.x.erase(test_.x.begin(), test_.x.begin() + 1000 * 8);
    test_.y.erase(test_.y.begin(), test_.y.begin() + 1000);
    options_.training.batch_size = 32;
    options_.training.epochs = 5;
    options_.training.eval_every_steps = 50;
  }

  std::unique_ptr<ModelSpec> spec_;
  Dataset train_, test_;
  DownpourLoop::Options options_;
};

// Every gradient element is 1, so the pushed sum counts the steps pushed.
// `on_step`, when set, is called before each step with the number of steps
// computed so far.
class OnesBackend : public ComputeBackend {
 public:
  explicit OnesBackend(int64_t n, std::function<void(int64_t)> on_step = nullptr)
      : n_(n), on_step_(std::move(on_step)) {}
  absl::StatusOr<float> LossAndGradient(const float*, const float*, const int*,
                                        int, float* grad) override {
    if (on_step_) on_step_(steps_);
    ++steps_;
    std::fill(grad, grad + n_, 1.0f);
    return 1.0f;
  }
  absl::Status Evaluate(const float*, const float*, const int*, int n,
                        double* loss_sum, int64_t* correct) override {
    *loss_sum = n;
    *correct = 0;
    return absl::OkStatus();
  }
  std::string device() const override { return "test"; }

 private:
  const int64_t n_;
  const std::function<void(int64_t)> on_step_;
  int64_t steps_ = 0;
};

TEST_F(DownpourLoopTest, EveryStepsGradientIsPushedExactlyOnce) {
  for (int n_push : {1, 3}) {
    FakePsClient ps(spec_->InitAll(1), spec_->blocks().size(), 0.0f);
    OnesBackend backend(spec_->num_params());
    options_.training.n_push = n_push;
    DownpourLoop loop(*spec_, &backend, &ps, &train_, &test_, options_);
    ASSERT_THAT(loop.Run(), IsOk());
    const WorkerStats stats = loop.stats();
    EXPECT_TRUE(stats.finished);
    EXPECT_EQ(stats.step, 5 * 32);  // ceil(1000 / 32) = 32 steps per epoch
    // Every step's gradient went into exactly one push...
    EXPECT_EQ(stats.pushed_steps, 5 * 32) << "n_push " << n_push;
    EXPECT_EQ(stats.pushes, ps.pushes());
    // ...and none carries more than n_push steps' worth (lagging pushes are
    // scaled), so the ps received at most the steps' total.
    EXPECT_LE(ps.pushed_sum(), 5 * 32);
    EXPECT_GE(ps.pushed_sum() + 1e-3, ps.pushes());  // float scaling rounds
    EXPECT_LE(ps.pushes(), 5 * 32 / n_push + 1);  // plus the final flush
  }
}

TEST_F(DownpourLoopTest, LearnsWithCommunicationOff) {
  FakePsClient ps(spec_->InitAll(1), spec_->blocks().size(), 0.0f);
  CpuBackend backend(*spec_, options_.training.batch_size);
  options_.no_communication = true;
  options_.local_learning_rate = 0.1;
  DownpourLoop loop(*spec_, &backend, &ps, &train_, &test_, options_);
  ASSERT_THAT(loop.Run(), IsOk());
  EXPECT_GT(loop.stats().accuracy, 0.8);
  EXPECT_EQ(ps.pushes(), 0);
}

TEST_F(DownpourLoopTest, PushErrorEndsTheRunWithThatError) {
  FakePsClient ps(spec_->InitAll(1), spec_->blocks().size(), 0.1f);
  ps.FailPushes();
  CpuBackend backend(*spec_, options_.training.batch_size);
  DownpourLoop loop(*spec_, &backend, &ps, &train_, &test_, options_);
  EXPECT_THAT(loop.Run(), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(DownpourLoopTest, StopEndsEarlyAndStillFlushes) {
  FakePsClient ps(spec_->InitAll(1), spec_->blocks().size(), 0.1f);
  options_.training.epochs = 100000;
  // No regular push before the stop: all the gradient is owed at Stop, and only
  // the flush can deliver it.
  options_.training.n_push = 1000;
  DownpourLoop* loop_ptr = nullptr;
  OnesBackend backend(spec_->num_params(), [&](int64_t steps) {
    if (steps == 20) loop_ptr->Stop();
  });
  DownpourLoop loop(*spec_, &backend, &ps, &train_, &test_, options_);
  loop_ptr = &loop;
  ASSERT_THAT(loop.Run(), IsOk());
  const WorkerStats stats = loop.stats();
  EXPECT_TRUE(stats.finished);
  // Stop is seen at the next step boundary: the 21st step still completes.
  EXPECT_EQ(stats.step, 21);
  EXPECT_EQ(stats.pushed_steps, stats.step);
  EXPECT_EQ(ps.pushes(), 1) << "the owed gradient was not flushed";
  EXPECT_DOUBLE_EQ(ps.pushed_sum(), static_cast<double>(stats.step))
      << "the flush carried a different number of steps' gradient";
}

}  // namespace
}  // namespace downpour::worker
