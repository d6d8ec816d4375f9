#include "server/optimizer.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::server {
namespace {

using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;

std::unique_ptr<Optimizer> Make(const OptimizerSection& section) {
  auto optimizer = Optimizer::Create(section);
  EXPECT_TRUE(optimizer.ok()) << optimizer.status();
  return optimizer.ok() ? std::move(optimizer).value() : nullptr;
}

// The context of update t with the configured lr and momentum.
ApplyContext At(uint64_t t) {
  ApplyContext context;
  context.t = t;
  return context;
}

// `type` as the config writes it ("sgd").
OptimizerSection Section(const std::string& type, double lr) {
  OptimizerSection section;
  section.type = ParseOptimizerType(type).value();
  section.learning_rate = lr;
  return section;
}

TEST(OptimizerTest, CreateNamesEachTypeAndItsStateSlots) {
  struct Case {
    std::string type;
    int slots;
  };
  for (const Case& c : std::vector<Case>{
           {"sgd", 0}, {"momentum", 1}, {"adagrad", 1}, {"adam", 2}}) {
    std::unique_ptr<Optimizer> optimizer = Make(Section(c.type, 0.1));
    ASSERT_NE(optimizer, nullptr);
    EXPECT_EQ(optimizer->name(), c.type);
    EXPECT_EQ(optimizer->state_slots(), c.slots) << c.type;
  }
}

// Only a value cast from an integer can be none of the types.
TEST(OptimizerTest, UnknownTypeIsInvalidArgument) {
  OptimizerSection section = Section("sgd", 0.1);
  section.type = static_cast<OptimizerType>(99);
  EXPECT_THAT(Optimizer::Create(section),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("'?' is unknown; allowed: sgd")));
}

TEST(OptimizerTest, ImpossibleHyperParametersAreInvalidArgument) {
  OptimizerSection zero_lr = Section("sgd", 0.0);
  OptimizerSection bad_momentum = Section("momentum", 0.1);
  bad_momentum.momentum = 1.0;
  OptimizerSection bad_beta2 = Section("adam", 0.1);
  bad_beta2.beta2 = -0.1;
  OptimizerSection bad_epsilon = Section("adagrad", 0.1);
  bad_epsilon.epsilon = 0.0;
  OptimizerSection negative_decay = Section("sgd", 0.1);
  negative_decay.weight_decay = -1.0;
  struct Case {
    OptimizerSection section;
    std::string key;
  };
  for (const Case& c :
       std::vector<Case>{{zero_lr, "optimizer.learning_rate"},
                         {bad_momentum, "optimizer.momentum"},
                         {bad_beta2, "optimizer.beta2"},
                         {bad_epsilon, "optimizer.epsilon"},
                         {negative_decay, "optimizer.weight_decay"}}) {
    EXPECT_THAT(Optimizer::Create(c.section),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.key)));
  }
}

// lr 0.5: w = {1, -2}; g = {2, 4} gives {0, -4}; g = {1, -2} gives {-0.5, -3}.
TEST(OptimizerTest, SgdTwoSteps) {
  std::unique_ptr<Optimizer> sgd = Make(Section("sgd", 0.5));
  std::vector<float> w = {1.0f, -2.0f};
  std::vector<float> g1 = {2.0f, 4.0f}, g2 = {1.0f, -2.0f};
  sgd->Apply(w.data(), g1.data(), nullptr, 2, At(1));
  EXPECT_THAT(w, ::testing::ElementsAre(0.0f, -4.0f));
  sgd->Apply(w.data(), g2.data(), nullptr, 2, At(2));
  EXPECT_THAT(w, ::testing::ElementsAre(-0.5f, -3.0f));
}

// lr 0.5, weight decay 0.25: w = 2, g = 1 -> g' = 1.5, w = 1.25.
TEST(OptimizerTest, SgdAddsWeightDecayToTheGradient) {
  OptimizerSection section = Section("sgd", 0.5);
  section.weight_decay = 0.25;
  std::unique_ptr<Optimizer> sgd = Make(section);
  std::vector<float> w = {2.0f};
  std::vector<float> g = {1.0f};
  sgd->Apply(w.data(), g.data(), nullptr, 1, At(1));
  EXPECT_FLOAT_EQ(w[0], 1.25f);
}

