// Update rules. Each Apply is one tight loop over restrict pointers so that the
// compiler vectorises it (the BUILD target adds -O3 -fno-math-errno for that).
#include "server/optimizer.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/lr_schedule.h"

namespace downpour::server {
namespace {

// Float32 rounding in one Apply: every bound is widened by this relative
// margin (a few ulps; float's is 6e-8).
constexpr double kRounding = 1.0 + 1e-6;

// Bound on |g + wd * w|.
double DecayedGradient(double max_g, double wd, const Magnitudes& m) {
  return (max_g + wd * m.w) * kRounding;
}

double Max(std::initializer_list<double> values) { return std::max(values); }

class Sgd final : public Optimizer {
 public:
  Sgd(const OptimizerSection& s, double lr, float wd)
      : Optimizer(s), lr_(lr), wd_(wd) {}
  int state_slots() const override { return 0; }
  std::string name() const override {
    return OptimizerTypeName(OptimizerType::kSgd);
  }

  void Apply(float* __restrict w, const float* __restrict g, float* /*state*/,
             int64_t n, const ApplyContext& c) const override {
    const float lr = static_cast<float>(lr_ * c.lr_scale), wd = wd_;
    for (int64_t i = 0; i < n; ++i) w[i] -= lr * (g[i] + wd * w[i]);
  }

  Magnitudes AfterApply(const Magnitudes& m, double max_g,
                        const ApplyContext& c) const override {
    const double a = DecayedGradient(max_g, wd_, m), lr = lr_ * c.lr_scale;
    Magnitudes out;
    out.w = (m.w + lr * a) * kRounding;
    out.peak = Max({a, lr * a, out.w});
    return out;
  }

 private:
  const double lr_;
  const float wd_;
};

class Momentum final : public Optimizer {
 public:
  Momentum(const OptimizerSection& s, double lr, float wd, double mu)
      : Optimizer(s), lr_(lr), wd_(wd), mu_(mu) {}
  int state_slots() const override { return 1; }
  std::string name() const override {
    return OptimizerTypeName(OptimizerType::kMomentum);
  }

  void Apply(float* __restrict w, const float* __restrict g,
             float* __restrict v, int64_t n,
             const ApplyContext& c) const override {
    const float lr = static_cast<float>(lr_ * c.lr_scale), wd = wd_;
    const float mu = static_cast<float>(c.momentum >= 0 ? c.momentum : mu_);
    for (int64_t i = 0; i < n; ++i) {
      float vi = mu * v[i] + (g[i] + wd * w[i]);
      v[i] = vi;
      w[i] -= lr * vi;
    }
  }

  Magnitudes AfterApply(const Magnitudes& m, double max_g,
                        const ApplyContext& c) const override {
    const double a = DecayedGradient(max_g, wd_, m), lr = lr_ * c.lr_scale;
    const double mu = c.momentum >= 0 ? c.momentum : mu_;
    Magnitudes out;
    out.state[0] = (mu * m.state[0] + a) * kRounding;
    out.w = (m.w + lr * out.state[0]) * kRounding;
    out.peak = Max({a, out.state[0], lr * out.state[0], out.w});
    return out;
  }

 private:
  const double lr_;
  const float wd_;
  const double mu_;
};

class Adagrad final : public Optimizer {
 public:
  Adagrad(const OptimizerSection& s, double lr, float wd, float eps)
      : Optimizer(s), lr_(lr), wd_(wd), eps_(eps) {}
  int state_slots() const override { return 1; }
  std::string name() const override {
    return OptimizerTypeName(OptimizerType::kAdagrad);
  }

  void Apply(float* __restrict w, const float* __restrict g,
             float* __restrict h, int64_t n,
             const ApplyContext& c) const override {
    const float lr = static_cast<float>(lr_ * c.lr_scale), wd = wd_, eps = eps_;
    for (int64_t i = 0; i < n; ++i) {
      float gi = g[i] + wd * w[i];
      float hi = h[i] + gi * gi;
      h[i] = hi;
      w[i] -= lr * gi / (std::sqrt(hi) + eps);
    }
  }

