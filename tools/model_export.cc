// Parameters from checkpoints or live shards, plus the data's meta.
#include "tools/model_export.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <queue>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/model_spec.h"
#include "common/sparse_keys.h"
#include "common/status_macros.h"
#include "server/checkpoint.h"
#include "worker/dataset.h"
#include "worker/line_parsers.h"
#include "worker/sparse_data.h"

namespace downpour::tools {
namespace {

// Copies one block's values into the flat vector after checking its length,
// unless (*versions)[id] (-1: none yet) is as new as `version`: a block a
// live move handed on is in the checkpoints of both ps until the old owner
// writes its next one, and the new owner's copy has the higher version.
absl::Status PlaceBlock(const ModelSpec& spec, uint32_t id, const float* values,
                        size_t n, uint64_t version, const std::string& from,
                        std::vector<float>* params,
                        std::vector<int64_t>* versions) {
  if (id >= spec.blocks().size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        from, " holds block ", id,
        ", which this config's model does not have "
        "(",
        spec.blocks().size(), " blocks): is it the config of this job?"));
  }
  const BlockSpec& block = spec.blocks()[id];
  if (static_cast<int64_t>(n) != block.length) {
    return absl::FailedPreconditionError(absl::StrCat(
        from, ": block ", id, " holds ", n, " floats, the config's model ",
        block.length, ": is it the config of this job?"));
  }
  if ((*versions)[id] >= static_cast<int64_t>(version)) return absl::OkStatus();
  std::copy(values, values + n, params->begin() + block.offset);
  (*versions)[id] = static_cast<int64_t>(version);
  return absl::OkStatus();
}

// The updates the placed blocks hold (their versions summed).
uint64_t UpdatesOf(const std::vector<int64_t>& versions) {
  uint64_t sum = 0;
  for (int64_t v : versions) sum += v > 0 ? static_cast<uint64_t>(v) : 0;
  return sum;
}

absl::Status CheckAllSeen(const std::vector<int64_t>& seen,
                          const std::string& where) {
  for (size_t id = 0; id < seen.size(); ++id) {
    if (seen[id] < 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(where, " holds no block ", id, " of the model"));
    }
  }
  return absl::OkStatus();
}

// Shard `shard`'s newest good checkpoint in `dir`, checked to be of `spec`.
absl::StatusOr<server::Checkpoint> ReadShard(const ModelSpec& spec,
                                             const std::string& dir,
                                             int shard) {
  absl::StatusOr<server::Checkpoint> checkpoint =
      server::ReadNewestCheckpoint(dir, shard);
  if (!checkpoint.ok()) {
    return absl::Status(checkpoint.status().code(),
                        absl::StrCat("no checkpoint of ps ", shard, " in ", dir,
                                     ": ", checkpoint.status().message()));
  }
  if (checkpoint->model_fingerprint != 0 &&
      checkpoint->model_fingerprint != spec.Fingerprint()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the checkpoint of ps ", shard, " in ", dir,
        " holds another model than the config's (fingerprints differ): "
        "give the config of the job that wrote it"));
  }
  return checkpoint;
}

// FailedPrecondition when `dir` holds checkpoints of a ps index at or beyond
// `shards` (a ps added with psctl add-ps): their rows or blocks would be left
// out silently.
absl::Status CheckNoExtraShard(const std::string& dir, int shards) {
  std::error_code error;
  if (std::filesystem::exists(server::ShardCheckpointDir(dir, shards), error) ||
      std::filesystem::exists(server::CheckpointPath(dir, shards), error)) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, " holds checkpoints of ps ", shards,
                     ", but the config names ", shards,
                     " ps (cluster.ps): their rows or blocks would be "
                     "missing from the export; give the config of the job "
                     "that wrote them, with the ps added by psctl add-ps in "
                     "cluster.ps"));
  }
  return absl::OkStatus();
}

// One shard's rows whose weight is not 0, keys ascending.
struct NonzeroRows {
  std::vector<uint64_t> keys;
  std::vector<float> weights;  // dim floats a key
};

