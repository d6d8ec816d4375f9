// The trained model as a file: a NumPy .npz (model/npz.h) with one float32
// array per tensor in the model's own names and shapes, `input_mean` and
// `input_std`, and `meta`, a JSON string (proto/model.proto's ModelMeta) naming
// the layers, activation, task, classes, features and the input
// standardization. docs/DATA.md shows the ten lines of NumPy that reproduce
// the predictions.
//
//   ExportedModel m = ...;  // from a cluster or checkpoints (tools/psctl)
//   RETURN_IF_ERROR(WriteModel("model.npz", m));
//   ASSIGN_OR_RETURN(ExportedModel back, ReadModel("model.npz"));
#ifndef DOWNPOUR_MODEL_EXPORT_H_
#define DOWNPOUR_MODEL_EXPORT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/config.h"
#include "common/model_spec.h"
#include "proto/model.pb.h"

namespace downpour::model {

struct ExportedModel {
  proto::ModelMeta meta;
  std::vector<float> params;  // the flat vector of common/model_spec.h
};

// The meta of a model of `config` whose training data was read as `data`
// with the given class and feature names and standardization.
// REQUIRES: mean and std have config.model.layers[0] entries.
proto::ModelMeta MakeMeta(const Config& config,
                          const std::vector<std::string>& class_names,
                          const std::vector<std::string>& feature_names,
                          const std::vector<float>& mean,
                          const std::vector<float>& std);

// The ModelSection that describes the model in `meta` (task, type, layers).
// InvalidArgument naming the key when its task or type is unknown.
absl::StatusOr<ModelSection> ModelOf(const proto::ModelMeta& meta);

// Writes the .npz. InvalidArgument when params do not fit meta's layers.
absl::Status WriteModel(const std::string& path, const ExportedModel& model);

// Reads a file WriteModel wrote: NotFound when missing; InvalidArgument
// naming the file when it is not a Downpour model or its tensors do not fit
// its layers.
absl::StatusOr<ExportedModel> ReadModel(const std::string& path);

}  // namespace downpour::model

#endif  // DOWNPOUR_MODEL_EXPORT_H_
