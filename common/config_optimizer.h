// The `optimizer` section of the config: how each ps shard applies a push
// (server/optimizer.h), its learning-rate schedule and its gradient bounds.
#ifndef DOWNPOUR_COMMON_CONFIG_OPTIMIZER_H_
#define DOWNPOUR_COMMON_CONFIG_OPTIMIZER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace downpour {

// Name and Parse of each choice as config.h describes for every choice.
// optimizer.type. Checkpoints store OptimizerTypeName's text. kFtrl
// (FTRL-Proximal) trains sparse tables only; a sparse model's dense blocks
// (its bias) then train with adagrad.
enum class OptimizerType { kSgd, kMomentum, kAdagrad, kAdam, kFtrl };
const char* OptimizerTypeName(OptimizerType type);
absl::StatusOr<OptimizerType> ParseOptimizerType(absl::string_view name);

// optimizer.schedule (server/lr_schedule.h).
enum class LrScheduleType { kConstant, kStep, kCosine };
const char* LrScheduleTypeName(LrScheduleType schedule);
absl::StatusOr<LrScheduleType> ParseLrScheduleType(absl::string_view name);

// optimizer.async_momentum.
enum class AsyncMomentum { kAuto, kOff };
const char* AsyncMomentumName(AsyncMomentum mode);
absl::StatusOr<AsyncMomentum> ParseAsyncMomentum(absl::string_view name);

struct OptimizerSection {
  // "sgd", "momentum", "adagrad" or "adam". Default kSgd.
  OptimizerType type = OptimizerType::kSgd;
  double learning_rate = 0.05;  // > 0
  double momentum = 0.9;        // momentum: in [0, 1)
  double beta1 = 0.9;           // adam: in [0, 1)
  double beta2 = 0.999;         // adam: in [0, 1)
  double epsilon = 1e-8;        // adagrad, adam: > 0
  double weight_decay = 0.0;    // L2 coefficient added to each gradient, >= 0
  // Learning-rate schedule over the global step (the blocks' version: updates
  // the cluster applied): "constant", "step" or "cosine"
  // (server/lr_schedule.h). Default kConstant.
  LrScheduleType schedule = LrScheduleType::kConstant;
  // The lr ramps linearly from lr / warmup_updates to lr over the first
  // warmup_updates updates, >= 0. Default 0 (no warmup).
  int64_t warmup_updates = 0;
  // step: the lr is multiplied by decay_factor every decay_updates updates;
  // cosine: it falls to min_lr_fraction * lr over decay_updates updates (both
  // counted after warmup). >= 0, and > 0 for step and cosine. Default 0.
  int64_t decay_updates = 0;
  double decay_factor = 0.1;     // step: in (0, 1]
  double min_lr_fraction = 0.0;  // cosine: in [0, 1]
  // Staleness-aware lr (Zhang et al. 2016): a push of staleness tau is applied
  // with lr / max(1, tau). Default false.
  bool staleness_lr = false;
  // momentum only: "auto" lowers the explicit momentum by the momentum that
  // asynchrony adds (Mitliagkas et al. 2016), from each block's mean staleness;
  // "off" applies optimizer.momentum as is. Default kAuto.
  AsyncMomentum async_momentum = AsyncMomentum::kAuto;
  // DC-ASGD lambda (Zheng et al. 2017): g + lambda * g * g * (w_now - w_pulled)
  // is applied instead of g, >= 0. Default 0 (off).
  double delay_compensation = 0.0;
  // A push with any gradient element whose |value| exceeds this is refused
  // with InvalidArgument naming the block and the value; nothing of it is
  // applied. Guards the optimizer state against finite but huge gradients
  // (one 1e38 would turn Adam's state into Inf). >= 0; 0 = no bound (NaN/Inf
  // are refused regardless). Default 1e6.
  double max_gradient_value = 1e6;
  // Each block's gradient is scaled down to this L2 norm when its norm is
  // larger (ps counter "clipped_gradients"). >= 0; 0 = off. Default 0.
  double max_gradient_norm = 0.0;
  // ftrl (FTRL-Proximal, McMahan et al. 2013): learning_rate is alpha.
  double ftrl_beta = 1.0;  // >= 0
  double l1 = 0.0;         // >= 0: weights with |z| <= l1 are exactly 0
  double l2 = 0.0;         // >= 0
};

// Every key of an optimizer section with its value, one "key=value" line
// each in declaration order ("learning_rate=0.001", numbers exact to 17
// digits): what must match for two processes to apply the same update the
// same way (a primary and its backup).
std::string OptimizerSettingsText(const OptimizerSection& optimizer);
// "" when two OptimizerSettingsText agree, else their first difference:
// "optimizer.learning_rate is 0.001 on the primary and 0.2 on this standby"
// (`a_name`, `b_name`: "on the primary", "on this standby").
std::string FirstOptimizerDifference(const std::string& a,
                                     const std::string& a_name,
                                     const std::string& b,
                                     const std::string& b_name);

// Internal to the config loader (common/config.cc).
namespace config_internal {
struct ConfigField;
// The section's keys bound to `optimizer`, in docs/CONFIG.md's order.
std::vector<ConfigField> OptimizerKeys(OptimizerSection* optimizer);
}  // namespace config_internal

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_CONFIG_OPTIMIZER_H_
