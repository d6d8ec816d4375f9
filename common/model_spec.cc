// Tensor and block layout, initial values and placement.
#include "common/model_spec.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace downpour {
namespace {

// splitmix64: a counter-based generator, so each float's initial value depends
// only on (seed, position).
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// FNV-1a over the little-endian bytes of integers and the bytes of strings.
class Fnv1a {
 public:
  void Add(uint64_t v) {
    for (int i = 0; i < 8; ++i) Byte(static_cast<unsigned char>(v >> (8 * i)));
  }
  void Add(const std::string& s) {
    Add(s.size());
    for (char c : s) Byte(static_cast<unsigned char>(c));
  }
  uint64_t hash() const { return hash_; }

 private:
  void Byte(unsigned char b) {
    hash_ ^= b;
    hash_ *= 0x100000001b3ULL;
  }
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

// The checks of a dense model's model.layers, type, task and block_size.
absl::Status CheckDenseLayers(const ModelSection& model) {
  const Task task = model.task;
  if (model.layers.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.layers needs at least 2 entries (inputs, classes), got ",
        model.layers.size()));
  }
  const bool linear = IsLinear(model.type);
  if (linear && model.layers.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.type ", ModelTypeName(model.type),
                     " takes exactly 2 layers [inputs, outputs], got [",
                     absl::StrJoin(model.layers, ", "), "]"));
  }
  if (!linear && model.type != ModelType::kMlp) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.type must be linear, mlp or softmax, got ",
                     ModelTypeName(model.type)));
  }
  if (task != Task::kMulticlass && model.layers.back() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.task ", TaskName(task),
                     " has one output, so the last entry "
                     "of model.layers must be 1, got [",
                     absl::StrJoin(model.layers, ", "), "]"));
  }
  if (task == Task::kMulticlass && model.layers.back() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.task multiclass needs at least 2 classes (the last entry of "
        "model.layers), got [",
        absl::StrJoin(model.layers, ", "),
        "]; for one output use model.task binary or regression"));
  }
  for (int width : model.layers) {
    if (width < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.layers entries must be >= 1, got ", width));
    }
  }
  if (model.block_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.block_size must be >= 1, got ", model.block_size));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelSpec> ModelSpec::Create(const ModelSection& model) {
  absl::StatusOr<ModelSpec> spec =
      IsSparseModel(model.type)           ? CreateSparse(model)
      : model.type == ModelType::kTensors ? CreateTensors(model)
                                          : CreateDense(model);
  if (spec.ok()) spec->type_ = model.type;
  return spec;
}

absl::StatusOr<ModelSpec> ModelSpec::CreateDense(const ModelSection& model) {
  RETURN_IF_ERROR(CheckDenseLayers(model));
  // Sized before anything is allocated (a typo must not take gigabytes).
  absl::Status size = CheckModelSize(model);
  if (!size.ok()) return size;
  ModelSpec spec;
  spec.layers_ = model.layers;
  spec.task_ = model.task;
  int64_t offset = 0;
  for (size_t l = 0; l + 1 < model.layers.size(); ++l) {
    const int64_t in = model.layers[l], out = model.layers[l + 1];
    const std::string prefix = absl::StrCat("fc", l + 1);
    spec.tensors_.push_back(
        {prefix + ".weight", {in, out}, offset, in * out, in});
    offset += in * out;
    spec.tensors_.push_back({prefix + ".bias", {out}, offset, out, 0});
    offset += out;
  }
  spec.num_params_ = offset;
  spec.CutBlocks(model.block_size);
  return spec;
}

absl::StatusOr<ModelSpec> ModelSpec::CreateTensors(const ModelSection& model) {
  ASSIGN_OR_RETURN(const std::vector<TensorDecl> decls,
                   ParseModelTensors(model.tensors));
  ModelSpec spec;
  spec.layers_ = {1, 1};  // no layers: the worker computes the tensors
  spec.task_ = model.task;
  int64_t offset = 0, blocks = 0;
  for (const TensorDecl& decl : decls) {
    int64_t size = 1;
    for (int64_t d : decl.shape) size *= d;
    // PyTorch's shapes: a weight is [out, in, ...], its fan-in the product
    // of the dimensions after the first; a 1-D tensor (a bias) starts at 0.
    const int64_t fan_in = decl.shape.size() < 2 ? 0 : size / decl.shape[0];
    spec.tensors_.push_back({decl.name, decl.shape, offset, size, fan_in});
    offset += size;
    blocks += (size - 1) / model.block_size + 1;
  }
  if (blocks > kMaxModelBlocks) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.tensors with model.block_size ", model.block_size,
                     " make ", blocks, " blocks, over the ", kMaxModelBlocks,
                     " a model may have: raise model.block_size"));
  }
  spec.num_params_ = offset;
  spec.CutBlocks(model.block_size);
  return spec;
}

void ModelSpec::CutBlocks(int64_t block_size) {
  for (size_t t = 0; t < tensors_.size(); ++t) {
    const TensorSpec& tensor = tensors_[t];
    for (int64_t start = 0; start < tensor.size; start += block_size) {
      BlockSpec block;
      block.id = static_cast<uint32_t>(blocks_.size());
      block.tensor = static_cast<int>(t);
      block.offset = tensor.offset + start;
      block.length = std::min<int64_t>(block_size, tensor.size - start);
      blocks_.push_back(block);
    }
  }
}

