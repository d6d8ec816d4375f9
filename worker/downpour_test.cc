#include "worker/downpour.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <thread>

#include "absl/time/time.h"
#include "common/testing/poll.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "worker/cpu/cpu_backend.h"
#include "worker/data_parts.h"
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
  explicit OnesBackend(int64_t n,
                       std::function<void(int64_t)> on_step = nullptr)
      : n_(n), on_step_(std::move(on_step)) {}
  absl::StatusOr<float> LossAndGradient(const float*, const float*,
                                        const float*, int,
                                        float* grad) override {
    if (on_step_) on_step_(steps_);
    ++steps_;
    std::fill(grad, grad + n_, 1.0f);
    return 1.0f;
  }
  absl::Status Predict(const float*, const float*, int n, float* out) override {
    std::fill(out, out + static_cast<int64_t>(n) * 3, 0.0f);  // 3 classes
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
    // Every step's gradient went into exactly one push, at full weight...
    EXPECT_EQ(stats.pushed_steps, 5 * 32) << "n_push " << n_push;
    EXPECT_EQ(stats.pushes, ps.pushes());
    EXPECT_DOUBLE_EQ(ps.pushed_sum(), 5 * 32) << "n_push " << n_push;
    // ...n_push steps to a push, plus the final flush of the rest.
    EXPECT_EQ(ps.pushes(), (5 * 32 + n_push - 1) / n_push);
    EXPECT_EQ(stats.examples, 5 * 32 * 32);
  }
}

// A push the ps's guard refused is answered but not applied: its steps are
// counted as refused, in none of the applied figures (pushes, pushed_steps,
// examples), and the run goes on. Layerwise, a step counts as refused when
// any of its groups was.
TEST_F(DownpourLoopTest, RefusedPushesAreNotCountedAsAppliedWork) {
  {
    FakePsClient ps(spec_->InitAll(1), spec_->blocks().size(), 0.0f);
    ps.RefusePushes(3);
    OnesBackend backend(spec_->num_params());
    DownpourLoop loop(*spec_, &backend, &ps, &train_, &test_, options_);
    ASSERT_THAT(loop.Run(), IsOk());
    const WorkerStats stats = loop.stats();
    EXPECT_EQ(stats.step, 5 * 32);
    EXPECT_EQ(ps.refused(), 3);
    EXPECT_EQ(stats.refused_steps, 3);
    EXPECT_EQ(stats.pushed_steps, 5 * 32 - 3);
    EXPECT_EQ(stats.pushes, ps.pushes());
    EXPECT_DOUBLE_EQ(ps.pushed_sum(), 5 * 32 - 3);
    EXPECT_EQ(stats.examples, (5 * 32 - 3) * 32);
  }
  ModelSection model;
  model.layers = {8, 16, 3};
  model.block_size = 16;
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(model);
  ASSERT_THAT(spec, IsOk());
  CpuBackend backend(*spec, options_.training.batch_size);
  options_.training.epochs = 2;  // 64 steps
  options_.training.fetch = FetchMode::kLayerwise;
  options_.layer_group_floats = 1;  // a group per block, 14 a step
  FakePsClient ps(spec->InitAll(1), spec->blocks().size(), 0.1f);
  ps.UseBlocks(spec->blocks());
  ps.RefusePushes(3);  // 3 groups of the first step
  DownpourLoop loop(*spec, &backend, &ps, &train_, &test_, options_);
  ASSERT_THAT(loop.Run(), IsOk());
  const WorkerStats stats = loop.stats();
  EXPECT_EQ(stats.step, 64);
  EXPECT_EQ(stats.refused_steps, 1);
  EXPECT_EQ(stats.pushed_steps, 63);
  EXPECT_EQ(stats.examples, 63 * 32);
}