// The rows of `table` (shard `shard`'s) checked to be ascending and of the
// shard's buckets; the values of the nonzero ones (of every one with
// `keep_all`: an embedding differs from its initializer's values, not from
// 0) go to *out, and *rows counts them all.
absl::Status TakeRows(const SparseTableSpec& spec, int shard, int shards,
                      const std::string& dir,
                      const server::SparseTable::Rows& table, bool keep_all,
                      NonzeroRows* out, int64_t* rows) {
  const std::string where =
      absl::StrCat("the checkpoint of ps ", shard, " in ", dir);
  if (table.dim != spec.dim) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, ": table ", spec.name, " has rows of dim ",
                     table.dim, ", the config's model ", spec.dim,
                     ": give the config of the job that wrote it"));
  }
  const size_t stride =
      static_cast<size_t>(table.dim) * (1 + table.state_slots);
  for (size_t r = 0; r < table.keys.size(); ++r) {
    const uint64_t key = table.keys[r];
    if (r > 0 && key <= table.keys[r - 1]) {
      return absl::FailedPreconditionError(absl::StrCat(
          where, ": table ", spec.name, "'s key ", key, " follows ",
          table.keys[r - 1],
          " (keys must be strictly ascending): the file "
          "is damaged; export from an older generation or a good copy"));
    }
    const int owner = ShardOfKey(key, spec.buckets, shards);
    if (owner != shard) {
      return absl::FailedPreconditionError(absl::StrCat(
          where, " holds key ", key, " of bucket ", BucketOf(key, spec.buckets),
          ", which ps ", owner, " serves with ", shards, " ps (bucket % ",
          shards,
          "): was the job run with "
          "another cluster.ps? Give the config of the job that wrote it"));
    }
    const float* values = table.data.data() + r * stride;
    if (keep_all || values[0] != 0) {
      out->keys.push_back(key);
      out->weights.insert(out->weights.end(), values, values + table.dim);
    }
  }
  *rows += static_cast<int64_t>(table.keys.size());
  return absl::OkStatus();
}

// Merges the shards' rows (each ascending, dim floats a key) into *keys and
// *values, ascending. FailedPrecondition naming both shards when a key
// repeats (impossible once each shard holds only its own buckets; checked
// anyway, since a repeat would make the export ambiguous).
absl::Status MergeRows(std::vector<NonzeroRows> shards, int dim,
                       std::vector<uint64_t>* keys,
                       std::vector<float>* values) {
  size_t total = 0;
  for (const NonzeroRows& s : shards) total += s.keys.size();
  keys->clear();
  values->clear();
  keys->reserve(total);
  values->reserve(total * dim);
  // (key, shard) of each shard's next row, smallest key on top.
  using Head = std::pair<uint64_t, int>;
  std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heads;
  std::vector<size_t> next(shards.size(), 0);
  for (size_t s = 0; s < shards.size(); ++s) {
    if (!shards[s].keys.empty())
      heads.push({shards[s].keys[0], static_cast<int>(s)});
  }
  int last_shard = -1;
  while (!heads.empty()) {
    const auto [key, s] = heads.top();
    heads.pop();
    if (!keys->empty() && keys->back() == key) {
      return absl::FailedPreconditionError(
          absl::StrCat("key ", key, " is in the checkpoints of ps ", last_shard,
                       " and ps ", s));
    }
    keys->push_back(key);
    values->insert(values->end(), shards[s].weights.begin() + next[s] * dim,
                   shards[s].weights.begin() + (next[s] + 1) * dim);
    last_shard = s;
    if (++next[s] < shards[s].keys.size())
      heads.push({shards[s].keys[next[s]], s});
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<float>> ParamsFromCheckpoints(const Config& config,
                                                         const std::string& dir,
                                                         uint64_t* updates) {
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(config.model);
  if (!spec.ok()) return spec.status();
  if (!spec->sparse_tables().empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("model.type ", ModelTypeName(config.model.type),
                     ": read its checkpoints with SparseFromCheckpoints"));
  }
  const int shards = static_cast<int>(config.cluster.ps.size());
  RETURN_IF_ERROR(CheckNoExtraShard(dir, shards));
  std::vector<float> params(spec->num_params());
  std::vector<int64_t> seen(spec->blocks().size(), -1);
  for (int shard = 0; shard < shards; ++shard) {
    ASSIGN_OR_RETURN(server::Checkpoint checkpoint,
                     ReadShard(*spec, dir, shard));
    for (const auto& block : checkpoint.blocks) {
      RETURN_IF_ERROR(PlaceBlock(*spec, block.id, block.values.data(),
                                 block.values.size(), block.version,
                                 absl::StrCat("checkpoint of ps ", shard),
                                 &params, &seen));
    }
  }
  *updates = UpdatesOf(seen);
  absl::Status all =
      CheckAllSeen(seen, absl::StrCat("the checkpoints in ", dir));
  if (!all.ok()) return all;
  return params;
}

absl::Status CheckExportableFromCluster(const Config& config) {
  if (!IsSparseModel(config.model.type)) return absl::OkStatus();
  // The launcher puts checkpoints in <run_dir>/checkpoints unless the config
  // names checkpoint.dir itself.
  const std::string where =
      config.explicit_keys.count("checkpoint.dir") > 0
          ? absl::StrCat("checkpoint.dir: ", config.checkpoint.dir)
          : absl::StrCat(
                "a launcher job's <run_dir>/checkpoints, or "
                "checkpoint.dir: ",
                config.checkpoint.dir);
  return absl::FailedPreconditionError(absl::StrCat(
      "model.type ", ModelTypeName(config.model.type),
      " is exported from checkpoints only: a ps "
      "answers a sparse pull for the keys it is given, and no RPC lists the "
      "keys it holds. Pass --checkpoint_dir with the job's checkpoint folder (",
      where,
      "); each ps writes one every checkpoint.interval_s and a final one when "
      "it stops"));
}

absl::StatusOr<std::vector<float>> ParamsFromCluster(
    const Config& config, const proto::GetPlacementResponse& placement,
    MemberProbe& probe, uint64_t* updates) {
  RETURN_IF_ERROR(CheckExportableFromCluster(config));
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(config.model);
  if (!spec.ok()) return spec.status();
  if (placement.epoch() == 0) {
    return absl::UnavailableError(absl::StrCat(
        "the cluster has no placement yet: ", placement.waiting_for()));
  }
  std::vector<float> params(spec->num_params());
  std::vector<int64_t> seen(spec->blocks().size(), -1);
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
      RETURN_IF_ERROR(PlaceBlock(
          *spec, b.block_id(), values.data(), values.size(), b.version(),
          absl::StrCat("ps ", shard.index()), &params, &seen));
    }
  }
  *updates = UpdatesOf(seen);
  absl::Status all = CheckAllSeen(seen, "the cluster");
  if (!all.ok()) return all;
  return params;
}

