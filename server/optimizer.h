// The update rules a ps applies to pushed gradients: SGD, momentum, Adagrad
// (as in Dean et al. 2012) and Adam.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> opt,
//                    Optimizer::Create(config.optimizer));
//   std::vector<float> state(opt->state_slots() * n, 0.0f);
//   opt->Apply(w, g, state.data(), n, /*t=*/1);
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

// Applies one update rule to float vectors. Immutable after Create, hence
// thread-safe: threads may call Apply concurrently on disjoint (w, state).
//
// Every rule first adds weight decay, g' = g + weight_decay * w, then:
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
  // Builds the rule named by `section.type`. InvalidArgument for an unknown
  // type or an impossible hyper-parameter (learning_rate <= 0, momentum/beta
  // outside [0, 1), epsilon <= 0 for adagrad/adam, weight_decay < 0).
  static absl::StatusOr<std::unique_ptr<Optimizer>> Create(
      const OptimizerSection& section);

  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;
  virtual ~Optimizer();

  // Floats of state per parameter: sgd 0, momentum 1, adagrad 1, adam 2.
  virtual int state_slots() const = 0;

  // Applies one update in place to w[0, n). `state` holds state_slots() * n
  // floats, slot-major (slot s of parameter i is state[s * n + i]; Adam: m,
  // then v), zeroed by the owner before the first update. `t` is the 1-based
  // count of updates to this block including this one (Adam's bias
  // correction; t = 0 is treated as 1).
  // REQUIRES: w, g and state do not overlap; g is finite (BlockStore checks).
  virtual void Apply(float* w, const float* g, float* state, int64_t n,
                     uint64_t t) const = 0;

  // The rule's config name: "sgd", "momentum", "adagrad" or "adam".
  virtual std::string name() const = 0;

 protected:
  Optimizer() = default;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_OPTIMIZER_H_
