// The update rules a ps applies to pushed gradients: SGD, momentum, Adagrad
// (as in Dean et al. 2012) and Adam, and the per-update factors that adapt them
// to asynchrony (lr schedule, staleness-aware lr, asynchrony-aware momentum,
// DC-ASGD delay compensation).
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> opt,
//                    Optimizer::Create(config.optimizer));
//   std::vector<float> state(opt->state_slots() * n, 0.0f);
//   ApplyContext context = opt->Context(/*global_step=*/0, /*staleness=*/0,
//                                       /*mean_staleness=*/0);
//   opt->Apply(w, g, state.data(), n, context);
//
// An Optimizer holds only hyper-parameters; the per-parameter state belongs to
// the caller (BlockStore keeps it beside each block), so one Optimizer serves
// every block.
#ifndef DOWNPOUR_SERVER_OPTIMIZER_H_
#define DOWNPOUR_SERVER_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/config.h"

namespace downpour::server {

// The factors of one Apply call, which BlockStore derives per update (see
// Optimizer::Context).
struct ApplyContext {
  // The 1-based count of updates to this block including this one (Adam's bias
  // correction; 0 is treated as 1).
  uint64_t t = 1;
  // Multiplies optimizer.learning_rate (schedule x staleness scaling).
  double lr_scale = 1.0;
  // momentum only: the momentum to apply; < 0 means optimizer.momentum.
  double momentum = -1.0;
};

// Upper bounds on magnitudes around one Apply (all >= 0; +inf = unknown).
struct Magnitudes {
  double w = 0.0;            // max |value|
  double state[2] = {0, 0};  // max |state| per slot
  // adam: max over parameters of |m| / sqrt(v) (0 / 0 counts as 0);
  // +inf when unknown. Unused by the other rules.
  double ratio = 0.0;
  // Apply's largest intermediate (AfterApply only).
  double peak = 0.0;
};

// Applies one update rule to float vectors. Immutable after Create, hence
// thread-safe: threads may call Apply concurrently on disjoint (w, state).
//
// Every rule first adds weight decay, g' = g + weight_decay * w, then, with
// lr = learning_rate * lr_scale and mu = the context's momentum:
//   sgd:      w -= lr * g'
//   momentum: v = mu * v + g';  w -= lr * v                     (state: v)
//   adagrad:  h += g'^2;        w -= lr * g' / (sqrt(h) + eps)  (state: h)
//   adam:     m = b1 * m + (1 - b1) * g';  v = b2 * v + (1 - b2) * g'^2;
//             w -= lr * m^ / (sqrt(v^) + eps)                 (state: m, v)
//             with m^ = m / (1 - b1^t), v^ = v / (1 - b2^t)
// Arithmetic is float32; per-call factors (bias corrections) are computed in
// double. Each Apply is one loop that the compiler vectorises.
class Optimizer {
 public:
  // Weight of the newest staleness in a block's mean staleness (an
  // exponential moving average, updated once per update).
  static constexpr double kStalenessAverageWeight = 0.05;

  // Builds the rule named by `section.type`. InvalidArgument for an unknown
  // type or an impossible hyper-parameter (learning_rate <= 0, momentum/beta
  // outside [0, 1), epsilon <= 0 for adagrad/adam, weight_decay < 0, an
  // unknown schedule or async_momentum, decay_updates 0 for step/cosine,
  // decay_factor outside (0, 1], min_lr_fraction outside [0, 1],
  // delay_compensation < 0).
  static absl::StatusOr<std::unique_ptr<Optimizer>> Create(
      const OptimizerSection& section);

  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;
  virtual ~Optimizer();

  // Floats of state per parameter: sgd 0, momentum 1, adagrad 1, adam 2.
  virtual int state_slots() const = 0;

