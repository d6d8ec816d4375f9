// Sparse models: bias, keys and weights in a .npz, and their predictions.
#include "model/sparse_model.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/libsvm_reader.h"
#include "model/export.h"
#include "model/npz.h"

namespace downpour::model {
namespace {

// InvalidArgument unless keys are strictly ascending and each weight finite
// (and, with `nonzero`, not 0); `where` names the model.
absl::Status CheckRows(const std::string& where, const SparseModel& model,
                       bool nonzero) {
  if (model.keys.size() != model.weights.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", model.keys.size(), " keys but ",
                     model.weights.size(), " weights"));
  }
  for (size_t i = 0; i < model.keys.size(); ++i) {
    if (i > 0 && model.keys[i] <= model.keys[i - 1]) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": keys must be strictly ascending, but key ", model.keys[i],
          " (index ", i, ") follows ", model.keys[i - 1]));
    }
    const float w = model.weights[i];
    if (!std::isfinite(w) || (nonzero && w == 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": key ", model.keys[i], " has weight ", w,
                       nonzero ? "; the file holds finite nonzero weights only"
                               : "; weights must be finite"));
    }
  }
  if (!std::isfinite(model.bias)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": the bias is ", model.bias));
  }
  return absl::OkStatus();
}

NpyArray* Find(std::vector<NpyArray>& arrays, const std::string& name) {
  for (NpyArray& a : arrays) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

data::LabelMode LabelsOf(Task task) {
  return task == Task::kRegression ? data::LabelMode::kReal
                                   : data::LabelMode::kClass;
}

absl::StatusOr<std::vector<data::SparseColumn>> ColumnsOf(
    const proto::DataFormat& format) {
  std::vector<data::SparseColumn> columns;
  for (const proto::SparseColumnFormat& c : format.columns()) {
    data::SparseColumn column;
    column.name = c.name();
    absl::StatusOr<data::SparseColumnKind> kind =
        data::ParseSparseColumnKind(c.kind());
    if (!kind.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the model's column ", c.name(), ": ", kind.status().message()));
    }
    column.kind = *kind;
    column.boundaries.assign(c.boundaries().begin(), c.boundaries().end());
    columns.push_back(std::move(column));
  }
  return columns;
}

}  // namespace

float SparseModel::Weight(uint64_t key) const {
  auto it = std::lower_bound(keys.begin(), keys.end(), key);
  if (it == keys.end() || *it != key) return 0.0f;
  return weights[it - keys.begin()];
}

proto::ModelMeta MakeSparseMeta(
    const Config& config, const std::vector<std::string>& class_names,
    const std::vector<data::SparseColumn>& columns) {
  proto::ModelMeta meta;
  meta.set_format(kModelFormat);
  meta.set_version(1);
  meta.set_task(TaskName(config.model.task));
  meta.set_type(ModelTypeName(ModelType::kSparseLinear));
  meta.set_output(config.model.task == Task::kBinary ? "sigmoid" : "identity");
  for (const char* t : {"bias", "keys", "weights"}) meta.add_tensors(t);
  for (const std::string& c : class_names) meta.add_class_names(c);
  meta.set_sparse_buckets(static_cast<uint32_t>(config.model.sparse_buckets));
  proto::DataFormat* data = meta.mutable_data();
  data->set_source(DataSourceName(config.data.source));
  if (config.data.source == DataSource::kCsv) {
    data->set_header(config.data.header);
    data->set_label_column(config.data.label_column);
    data->set_delimiter(config.data.delimiter);
    data->set_skip_lines(config.data.skip_lines);
    for (const data::SparseColumn& c : columns) {
      proto::SparseColumnFormat* column = data->add_columns();
      column->set_name(c.name);
      column->set_kind(data::SparseColumnKindName(c.kind));
      for (double b : c.boundaries) column->add_boundaries(b);
    }
  }
  return meta;
}

absl::Status WriteSparseModel(const std::string& path,
                              const SparseModel& model) {
  if (!IsSparseMeta(model.meta)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "export: WriteSparseModel writes sparse_linear models, not ",
        model.meta.type(), " (WriteModel writes those)"));
  }
  RETURN_IF_ERROR(CheckRows(absl::StrCat("export to ", path), model, true));
  const int64_t n = static_cast<int64_t>(model.keys.size());
  NpzWriter npz;
  npz.AddFloat32("bias", {1}, {model.bias});
  npz.AddUint64("keys", {n}, model.keys);
  npz.AddFloat32("weights", {n}, model.weights);
  npz.AddString("meta", MetaText(model.meta));
  return npz.WriteTo(path);
}