absl::StatusOr<model::ExportedModel> BuildExport(const Config& config,
                                                 std::vector<float> params,
                                                 const std::string& origin,
                                                 uint64_t updates) {
  if (config.model.type == ModelType::kTensors) {
    return absl::FailedPreconditionError(
        "model.type tensors: psctl export writes the models serve scores "
        "(layers or sparse tables); a tensors model's values are read with "
        "downpour.Client.pull() and saved with your framework "
        "(docs/PYTHON.md)");
  }
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
  if (data->train.dim != spec->inputs()) {
    // data.source synthetic makes 784 features whatever model.layers says:
    // a file serve would refuse to load.
    return absl::FailedPreconditionError(absl::StrCat(
        "the training data (data.source ", DataSourceName(config.data.source),
        ") have ", data->train.dim, " features but model.layers[0] is ",
        spec->inputs(),
        ": the export's input standardization would not fit the model"));
  }
  model::ExportedModel out;
  out.meta = model::MakeMeta(config, data->train.class_names,
                             data->train.feature_names, data->mean, data->std);
  out.meta.set_origin(origin);
  out.meta.set_updates(updates);
  out.params = std::move(params);
  return out;
}

absl::StatusOr<SparseParams> SparseFromCheckpoints(const Config& config,
                                                   const std::string& dir) {
  ASSIGN_OR_RETURN(ModelSpec spec, ModelSpec::Create(config.model));
  if (spec.sparse_tables().empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("model.type ", ModelTypeName(config.model.type),
                     " has no sparse tables: export it as a dense model"));
  }
  const int shards = static_cast<int>(config.cluster.ps.size());
  RETURN_IF_ERROR(CheckNoExtraShard(dir, shards));
  SparseParams params;
  // Per table, per shard: its rows.
  const size_t tables = spec.sparse_tables().size();
  std::vector<std::vector<NonzeroRows>> taken(tables,
                                              std::vector<NonzeroRows>(shards));
  std::vector<int64_t> held(tables, 0);
  std::vector<float> dense(spec.num_params());
  std::vector<int64_t> seen(spec.blocks().size(), -1);
  for (int shard = 0; shard < shards; ++shard) {
    ASSIGN_OR_RETURN(server::Checkpoint checkpoint,
                     ReadShard(spec, dir, shard));
    for (const auto& block : checkpoint.blocks) {
      RETURN_IF_ERROR(PlaceBlock(spec, block.id, block.values.data(),
                                 block.values.size(), block.version,
                                 absl::StrCat("checkpoint of ps ", shard),
                                 &dense, &seen));
    }
    for (size_t t = 0; t < tables; ++t) {
      const SparseTableSpec& table_spec = spec.sparse_tables()[t];
      const server::SparseTable::Rows* table = nullptr;
      for (const auto& [id, rows] : checkpoint.sparse_tables) {
        if (id == table_spec.id) table = &rows;
      }
      if (table == nullptr) {
        return absl::FailedPreconditionError(absl::StrCat(
            "the checkpoint of ps ", shard, " in ", dir,
            " holds no sparse table ", table_spec.id, " (", table_spec.name,
            "; format ", checkpoint.format,
            checkpoint.format < 4 ? ", which predates sparse tables" : "",
            "): it was not written by a ", ModelTypeName(config.model.type),
            " job of this config; give the checkpoint folder of the job that "
            "trained the model"));
      }
      // Table 0's zero weights equal their initial value and are left out;
      // embeddings (table 1) are kept whole.
      RETURN_IF_ERROR(TakeRows(table_spec, shard, shards, dir, *table,
                               /*keep_all=*/t > 0, &taken[t][shard], &held[t]));
    }
  }
  RETURN_IF_ERROR(CheckAllSeen(seen, absl::StrCat("the checkpoints in ", dir)));
  // Every push updates every dense block once.
  params.updates = static_cast<uint64_t>(seen[spec.blocks()[0].id]);
  if (config.model.type == ModelType::kWideDeep) {
    params.mlp = std::move(dense);
  } else {
    params.bias = dense[spec.blocks()[0].offset];
  }
  params.rows = held[0];
  RETURN_IF_ERROR(
      MergeRows(std::move(taken[0]), 1, &params.keys, &params.weights));
  if (tables > 1) {
    params.embedding_rows = held[1];
    RETURN_IF_ERROR(MergeRows(std::move(taken[1]), spec.sparse_tables()[1].dim,
                              &params.embedding_keys, &params.embeddings));
  }
  return params;
}

