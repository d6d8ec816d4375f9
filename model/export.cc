// Exported models: tensors and meta in a .npz.
#include "model/export.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json.h"
#include "model/npz.h"

namespace downpour::model {
namespace {

const char* OutputOf(Task task) {
  if (task == Task::kBinary) return "sigmoid";
  if (task == Task::kRegression) return "identity";
  return "softmax";
}

// JSON strings in the .npz must be ASCII (a '<U' array of code points is
// written byte by byte): escape everything else as \uXXXX (UTF-8 decoded).
std::string AsciiJson(const std::string& json) {
  std::string out;
  for (size_t i = 0; i < json.size();) {
    const unsigned char c = json[i];
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    uint32_t cp = 0;
    int extra = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : 1;
    cp = c & (0x3f >> extra);
    for (int k = 1; k <= extra && i + k < json.size(); ++k) {
      cp = (cp << 6) | (static_cast<unsigned char>(json[i + k]) & 0x3f);
    }
    i += extra + 1;
    auto unit = [&](uint32_t u) {
      absl::StrAppend(&out, "\\u", absl::Hex(u, absl::kZeroPad4));
    };
    if (cp >= 0x10000) {
      cp -= 0x10000;
      unit(0xd800 + (cp >> 10));
      unit(0xdc00 + (cp & 0x3ff));
    } else {
      unit(cp);
    }
  }
  return out;
}

}  // namespace

std::string MetaText(const proto::ModelMeta& meta) {
  return AsciiJson(ToJson(meta));
}

proto::ModelMeta MakeMeta(const Config& config,
                          const std::vector<std::string>& class_names,
                          const std::vector<std::string>& feature_names,
                          const std::vector<float>& mean,
                          const std::vector<float>& std) {
  proto::ModelMeta meta;
  meta.set_format(kModelFormat);
  meta.set_version(1);
  meta.set_task(TaskName(config.model.task));
  meta.set_type(ModelTypeName(IsLinear(config.model.type) ? ModelType::kLinear
                                                          : config.model.type));
  for (int w : config.model.layers) meta.add_layers(w);
  meta.set_activation("relu");
  meta.set_output(OutputOf(config.model.task));
  for (size_t l = 0; l + 1 < config.model.layers.size(); ++l) {
    meta.add_tensors(absl::StrCat("fc", l + 1, ".weight"));
    meta.add_tensors(absl::StrCat("fc", l + 1, ".bias"));
  }
  for (const std::string& c : class_names) meta.add_class_names(c);
  for (const std::string& f : feature_names) meta.add_feature_names(f);
  for (float m : mean) meta.add_input_mean(m);
  for (float s : std) meta.add_input_std(s);
  proto::DataFormat* data = meta.mutable_data();
  data->set_source(DataSourceName(config.data.source));
  data->set_header(config.data.header);
  data->set_label_column(config.data.label_column);
  data->set_delimiter(config.data.delimiter);
  data->set_skip_lines(config.data.skip_lines);
  data->set_missing(MissingPolicyName(config.data.missing));
  data->set_zero_based(config.data.zero_based);
  return meta;
}

absl::StatusOr<ModelSection> ModelOf(const proto::ModelMeta& meta) {
  ModelSection model;
  absl::StatusOr<Task> task = ParseTask(meta.task());
  if (!task.ok()) return task.status();
  model.task = *task;
  absl::StatusOr<ModelType> type = ParseModelType(meta.type());
  if (!type.ok()) return type.status();
  model.type = *type;
  model.layers.assign(meta.layers().begin(), meta.layers().end());
  return model;
}

absl::StatusOr<ModelSpec> SpecOf(const proto::ModelMeta& meta) {
  absl::StatusOr<ModelSection> section = ModelOf(meta);
  if (!section.ok()) return section.status();
  return ModelSpec::Create(*section);
}

bool IsSparseMeta(const proto::ModelMeta& meta) {
  return meta.type() == ModelTypeName(ModelType::kSparseLinear) ||
         meta.type() == ModelTypeName(ModelType::kFm) ||
         meta.type() == ModelTypeName(ModelType::kWideDeep);
}

absl::Status WriteModel(const std::string& path, const ExportedModel& model) {
  if (IsSparseMeta(model.meta)) {
    return absl::InvalidArgumentError(
        "export: a sparse_linear model is written by WriteSparseModel "
        "(model/sparse_model.h), not as dense tensors");
  }
  absl::StatusOr<ModelSpec> spec = SpecOf(model.meta);
  if (!spec.ok()) return spec.status();
  if (static_cast<int64_t>(model.params.size()) != spec->num_params()) {
    return absl::InvalidArgumentError(
        absl::StrCat("export: ", model.params.size(),
                     " parameters, but the layers need ", spec->num_params()));
  }
  NpzWriter npz;
  for (const TensorSpec& t : spec->tensors()) {
    npz.AddFloat32(
        t.name, t.shape,
        std::vector<float>(model.params.begin() + t.offset,
                           model.params.begin() + t.offset + t.size));
  }
  const int64_t dim = spec->inputs();
  npz.AddFloat32(
      "input_mean", {dim},
      {model.meta.input_mean().begin(), model.meta.input_mean().end()});
  npz.AddFloat32(
      "input_std", {dim},
      {model.meta.input_std().begin(), model.meta.input_std().end()});
  npz.AddString("meta", MetaText(model.meta));
  return npz.WriteTo(path);
}

absl::StatusOr<proto::ModelMeta> MetaFromArrays(
    const std::string& path, const std::vector<NpyArray>& arrays) {
  const NpyArray* text = nullptr;
  for (const NpyArray& a : arrays) {
    if (a.name == "meta" && a.is_string) text = &a;
  }
  if (text == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " holds no 'meta': not a model written by psctl export"));
  }
  proto::ModelMeta meta;
  absl::Status parsed = FromJson(text->text, path + " (meta)", &meta);
  if (!parsed.ok()) return parsed;
  if (meta.format() != kModelFormat) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": meta.format is '", meta.format(), "', not ", kModelFormat));
  }
  return meta;
}