  // Applies one update in place to w[0, n). `state` holds state_slots() * n
  // floats, slot-major (slot s of parameter i is state[s * n + i]; Adam: m,
  // then v), zeroed by the owner before the first update.
  // REQUIRES: w, g and state do not overlap; g is finite (BlockStore checks).
  virtual void Apply(float* w, const float* g, float* state, int64_t n,
                     const ApplyContext& context) const = 0;

  // Bounds on |w|, each state slot and every intermediate after one Apply
  // with |g| <= max_g, given bounds `before` (double arithmetic,
  // conservative). BlockStore skips its overflow guard while these stay far
  // below FLT_MAX. REQUIRES: the slot second_moment_slot() names is >= 0
  // everywhere (Apply keeps it so).
  virtual Magnitudes AfterApply(const Magnitudes& before, double max_g,
                                const ApplyContext& context) const = 0;

  // The state slot that holds a sum of squares (adagrad 0, adam 1), whose
  // floats must be >= 0 for AfterApply's bound; -1 for none.
  virtual int second_moment_slot() const { return -1; }

  // Magnitudes::ratio of `state` (state_slots() * n floats), measured.
  virtual double MeasureRatio(const float* /*state*/, int64_t /*n*/) const {
    return 0.0;
  }

  // The rule's config name: "sgd", "momentum", "adagrad" or "adam".
  virtual std::string name() const = 0;

  // The configuration this rule was built from.
  const OptimizerSection& section() const { return section_; }

  // The context of the update applied to a block after `global_step` updates
  // (its version before this one) by a push of `staleness`, when the block's
  // mean staleness (including this push) is `mean_staleness`:
  //   t = global_step + 1;
  //   lr_scale = LrScale(section, global_step)
  //              * (staleness_lr ? 1 / max(1, staleness) : 1);
  //   momentum = AsyncMomentum(momentum, mean_staleness) for type momentum
  //              with async_momentum auto, else -1 (as configured).
  ApplyContext Context(uint64_t global_step, uint64_t staleness,
                       double mean_staleness) const;

  // Mitliagkas et al. 2016, "Asynchrony begets momentum": asynchrony adds
  // implicit momentum that grows with staleness. Their queueing model puts it
  // at about 1 - 1 / (1 + s) for mean staleness s; on our clusters that
  // over-corrects (bench/convergence, 3 seeds, momentum 0.9: 4 workers -0.82
  // points against 1 worker, 8 workers -1.58), counting half the staleness
  // measured better (-0.49, -0.74) and still never collapsed where
  // uncorrected momentum did. So the implicit momentum counted is
  // 1 - 1 / (1 + s / 2), and the explicit momentum that keeps the total at
  // mu is max(0, 1 - (1 - mu) * (1 + s / 2)).
  static double AsyncMomentum(double mu, double mean_staleness);

  // DC-ASGD (Zheng et al. 2017): out = g + lambda * g * g * (w - w_served),
  // elementwise over n floats. REQUIRES: `out` overlaps none of the inputs.
  static void CompensateDelay(const float* g, const float* w,
                              const float* w_served, float lambda, int64_t n,
                              float* out);

 protected:
  explicit Optimizer(const OptimizerSection& section) : section_(section) {}

 private:
  const OptimizerSection section_;
};

// The optimizer of a model's dense blocks: config.optimizer, with what the
// model type changes (optimizer.cc says why); under training.mode easgd,
// ElasticCenterRule() (config.optimizer is then the workers' local rule).
OptimizerSection DenseOptimizer(const Config& config);

// training.mode easgd: the center adds each pushed elastic difference as it
// is. A worker pushes -alpha (x - c); plain sgd at learning rate 1 with no
// schedule, warmup, staleness scaling, delay compensation, weight decay or
// clipping applies c -= 1 * (-alpha (x - c)) exactly. Expressed as sgd so
// that the push keeps the ordinary path (sequences, exactly-once, replicas,
// checkpoints, the push guard's bounds).
OptimizerSection ElasticCenterRule();

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_OPTIMIZER_H_
