// The learning-rate schedule: a factor on optimizer.learning_rate as a pure
// function of the global step, the number of updates the cluster has applied.
//
//   double lr = section.learning_rate * LrScale(section, block_version);
//
// The global step is a block's version: every dense push bumps every block of
// every shard by one, so all shards agree on it without talking, and it
// survives a restart in the checkpoint.
#ifndef DOWNPOUR_SERVER_LR_SCHEDULE_H_
#define DOWNPOUR_SERVER_LR_SCHEDULE_H_

#include <cstdint>

#include "common/config.h"

namespace downpour::server {

// The factor in (0, 1] for the update applied after `global_step` updates
// (0-based: the first update of a job has global_step 0).
//   warmup (global_step < w = warmup_updates): (global_step + 1) / w, so the
//     first update uses lr / w and update w - 1 the full lr;
//   then, with u = global_step - w and d = decay_updates:
//     constant: 1
//     step:     decay_factor ^ floor(u / d)
//     cosine:   f + (1 - f) * 0.5 * (1 + cos(pi * min(1, u / d))),
//               f = min_lr_fraction (stays at f after d updates).
// REQUIRES: the section is valid (ValidateConfig / Optimizer::Create): d > 0
// for step and cosine. An unknown schedule is treated as constant.
double LrScale(const OptimizerSection& section, uint64_t global_step);

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_LR_SCHEDULE_H_