  // With h >= 0, h' >= g'^2, so |g'| / (sqrt(h') + eps) <= 1.
  Magnitudes AfterApply(const Magnitudes& m, double max_g,
                        const ApplyContext& c) const override {
    const double a = DecayedGradient(max_g, wd_, m), lr = lr_ * c.lr_scale;
    Magnitudes out;
    out.state[0] = (m.state[0] + a * a) * kRounding;
    out.w = (m.w + lr) * kRounding;
    out.peak = Max({a, a * a, out.state[0], lr * a, out.w});
    return out;
  }
  int second_moment_slot() const override { return 0; }

 private:
  const double lr_;
  const float wd_, eps_;
};

class Adam final : public Optimizer {
 public:
  Adam(const OptimizerSection& s, double lr, float wd, double b1, double b2,
       float eps)
      : Optimizer(s), lr_(lr), wd_(wd), b1_(b1), b2_(b2), eps_(eps) {}
  int state_slots() const override { return 2; }
  std::string name() const override {
    return OptimizerTypeName(OptimizerType::kAdam);
  }

  void Apply(float* __restrict w, const float* __restrict g,
             float* __restrict state, int64_t n,
             const ApplyContext& c) const override {
    const double td = static_cast<double>(c.t == 0 ? 1 : c.t);
    // Folding the bias corrections into two scalars keeps the loop to one sqrt.
    const float step =
        static_cast<float>(lr_ * c.lr_scale / (1.0 - std::pow(b1_, td)));
    const float inv_bias2 = static_cast<float>(1.0 / (1.0 - std::pow(b2_, td)));
    const float b1 = static_cast<float>(b1_), b2 = static_cast<float>(b2_);
    const float c1 = static_cast<float>(1.0 - b1_),
                c2 = static_cast<float>(1.0 - b2_);
    const float wd = wd_, eps = eps_;
    float* __restrict m = state;
    float* __restrict v = state + n;
    for (int64_t i = 0; i < n; ++i) {
      float gi = g[i] + wd * w[i];
      float mi = b1 * m[i] + c1 * gi;
      float vi = b2 * v[i] + c2 * gi * gi;
      m[i] = mi;
      v[i] = vi;
      w[i] -= step * mi / (std::sqrt(vi * inv_bias2) + eps);
    }
  }

  // m' and v' are convex combinations of m, g' and v, g'^2, so they stay
  // within the larger of the two. The step is at most step * |m'| /
  // sqrt(v') (inv_bias2 >= 1): with |m| <= R sqrt(v) for every parameter,
  // Cauchy-Schwarz gives |m'| <= R' sqrt(v') with R'^2 = b1^2 R^2 / b2 +
  // (1 - b1)^2 / (1 - b2), which settles near 7 for the usual betas, so the
  // bound on w grows by about 7 step per update, weight decay or not. Without
  // a finite R (b2 = 0, or a state loaded with m != 0 where v = 0), the step
  // is bounded by |m'| / eps.
  Magnitudes AfterApply(const Magnitudes& m, double max_g,
                        const ApplyContext& c) const override {
    const double a = DecayedGradient(max_g, wd_, m);
    const double td = static_cast<double>(c.t == 0 ? 1 : c.t);
    const double step = lr_ * c.lr_scale / (1.0 - std::pow(b1_, td));
    const double inv_bias2 = 1.0 / (1.0 - std::pow(b2_, td));
    // Float rounding of the ratio (float m, v and sqrt): a relative 1e-5.
    Magnitudes out;
    out.state[0] = std::max(m.state[0], a) * kRounding;
    out.state[1] = std::max(m.state[1], a * a) * kRounding;
    out.ratio = std::numeric_limits<double>::infinity();
    if (b2_ > 0 && std::isfinite(m.ratio)) {
      const double c1 = 1.0 - b1_, c2 = 1.0 - b2_;
      out.ratio =
          std::sqrt(b1_ * b1_ * m.ratio * m.ratio / b2_ + c1 * c1 / c2) *
          (1.0 + 1e-5);
    }
    const double max_step =
        std::min(out.ratio, out.state[0] / static_cast<double>(eps_));
    out.w = (m.w + step * max_step) * kRounding;
    out.peak =
        Max({a, a * a, out.state[1] * inv_bias2, step * out.state[0], out.w});
    return out;
  }
  int second_moment_slot() const override { return 1; }