// The coordinator hands this worker a second part after one epoch and takes it
// back two epochs (over both parts) later: the budget is the 5 epochs, each
// step counted on the set it ran on, whatever moved.
TEST_F(DownpourLoopTest, EpochBudgetFollowsPartsAdoptedAndGivenBack) {
  Dataset both = train_;  // 2000 examples: 63 steps an epoch
  both.x.insert(both.x.end(), train_.x.begin(), train_.x.end());
  both.y.insert(both.y.end(), train_.y.begin(), train_.y.end());
  auto own = std::make_shared<const Dataset>(train_);
  auto adopted = std::make_shared<const Dataset>(both);
  FakePsClient ps(spec_->InitAll(1), spec_->blocks().size(), 0.0f);
  DownpourLoop* running = nullptr;
  // on_step(n) runs during step n; the new set applies from step n + 1.
  OnesBackend backend(spec_->num_params(), [&](int64_t steps) {
    if (steps == 31) running->ReplaceTrainingData(adopted);
    if (steps == 32 + 2 * 63 - 1) running->ReplaceTrainingData(own);
  });
  DownpourLoop loop(*spec_, &backend, &ps, &train_, &test_, options_);
  running = &loop;
  ASSERT_THAT(loop.Run(), IsOk());
  const WorkerStats stats = loop.stats();
  EXPECT_TRUE(stats.finished);
  // 1 epoch of 32 steps, 2 of 63, then the 2 left over its own part.
  EXPECT_EQ(stats.step, 32 + 2 * 63 + 2 * 32);
  EXPECT_EQ(stats.pushed_steps, stats.step);
  EXPECT_EQ(stats.examples, stats.step * 32);
}

// training.fetch layerwise with one worker computes exactly what after_push
// does (every step on parameters holding its own last update) while its
// blocks come and go in groups: each block is pushed once a step, staleness
// stays 0, and the final parameters match after_push's up to the order of
// float sums. Blocks of 16 floats, one group each, so 14 groups go at once.
TEST_F(DownpourLoopTest, LayerwiseComputesWhatAfterPushComputes) {
  ModelSection model;
  model.layers = {8, 16, 3};
  model.block_size = 16;
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(model);
  ASSERT_THAT(spec, IsOk());
  ASSERT_GT(spec->blocks().size(), 10u);
  options_.training.epochs = 2;  // 64 steps
  auto train = [&](FetchMode fetch, FakePsClient* ps) {
    CpuBackend backend(*spec, options_.training.batch_size);
    DownpourLoop::Options options = options_;
    options.training.fetch = fetch;
    options.layer_group_floats = 1;
    DownpourLoop loop(*spec, &backend, ps, &train_, &test_, options);
    EXPECT_THAT(loop.Run(), IsOk());
    return loop.stats();
  };
  FakePsClient after_push(spec->InitAll(1), spec->blocks().size(), 0.1f);
  const WorkerStats want = train(FetchMode::kAfterPush, &after_push);
  FakePsClient layerwise(spec->InitAll(1), spec->blocks().size(), 0.1f);
  layerwise.UseBlocks(spec->blocks());
  const WorkerStats got = train(FetchMode::kLayerwise, &layerwise);
  EXPECT_TRUE(got.finished);
  EXPECT_EQ(got.step, 64);
  EXPECT_EQ(got.pushed_steps, 64);
  EXPECT_EQ(got.pushes, 64);
  EXPECT_EQ(got.examples, 64 * 32);
  EXPECT_EQ(got.staleness_max, 0);
  for (uint64_t version : layerwise.versions()) EXPECT_EQ(version, 64u);
  const std::vector<float> a = after_push.params(), b = layerwise.params();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], b[i], 1e-4 + 1e-4 * std::abs(a[i])) << "parameter " << i;
  }
  EXPECT_NEAR(got.accuracy, want.accuracy, 0.02);
}

// A shard refusing a group's push ends a layerwise run with its error, no
// hang; and a client that cannot push blocks alone is named.
TEST_F(DownpourLoopTest, LayerwiseEndsOnAFailedPushWithItsError) {
  CpuBackend backend(*spec_, options_.training.batch_size);
  options_.training.fetch = FetchMode::kLayerwise;
  {
    FakePsClient ps(spec_->InitAll(1), spec_->blocks().size(), 0.1f);
    ps.UseBlocks(spec_->blocks());
    ps.FailPushes();
    DownpourLoop loop(*spec_, &backend, &ps, &train_, &test_, options_);
    EXPECT_THAT(loop.Run(), StatusIs(absl::StatusCode::kInvalidArgument,
                                     "push: gradient has NaN"));
    EXPECT_EQ(loop.stats().pushes, 0);
  }
  FakePsClient ps(spec_->InitAll(1), spec_->blocks().size(), 0.1f);
  DownpourLoop loop(*spec_, &backend, &ps, &train_, &test_, options_);
  EXPECT_THAT(loop.Run(), StatusIs(absl::StatusCode::kUnimplemented,
                                   ::testing::HasSubstr("training.fetch")));
}

