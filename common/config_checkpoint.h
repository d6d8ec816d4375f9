// The `checkpoint` section of the config: where and how often each ps shard
// writes its checkpoints, and how many it keeps.
#ifndef DOWNPOUR_COMMON_CONFIG_CHECKPOINT_H_
#define DOWNPOUR_COMMON_CONFIG_CHECKPOINT_H_

#include <string>
#include <vector>

namespace downpour {

struct CheckpointSection {
  // Folder for ps checkpoints ("" = no checkpoints). Default "run/checkpoints".
  std::string dir = "run/checkpoints";
  // Seconds between periodic checkpoints (0 = only on shutdown). Default 30.
  double interval_s = 30;
  // Checkpoint generations each shard keeps (1..100): a corrupt newest one
  // falls back to the next newest good one. Default 3. With incremental
  // checkpoints: full cuts, each kept or removed with its deltas.
  int keep = 3;
  // Sparse tables: a shard's first checkpoint is a full cut, the next
  // full_every a delta each (the rows changed since the previous checkpoint
  // and the keys evicted; dense blocks whole), then a full cut again
  // (server/checkpoint.h). Default false: every checkpoint a full cut.
  bool incremental = false;
  // Deltas between two full cuts, 1..1000. Default 10.
  int full_every = 10;
};

// Internal to the config loader (common/config.cc).
namespace config_internal {
struct ConfigField;
// The section's keys bound to `checkpoint`, in docs/CONFIG.md's order.
std::vector<ConfigField> CheckpointKeys(CheckpointSection* checkpoint);
}  // namespace config_internal

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_CONFIG_CHECKPOINT_H_