  double MeasureRatio(const float* state, int64_t n) const override {
    const float* m = state;
    const float* v = state + n;
    double ratio = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      if (m[i] == 0.0f) continue;
      if (!(v[i] > 0.0f)) return std::numeric_limits<double>::infinity();
      ratio = std::max(ratio, std::fabs(static_cast<double>(m[i])) /
                                  std::sqrt(static_cast<double>(v[i])));
    }
    return ratio;
  }

 private:
  const double lr_;
  const float wd_;
  const double b1_, b2_;
  const float eps_;
};

absl::Status CheckInUnitInterval(const char* key, double value) {
  if (value >= 0.0 && value < 1.0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("optimizer.", key, " must be in [0, 1), got ", value));
}

absl::Status CheckCommon(const OptimizerSection& s) {
  if (!(s.learning_rate > 0.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer.learning_rate must be > 0, got ", s.learning_rate));
  }
  if (!(s.weight_decay >= 0.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer.weight_decay must be >= 0, got ", s.weight_decay));
  }
  return absl::OkStatus();
}

absl::Status CheckEpsilon(const OptimizerSection& s) {
  if (s.epsilon > 0.0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("optimizer.epsilon must be > 0, got ", s.epsilon));
}

// The keys that adapt every rule to asynchrony (same texts as common/config).
absl::Status CheckAsynchronyKeys(const OptimizerSection& s) {
  // A section built in code may hold a value cast from an integer.
  RETURN_IF_ERROR(ParseLrScheduleType(LrScheduleTypeName(s.schedule)).status());
  if (s.warmup_updates < 0 || s.decay_updates < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer.warmup_updates and optimizer.decay_updates must be >= 0, "
        "got ",
        s.warmup_updates, " and ", s.decay_updates));
  }
  if (s.schedule != LrScheduleType::kConstant && s.decay_updates == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer.schedule ", LrScheduleTypeName(s.schedule),
                     " needs optimizer.decay_updates > 0, got 0"));
  }
  if (!(s.decay_factor > 0.0 && s.decay_factor <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer.decay_factor must be in (0, 1], got ", s.decay_factor));
  }
  if (!(s.min_lr_fraction >= 0.0 && s.min_lr_fraction <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer.min_lr_fraction must be in [0, 1], got ",
                     s.min_lr_fraction));
  }
  RETURN_IF_ERROR(
      ParseAsyncMomentum(AsyncMomentumName(s.async_momentum)).status());
  if (!(s.delay_compensation >= 0.0 && std::isfinite(s.delay_compensation))) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer.delay_compensation must be >= 0, got ",
                     s.delay_compensation));
  }
  return absl::OkStatus();
}

}  // namespace

Optimizer::~Optimizer() = default;

ApplyContext Optimizer::Context(uint64_t global_step, uint64_t staleness,
                                double mean_staleness) const {
  ApplyContext context;
  context.t = global_step + 1;
  context.lr_scale = LrScale(section_, global_step);
  if (section_.staleness_lr && staleness > 1) {
    context.lr_scale /= static_cast<double>(staleness);
  }
  if (section_.type == OptimizerType::kMomentum &&
      section_.async_momentum == AsyncMomentum::kAuto) {
    context.momentum = AsyncMomentum(section_.momentum, mean_staleness);
  }
  return context;
}