// lr 0.1, mu 0.9, g = 1 each step: v = 1, 1.9, 2.71; w = 0.9, 0.71, 0.439.
TEST(OptimizerTest, MomentumThreeSteps) {
  OptimizerSection section = Section("momentum", 0.1);
  section.momentum = 0.9;
  std::unique_ptr<Optimizer> momentum = Make(section);
  std::vector<float> w = {1.0f}, v = {0.0f}, g = {1.0f};
  const float expected_v[] = {1.0f, 1.9f, 2.71f};
  const float expected_w[] = {0.9f, 0.71f, 0.439f};
  for (int step = 0; step < 3; ++step) {
    momentum->Apply(w.data(), g.data(), v.data(), 1, At(step + 1));
    EXPECT_NEAR(v[0], expected_v[step], 1e-6) << "step " << step + 1;
    EXPECT_NEAR(w[0], expected_w[step], 1e-6) << "step " << step + 1;
  }
}

// lr 0.1:
//   g = 3 -> h = 9,  w = 1 - 0.1*3/3 = 0.9
//   g = 4 -> h = 25, w = 0.9 - 0.1*4/5 = 0.82
//   g = 0 -> unchanged.
// A second parameter with g = 0 never moves.
TEST(OptimizerTest, AdagradThreeSteps) {
  OptimizerSection section = Section("adagrad", 0.1);
  section.epsilon = 1e-8;
  std::unique_ptr<Optimizer> adagrad = Make(section);
  std::vector<float> w = {1.0f, 5.0f}, h = {0.0f, 0.0f};
  const float g[3][2] = {{3.0f, 0.0f}, {4.0f, 0.0f}, {0.0f, 0.0f}};
  const float expected_h[] = {9.0f, 25.0f, 25.0f};
  const float expected_w[] = {0.9f, 0.82f, 0.82f};
  for (int step = 0; step < 3; ++step) {
    adagrad->Apply(w.data(), g[step], h.data(), 2, At(step + 1));
    EXPECT_FLOAT_EQ(h[0], expected_h[step]) << "step " << step + 1;
    EXPECT_NEAR(w[0], expected_w[step], 1e-6) << "step " << step + 1;
    EXPECT_EQ(w[1], 5.0f);
    EXPECT_EQ(h[1], 0.0f);
  }
}

// lr 0.1, b1 0.9, b2 0.999, eps 1e-8, w = 1; g = 2, 1, -1:
//   t=1: m = 0.2,  v = 0.004;    m^ = 2, v^ = 4  ->  w = 1 - 0.1*2/2 = 0.9
//   t=2: m = 0.28, v = 0.004996; m^ = 0.28/0.19,
//        v^ = 0.004996/0.001999  ->  w = 0.806782
//   t=3: m = 0.152, v = 0.005991004  ->  w = 0.767112
// State is slot-major, {m_0, m_1, v_0, v_1}; parameter 1 has g = 0, stays put.
TEST(OptimizerTest, AdamThreeStepsWithBiasCorrection) {
  OptimizerSection section = Section("adam", 0.1);
  section.beta1 = 0.9;
  section.beta2 = 0.999;
  section.epsilon = 1e-8;
  std::unique_ptr<Optimizer> adam = Make(section);
  std::vector<float> w = {1.0f, 3.0f}, state(4, 0.0f);
  const float g[3][2] = {{2.0f, 0.0f}, {1.0f, 0.0f}, {-1.0f, 0.0f}};
  const float expected_m[] = {0.2f, 0.28f, 0.152f};
  const float expected_v[] = {0.004f, 0.004996f, 0.005991004f};
  const double expected_w[] = {0.9000000005, 0.8067820372, 0.7671115136};
  for (int step = 0; step < 3; ++step) {
    adam->Apply(w.data(), g[step], state.data(), 2, At(step + 1));
    EXPECT_NEAR(state[0], expected_m[step], 1e-6) << "step " << step + 1;
    EXPECT_NEAR(state[2], expected_v[step], 1e-8) << "step " << step + 1;
    EXPECT_NEAR(w[0], expected_w[step], 2e-6) << "step " << step + 1;
    EXPECT_EQ(state[1], 0.0f);
    EXPECT_EQ(state[3], 0.0f);
    EXPECT_EQ(w[1], 3.0f);
  }
}