absl::StatusOr<ModelSpec> ModelSpec::CreateSparse(const ModelSection& model) {
  const Task task = model.task;
  if (task == Task::kMulticlass) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.type ", ModelTypeName(model.type),
                     " needs model.task binary or regression"));
  }
  if (model.sparse_buckets < 1 || model.sparse_buckets > 65536) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.sparse_buckets must be in 1..65536, got ",
                     model.sparse_buckets));
  }
  const FmSection& e = EmbeddingOptions(model);
  if (model.type != ModelType::kSparseLinear && (e.dim < 1 || e.dim > 256)) {
    return absl::InvalidArgumentError(
        absl::StrCat(model.type == ModelType::kWideDeep ? "wide_deep" : "fm",
                     ".dim must be in 1..256, got ", e.dim));
  }
  ModelSpec spec;
  if (model.type == ModelType::kWideDeep) {
    // The dense blocks are the deep part's MLP, fields * dim inputs to
    // one output (whose bias is the model's bias), laid out and checked
    // as a dense mlp.
    const WideDeepSection& w = model.wide_deep;
    if (w.fields < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("wide_deep needs at least one field, got ", w.fields));
    }
    ModelSection mlp = model;
    mlp.type = ModelType::kMlp;
    mlp.layers = {w.fields * e.dim};
    mlp.layers.insert(mlp.layers.end(), w.hidden.begin(), w.hidden.end());
    mlp.layers.push_back(1);
    ASSIGN_OR_RETURN(spec, Create(mlp));
  } else {
    // One dense block, the bias; the weights are the sparse table's rows.
    spec.task_ = task;
    spec.layers_ = {1, 1};
    spec.tensors_.push_back({"bias", {1}, 0, 1, 0});
    spec.blocks_.push_back({0, 0, 0, 1});
    spec.num_params_ = 1;
  }
  spec.sparse_tables_.push_back(
      {0, "weights", 1, static_cast<uint32_t>(model.sparse_buckets)});
  if (model.type != ModelType::kSparseLinear) {
    SparseTableSpec embeddings;
    embeddings.id = 1;
    embeddings.name = "embeddings";
    embeddings.dim = e.dim;
    embeddings.buckets = static_cast<uint32_t>(model.sparse_buckets);
    embeddings.init_scale = e.init_scale;
    embeddings.min_count = e.embedding_min_count;
    spec.sparse_tables_.push_back(embeddings);
  }
  return spec;
}

uint64_t ModelSpec::Fingerprint() const {
  Fnv1a h;
  h.Add(tensors_.size());
  for (const TensorSpec& tensor : tensors_) {
    h.Add(tensor.name);
    h.Add(tensor.shape.size());
    for (int64_t dim : tensor.shape) h.Add(static_cast<uint64_t>(dim));
  }
  h.Add(blocks_.size());
  for (const BlockSpec& block : blocks_) {
    h.Add(block.id);
    h.Add(static_cast<uint64_t>(block.tensor));
    h.Add(static_cast<uint64_t>(block.offset));
    h.Add(static_cast<uint64_t>(block.length));
  }
  // Dense models hash as they did before sparse tables existed (their
  // checkpoints stay readable).
  if (!sparse_tables_.empty()) {
    h.Add(sparse_tables_.size());
    for (const SparseTableSpec& table : sparse_tables_) {
      h.Add(table.id);
      h.Add(table.name);
      h.Add(static_cast<uint64_t>(table.dim));
      h.Add(table.buckets);
    }
  }
  return h.hash() == 0 ? 1 : h.hash();
}

void ModelSpec::InitBlock(const BlockSpec& block, uint64_t seed,
                          float* out) const {
  const TensorSpec& tensor = tensors_[block.tensor];
  if (tensor.fan_in == 0) {
    std::fill(out, out + block.length, 0.0f);
    return;
  }
  const double limit = std::sqrt(6.0 / static_cast<double>(tensor.fan_in));
  const uint64_t base = Mix(seed);
  for (int64_t i = 0; i < block.length; ++i) {
    const uint64_t r = Mix(base ^ static_cast<uint64_t>(block.offset + i));
    const double u = static_cast<double>(r >> 11) * (1.0 / 9007199254740992.0);
    out[i] = static_cast<float>((2.0 * u - 1.0) * limit);
  }
}

std::vector<float> ModelSpec::InitAll(uint64_t seed) const {
  std::vector<float> params(num_params_);
  for (const BlockSpec& block : blocks_) {
    InitBlock(block, seed, params.data() + block.offset);
  }
  return params;
}

std::vector<std::vector<uint32_t>> PlaceBlocks(const ModelSpec& spec,
                                               int num_shards) {
  std::vector<uint32_t> order(spec.blocks().size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return spec.blocks()[a].length > spec.blocks()[b].length;
  });
  std::vector<int64_t> load(num_shards, 0);
  std::vector<std::vector<uint32_t>> shards(num_shards);
  for (uint32_t id : order) {
    const int target = static_cast<int>(
        std::min_element(load.begin(), load.end()) - load.begin());
    load[target] += spec.blocks()[id].length;
    shards[target].push_back(id);
  }
  for (auto& ids : shards) std::sort(ids.begin(), ids.end());
  return shards;
}

}  // namespace downpour
