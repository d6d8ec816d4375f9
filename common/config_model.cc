// The `model`, `fm` and `wide_deep` sections: the names of their choices,
// their keys, and the rules on the model's shape and size.
#include "common/config_model.h"

#include <algorithm>
#include <cstddef>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/config_field.h"
#include "common/status_macros.h"

namespace downpour {
namespace {

using config_internal::Choice;
using config_internal::ChoiceName;
using config_internal::ParseChoice;

// The spellings of each choice, the first one the name.
constexpr Choice<Task> kTasks[] = {{"multiclass", Task::kMulticlass},
                                   {"binary", Task::kBinary},
                                   {"regression", Task::kRegression}};
constexpr Choice<ModelType> kModelTypes[] = {
    {"mlp", ModelType::kMlp},
    {"linear", ModelType::kLinear},
    {"softmax", ModelType::kSoftmax},
    {"sparse_linear", ModelType::kSparseLinear},
    {"fm", ModelType::kFm},
    {"wide_deep", ModelType::kWideDeep},
    {"tensors", ModelType::kTensors}};
constexpr Choice<Pooling> kPoolings[] = {{"sum", Pooling::kSum},
                                         {"mean", Pooling::kMean}};

constexpr size_t kMaxLayers = 64;                     // entries of model.layers
constexpr int64_t kMaxBlockSize = 1 << 24;            // floats (64 MiB)
constexpr int64_t kMaxDataFloats = int64_t{1} << 32;  // 16 GiB of examples

}  // namespace

namespace config_internal {
namespace {

// The keys that fm and wide_deep share, in section `section`.
std::vector<ConfigField> EmbeddingKeys(const std::string& section,
                                       FmSection* e) {
  return {
      IntField(section + ".dim", &e->dim, Between(1, 256)),
      IntField(section + ".embedding_min_count", &e->embedding_min_count,
               Between(1, 1'000'000)),
      DoubleField(section + ".init_scale", &e->init_scale, {0, false, 1, true}),
      DoubleField(section + ".l1", &e->l1, NonNegativeAtMost(1e6)),
      DoubleField(section + ".l2", &e->l2, NonNegativeAtMost(1e6)),
      DoubleField(section + ".learning_rate", &e->learning_rate,
                  NonNegativeAtMost(1000))};
}

}  // namespace

std::vector<ConfigField> ModelKeys(ModelSection* m) {
  return {
      ChoiceField("model.task", &m->task, ParseTask, TaskName),
      ChoiceField("model.type", &m->type, ParseModelType, ModelTypeName),
      IntListField("model.layers", &m->layers, 2, kMaxLayers,
                   Between(1, kMaxLayerWidth)),
      Int64Field("model.block_size", &m->block_size, Between(1, kMaxBlockSize)),
      Uint64Field("model.init_seed", &m->init_seed),
      IntField("model.sparse_buckets", &m->sparse_buckets, Between(1, 65536)),
      Int64Field("model.sparse_max_rows", &m->sparse_max_rows,
                 Between(1, (int64_t{1} << 31) - 1)),
      StringListField("model.tensors", &m->tensors, 4096)};
}

std::vector<ConfigField> FmKeys(FmSection* fm) {
  std::vector<ConfigField> keys = EmbeddingKeys("fm", fm);
  keys.push_back(BoolField("fm.scale_step", &fm->scale_step));
  return keys;
}

std::vector<ConfigField> WideDeepKeys(WideDeepSection* w) {
  std::vector<ConfigField> keys = EmbeddingKeys("wide_deep", w);
  keys.push_back(
      IntListField("wide_deep.hidden", &w->hidden, 0, 8, Between(1, 4096)));
  keys.push_back(
      ChoiceField("wide_deep.pooling", &w->pooling, ParsePooling, PoolingName));
  keys.push_back(DoubleField("wide_deep.mlp_learning_rate",
                             &w->mlp_learning_rate, NonNegativeAtMost(1000)));
  return keys;
}

namespace {

// A dense model's layers: the input floats they make of the data, the
// outputs the type and task need.
absl::Status CheckLayers(const ModelSection& model, const DataSection& data) {
  const std::vector<int>& layers = model.layers;
  const int64_t examples = int64_t{data.train_examples} + data.test_examples;
  if (!layers.empty() && examples * layers.front() > kMaxDataFloats) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.train_examples + data.test_examples (", examples,
        ") x model.layers[0] (", layers.front(),
        ") = ", examples * layers.front(), " input floats; at most ",
        kMaxDataFloats, " (16 GiB) are allowed: check both for a typo"));
  }
  if (IsLinear(model.type) && layers.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.type ", ModelTypeName(model.type),
                     " needs exactly 2 layers [inputs, outputs], got ",
                     layers.size(), ": [", absl::StrJoin(layers, ", "), "]"));
  }
  if (model.task != Task::kMulticlass && !layers.empty() &&
      layers.back() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.task ", TaskName(model.task),
        " has one output, so the last entry of model.layers must be 1, got [",
        absl::StrJoin(layers, ", "), "]"));
  }
  if (model.task == Task::kMulticlass && !layers.empty() && layers.back() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.task multiclass needs at least 2 classes (the last entry of "
        "model.layers), got [",
        absl::StrJoin(layers, ", "),
        "]: for one output set model.task to binary or regression"));
  }
  return absl::OkStatus();
}

