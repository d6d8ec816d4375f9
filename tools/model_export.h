// The trained model out of a cluster: its parameters from the live ps shards
// or from their checkpoint folder, and what a reader needs besides them (the
// classes, features and input standardization of the training data), as a
// model/export.h ExportedModel. `psctl export` is a thin command over this.
//
//   ASSIGN_OR_RETURN(std::vector<float> params,
//                    ParamsFromCheckpoints(config, "run/checkpoints", &origin));
//   ASSIGN_OR_RETURN(ExportedModel m, BuildExport(config, params, origin));
#ifndef DOWNPOUR_TOOLS_MODEL_EXPORT_H_
#define DOWNPOUR_TOOLS_MODEL_EXPORT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config.h"
#include "model/export.h"
#include "proto/coordinator.pb.h"
#include "tools/member_probe.h"

namespace downpour::tools {

// The flat parameter vector from each shard's newest good checkpoint in
// `dir` (one per cluster.ps index). NotFound naming the shard when one has no
// checkpoint; FailedPrecondition when a checkpoint is of another model or a
// block is missing. *updates gets the sum of the block versions.
absl::StatusOr<std::vector<float>> ParamsFromCheckpoints(
    const Config& config, const std::string& dir, uint64_t* updates);

// The flat parameter vector pulled from the shards of `placement` (as a tool:
// worker id -1, float32). Unavailable naming the shard that did not answer;
// FailedPrecondition when the placement misses a block.
absl::StatusOr<std::vector<float>> ParamsFromCluster(
    const Config& config, const proto::GetPlacementResponse& placement,
    MemberProbe& probe, uint64_t* updates);

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