absl::StatusOr<ExportedModel> ReadModel(const std::string& path) {
  absl::StatusOr<std::vector<NpyArray>> arrays = ReadNpz(path);
  if (!arrays.ok()) return arrays.status();
  return ModelFromArrays(path, *std::move(arrays));
}

absl::StatusOr<ExportedModel> ModelFromArrays(const std::string& path,
                                              std::vector<NpyArray> arrays) {
  ExportedModel model;
  absl::StatusOr<proto::ModelMeta> meta = MetaFromArrays(path, arrays);
  if (!meta.ok()) return meta.status();
  model.meta = *std::move(meta);
  if (IsSparseMeta(model.meta)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        " holds a sparse_linear model (arrays bias, keys, weights): "
        "read it with ReadSparseModel (model/sparse_model.h)"));
  }
  absl::StatusOr<ModelSpec> spec = SpecOf(model.meta);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", spec.status().message()));
  }
  model.params.assign(spec->num_params(), 0.0f);
  for (const TensorSpec& t : spec->tensors()) {
    const NpyArray* found = nullptr;
    for (const NpyArray& a : arrays) {
      if (a.name == t.name && !a.is_string && !a.is_uint64) found = &a;
    }
    if (found == nullptr || found->shape != t.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": tensor ", t.name,
          found == nullptr ? " is missing" : " has another shape",
          " (the meta's layers need [", absl::StrJoin(t.shape, ", "), "])"));
    }
    std::copy(found->values.begin(), found->values.end(),
              model.params.begin() + t.offset);
  }
  if (model.meta.input_mean_size() != spec->inputs() ||
      model.meta.input_std_size() != spec->inputs()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": meta.input_mean and input_std need ",
                     spec->inputs(), " entries"));
  }
  return model;
}

}  // namespace downpour::model