// lr 0.5 scaled by 0.5: w = 1, g = 2 -> w = 1 - 0.25 * 2 = 0.5.
// Adam, lr 0.1 scaled by 0.5, t = 1: m^ = g, v^ = g^2 -> w = 1 - 0.05 = 0.95.
TEST(OptimizerTest, ContextLrScaleMultipliesTheLearningRate) {
  ApplyContext half = At(1);
  half.lr_scale = 0.5;
  std::unique_ptr<Optimizer> sgd = Make(Section("sgd", 0.5));
  std::vector<float> w = {1.0f}, g = {2.0f};
  sgd->Apply(w.data(), g.data(), nullptr, 1, half);
  EXPECT_FLOAT_EQ(w[0], 0.5f);

  std::unique_ptr<Optimizer> adam = Make(Section("adam", 0.1));
  std::vector<float> wa = {1.0f}, state(2, 0.0f);
  adam->Apply(wa.data(), g.data(), state.data(), 1, half);
  EXPECT_NEAR(wa[0], 0.95f, 1e-6);
}

// lr 0.1, configured mu 0.9, v = 2, g = 1:
//   as configured: v = 0.9 * 2 + 1 = 2.8, w = 1 - 0.28 = 0.72;
//   context mu 0.5: v = 0.5 * 2 + 1 = 2,  w = 1 - 0.2 = 0.8;
//   context mu 0:   v = 1,                w = 0.9.
TEST(OptimizerTest, ContextMomentumOverridesTheConfiguredOne) {
  OptimizerSection section = Section("momentum", 0.1);
  section.momentum = 0.9;
  std::unique_ptr<Optimizer> momentum = Make(section);
  struct Case {
    double mu;
    float v, w;
  };
  for (const Case& c : std::vector<Case>{
           {-1.0, 2.8f, 0.72f}, {0.5, 2.0f, 0.8f}, {0.0, 1.0f, 0.9f}}) {
    ApplyContext context = At(1);
    context.momentum = c.mu;
    std::vector<float> w = {1.0f}, v = {2.0f}, g = {1.0f};
    momentum->Apply(w.data(), g.data(), v.data(), 1, context);
    EXPECT_NEAR(v[0], c.v, 1e-6) << "mu " << c.mu;
    EXPECT_NEAR(w[0], c.w, 1e-6) << "mu " << c.mu;
  }
}

// step schedule (decay 10, factor 0.5) with staleness_lr, at global step 10:
// the schedule gives 0.5; staleness 4 divides it by 4, staleness 0 and 1 not.
TEST(OptimizerTest, ContextCombinesScheduleAndStalenessLr) {
  OptimizerSection section = Section("sgd", 0.1);
  section.schedule = LrScheduleType::kStep;
  section.decay_updates = 10;
  section.decay_factor = 0.5;
  section.staleness_lr = true;
  std::unique_ptr<Optimizer> sgd = Make(section);
  const ApplyContext stale = sgd->Context(10, 4, 0.0);
  EXPECT_EQ(stale.t, 11u);
  EXPECT_DOUBLE_EQ(stale.lr_scale, 0.125);
  EXPECT_LT(stale.momentum, 0.0) << "sgd has no momentum";
  EXPECT_DOUBLE_EQ(sgd->Context(10, 0, 0.0).lr_scale, 0.5);
  EXPECT_DOUBLE_EQ(sgd->Context(10, 1, 0.0).lr_scale, 0.5);
  EXPECT_DOUBLE_EQ(sgd->Context(9, 4, 0.0).lr_scale, 0.25);

  section.staleness_lr = false;
  EXPECT_DOUBLE_EQ(Make(section)->Context(10, 4, 0.0).lr_scale, 0.5);
}

