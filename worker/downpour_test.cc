#include "worker/downpour.h"

#include <cstring>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "worker/cpu/cpu_backend.h"

namespace downpour::worker {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;

// An in-process parameter store that applies SGD on push, standing in for the
// ps shards so the loop's threading and accounting can be tested alone.
class InProcessPs : public PsClient {
 public:
  InProcessPs(std::vector<float> params, int num_blocks, float lr)
      : params_(std::move(params)), versions_(num_blocks, 0), lr_(lr) {}

  absl::Status Pull(float* params, std::vector<uint64_t>* versions) override {
    absl::MutexLock lock(&mu_);
    std::memcpy(params, params_.data(), params_.size() * sizeof(float));
    *versions = versions_;
    ++pulls_;
    return absl::OkStatus();
  }

  absl::Status Push(const float* grad, const std::vector<uint64_t>&) override {
    absl::MutexLock lock(&mu_);
    if (fail_pushes_) return absl::InvalidArgumentError("push: gradient has NaN");
    pushed_sum_ += grad[0];
    for (size_t i = 0; i < params_.size(); ++i) params_[i] -= lr_ * grad[i];
    for (auto& v : versions_) ++v;
    ++pushes_;
    return absl::OkStatus();
  }

  void FailPushes() {
    absl::MutexLock lock(&mu_);
    fail_pushes_ = true;
  }
  int pushes() {
    absl::MutexLock lock(&mu_);
    return pushes_;
  }
  double pushed_sum() {
    absl::MutexLock lock(&mu_);
    return pushed_sum_;
  }

 private:
  absl::Mutex mu_;
  std::vector<float> params_;
  std::vector<uint64_t> versions_;
  float lr_;
  int pulls_ = 0, pushes_ = 0;
  double pushed_sum_ = 0;
  bool fail_pushes_ = false;
};

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
class OnesBackend : public ComputeBackend {
 public:
  explicit OnesBackend(int64_t n) : n_(n) {}
  absl::StatusOr<float> LossAndGradient(const float*, const float*, const int*,
                                        int, float* grad) override {
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
  int64_t n_;
};

TEST_F(DownpourLoopTest, EveryStepsGradientIsPushedExactlyOnce) {
  for (int n_push : {1, 3}) {
    InProcessPs ps(spec_->InitAll(1), spec_->blocks().size(), 0.0f);
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
  InProcessPs ps(spec_->InitAll(1), spec_->blocks().size(), 0.0f);
  CpuBackend backend(*spec_, options_.training.batch_size);
  options_.no_communication = true;
  options_.local_learning_rate = 0.1;
  DownpourLoop loop(*spec_, &backend, &ps, &train_, &test_, options_);
  ASSERT_THAT(loop.Run(), IsOk());
  EXPECT_GT(loop.stats().accuracy, 0.8);
  EXPECT_EQ(ps.pushes(), 0);
}

TEST_F(DownpourLoopTest, PushErrorEndsTheRunWithThatError) {
  InProcessPs ps(spec_->InitAll(1), spec_->blocks().size(), 0.1f);
  ps.FailPushes();
  CpuBackend backend(*spec_, options_.training.batch_size);
  DownpourLoop loop(*spec_, &backend, &ps, &train_, &test_, options_);
  EXPECT_THAT(loop.Run(), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(DownpourLoopTest, StopEndsEarlyAndStillFlushes) {
  InProcessPs ps(spec_->InitAll(1), spec_->blocks().size(), 0.1f);
  CpuBackend backend(*spec_, options_.training.batch_size);
  options_.training.epochs = 100000;
  DownpourLoop loop(*spec_, &backend, &ps, &train_, &test_, options_);
  std::thread stopper([&] {
    while (loop.stats().step < 20) absl::SleepFor(absl::Milliseconds(1));
    loop.Stop();
  });
  ASSERT_THAT(loop.Run(), IsOk());
  stopper.join();
  EXPECT_TRUE(loop.stats().finished);
  EXPECT_LT(loop.stats().step, 100000);
}

}  // namespace
}  // namespace downpour::worker
