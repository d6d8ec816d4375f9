// Sparse models: bias, keys and weights in a .npz, and their predictions.
#include "model/sparse_model.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/model_spec.h"
#include "common/sparse_keys.h"
#include "common/status_macros.h"
#include "data/criteo_parser.h"
#include "data/file_reader.h"
#include "data/libsvm_reader.h"
#include "model/export.h"
#include "model/fm_math.h"
#include "model/npz.h"
#include "model/wide_deep_math.h"

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

// fm: InvalidArgument unless the embedding rows fit meta.fm_dim, their keys
// are strictly ascending and every value finite; `where` names the model.
absl::Status CheckEmbeddings(const std::string& where,
                             const SparseModel& model) {
  const int k = model.meta.fm_dim();
  if (model.meta.type() != ModelTypeName(ModelType::kFm) &&
      model.meta.type() != ModelTypeName(ModelType::kWideDeep)) {
    if (!model.embedding_keys.empty() || !model.embeddings.empty() || k != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": a ", model.meta.type(), " model holds no embeddings"));
    }
    return absl::OkStatus();
  }
  if (k < 1 || k > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": meta.fm_dim is ", k, ", not in 1..256"));
  }
  if (!(model.meta.fm_init_scale() >= 0) ||
      !std::isfinite(model.meta.fm_init_scale())) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": meta.fm_init_scale is ", model.meta.fm_init_scale()));
  }
  if (model.embeddings.size() != model.embedding_keys.size() * k) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": ", model.embedding_keys.size(), " embedding keys need ",
        model.embedding_keys.size() * k, " embedding values of dim ", k,
        ", got ", model.embeddings.size()));
  }
  for (size_t i = 1; i < model.embedding_keys.size(); ++i) {
    if (model.embedding_keys[i] <= model.embedding_keys[i - 1]) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": embedding_keys must be strictly ascending, but key ",
          model.embedding_keys[i], " (index ", i, ") follows ",
          model.embedding_keys[i - 1]));
    }
  }
  for (size_t i = 0; i < model.embeddings.size(); ++i) {
    if (!std::isfinite(model.embeddings[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": the embedding of key ", model.embedding_keys[i / k],
          " holds ", model.embeddings[i]));
    }
  }
  return absl::OkStatus();
}

// wide_deep: the layout of the MLP of meta.layers (ModelSpec's, as the ps
// holds it), checked as a dense model of meta.task is.
absl::StatusOr<ModelSpec> MlpSpec(const std::string& where,
                                  const proto::ModelMeta& meta) {
  ModelSection mlp;
  mlp.type = ModelType::kMlp;
  mlp.task = ParseTask(meta.task()).value_or(Task::kBinary);
  mlp.layers.assign(meta.layers().begin(), meta.layers().end());
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(mlp);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": a wide_deep model's meta.layers: ", spec.status().message()));
  }
  return spec;
}