// 1 - (1 - mu) * (1 + s / 2): mu 0.9: s 0 -> 0.9, s 1 -> 0.85, s 3 -> 0.75,
// s 9 -> 0.45, s 18 -> 0, s 40 -> 0 (clamped); mu 0.5, s 0.5 -> 0.375. With
// s = 2 the implicit momentum counted is 1 - 1/2, so (1 - 0.8) * (1 - 0.5) =
// 0.1 = 1 - mu.
TEST(OptimizerTest, AsyncMomentumSubtractsTheImplicitMomentum) {
  EXPECT_DOUBLE_EQ(Optimizer::AsyncMomentum(0.9, 0.0), 0.9);
  EXPECT_NEAR(Optimizer::AsyncMomentum(0.9, 1.0), 0.85, 1e-12);
  EXPECT_NEAR(Optimizer::AsyncMomentum(0.9, 3.0), 0.75, 1e-12);
  EXPECT_NEAR(Optimizer::AsyncMomentum(0.9, 9.0), 0.45, 1e-12);
  EXPECT_NEAR(Optimizer::AsyncMomentum(0.9, 18.0), 0.0, 1e-12);
  EXPECT_EQ(Optimizer::AsyncMomentum(0.9, 40.0), 0.0);
  EXPECT_DOUBLE_EQ(Optimizer::AsyncMomentum(0.5, 0.5), 0.375);
  const double mu_e = Optimizer::AsyncMomentum(0.9, 2.0);
  EXPECT_NEAR((1 - mu_e) * (1.0 / (1 + 2.0 / 2)), 1 - 0.9, 1e-12);
}

TEST(OptimizerTest, ContextMomentumFollowsAsyncMomentumSetting) {
  OptimizerSection section = Section("momentum", 0.1);
  section.momentum = 0.9;
  EXPECT_NEAR(Make(section)->Context(0, 3, 3.0).momentum, 0.75, 1e-12);
  EXPECT_NEAR(Make(section)->Context(0, 0, 0.0).momentum, 0.9, 1e-12);
  section.async_momentum = AsyncMomentum::kOff;
  EXPECT_LT(Make(section)->Context(0, 3, 3.0).momentum, 0.0);
  EXPECT_LT(Make(Section("adam", 0.1))->Context(0, 3, 3.0).momentum, 0.0);
}

// lambda 0.04: g = {2, -1, 0}, w = {1, 1, 5}, w_served = {0.5, 3, 1}:
//   2 + 0.04 * 4 * 0.5 = 2.08;  -1 + 0.04 * 1 * -2 = -1.08;  0 + 0 = 0.
TEST(OptimizerTest, CompensateDelayAddsLambdaGSquaredTimesTheDrift) {
  const float g[] = {2, -1, 0}, w[] = {1, 1, 5}, w_served[] = {0.5f, 3, 1};
  float out[3];
  Optimizer::CompensateDelay(g, w, w_served, 0.04f, 3, out);
  EXPECT_FLOAT_EQ(out[0], 2.08f);
  EXPECT_FLOAT_EQ(out[1], -1.08f);
  EXPECT_FLOAT_EQ(out[2], 0.0f);
}

TEST(OptimizerTest, ImpossibleAsynchronyKeysAreInvalidArgument) {
  struct Case {
    void (*set)(OptimizerSection*);
    std::string error;
  };
  const std::vector<Case> cases = {
      {[](OptimizerSection* s) {
         s->schedule = static_cast<LrScheduleType>(9);
       },
       "optimizer.schedule must be one of constant, step, cosine; got '?'"},
      {[](OptimizerSection* s) { s->schedule = LrScheduleType::kCosine; },
       "optimizer.schedule cosine needs optimizer.decay_updates > 0, got 0"},
      {[](OptimizerSection* s) { s->warmup_updates = -1; },
       "optimizer.warmup_updates and optimizer.decay_updates must be >= 0"},
      {[](OptimizerSection* s) { s->decay_factor = 0; },
       "optimizer.decay_factor must be in (0, 1], got 0"},
      {[](OptimizerSection* s) { s->min_lr_fraction = 1.5; },
       "optimizer.min_lr_fraction must be in [0, 1], got 1.5"},
      {[](OptimizerSection* s) {
         s->async_momentum = static_cast<AsyncMomentum>(9);
       },
       "optimizer.async_momentum must be one of auto, off; got '?'"},
      {[](OptimizerSection* s) { s->delay_compensation = -0.1; },
       "optimizer.delay_compensation must be >= 0, got -0.1"},
  };
  for (const Case& c : cases) {
    OptimizerSection section = Section("momentum", 0.1);
    c.set(&section);
    EXPECT_THAT(
        Optimizer::Create(section),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.error)));
  }
}

