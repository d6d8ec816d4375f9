// Update rules. Each Apply is one tight loop over restrict pointers so that the
// compiler vectorises it (the BUILD target adds -O3 -fno-math-errno for that).
#include "server/optimizer.h"

#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace downpour::server {
namespace {

class Sgd final : public Optimizer {
 public:
  Sgd(float lr, float wd) : lr_(lr), wd_(wd) {}
  int state_slots() const override { return 0; }
  std::string name() const override { return "sgd"; }

  void Apply(float* __restrict w, const float* __restrict g, float* /*state*/,
             int64_t n, uint64_t /*t*/) const override {
    const float lr = lr_, wd = wd_;
    for (int64_t i = 0; i < n; ++i) w[i] -= lr * (g[i] + wd * w[i]);
  }

 private:
  const float lr_, wd_;
};

class Momentum final : public Optimizer {
 public:
  Momentum(float lr, float wd, float mu) : lr_(lr), wd_(wd), mu_(mu) {}
  int state_slots() const override { return 1; }
  std::string name() const override { return "momentum"; }

  void Apply(float* __restrict w, const float* __restrict g,
             float* __restrict v, int64_t n, uint64_t /*t*/) const override {
    const float lr = lr_, wd = wd_, mu = mu_;
    for (int64_t i = 0; i < n; ++i) {
      float vi = mu * v[i] + (g[i] + wd * w[i]);
      v[i] = vi;
      w[i] -= lr * vi;
    }
  }

 private:
  const float lr_, wd_, mu_;
};

class Adagrad final : public Optimizer {
 public:
  Adagrad(float lr, float wd, float eps) : lr_(lr), wd_(wd), eps_(eps) {}
  int state_slots() const override { return 1; }
  std::string name() const override { return "adagrad"; }

  void Apply(float* __restrict w, const float* __restrict g,
             float* __restrict h, int64_t n, uint64_t /*t*/) const override {
    const float lr = lr_, wd = wd_, eps = eps_;
    for (int64_t i = 0; i < n; ++i) {
      float gi = g[i] + wd * w[i];
      float hi = h[i] + gi * gi;
      h[i] = hi;
      w[i] -= lr * gi / (std::sqrt(hi) + eps);
    }
  }

 private:
  const float lr_, wd_, eps_;
};

class Adam final : public Optimizer {
 public:
  Adam(double lr, float wd, double b1, double b2, float eps)
      : lr_(lr), wd_(wd), b1_(b1), b2_(b2), eps_(eps) {}
  int state_slots() const override { return 2; }
  std::string name() const override { return "adam"; }

  void Apply(float* __restrict w, const float* __restrict g,
             float* __restrict state, int64_t n, uint64_t t) const override {
    if (t == 0) t = 1;
    const double td = static_cast<double>(t);
    // Folding the bias corrections into two scalars keeps the loop to one sqrt.
    const float step = static_cast<float>(lr_ / (1.0 - std::pow(b1_, td)));
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

}  // namespace

Optimizer::~Optimizer() = default;

absl::StatusOr<std::unique_ptr<Optimizer>> Optimizer::Create(
    const OptimizerSection& s) {
  RETURN_IF_ERROR(CheckCommon(s));
  const float lr = static_cast<float>(s.learning_rate);
  const float wd = static_cast<float>(s.weight_decay);
  const float eps = static_cast<float>(s.epsilon);
  if (s.type == "sgd") return std::make_unique<Sgd>(lr, wd);
  if (s.type == "momentum") {
    RETURN_IF_ERROR(CheckInUnitInterval("momentum", s.momentum));
    return std::make_unique<Momentum>(lr, wd, static_cast<float>(s.momentum));
  }
  if (s.type == "adagrad") {
    RETURN_IF_ERROR(CheckEpsilon(s));
    return std::make_unique<Adagrad>(lr, wd, eps);
  }
  if (s.type == "adam") {
    RETURN_IF_ERROR(CheckInUnitInterval("beta1", s.beta1));
    RETURN_IF_ERROR(CheckInUnitInterval("beta2", s.beta2));
    RETURN_IF_ERROR(CheckEpsilon(s));
    return std::make_unique<Adam>(s.learning_rate, wd, s.beta1, s.beta2, eps);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("optimizer.type '", s.type,
                   "' is unknown; allowed: sgd, momentum, adagrad, adam"));
}

}  // namespace downpour::server