// wide_deep: InvalidArgument unless `mlp` holds the parameters of the MLP of
// meta.layers, all finite, its inputs are the data's fields * fm_dim, and the
// pooling is known; other types hold no MLP.
absl::Status CheckMlp(const std::string& where, const SparseModel& model) {
  const proto::ModelMeta& meta = model.meta;
  if (meta.type() != ModelTypeName(ModelType::kWideDeep)) {
    if (!model.mlp.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": a ", meta.type(), " model holds no MLP"));
    }
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const ModelSpec spec, MlpSpec(where, meta));
  if (static_cast<int64_t>(model.mlp.size()) != spec.num_params()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": the MLP of meta.layers needs ",
                     spec.num_params(), " parameters, got ", model.mlp.size()));
  }
  for (float v : model.mlp) {
    if (!std::isfinite(v)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": an MLP parameter is ", v));
    }
  }
  // The fields the data reader numbers: csv, the non-ignored columns;
  // libsvm, one.
  int fields = 1;
  if (meta.data().source() == DataSourceName(DataSource::kCsv)) {
    fields = 0;
    for (const proto::SparseColumnFormat& c : meta.data().columns()) {
      if (c.kind() !=
          data::SparseColumnKindName(data::SparseColumnKind::kIgnore)) {
        ++fields;
      }
    }
  }
  const int k = meta.fm_dim();  // 1..256: CheckEmbeddings
  if (spec.inputs() != fields * k) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": the MLP takes ", spec.inputs(), " inputs, but the data's ",
        fields, " fields of fm_dim ", k, " make ", fields * k));
  }
  if (!ParsePooling(meta.pooling()).ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": meta.pooling is '", meta.pooling(), "', not sum or mean"));
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
  const ModelType type = config.model.type;
  meta.set_type(ModelTypeName(type));
  meta.set_output(config.model.task == Task::kBinary ? "sigmoid" : "identity");
  for (const char* t : {"bias", "keys", "weights"}) meta.add_tensors(t);
  if (type == ModelType::kFm || type == ModelType::kWideDeep) {
    const FmSection& e = EmbeddingOptions(config.model);
    meta.add_tensors("embedding_keys");
    meta.add_tensors("embeddings");
    meta.set_fm_dim(e.dim);
    meta.set_fm_init_scale(e.init_scale);
    meta.set_fm_init_seed(SparseTableSeed(config.model.init_seed, 1));
  }
  if (type == ModelType::kWideDeep) {
    // The MLP the ps holds: ModelSpec's dense tensors (a config that loaded
    // makes one; otherwise the meta names none and the writer refuses it).
    absl::StatusOr<ModelSpec> spec = ModelSpec::Create(config.model);
    if (spec.ok()) {
      for (int width : spec->layers()) meta.add_layers(width);
      for (const TensorSpec& t : spec->tensors()) meta.add_tensors(t.name);
    }
    meta.set_activation("relu");
    meta.set_pooling(PoolingName(config.model.wide_deep.pooling));
  }
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
        "export: WriteSparseModel writes sparse_linear, fm and wide_deep "
        "models, not ",
        model.meta.type(), " (WriteModel writes those)"));
  }
  RETURN_IF_ERROR(CheckRows(absl::StrCat("export to ", path), model, true));
  RETURN_IF_ERROR(CheckEmbeddings(absl::StrCat("export to ", path), model));
  RETURN_IF_ERROR(CheckMlp(absl::StrCat("export to ", path), model));
  const int64_t n = static_cast<int64_t>(model.keys.size());
  NpzWriter npz;
  npz.AddFloat32("bias", {1}, {model.bias});
  npz.AddUint64("keys", {n}, model.keys);
  npz.AddFloat32("weights", {n}, model.weights);
  if (model.meta.fm_dim() > 0) {
    const int64_t m = static_cast<int64_t>(model.embedding_keys.size());
    npz.AddUint64("embedding_keys", {m}, model.embedding_keys);
    npz.AddFloat32("embeddings", {m, model.meta.fm_dim()}, model.embeddings);
  }
  if (model.meta.type() == ModelTypeName(ModelType::kWideDeep)) {
    ASSIGN_OR_RETURN(const ModelSpec spec, MlpSpec(path, model.meta));
    for (const TensorSpec& t : spec.tensors()) {
      npz.AddFloat32(t.name, t.shape,
                     std::vector<float>(model.mlp.begin() + t.offset,
                                        model.mlp.begin() + t.offset + t.size));
    }
  }
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
                     " model, not a sparse one: read it with ReadModel "
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
  const bool wide_deep =
      model.meta.type() == ModelTypeName(ModelType::kWideDeep);
  if (model.meta.type() == ModelTypeName(ModelType::kFm) || wide_deep) {
    NpyArray* ekeys = Find(arrays, "embedding_keys");
    NpyArray* emb = Find(arrays, "embeddings");
    if (ekeys == nullptr || !ekeys->is_uint64 || ekeys->shape.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": an fm model needs 'embedding_keys', a uint64 vector"));
    }
    if (emb == nullptr || emb->is_string || emb->is_uint64 ||
        emb->shape.size() != 2 || emb->shape[1] != model.meta.fm_dim()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": an fm model needs 'embeddings', float32 of shape [m, ",
          model.meta.fm_dim(), "] (meta.fm_dim)"));
    }
    model.embedding_keys = std::move(ekeys->uint64);
    model.embeddings = std::move(emb->values);
  }
  if (wide_deep) {
    ASSIGN_OR_RETURN(const ModelSpec spec, MlpSpec(path, model.meta));
    for (const TensorSpec& t : spec.tensors()) {
      NpyArray* a = Find(arrays, t.name);
      if (a == nullptr || a->is_string || a->is_uint64 || a->shape != t.shape) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": a wide_deep model needs '", t.name,
                         "', float32 of shape [", absl::StrJoin(t.shape, ", "),
                         "] (meta.layers)"));
      }
      model.mlp.insert(model.mlp.end(), a->values.begin(), a->values.end());
    }
  }
  RETURN_IF_ERROR(CheckEmbeddings(path, model));
  RETURN_IF_ERROR(CheckMlp(path, model));
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
  if (f.source() == DataSourceName(DataSource::kCriteo)) {
    ASSIGN_OR_RETURN(const std::string text, data::ReadFileMaybeGzip(path));
    data::SparseDataset rows;
    RETURN_IF_ERROR(data::ParseCriteoRows(text, path, 1, &rows));
    rows.class_names = classes;
    return rows;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("the model was trained on data.source '", f.source(),
                   "'; a sparse model reads libsvm, criteo or csv files"));
}