TEST(OptimizerTest, LongVectorsMatchElementwiseUpdates) {
  // Odd length exercises the vector loop's remainder.
  const int64_t n = 1027;
  for (const std::string type : {"sgd", "momentum", "adagrad", "adam"}) {
    std::unique_ptr<Optimizer> optimizer = Make(Section(type, 0.01));
    const int slots = optimizer->state_slots();
    std::vector<float> w(n), g(n), state(slots * n, 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      w[i] = 0.001f * i;
      g[i] = 0.5f - 0.002f * i;
    }
    std::vector<float> w_single = w;
    optimizer->Apply(w.data(), g.data(), state.data(), n, At(1));
    for (int64_t i = 0; i < n; ++i) {
      std::vector<float> one_state(slots);
      optimizer->Apply(&w_single[i], &g[i], one_state.data(), 1, At(1));
      ASSERT_NEAR(w[i], w_single[i], 1e-6) << type << " index " << i;
    }
  }
}

// AfterApply is what lets BlockStore skip its overflow guard, so it must
// never under-estimate: run each rule on random gradients (weight decay on,
// magnitudes over many orders) and check every measured magnitude against the
// bound carried along.
TEST(OptimizerTest, AfterApplyBoundsHoldOverManyRandomUpdates) {
  std::mt19937 random(7);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-6, 5);
  for (const char* type : {"sgd", "momentum", "adagrad", "adam"}) {
    OptimizerSection section = Section(type, 0.05);
    section.weight_decay = 1e-4;
    auto optimizer = Optimizer::Create(section).value();
    const int64_t n = 64;
    std::vector<float> w(n, 0.5f), g(n);
    std::vector<float> state(optimizer->state_slots() * n, 0.0f);
    Magnitudes bound;
    bound.w = 0.5;
    for (int step = 1; step <= 500; ++step) {
      const float scale = std::pow(10.0f, static_cast<float>(exponent(random)));
      double max_g = 0;
      for (float& x : g) {
        x = unit(random) * scale;
        max_g = std::max(max_g, static_cast<double>(std::fabs(x)));
      }
      bound = optimizer->AfterApply(bound, max_g, At(step));
      optimizer->Apply(w.data(), g.data(), state.data(), n, At(step));
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_LE(std::fabs(w[i]), bound.w) << type << " step " << step;
        for (int slot = 0; slot < optimizer->state_slots(); ++slot) {
          ASSERT_LE(std::fabs(state[slot * n + i]), bound.state[slot])
              << type << " step " << step << " slot " << slot;
        }
      }
      if (section.type == OptimizerType::kAdam) {
        ASSERT_LE(optimizer->MeasureRatio(state.data(), n), bound.ratio)
            << "step " << step;
      }
    }
    // The bound stays useful: far below float32's range after 500 updates.
    EXPECT_LT(bound.w, 1e12) << type;
    EXPECT_LT(bound.peak, 1e30) << type;
  }
}

// training.mode easgd: whatever optimizer.* says (the workers' local rule),
// the center adds a pushed elastic difference as it is, at any global step
// and staleness.
TEST(DenseOptimizerTest, EasgdCenterAddsThePushAsItIs) {
  Config config;
  config.training.mode = TrainingMode::kEasgd;
  config.optimizer.type = OptimizerType::kAdam;
  config.optimizer.learning_rate = 0.002;
  config.optimizer.warmup_updates = 10;
  config.optimizer.weight_decay = 0.1;
  config.optimizer.staleness_lr = true;
  config.optimizer.max_gradient_norm = 0.5;
  auto opt = Optimizer::Create(DenseOptimizer(config));
  ASSERT_TRUE(opt.ok()) << opt.status();
  std::vector<float> w = {1.0f, -2.0f, 0.5f};
  const std::vector<float> g = {-0.25f, 0.125f, 3.0f};  // -alpha (x - c)
  std::vector<float> state((*opt)->state_slots() * w.size(), 0.0f);
  const ApplyContext context = (*opt)->Context(/*global_step=*/3,
                                               /*staleness=*/5,
                                               /*mean_staleness=*/2);
  (*opt)->Apply(w.data(), g.data(), state.data(), 3, context);
  EXPECT_EQ(w, (std::vector<float>{1.25f, -2.125f, -2.5f}));
  EXPECT_EQ(DenseOptimizer(config).max_gradient_norm, 0);
}

}  // namespace
}  // namespace downpour::server
