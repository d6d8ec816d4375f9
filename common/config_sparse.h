// The sections `admission` and `eviction` of the config: which keys of a
// sparse table get a row, and which rows are dropped again.
#ifndef DOWNPOUR_COMMON_CONFIG_SPARSE_H_
#define DOWNPOUR_COMMON_CONFIG_SPARSE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/config_checkpoint.h"
#include "common/config_model.h"

namespace downpour {

// Sparse tables: which keys get a row (McMahan et al., KDD 2013, "Ad Click
// Prediction", probabilistic feature inclusion). A key without a row gets
// one only once admitted; until then its pushes are counted, not applied,
// and its reads return the initial values. Occurrence counts come with the
// pushes (the worker counts a key once per example that holds it).
struct AdmissionSection {
  // Admit a key once it has occurred this many times. 1..1e6; 1 (default):
  // every key at its first push.
  int min_count = 1;
  // Or admit each occurrence with this probability (a seeded draw per key
  // and occurrence, so a run repeats). (0, 1]; 1 (default): always.
  double probability = 1.0;
};

// Eviction of sparse rows (config section `eviction`): by ttl_updates and
// max_rows when a ps takes a checkpoint (every checkpoint.interval_s), under
// its lock; by the memory budget on the push that needs the room.
struct EvictionSection {
  // A row untouched by its table's last ttl_updates key updates (on that
  // shard) is dropped. 0 (default): off. 0..2^40.
  int64_t ttl_updates = 0;
  // Beyond this many rows per table per shard, the least recently updated
  // are dropped. 0 (default): off. 0..2^31-1.
  int64_t max_rows = 0;
  // The ps's memory budget in MiB (server/memory_budget.h): its sparse
  // tables hold at most half of it; near that bound rows are evicted on
  // the push that needs the room (rows updated once first, then the least
  // recently updated), and new keys that do not fit even so are refused
  // with RESOURCE_EXHAUSTED. A quarter bounds the bytes of Lookup and pull
  // replies in flight. 0 (default): derived from the host, half its memory
  // (the smaller of MemTotal and the cgroup's limit) shared by the ps and
  // standbys configured on the ps's host. 0, or 16..2^30.
  int64_t memory_budget_mb = 0;
};

// The smallest eviction.memory_budget_mb but 0 (auto).
inline constexpr int64_t kMinMemoryBudgetMb = 16;

// Internal to the config loader (common/config.cc).
namespace config_internal {
struct ConfigField;
// The keys of the sections `admission` and `eviction`, bound to `admission`
// and `eviction`, in docs/CONFIG.md's order.
std::vector<ConfigField> AdmissionKeys(AdmissionSection* admission);
std::vector<ConfigField> EvictionKeys(EvictionSection* eviction);
// eviction.*: sparse models only, run with the periodic checkpoints, and
// below the hard bound of model.sparse_max_rows. InvalidArgument naming the
// keys.
absl::Status CheckEviction(const EvictionSection& eviction,
                           const ModelSection& model,
                           const CheckpointSection& checkpoint);
}  // namespace config_internal

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_CONFIG_SPARSE_H_