// A slow ps: pushes are held, and one is let through only when the pipeline is
// full. The compute thread must wait rather than run ahead, and still push
// every step at full weight.
TEST_F(DownpourLoopTest, SlowPushesMakeComputeWaitAndLoseNothing) {
  for (int in_flight : {1, 2}) {
    constexpr int kNPush = 2;
    constexpr int kSteps = 5 * 32;
    constexpr int kPushes = kSteps / kNPush;
    // The client holds the one knob (training.max_pushes_in_flight).
    FakePsClient ps(spec_->InitAll(1), spec_->blocks().size(), 0.0f, in_flight);
    ps.HoldPushes();
    options_.training.n_push = kNPush;
    // Pulls in the background: only pushes can hold compute up.
    options_.training.fetch = FetchMode::kOverlap;
    // Steps computed before this one, less those the ps acknowledged: at most
    // the pushes in flight plus the one being summed.
    int64_t most_ahead = 0;
    OnesBackend backend(spec_->num_params(), [&](int64_t steps) {
      most_ahead = std::max<int64_t>(most_ahead, steps - kNPush * ps.pushes());
    });
    DownpourLoop loop(*spec_, &backend, &ps, &train_, &test_, options_);
    std::thread slow_ps([&] {
      for (int i = 0; i < kPushes; ++i) {
        ASSERT_TRUE(ps.AwaitBlockedPushes(std::min(in_flight, kPushes - i),
                                          absl::Seconds(30)))
            << "push " << i << " of " << kPushes << " never came";
        ps.AllowPushes(1);
      }
    });
    ASSERT_THAT(loop.Run(), IsOk());
    slow_ps.join();
    const WorkerStats stats = loop.stats();
    EXPECT_EQ(stats.step, kSteps);
    EXPECT_EQ(ps.pushes(), kPushes);
    EXPECT_EQ(stats.pushes, kPushes);
    EXPECT_EQ(stats.pushed_steps, kSteps);
    EXPECT_DOUBLE_EQ(ps.pushed_sum(), kSteps)
        << "a step's gradient was lost or scaled";
    EXPECT_EQ(stats.examples, int64_t{kSteps} * 32);
    EXPECT_LE(most_ahead, kNPush * (in_flight + 1))
        << "compute ran ahead of the pushes in flight";
    EXPECT_EQ(ps.max_concurrent_pushes(), in_flight);
    EXPECT_GT(stats.share_wait_push, 0);
    EXPECT_LE(
        stats.share_compute + stats.share_wait_pull + stats.share_wait_push,
        1.0 + 1e-9);
  }
}

TEST_F(DownpourLoopTest, StalenessQuantilesAreWhatThePsReports) {
  // One worker that never refreshes its parameters: every push's gradient was
  // computed on the version-0 parameters. The fake reports each block's
  // staleness; the loop keeps them all in a histogram.
  FakePsClient ps(spec_->InitAll(1), spec_->blocks().size(), 0.0f);
  OnesBackend backend(spec_->num_params());
  options_.training.n_fetch = 1000000;  // never refresh: staleness grows by 1
  DownpourLoop loop(*spec_, &backend, &ps, &train_, &test_, options_);
  ASSERT_THAT(loop.Run(), IsOk());
  // By hand: push k (0-based, of 160) finds k updates on each of its B blocks,
  // so the 160 * B values are 0..159, B of each; value k holds ranks
  // kB+1..(k+1)B. p50: rank 80B -> 79. p99: rank ceil(158.4B), in
  // (158B, 159B] -> 158. Max 159, mean 159 / 2.
  const WorkerStats stats = loop.stats();
  EXPECT_DOUBLE_EQ(stats.mean_staleness, (5 * 32 - 1) / 2.0);
  EXPECT_EQ(stats.staleness_p50, 79);
  EXPECT_EQ(stats.staleness_p99, 158);
  EXPECT_EQ(stats.staleness_max, 159);
  EXPECT_EQ(loop.staleness().count(), 160u * spec_->blocks().size());
}

