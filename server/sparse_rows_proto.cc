#include "server/sparse_rows_proto.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/config.h"

namespace downpour::server {

// A ReplicaSparseRows message as SparseTable::Rows; InvalidArgument when its
// arrays are not whole values or their lengths disagree.
absl::Status ToRows(const proto::ReplicaSparseRows& in, const char* what,
                    SparseTable::Rows* out) {
  absl::StatusOr<SparseOptimizerType> optimizer =
      ParseSparseOptimizer(in.optimizer());
  if (!optimizer.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": sparse table ", in.table(), ": ",
                     optimizer.status().message()));
  }
  if (in.keys().size() % sizeof(uint64_t) != 0 ||
      in.data().size() % sizeof(float) != 0 ||
      in.versions().size() % sizeof(uint32_t) != 0 ||
      in.evicted_keys().size() % sizeof(uint64_t) != 0 ||
      in.clocks().size() % sizeof(uint64_t) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": sparse table ", in.table(), " carries ", in.keys().size(),
        " key bytes, ", in.data().size(), " data bytes, ", in.versions().size(),
        " version bytes, ", in.clocks().size(), " clock bytes and ",
        in.evicted_keys().size(), " evicted key bytes: not whole values"));
  }
  out->dim = static_cast<int>(in.dim());
  out->state_slots = static_cast<int>(in.state_slots());
  out->optimizer = *optimizer;
  out->keys.resize(in.keys().size() / sizeof(uint64_t));
  out->data.resize(in.data().size() / sizeof(float));
  out->versions.resize(in.versions().size() / sizeof(uint32_t));
  if (!out->keys.empty()) {
    std::memcpy(out->keys.data(), in.keys().data(), in.keys().size());
  }
  if (!out->data.empty()) {
    std::memcpy(out->data.data(), in.data().data(), in.data().size());
  }
  if (!out->versions.empty()) {
    std::memcpy(out->versions.data(), in.versions().data(),
                in.versions().size());
  }
  out->clocks.resize(in.clocks().size() / sizeof(uint64_t));
  if (!out->clocks.empty()) {
    std::memcpy(out->clocks.data(), in.clocks().data(), in.clocks().size());
  }
  out->evicted_keys.resize(in.evicted_keys().size() / sizeof(uint64_t));
  if (!out->evicted_keys.empty()) {
    std::memcpy(out->evicted_keys.data(), in.evicted_keys().data(),
                in.evicted_keys().size());
  }
  out->clock = in.clock();
  out->evicted_versions = in.evicted_versions();
  return absl::OkStatus();
}

void FromRows(uint32_t table, const SparseTable::Rows& rows, size_t begin,
              size_t n, proto::ReplicaSparseRows* out) {
  const size_t stride = static_cast<size_t>(rows.dim) * (1 + rows.state_slots);
  out->set_table(table);
  out->set_optimizer(SparseOptimizerName(rows.optimizer));
  out->set_dim(static_cast<uint32_t>(rows.dim));
  out->set_state_slots(static_cast<uint32_t>(rows.state_slots));
  out->set_clock(rows.clock);
  out->set_evicted_versions(rows.evicted_versions);
  out->set_keys(reinterpret_cast<const char*>(rows.keys.data() + begin),
                n * sizeof(uint64_t));
  out->set_data(
      reinterpret_cast<const char*>(rows.data.data() + begin * stride),
      n * stride * sizeof(float));
  out->set_versions(reinterpret_cast<const char*>(rows.versions.data() + begin),
                    n * sizeof(uint32_t));
  if (!rows.clocks.empty()) {
    out->set_clocks(reinterpret_cast<const char*>(rows.clocks.data() + begin),
                    n * sizeof(uint64_t));
  }
}

namespace {

void ToBytes(const std::vector<float>& floats, std::string* out) {
  out->assign(reinterpret_cast<const char*>(floats.data()),
              floats.size() * sizeof(float));
}

absl::Status ToFloats(const std::string& bytes, const char* what, uint32_t id,
                      const char* part, std::vector<float>* out) {
  if (bytes.size() % sizeof(float) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": block ", id, " ", part, " has ", bytes.size(),
                     " bytes, not whole float32 values"));
  }
  out->resize(bytes.size() / sizeof(float));
  if (!bytes.empty()) std::memcpy(out->data(), bytes.data(), bytes.size());
  for (size_t i = 0; i < out->size(); ++i) {
    if (!std::isfinite((*out)[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": block ", id, " ", part, "[", i, "] is ",
          std::isnan((*out)[i]) ? "NaN" : "Inf",
          ": a ps holds finite values only; the block is refused"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

void FromBlock(const BlockStore::BlockSnapshot& block,
               proto::ReplicaBlock* out) {
  out->set_id(block.id);
  out->set_version(block.version);
  ToBytes(block.values, out->mutable_values());
  ToBytes(block.state, out->mutable_state());
}

absl::Status ToBlock(const proto::ReplicaBlock& in, const char* what,
                     BlockStore::BlockSnapshot* out) {
  out->id = in.id();
  out->version = in.version();
  absl::Status ok =
      ToFloats(in.values(), what, in.id(), "values", &out->values);
  if (ok.ok()) ok = ToFloats(in.state(), what, in.id(), "state", &out->state);
  return ok;
}

}  // namespace downpour::server
