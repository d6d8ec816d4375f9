// The `model` section of the config and its subsections `fm` and
// `wide_deep`: what the model computes, its layers and blocks, and the
// embeddings of the sparse models.
#ifndef DOWNPOUR_COMMON_CONFIG_MODEL_H_
#define DOWNPOUR_COMMON_CONFIG_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/config_data.h"
#include "common/config_optimizer.h"
#include "common/mnist.h"

namespace downpour {

// Name and Parse of each choice as config.h describes for every choice.
// What the model's outputs mean, and so its loss and metrics (model.task).
//   kMulticlass: one logit per class, softmax cross-entropy; targets are class
//                indices.
//   kBinary:     one logit, logistic loss; targets are 0 or 1.
//   kRegression: one value, squared error; targets are real values.
// The numbers are stable: the CUDA kernels and exported models use them.
enum class Task { kMulticlass = 0, kBinary = 1, kRegression = 2 };
// "multiclass", "binary" or "regression".
const char* TaskName(Task task);
absl::StatusOr<Task> ParseTask(absl::string_view name);

// model.type. kSoftmax is an alias of kLinear, kept apart so that messages
// say what the file wrote. kSparseLinear: logistic (binary) or linear
// (regression) over hashed feature keys, one weight per key in a sparse
// table plus a dense bias (server/sparse_table.h). kFm: a factorization
// machine (Rendle, ICDM 2010): sparse_linear plus pairwise interactions of
// the keys through k-dimensional embeddings (a second sparse table).
// kTensors: the dense tensors model.tensors declares, trained by workers
// that compute them themselves (Python, docs/PYTHON.md); the C++ worker
// refuses it.
enum class ModelType {
  kMlp,
  kLinear,
  kSoftmax,
  kSparseLinear,
  kFm,
  kWideDeep,
  kTensors
};
const char* ModelTypeName(ModelType type);
absl::StatusOr<ModelType> ParseModelType(absl::string_view name);
// A model over hashed feature keys in sparse tables: sparse_linear, fm.
inline bool IsSparseModel(ModelType type) {
  return type == ModelType::kSparseLinear || type == ModelType::kFm ||
         type == ModelType::kWideDeep;
}
// kLinear or kSoftmax: no hidden layer.
inline bool IsLinear(ModelType type) {
  return type == ModelType::kLinear || type == ModelType::kSoftmax;
}
// wide_deep.pooling: how a field's embeddings become its inputs to the MLP
// (model/wide_deep_math.h). Exported models store PoolingName's text.
enum class Pooling { kSum, kMean };
const char* PoolingName(Pooling pooling);
absl::StatusOr<Pooling> ParsePooling(absl::string_view name);

// model.type fm: the embeddings (config section `fm`).
struct FmSection {
  // k, the floats of each key's embedding. 1..256; default 8.
  int dim = 8;
  // A key gets an embedding row only once it has occurred this many times
  // (its linear weight from the first sight, or as admission.* says).
  // 1..1e6; default 1.
  int embedding_min_count = 1;
  // Embeddings start uniform in [-init_scale, init_scale] (a function of
  // the key and the seed, so a key without a row reads the same values on
  // every ps and in a served snapshot). (0, 1]; default 0.01.
  double init_scale = 0.01;
  // The embeddings' regularization: ftrl's l1 and l2 (optimizer.l1 and l2
  // stay the linear weights'; an l1 that zeroes most weights would zero the
  // embeddings too), or weight decay (l2) for sgd, adagrad and adam.
  // >= 0; default 0.
  double l1 = 0;
  double l2 = 0;
  // The embeddings' learning rate (ftrl's alpha); 0: the optimizer's.
  // Default 0.01 (fm; wide_deep sets its own): at the optimizer's rate the
  // pairwise term of examples with hundreds of keys saturates (docs/SPARSE.md,
  // "Default rates").
  double learning_rate = 0.01;
  // fm only (key fm.scale_step): each example's embedding gradient is divided
  // by the sum of its |x_i| (at least 1), since the pairwise term's gradient
  // in v_i, x_i (s_f - v_i x_i), grows with the example's keys. Default true.
  bool scale_step = true;
};

// model.type wide_deep (config section `wide_deep`): the wide part is
// sparse_linear's weights over the keys; the deep part pools each field's
// embeddings (the same options as fm's) into an MLP. See
// docs/SPARSE.md.
struct WideDeepSection : FmSection {
  // The embeddings' rate defaults to the optimizer's (0), not fm's 0.01: the
  // grid in docs/SPARSE.md ("Default rates") found no pair of rates that
  // trains all four of its data sets.
  WideDeepSection() { learning_rate = 0; }
  // The MLP's hidden layer widths, 0..8 entries of 1..4096; its input is
  // fields * dim floats, its output the one margin added to the wide part's.
  // Default [32, 16].
  std::vector<int> hidden = {32, 16};
  // How a field's embeddings become its dim inputs: "sum" (of value *
  // embedding over the field's keys in the example) or "mean" (that sum
  // divided by the count of those keys). Default kMean.
  Pooling pooling = Pooling::kMean;
  // The MLP's learning rate (its dense blocks' optimizer: optimizer.type,
  // or adagrad when that is ftrl); 0 (default): optimizer.learning_rate.
  // The wide part's FTRL often wants many passes the MLP would overfit in.
  double mlp_learning_rate = 0;
  // Not a key: the fields, set by the config loader from the data section
  // (csv: the data.categorical, text, numeric and bucketize columns, in that
  // order; libsvm: 1, every key in one field).
  int fields = 1;
};

struct ModelSection {
  // What the outputs mean: "multiclass" (softmax cross-entropy over classes),
  // "binary" (one output, logistic loss) or "regression" (one output, squared
  // error). Chooses the loss and the test metrics. Default kMulticlass.
  Task task = Task::kMulticlass;
  // "mlp" (ReLU hidden layers) or "linear" (no hidden layer: logistic,
  // softmax or linear regression by model.task; layers must then have two
  // entries). "softmax" is an alias of "linear". Default kMlp.
  ModelType type = ModelType::kMlp;
  // Layer widths, input first, outputs last (classes for multiclass, 1 for
  // binary and regression). Default [784, 256, 128, 10].
  std::vector<int> layers = {kMnistDim, 256, 128, kMnistClasses};
  // Largest block in floats; tensors are cut into blocks of at most this size.
  // Default 65536 (256 KiB).
  int64_t block_size = 65536;
  // Seed for the initial parameters (the ps initialises the blocks it holds).
  uint64_t init_seed = 1;
  // sparse_linear: hash buckets of the sparse table (common/sparse_keys.h),
  // 1..65536. Default 1024.
  int sparse_buckets = 1024;
  // sparse_linear: the most rows one ps shard's table may hold; a push that
  // would create more is refused (RESOURCE_EXHAUSTED). 1..2^31-1. Default
  // 2^31-1.
  int64_t sparse_max_rows = (int64_t{1} << 31) - 1;
  // model.type tensors: each tensor as "NAME D1xD2x..." (e.g.
  // "conv1.weight 16x1x3x3"), in order; ParseModelTensors reads them.
  std::vector<std::string> tensors;
  FmSection fm;
  WideDeepSection wide_deep;
};

// One entry of model.tensors.
struct TensorDecl {
  std::string name;
  std::vector<int64_t> shape;
};
// model.tensors parsed: InvalidArgument naming the entry unless each is
// "NAME D1xD2x..." with a unique name of [A-Za-z0-9_.]+ and 1-8 dims >= 1,
// and the list is non-empty.
absl::StatusOr<std::vector<TensorDecl>> ParseModelTensors(
    const std::vector<std::string>& tensors);

// The embeddings' options of a model with an embedding table: wide_deep's
// for model.type wide_deep, else fm's.
inline const FmSection& EmbeddingOptions(const ModelSection& model) {
  if (model.type == ModelType::kWideDeep) return model.wide_deep;
  return model.fm;
}

// The largest model a config may describe: its blocks (the coordinator and
// every ps keep a table of them) and its parameters (each worker holds all of
// them), so that a typo in model.layers or model.block_size is refused
// instead of allocating gigabytes.
inline constexpr int64_t kMaxModelBlocks = int64_t{1} << 20;
inline constexpr int64_t kMaxModelParams = int64_t{1}
                                           << 30;  // 4 GiB of float32
// InvalidArgument naming the keys when `model`'s layers and block_size make
// more than kMaxModelBlocks blocks or kMaxModelParams parameters. Counts
// without allocating, and without overflow for any int widths. Widths < 1 and
// block_size < 1 are left to the range checks (OK here).
absl::Status CheckModelSize(const ModelSection& model);

// model.wide_deep.fields for `data`: csv, the count of data.categorical,
// text, numeric and bucketize columns (at least 1); other sources 1. The
// config loader sets it; a Config built in code must set it itself.
int WideDeepFields(const DataSection& data);

// The test metrics measured for a model.task, the main one first:
// multiclass: accuracy, logloss; binary: auc, logloss, accuracy; regression:
// rmse, mae, r2.
std::vector<std::string> TaskMetricNames(Task task);
// accuracy, auc and r2 grow as the model gets better; logloss, rmse, mae fall.
bool HigherIsBetter(const std::string& metric);

// Internal to the config loader (common/config.cc).
namespace config_internal {
struct ConfigField;
// The keys of the sections `model`, `fm` and `wide_deep`, bound to `model`,
// `model->fm` and `model->wide_deep`, in docs/CONFIG.md's order.
std::vector<ConfigField> ModelKeys(ModelSection* model);
std::vector<ConfigField> FmKeys(FmSection* fm);
std::vector<ConfigField> WideDeepKeys(WideDeepSection* wide_deep);
// model.type and model.task against the layers, the optimizer (ftrl is for
// sparse models) and the data (its size, mnist's shape): InvalidArgument
// naming the keys.
absl::Status CheckModel(const ModelSection& model,
                        const OptimizerSection& optimizer,
                        const DataSection& data);
}  // namespace config_internal

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_CONFIG_MODEL_H_