// The layers data.source mnist needs: 784 inputs, 10 classes, multiclass.
absl::Status CheckMnistLayers(const ModelSection& model) {
  const std::vector<int>& layers = model.layers;
  if (model.task != Task::kMulticlass) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.source mnist holds 10 digit classes: model.task must be "
        "multiclass, got ",
        TaskName(model.task)));
  }
  if (layers.front() != kMnistDim) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.layers[0] (", layers.front(), ") must be ",
                     kMnistDim, " for data.source mnist (28x28 pixels)"));
  }
  if (layers.back() != kMnistClasses) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.layers[", layers.size() - 1, "] (", layers.back(), ") must be ",
        kMnistClasses, " for data.source mnist (10 digit classes)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckModel(const ModelSection& model,
                        const OptimizerSection& optimizer,
                        const DataSection& data) {
  if (model.type == ModelType::kTensors) {
    if (optimizer.type == OptimizerType::kFtrl) {
      return absl::InvalidArgumentError(
          "optimizer.type ftrl trains sparse tables; model.type tensors is "
          "dense: use adagrad, adam, momentum or sgd");
    }
    return ParseModelTensors(model.tensors).status();
  }
  if (!model.tensors.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.tensors declares the tensors of model.type tensors; model.type "
        "is ",
        ModelTypeName(model.type), ": remove model.tensors or set the type"));
  }
  if (IsSparseModel(model.type)) {
    if (model.task == Task::kMulticlass) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model.type ", ModelTypeName(model.type),
          " is logistic (model.task: binary) or "
          "linear regression (model.task: regression), not multiclass"));
    }
    // model.layers do not apply: the keys are the features.
    return absl::OkStatus();
  }
  if (optimizer.type == OptimizerType::kFtrl) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer.type ftrl trains sparse tables (model.type sparse_linear, "
        "fm or wide_deep); "
        "model.type ",
        ModelTypeName(model.type),
        " is dense: use adagrad, adam, momentum or sgd"));
  }
  RETURN_IF_ERROR(CheckModelSize(model));
  RETURN_IF_ERROR(CheckLayers(model, data));
  if (data.source != DataSource::kMnist || model.layers.empty()) {
    return absl::OkStatus();
  }
  return CheckMnistLayers(model);
}

}  // namespace config_internal

absl::Status CheckModelSize(const ModelSection& model) {
  if (model.block_size < 1) return absl::OkStatus();
  int64_t params = 0, blocks = 0;
  for (size_t l = 0; l + 1 < model.layers.size(); ++l) {
    const int64_t in = model.layers[l], out = model.layers[l + 1];
    if (in < 1 || out < 1) return absl::OkStatus();
    // Each term is below 2^62 and the sums stop at the limits, so nothing
    // overflows.
    for (const int64_t size : {in * out, out}) {
      params += size;
      blocks += (size - 1) / model.block_size + 1;
      if (params > kMaxModelParams || blocks > kMaxModelBlocks) {
        return absl::InvalidArgumentError(absl::StrCat(
            "model.layers [", absl::StrJoin(model.layers, ", "),
            "] with model.block_size ", model.block_size, " make over ",
            params > kMaxModelParams ? kMaxModelParams : kMaxModelBlocks,
            params > kMaxModelParams ? " parameters" : " blocks",
            ", the most a model may have: ",
            params > kMaxModelParams ? "use narrower or fewer layers"
                                     : "raise model.block_size"));
      }
    }
  }
  return absl::OkStatus();
}