// training.fetch after_push (the default): each step computes on parameters
// pulled after the worker's previous push was acknowledged, so one worker's
// gradients are never stale. (With fetch overlap they are: the pull of step s
// races the push of step s - 1.)
TEST_F(DownpourLoopTest, FetchAfterPushComputesOnTheWorkersOwnUpdates) {
  FakePsClient ps(spec_->InitAll(1), spec_->blocks().size(), 0.0f);
  ps.HoldPushes();
  OnesBackend backend(spec_->num_params());
  ASSERT_EQ(options_.training.fetch, FetchMode::kAfterPush);
  DownpourLoop loop(*spec_, &backend, &ps, &train_, &test_, options_);
  // A slow ps: every push waits a little, so a background pull would come
  // back before the push is applied.
  std::thread slow_ps([&] {
    for (int i = 0; i < 5 * 32; ++i) {
      if (!ps.AwaitBlockedPushes(1, absl::Seconds(30))) return;
      ps.AllowPushes(1);
    }
  });
  ASSERT_THAT(loop.Run(), IsOk());
  slow_ps.join();
  const WorkerStats stats = loop.stats();
  EXPECT_EQ(stats.pushes, 5 * 32);
  EXPECT_EQ(stats.staleness_max, 0) << "a gradient was computed on "
                                       "parameters older than the worker's "
                                       "own last push";
  EXPECT_GE(stats.pulls, 5 * 32 - 1);
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

// From step `bad_step` on, the loss (or one gradient element) is not finite.
class DivergingBackend : public OnesBackend {
 public:
  DivergingBackend(int64_t n, int64_t bad_step, bool bad_gradient)
      : OnesBackend(n), bad_step_(bad_step), bad_gradient_(bad_gradient) {}
  absl::StatusOr<float> LossAndGradient(const float* p, const float* x,
                                        const float* y, int batch,
                                        float* grad) override {
    const float loss = *OnesBackend::LossAndGradient(p, x, y, batch, grad);
    if (steps_++ < bad_step_) return loss;
    if (!bad_gradient_) return std::nanf("");
    grad[0] = std::numeric_limits<float>::infinity();
    return loss;
  }

 private:
  const int64_t bad_step_;
  const bool bad_gradient_;
  int64_t steps_ = 0;
};

TEST_F(DownpourLoopTest,
       DivergenceEndsTheRunNamingTheKnobsAndPushesNothingBad) {
  for (bool bad_gradient : {false, true}) {
    SCOPED_TRACE(bad_gradient ? "inf gradient" : "NaN loss");
    FakePsClient ps(spec_->InitAll(1), spec_->blocks().size(), 0.0f);
    options_.optimizer.type = OptimizerType::kMomentum;
    options_.optimizer.learning_rate = 0.5;
    options_.optimizer.momentum = 0.9;
    options_.num_workers = 4;
    options_.worker_index = 2;
    DivergingBackend backend(spec_->num_params(), 3, bad_gradient);
    DownpourLoop loop(*spec_, &backend, &ps, &train_, &test_, options_);
    const absl::Status status = loop.Run();
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument));
    const std::string message(status.message());
    EXPECT_NE(message.find("worker 2: training diverged at step 3: " +
                           std::string(bad_gradient ? "gradient holds inf"
                                                    : "loss is nan")),
              std::string::npos)
        << message;
    for (const char* knob :
         {"optimizer.learning_rate too high (now 0.5)",
          "optimizer.momentum too high for 4 worker(s) (now 0.9",
          "stale gradients", "Lower optimizer.learning_rate"}) {
      EXPECT_NE(message.find(knob), std::string::npos)
          << knob << " in " << message;
    }
    // Steps 0-2 were pushed; the step that diverged was not.
    EXPECT_EQ(ps.pushes(), 3);
    EXPECT_FALSE(loop.stats().finished);
    EXPECT_EQ(loop.stats().diverged, message);
  }
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

// OnesBackend that also shows the callback the parameters each step reads.
class ParamsSpyBackend : public OnesBackend {
 public:
  ParamsSpyBackend(int64_t n, std::function<void(const float*)> on_step)
      : OnesBackend(n), on_params_(std::move(on_step)) {}
  absl::StatusOr<float> LossAndGradient(const float* params, const float* x,
                                        const float* y, int batch,
                                        float* grad) override {
    on_params_(params);
    return OnesBackend::LossAndGradient(params, x, y, batch, grad);
  }

 private:
  const std::function<void(const float*)> on_params_;
};

