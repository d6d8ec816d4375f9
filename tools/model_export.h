// The trained model out of a cluster: its parameters from the live ps shards
// or from their checkpoint folder, and what a reader needs besides them (the
// classes, features and input standardization of the training data), as a
// model/export.h ExportedModel, or for a sparse_linear model as a
// model/sparse_model.h SparseModel (from checkpoints only). `psctl export` is
// a thin command over this.
//
//   ASSIGN_OR_RETURN(std::vector<float> params,
//                    ParamsFromCheckpoints(config, "run/checkpoints",
//                    &origin));
//   ASSIGN_OR_RETURN(ExportedModel m, BuildExport(config, params, origin));
//   ASSIGN_OR_RETURN(SparseParams rows, SparseFromCheckpoints(config, dir));
//   ASSIGN_OR_RETURN(SparseModel s, BuildSparseExport(config, rows, origin));
#ifndef DOWNPOUR_TOOLS_MODEL_EXPORT_H_
#define DOWNPOUR_TOOLS_MODEL_EXPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/config.h"
#include "model/export.h"
#include "model/sparse_model.h"
#include "proto/coordinator.pb.h"
#include "tools/member_probe.h"

namespace downpour::tools {

// The flat parameter vector from each shard's newest good checkpoint in
// `dir` (one per cluster.ps index). NotFound naming the shard when one has no
// checkpoint; FailedPrecondition when a checkpoint is of another model or a
// block is missing, or the model is sparse_linear (SparseFromCheckpoints).
// *updates gets the sum of the block versions.
absl::StatusOr<std::vector<float>> ParamsFromCheckpoints(const Config& config,
                                                         const std::string& dir,
                                                         uint64_t* updates);

// OK when `config`'s model can be exported from a live cluster.
// FailedPrecondition for a sparse_linear model, saying to pass
// --checkpoint_dir: a ps answers a sparse pull for the keys it is given, and
// no RPC lists the keys a ps holds, so the rows cannot be read from the
// cluster.
absl::Status CheckExportableFromCluster(const Config& config);

// The flat parameter vector pulled from the shards of `placement` (as a tool:
// worker id -1, float32). Unavailable naming the shard that did not answer;
// FailedPrecondition when the placement misses a block, or as
// CheckExportableFromCluster.
absl::StatusOr<std::vector<float>> ParamsFromCluster(
    const Config& config, const proto::GetPlacementResponse& placement,
    MemberProbe& probe, uint64_t* updates);

// A sparse model's parameters (sparse_linear, fm) as its checkpoints hold
// them.
struct SparseParams {
  float bias = 0;
  // The rows whose weight is not 0, keys ascending, over all shards.
  std::vector<uint64_t> keys;
  std::vector<float> weights;
  // Rows the shards held, zero weights included.
  int64_t rows = 0;
  // fm: every embedding row, keys ascending, dim floats a key, and their
  // count.
  std::vector<uint64_t> embedding_keys;
  std::vector<float> embeddings;
  int64_t embedding_rows = 0;
  // wide_deep: the dense parameters, the MLP (the bias is then 0).
  std::vector<float> mlp;
  // The first dense block's version: the pushes applied.
  uint64_t updates = 0;
};

// The bias and the nonzero rows of sparse table 0 from each shard's newest
// good checkpoint in `dir` (one per cluster.ps index; checkpoint format 4).
// Each shard's keys are checked to be strictly ascending and of the buckets
// it serves (common/sparse_keys.h: MixKey(key) % sparse_buckets % ps == its
// index), so no key can come from two shards.
//   NotFound naming the shard when one has no checkpoint.
//   FailedPrecondition naming the shard, the folder and the fix when the
//     config's model is not sparse_linear; a checkpoint is of another model
//     (fingerprint); it holds no sparse tables (a format 1-3 file, or a dense
//     model's); its table has another dim; a key is out of order, or of a
//     bucket of another shard (the job ran with another cluster.ps); or the
//     folder holds checkpoints of a ps beyond the config's cluster.ps.
absl::StatusOr<SparseParams> SparseFromCheckpoints(const Config& config,
                                                   const std::string& dir);

// The export of a sparse_linear model: reads the training data as the
// workers do (worker/sparse_data.h's LoadSparseData, deterministic) for the
// class names and, for csv, the columns with the bucket boundaries training
// used. The readers' errors name the data file when it cannot be read here.
absl::StatusOr<model::SparseModel> BuildSparseExport(const Config& config,
                                                     SparseParams params,
                                                     const std::string& origin);

// The export of `params`: reads the training data as the workers do
// (LoadData with the config's data section and training.seed, which is
// deterministic) for the class names, feature names and standardization.
// The readers' errors name the data file when it cannot be read here.
absl::StatusOr<model::ExportedModel> BuildExport(const Config& config,
                                                 std::vector<float> params,
                                                 const std::string& origin,
                                                 uint64_t updates);

}  // namespace downpour::tools

#endif  // DOWNPOUR_TOOLS_MODEL_EXPORT_H_
