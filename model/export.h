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
#include "model/npz.h"
#include "proto/model.pb.h"

namespace downpour::model {

// The meta's `format` field.
inline constexpr char kModelFormat[] = "downpour-model";

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

// The ModelSpec of the model in `meta`: ModelOf(meta), then
// ModelSpec::Create; the first error of the two.
absl::StatusOr<ModelSpec> SpecOf(const proto::ModelMeta& meta);

// Writes the .npz. InvalidArgument when params do not fit meta's layers, or
// meta is of a sparse_linear model (WriteSparseModel writes those).
absl::Status WriteModel(const std::string& path, const ExportedModel& model);

// Reads a file WriteModel wrote: NotFound when missing; InvalidArgument
// naming the file when it is not a Downpour model, is a sparse_linear model
// (model/sparse_model.h reads those), or its tensors do not fit its layers.
absl::StatusOr<ExportedModel> ReadModel(const std::string& path);

// ReadModel of the arrays ReadNpz(path) returned, for a caller that read
// them to look at the meta first (MetaFromArrays, IsSparseMeta).
absl::StatusOr<ExportedModel> ModelFromArrays(const std::string& path,
                                              std::vector<NpyArray> arrays);

// True when `meta` is of a sparse model, sparse_linear or fm
// (model/sparse_model.h).
bool IsSparseMeta(const proto::ModelMeta& meta);

// The text of the .npz's 'meta' array: the meta as JSON, every non-ASCII
// character escaped as \uXXXX (a '<U' array is written byte by byte).
std::string MetaText(const proto::ModelMeta& meta);

// The meta among `arrays` (read from `path`): InvalidArgument naming the file
// when there is none, it is not JSON of a ModelMeta, or its format is not
// kModelFormat.
absl::StatusOr<proto::ModelMeta> MetaFromArrays(
    const std::string& path, const std::vector<NpyArray>& arrays);

}  // namespace downpour::model

#endif  // DOWNPOUR_MODEL_EXPORT_H_