double Optimizer::AsyncMomentum(double mu, double mean_staleness) {
  return std::max(
      0.0, 1.0 - (1.0 - mu) * (1.0 + 0.5 * std::max(0.0, mean_staleness)));
}

void Optimizer::CompensateDelay(const float* __restrict g,
                                const float* __restrict w,
                                const float* __restrict w_served, float lambda,
                                int64_t n, float* __restrict out) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = g[i] + lambda * g[i] * g[i] * (w[i] - w_served[i]);
  }
}

absl::StatusOr<std::unique_ptr<Optimizer>> Optimizer::Create(
    const OptimizerSection& s) {
  RETURN_IF_ERROR(CheckCommon(s));
  RETURN_IF_ERROR(CheckAsynchronyKeys(s));
  const double lr = s.learning_rate;
  const float wd = static_cast<float>(s.weight_decay);
  const float eps = static_cast<float>(s.epsilon);
  if (s.type == OptimizerType::kSgd) return std::make_unique<Sgd>(s, lr, wd);
  if (s.type == OptimizerType::kMomentum) {
    RETURN_IF_ERROR(CheckInUnitInterval("momentum", s.momentum));
    return std::make_unique<Momentum>(s, lr, wd, s.momentum);
  }
  // ftrl trains the sparse tables (server/sparse_table.h); a sparse model's
  // dense blocks (its bias) train with adagrad at the same learning rate.
  if (s.type == OptimizerType::kAdagrad || s.type == OptimizerType::kFtrl) {
    RETURN_IF_ERROR(CheckEpsilon(s));
    return std::make_unique<Adagrad>(s, lr, wd, eps);
  }
  if (s.type == OptimizerType::kAdam) {
    RETURN_IF_ERROR(CheckInUnitInterval("beta1", s.beta1));
    RETURN_IF_ERROR(CheckInUnitInterval("beta2", s.beta2));
    RETURN_IF_ERROR(CheckEpsilon(s));
    return std::make_unique<Adam>(s, lr, wd, s.beta1, s.beta2, eps);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("optimizer.type '", OptimizerTypeName(s.type),
                   "' is unknown; allowed: sgd, momentum, adagrad, adam"));
}

// A sparse_linear model's only dense block is its bias, which weight_decay
// leaves alone (an intercept is not regularized, as in scikit-learn; on a rare
// positive class a decayed bias cannot reach the base rate's log-odds: its
// gradient is the batch mean while a key's is the batch sum, so the same decay
// pulls it batch_size times harder). wide_deep's MLP may have a rate of its
// own (wide_deep.mlp_learning_rate).
OptimizerSection DenseOptimizer(const Config& config) {
  if (config.training.mode == TrainingMode::kEasgd) return ElasticCenterRule();
  OptimizerSection o = config.optimizer;
  if (IsSparseModel(config.model.type)) o.weight_decay = 0;
  if (config.model.type == ModelType::kWideDeep &&
      config.model.wide_deep.mlp_learning_rate > 0) {
    o.learning_rate = config.model.wide_deep.mlp_learning_rate;
  }
  return o;
}

OptimizerSection ElasticCenterRule() {
  // A push carries -alpha (x - c): sgd at lr 1 adds alpha (x - c) exactly
  // (1.0f * g is g), and every factor that would bend it is off. optimizer.*
  // is the workers' local rule under easgd, not the center's.
  OptimizerSection o;
  o.type = OptimizerType::kSgd;
  o.learning_rate = 1.0;
  o.weight_decay = 0;
  o.schedule = LrScheduleType::kConstant;
  o.warmup_updates = 0;
  o.staleness_lr = false;
  o.delay_compensation = 0;
  o.max_gradient_norm = 0;
  return o;
}

}  // namespace downpour::server