namespace {

// The exported model of `params` with the schema of `data` (classes,
// CSV columns and their buckets).
absl::StatusOr<model::SparseModel> SparseExportOf(
    const Config& config, const worker::SparseSplit& data, SparseParams params,
    const std::string& origin) {
  model::SparseModel out;
  out.meta =
      model::MakeSparseMeta(config, data.train.class_names, data.columns);
  out.meta.set_origin(origin);
  out.meta.set_updates(params.updates);
  out.meta.set_sparse_rows(static_cast<uint64_t>(params.rows));
  out.meta.set_embedding_rows(static_cast<uint64_t>(params.embedding_rows));
  out.bias = params.bias;
  out.keys = std::move(params.keys);
  out.weights = std::move(params.weights);
  out.embedding_keys = std::move(params.embedding_keys);
  out.embeddings = std::move(params.embeddings);
  out.mlp = std::move(params.mlp);
  return out;
}

}  // namespace

absl::StatusOr<model::SparseModel> BuildSparseExport(
    const Config& config, SparseParams params, const std::string& origin) {
  if (StreamsData(config.data)) {
    // A streamed job's schema is its config's: the classes its reader
    // fixed, no columns (libsvm, criteo): nothing to read again.
    worker::SparseSplit none;
    none.train.class_names =
        worker::StreamClassNames(config.data, config.model.task);
    none.columns = worker::StreamColumns(config.data);
    return SparseExportOf(config, none, std::move(params), origin);
  }
  absl::StatusOr<worker::SparseSplit> data = worker::LoadSparseData(
      config.data, config.training.seed, config.model.task);
  if (!data.ok()) {
    return absl::Status(
        data.status().code(),
        absl::StrCat("export reads the training data for its classes and "
                     "column buckets: ",
                     data.status().message()));
  }
  return SparseExportOf(config, *data, std::move(params), origin);
}

}  // namespace downpour::tools