absl::StatusOr<SparseModel> ReadSparseModel(const std::string& path) {
  ASSIGN_OR_RETURN(std::vector<NpyArray> arrays, ReadNpz(path));
  return SparseModelFromArrays(path, std::move(arrays));
}

absl::StatusOr<SparseModel> SparseModelFromArrays(
    const std::string& path, std::vector<NpyArray> arrays) {
  SparseModel model;
  ASSIGN_OR_RETURN(model.meta, MetaFromArrays(path, arrays));
  if (!IsSparseMeta(model.meta)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " holds a ", model.meta.type(),
                     " model, not a sparse_linear one: read it with ReadModel "
                     "(model/export.h)"));
  }
  if (!ParseTask(model.meta.task()).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": meta.task '", model.meta.task(), "' is unknown"));
  }
  NpyArray* bias = Find(arrays, "bias");
  NpyArray* keys = Find(arrays, "keys");
  NpyArray* weights = Find(arrays, "weights");
  if (bias == nullptr || bias->is_string || bias->is_uint64 ||
      bias->values.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": a sparse model needs 'bias', float32 of shape [1]"));
  }
  if (keys == nullptr || !keys->is_uint64 || keys->shape.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": a sparse model needs 'keys', a uint64 ('<u8') vector"));
  }
  if (weights == nullptr || weights->is_string || weights->is_uint64 ||
      weights->shape.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": a sparse model needs 'weights', a float32 vector"));
  }
  model.bias = bias->values[0];
  model.keys = std::move(keys->uint64);
  model.weights = std::move(weights->values);
  RETURN_IF_ERROR(CheckRows(path, model, false));
  return model;
}

absl::StatusOr<data::SparseDataset> ReadSparseExamples(
    const proto::ModelMeta& meta, const std::string& path, bool has_label) {
  ASSIGN_OR_RETURN(Task task, ParseTask(meta.task()));
  const std::vector<std::string> classes(meta.class_names().begin(),
                                         meta.class_names().end());
  const proto::DataFormat& f = meta.data();
  if (f.source() == DataSourceName(DataSource::kLibsvm)) {
    data::LibsvmSparseOptions options;
    options.labels = LabelsOf(task);
    options.classes = classes;
    return data::ReadLibsvmSparse(path, options);
  }
  if (f.source() == DataSourceName(DataSource::kCsv)) {
    DataSection section;  // for DelimiterChar's reading of "\\t"
    section.delimiter = f.delimiter();
    data::SparseCsvOptions options;
    options.csv.header = f.header();
    options.csv.label_column = f.label_column();
    options.csv.delimiter = DelimiterChar(section);
    options.csv.skip_lines = f.skip_lines();
    options.csv.has_label = has_label;
    options.csv.labels = LabelsOf(task);
    options.csv.classes = classes;
    ASSIGN_OR_RETURN(options.columns, ColumnsOf(f));
    return data::ReadCsvSparse(path, options);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("the model was trained on data.source '", f.source(),
                   "'; a sparse_linear model reads libsvm or csv files"));
}

SparseScorer::SparseScorer(const SparseModel& model) : model_(model) {
  weight_.reserve(model.keys.size());
  for (size_t i = 0; i < model.keys.size(); ++i) {
    weight_.emplace(model.keys[i], model.weights[i]);
  }
}

float SparseScorer::Margin(const uint64_t* keys, const float* values,
                           size_t n, int64_t* misses) const {
  double margin = model_.bias;
  int64_t missed = 0;
  for (size_t i = 0; i < n; ++i) {
    const auto it = weight_.find(keys[i]);
    float w = 0.0f;  // added all the same, as the worker adds a 0 row
    if (it == weight_.end()) {
      ++missed;
    } else {
      w = it->second;
    }
    margin += static_cast<double>(w) * values[i];
  }
  if (misses != nullptr) *misses += missed;
  return static_cast<float>(margin);
}

std::vector<float> Margins(const SparseModel& model,
                           const data::SparseDataset& rows) {
  const SparseScorer scorer(model);
  std::vector<float> out(rows.rows());
  for (int64_t r = 0; r < rows.rows(); ++r) {
    const int64_t b = rows.offsets[r];
    out[r] = scorer.Margin(rows.keys.data() + b, rows.values.data() + b,
                           static_cast<size_t>(rows.offsets[r + 1] - b));
  }
  return out;
}

}  // namespace downpour::model
