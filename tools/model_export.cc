// Parameters from checkpoints or live shards, plus the data's meta.
#include "tools/model_export.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/model_spec.h"
#include "common/status_macros.h"
#include "server/checkpoint.h"
#include "worker/dataset.h"

namespace downpour::tools {
namespace {

// Copies one block's values into the flat vector after checking its length.
absl::Status PlaceBlock(const ModelSpec& spec, uint32_t id,
                        const float* values, size_t n, const std::string& from,
                        std::vector<float>* params, std::vector<bool>* seen) {
  if (id >= spec.blocks().size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        from, " holds block ", id, ", which this config's model does not have "
        "(", spec.blocks().size(), " blocks): is it the config of this job?"));
  }
  const BlockSpec& block = spec.blocks()[id];
  if (static_cast<int64_t>(n) != block.length) {
    return absl::FailedPreconditionError(absl::StrCat(
        from, ": block ", id, " holds ", n, " floats, the config's model ",
        block.length, ": is it the config of this job?"));
  }
  std::copy(values, values + n, params->begin() + block.offset);
  (*seen)[id] = true;
  return absl::OkStatus();
}

absl::Status CheckAllSeen(const std::vector<bool>& seen,
                          const std::string& where) {
  for (size_t id = 0; id < seen.size(); ++id) {
    if (!seen[id]) {
      return absl::FailedPreconditionError(
          absl::StrCat(where, " holds no block ", id, " of the model"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<float>> ParamsFromCheckpoints(
    const Config& config, const std::string& dir, uint64_t* updates) {
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(config.model);
  if (!spec.ok()) return spec.status();
  std::vector<float> params(spec->num_params());
  std::vector<bool> seen(spec->blocks().size(), false);
  *updates = 0;
  for (int shard = 0; shard < static_cast<int>(config.cluster.ps.size());
       ++shard) {
    absl::StatusOr<server::Checkpoint> checkpoint =
        server::ReadNewestCheckpoint(dir, shard);
    if (!checkpoint.ok()) {
      return absl::Status(
          checkpoint.status().code(),
          absl::StrCat("no checkpoint of ps ", shard, " in ", dir, ": ",
                       checkpoint.status().message()));
    }
    if (checkpoint->model_fingerprint != 0 &&
        checkpoint->model_fingerprint != spec->Fingerprint()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the checkpoint of ps ", shard, " in ", dir,
          " holds another model than the config's (fingerprints differ): "
          "give the config of the job that wrote it"));
    }
    for (const auto& block : checkpoint->blocks) {
      RETURN_IF_ERROR(PlaceBlock(*spec, block.id, block.values.data(),
                                    block.values.size(),
                                    absl::StrCat("checkpoint of ps ", shard),
                                    &params, &seen));
      *updates += block.version;
    }
  }
  absl::Status all = CheckAllSeen(seen, absl::StrCat("the checkpoints in ", dir));
  if (!all.ok()) return all;
  return params;
}

absl::StatusOr<std::vector<float>> ParamsFromCluster(
    const Config& config, const proto::GetPlacementResponse& placement,
    MemberProbe& probe, uint64_t* updates) {
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(config.model);
  if (!spec.ok()) return spec.status();
  if (placement.epoch() == 0) {
    return absl::UnavailableError(absl::StrCat(
        "the cluster has no placement yet: ", placement.waiting_for()));
  }
  std::vector<float> params(spec->num_params());
  std::vector<bool> seen(spec->blocks().size(), false);
  *updates = 0;
  for (const proto::ShardInfo& shard : placement.shards()) {
    const std::vector<uint32_t> ids(shard.block_ids().begin(),
                                    shard.block_ids().end());
    absl::StatusOr<proto::PullResponse> pulled =
        probe.Pull(shard.address(), placement.epoch(), ids);
    if (!pulled.ok()) return pulled.status();
    for (const proto::BlockData& b : pulled->blocks()) {
      if (b.encoding() != proto::FLOAT32 || b.data().size() % 4 != 0) {
        return absl::InternalError(absl::StrCat(
            "ps ", shard.index(), " answered block ", b.block_id(),
            " in encoding ", b.encoding(), ", not the float32 asked for"));
      }
      std::vector<float> values(b.data().size() / 4);
      std::memcpy(values.data(), b.data().data(), b.data().size());
      RETURN_IF_ERROR(PlaceBlock(*spec, b.block_id(), values.data(),
                                    values.size(),
                                    absl::StrCat("ps ", shard.index()), &params,
                                    &seen));
      *updates += b.version();
    }
  }
  absl::Status all = CheckAllSeen(seen, "the cluster");
  if (!all.ok()) return all;
  return params;
}

absl::StatusOr<model::ExportedModel> BuildExport(const Config& config,
                                                 std::vector<float> params,
                                                 const std::string& origin,
                                                 uint64_t updates) {
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(config.model);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<worker::DataSplit> data =
      worker::LoadData(config.data, config.training.seed, spec->task());
  if (!data.ok()) {
    return absl::Status(
        data.status().code(),
        absl::StrCat("export reads the training data for its classes, "
                     "features and standardization: ",
                     data.status().message()));
  }
  model::ExportedModel out;
  out.meta = model::MakeMeta(config, data->train.class_names,
                             data->train.feature_names, data->mean, data->std);
  out.meta.set_origin(origin);
  out.meta.set_updates(updates);
  out.params = std::move(params);
  return out;
}

}  // namespace downpour::tools
