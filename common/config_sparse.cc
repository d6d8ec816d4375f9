// The `admission` and `eviction` sections: their keys and the rules that
// tie eviction to the model and the checkpoints.
#include "common/config_sparse.h"

#include "absl/strings/str_cat.h"
#include "common/config_field.h"

namespace downpour::config_internal {

std::vector<ConfigField> AdmissionKeys(AdmissionSection* a) {
  return {IntField("admission.min_count", &a->min_count, Between(1, 1'000'000)),
          DoubleField("admission.probability", &a->probability,
                      {0, true, 1, false})};
}

std::vector<ConfigField> EvictionKeys(EvictionSection* e) {
  return {Int64Field("eviction.ttl_updates", &e->ttl_updates,
                     Between(0, kMaxUpdates)),
          Int64Field("eviction.max_rows", &e->max_rows,
                     Between(0, (int64_t{1} << 31) - 1)),
          Int64Field("eviction.memory_budget_mb", &e->memory_budget_mb,
                     Between(0, int64_t{1} << 30))};
}

absl::Status CheckEviction(const EvictionSection& e, const ModelSection& model,
                           const CheckpointSection& checkpoint) {
  if (e.memory_budget_mb > 0 && e.memory_budget_mb < kMinMemoryBudgetMb) {
    return absl::InvalidArgumentError(absl::StrCat(
        "eviction.memory_budget_mb ", e.memory_budget_mb, " is below ",
        kMinMemoryBudgetMb,
        " MiB, less than a ps needs to run: set 0 (derived from the host's "
        "memory) or at least ",
        kMinMemoryBudgetMb));
  }
  if (e.ttl_updates == 0 && e.max_rows == 0) return absl::OkStatus();
  if (!IsSparseModel(model.type)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "eviction.ttl_updates and eviction.max_rows drop rows of sparse "
        "tables: they apply to model.type sparse_linear, fm and wide_deep "
        "only, not ",
        ModelTypeName(model.type)));
  }
  if (checkpoint.interval_s == 0) {
    return absl::InvalidArgumentError(
        "eviction runs when a ps takes its periodic checkpoint, every "
        "checkpoint.interval_s; with checkpoint.interval_s 0 it would never "
        "run: set checkpoint.interval_s > 0 (checkpoint.dir may stay \"\")");
  }
  if (e.max_rows > model.sparse_max_rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "eviction.max_rows ", e.max_rows, " is above model.sparse_max_rows ",
        model.sparse_max_rows,
        ": pushes are refused at that bound before eviction trims a table; "
        "lower eviction.max_rows or raise model.sparse_max_rows"));
  }
  return absl::OkStatus();
}

}  // namespace downpour::config_internal