SparseScorer::SparseScorer(const SparseModel& model)
    : model_(model),
      fm_dim_(model.meta.fm_dim()),
      wide_deep_(model.meta.type() == ModelTypeName(ModelType::kWideDeep)),
      layers_(model.meta.layers().begin(), model.meta.layers().end()) {
  weight_.reserve(model.keys.size());
  for (size_t i = 0; i < model.keys.size(); ++i) {
    weight_.emplace(model.keys[i], model.weights[i]);
  }
  embedding_.reserve(model.embedding_keys.size());
  for (size_t i = 0; i < model.embedding_keys.size(); ++i) {
    embedding_.emplace(model.embedding_keys[i], static_cast<uint32_t>(i));
  }
  // A meta the writer and reader check holds sum or mean; anything else
  // scores as sum, as the text comparison here did.
  const absl::StatusOr<Pooling> pooling = ParsePooling(model.meta.pooling());
  if (pooling.ok()) pooling_ = *pooling;
}

float SparseScorer::Margin(const uint64_t* keys, const float* values, size_t n,
                           int64_t* misses, const uint16_t* fields) const {
  if (fm_dim_ > 0) {
    // Gathered as the worker gathers its pulled rows; a key without an
    // embedding row reads its initializer's values, as the ps answers it.
    std::vector<float> w(n);
    std::vector<const float*> v(n);
    std::vector<float> initial;
    std::vector<double> s(fm_dim_);
    int64_t missed = 0;
    for (size_t i = 0; i < n; ++i) {
      const auto it = weight_.find(keys[i]);
      w[i] = it == weight_.end() ? 0.0f : it->second;
      if (embedding_.contains(keys[i])) continue;
      ++missed;
      if (initial.empty()) initial.resize(n * fm_dim_);
    }
    for (size_t i = 0; i < n; ++i) {
      const auto it = embedding_.find(keys[i]);
      if (it != embedding_.end()) {
        v[i] = model_.embeddings.data() + size_t{it->second} * fm_dim_;
        continue;
      }
      float* init = initial.data() + i * fm_dim_;
      for (int f = 0; f < fm_dim_; ++f) {
        init[f] = SparseInitialValue(model_.meta.fm_init_seed(),
                                     model_.meta.fm_init_scale(), keys[i], f);
      }
      v[i] = init;
    }
    if (misses != nullptr) *misses += missed;
    if (wide_deep_) {
      WideDeepScratch scratch;
      std::vector<float> p(n);
      PoolingWeights(values, fields, n, layers_.front() / fm_dim_,
                     pooling_ == Pooling::kMean, p.data(), &scratch);
      return WideDeepMargin(layers_, model_.mlp.data(), w.data(), v.data(),
                            values, p.data(), fields, n, fm_dim_, &scratch);
    }
    return static_cast<float>(FmMargin(model_.bias, w.data(), v.data(), values,
                                       n, fm_dim_, s.data()));
  }
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
    out[r] =
        scorer.Margin(rows.keys.data() + b, rows.values.data() + b,
                      static_cast<size_t>(rows.offsets[r + 1] - b), nullptr,
                      rows.fields.empty() ? nullptr : rows.fields.data() + b);
  }
  return out;
}

}  // namespace downpour::model