TEST_F(DownpourLoopTest, BspComputesEveryStepOnTheParametersAfterTheLastPush) {
  FakePsClient ps(spec_->InitAll(1), spec_->blocks().size(), 0.1f);
  options_.training.consistency = ConsistencyMode::kBsp;
  options_.training.n_push = 2;
  options_.training.n_fetch = 2;
  options_.training.epochs = 2;
  int steps = 0, stale_steps = 0;
  ParamsSpyBackend backend(spec_->num_params(), [&](const float* params) {
    ++steps;
    if (params[0] != ps.params()[0]) ++stale_steps;
  });
  DownpourLoop loop(*spec_, &backend, &ps, &train_, &test_, options_);
  ASSERT_THAT(loop.Run(), IsOk());
  EXPECT_EQ(steps, 2 * 32);
  EXPECT_EQ(stale_steps, 0);
  EXPECT_EQ(loop.stats().mean_staleness, 0);
  EXPECT_EQ(loop.stats().pushed_steps, 2 * 32);
}

// A worker's DataParts lets go of its training set the moment the
// coordinator moves the parts, while the loop is still in a step on it (it
// takes the new set up at its next step): the loop must keep the set alive.
// Borrowed, it was freed under that step (a worker once read garbage
// targets: "target 3.0914e-41 of example 28 is not a class index").
TEST_F(DownpourLoopTest, ASharedTrainingSetLivesWhileTheLoopTrainsOnIt) {
  FakePsClient ps(spec_->InitAll(1), spec_->blocks().size(), 0.1f);
  options_.training.epochs = 1;
  DataParts parts(&train_, {0}, 2);
  std::weak_ptr<const Dataset> first = parts.train();
  bool alive_after_update = false;
  OnesBackend backend(spec_->num_params(), [&](int64_t step) {
    if (step != 3) return;
    ASSERT_NE(parts.Update({0, 1}, 2), nullptr);  // drops parts' reference
    alive_after_update = !first.expired();
  });
  DownpourLoop loop(*spec_, &backend, &ps, parts.train(), &test_, options_);
  ASSERT_THAT(loop.Run(), IsOk());
  EXPECT_TRUE(alive_after_update)
      << "the training set the loop was on was freed when the parts moved";
}

TEST_F(DownpourLoopTest, WarmstartWaitsForWorkerZerosSteps) {
  FakePsClient ps(spec_->InitAll(1), spec_->blocks().size(), 0.1f);
  options_.worker_index = 1;
  options_.training.warmstart_steps = 10;
  options_.training.epochs = 1;
  options_.warmstart_poll = absl::Milliseconds(5);
  int pushes_at_first_step = -1;
  OnesBackend backend(spec_->num_params(), [&](int64_t step) {
    if (step == 0) pushes_at_first_step = ps.pushes();
  });
  // Worker 0, pushing its warmstart once this worker is polling.
  std::thread worker0([&] {
    ASSERT_TRUE(downpour::testing::WaitUntil([&] { return ps.pulls() >= 2; },
                                             absl::Seconds(30)));
    std::vector<float> grad(spec_->num_params(), 0.0f);
    std::vector<uint64_t> versions(spec_->blocks().size(), 0);
    for (int i = 0; i < 10; ++i)
      ASSERT_THAT(ps.Push(grad.data(), versions, nullptr), IsOk());
  });
  DownpourLoop loop(*spec_, &backend, &ps, &train_, &test_, options_);
  ASSERT_THAT(loop.Run(), IsOk());
  worker0.join();
  EXPECT_GE(pushes_at_first_step, 10);
}

TEST_F(DownpourLoopTest, WarmstartGivesUpWhenWorkerZeroMakesNoProgress) {
  FakePsClient ps(spec_->InitAll(1), spec_->blocks().size(), 0.1f);
  options_.worker_index = 2;
  options_.training.warmstart_steps = 10;
  options_.training.epochs = 1;
  options_.warmstart_poll = absl::Milliseconds(5);
  options_.warmstart_patience = absl::Milliseconds(100);
  OnesBackend backend(spec_->num_params());
  DownpourLoop loop(*spec_, &backend, &ps, &train_, &test_, options_);
  ASSERT_THAT(loop.Run(), IsOk());
  EXPECT_EQ(loop.stats().pushed_steps, 32);
}

}  // namespace
}  // namespace downpour::worker