namespace {

// One model.tensors entry, "NAME D1xD2x...".
absl::StatusOr<TensorDecl> ParseTensorDecl(const std::string& entry) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.tensors entry '", entry, "': ", why,
                     "; write NAME D1xD2x..., e.g. 'conv1.weight 16x1x3x3' or "
                     "'fc.bias 10'"));
  };
  std::vector<std::string> parts =
      absl::StrSplit(entry, ' ', absl::SkipWhitespace());
  if (parts.size() != 2) return bad("expected a name and a shape");
  TensorDecl decl;
  decl.name = parts[0];
  for (char c : decl.name) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '.') {
      return bad("a name has letters, digits, '_' and '.' only");
    }
  }
  for (absl::string_view dim : absl::StrSplit(parts[1], 'x')) {
    int64_t d = 0;
    if (!absl::SimpleAtoi(dim, &d) || d < 1 || d > kMaxModelParams) {
      return bad(absl::StrCat("dimension '", dim, "' is not a number >= 1"));
    }
    decl.shape.push_back(d);
  }
  if (decl.shape.size() > 8) return bad("at most 8 dimensions");
  return decl;
}

}  // namespace

absl::StatusOr<std::vector<TensorDecl>> ParseModelTensors(
    const std::vector<std::string>& tensors) {
  if (tensors.empty()) {
    return absl::InvalidArgumentError(
        "model.type tensors needs model.tensors, the list of its tensors "
        "('NAME D1xD2x...'), e.g. ['conv1.weight 16x1x3x3', 'conv1.bias 16']");
  }
  std::vector<TensorDecl> out;
  absl::flat_hash_set<std::string> names;
  int64_t params = 0;
  for (const std::string& entry : tensors) {
    ASSIGN_OR_RETURN(TensorDecl decl, ParseTensorDecl(entry));
    if (!names.insert(decl.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model.tensors names '", decl.name, "' twice: names are unique"));
    }
    int64_t size = 1;
    for (int64_t d : decl.shape) {
      size = d > kMaxModelParams / size ? kMaxModelParams + 1 : size * d;
    }
    params += size;
    if (params > kMaxModelParams) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model.tensors hold over ", kMaxModelParams,
          " parameters, the most a model may have (at '", entry, "')"));
    }
    out.push_back(std::move(decl));
  }
  return out;
}

int WideDeepFields(const DataSection& data) {
  if (data.source == DataSource::kCriteo) return 39;  // I1..I13, C1..C26
  if (data.source != DataSource::kCsv) return 1;
  return std::max<int>(
      1, static_cast<int>(data.categorical.size() + data.text.size() +
                          data.numeric.size() + data.bucketize.size()));
}

const char* TaskName(Task task) { return ChoiceName(kTasks, task); }
absl::StatusOr<Task> ParseTask(absl::string_view name) {
  return ParseChoice("model.task", kTasks, name);
}

const char* ModelTypeName(ModelType type) {
  return ChoiceName(kModelTypes, type);
}
absl::StatusOr<ModelType> ParseModelType(absl::string_view name) {
  return ParseChoice("model.type", kModelTypes, name);
}

const char* PoolingName(Pooling pooling) {
  return ChoiceName(kPoolings, pooling);
}
absl::StatusOr<Pooling> ParsePooling(absl::string_view name) {
  return ParseChoice("wide_deep.pooling", kPoolings, name);
}

std::vector<std::string> TaskMetricNames(Task task) {
  if (task == Task::kBinary) return {"auc", "logloss", "accuracy"};
  if (task == Task::kRegression) return {"rmse", "mae", "r2"};
  return {"accuracy", "logloss"};
}

bool HigherIsBetter(const std::string& metric) {
  return metric == "accuracy" || metric == "auc" || metric == "r2";
}

}  // namespace downpour
