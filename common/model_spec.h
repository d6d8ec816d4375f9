// The model's parameters as named tensors cut into blocks, and where blocks
// live.
//
// Every daemon derives the same layout from the config's `model` section: the
// parameters form one flat float vector (the worker's view); tensors are
// contiguous ranges of it, and blocks are ranges of at most block_size floats
// within a tensor. Blocks are the unit of placement, transfer, checkpoint and
// versioning.
#ifndef DOWNPOUR_COMMON_MODEL_SPEC_H_
#define DOWNPOUR_COMMON_MODEL_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config.h"

namespace downpour {

// Task (model.task), TaskName and ParseTask live in common/config.h.

struct TensorSpec {
  std::string name;            // "fc1.weight", "fc1.bias", ...
  std::vector<int64_t> shape;  // weights are [in, out] row-major, biases [out]
  int64_t offset = 0;          // first float in the flat vector
  int64_t size = 0;            // number of floats
  int64_t fan_in = 0;          // for initialisation; 0 for biases
};

struct BlockSpec {
  uint32_t id = 0;
  int tensor = 0;      // index into ModelSpec::tensors()
  int64_t offset = 0;  // first float in the flat vector
  int64_t length = 0;  // number of floats
};

// A sparse table of the model (server/sparse_table.h): uint64 keys to rows
// of `dim` floats, spread over the ps shards by hash bucket
// (common/sparse_keys.h).
struct SparseTableSpec {
  uint32_t id = 0;
  std::string name;  // "weights"
  int dim = 1;
  uint32_t buckets = 1;
  // Initial values uniform in [-init_scale, init_scale] (common/
  // sparse_keys.h SparseInitialValue); 0: zeros.
  double init_scale = 0;
  // A key gets a row only after this many occurrences (fm's embeddings:
  // fm.embedding_min_count); the larger of it and admission.min_count holds.
  int min_count = 1;
};

// The seed of sparse table `table_id`'s initializer (the ps's table and an
// exported fm model's meta.fm_init_seed).
inline uint64_t SparseTableSeed(uint64_t init_seed, uint32_t table_id) {
  return init_seed ^ (uint64_t{table_id} << 32);
}

// Immutable after construction; safe to share between threads.
class ModelSpec {
 public:
  // InvalidArgument if the section describes no valid model.
  static absl::StatusOr<ModelSpec> Create(const ModelSection& model);

  const std::vector<TensorSpec>& tensors() const { return tensors_; }
  const std::vector<BlockSpec>& blocks() const { return blocks_; }
  // sparse_linear: one table "weights" of dim 1 (and a dense "bias" [1]);
  // fm: also table 1 "embeddings" of dim fm.dim; wide_deep: those two
  // tables (dim wide_deep.dim) and the deep part's MLP as the dense tensors
  // (layers: fields * dim, wide_deep.hidden..., 1); dense models: none.
  const std::vector<SparseTableSpec>& sparse_tables() const {
    return sparse_tables_;
  }
  // model.type of the section it was made from.
  ModelType type() const { return type_; }
  const std::vector<int>& layers() const { return layers_; }
  Task task() const { return task_; }
  int inputs() const { return layers_.front(); }
  // Outputs per example: classes for kMulticlass, else 1.
  int outputs() const { return layers_.back(); }
  int64_t num_params() const { return num_params_; }

  // A 64-bit hash (FNV-1a) of the block layout: tensor names and shapes,
  // each block's id, tensor, offset and length, and the sparse tables' ids,
  // names, dims and buckets. Two configs with the same
  // fingerprint cut the parameters into the same blocks; a checkpoint records
  // it so that another model's file is refused. Stable across builds and
  // hosts; never 0.
  uint64_t Fingerprint() const;

  // Fills out[0..block.length) with the block's initial values: weights uniform
  // in
  // +-sqrt(6 / fan_in) (He), biases zero. Depends only on the seed and each
  // float's position in the flat vector, not on block_size.
  void InitBlock(const BlockSpec& block, uint64_t seed, float* out) const;

  // Initial values of the whole flat vector (tests, benchmarks).
  std::vector<float> InitAll(uint64_t seed) const;

 private:
  // Create for mlp, linear and softmax.
  static absl::StatusOr<ModelSpec> CreateDense(const ModelSection& model);
  // Create for sparse_linear, fm and wide_deep (IsSparseModel).
  static absl::StatusOr<ModelSpec> CreateSparse(const ModelSection& model);
  // Create for model.type tensors: model.tensors' shapes, PyTorch's
  // convention (a weight [out, in, ...]).
  static absl::StatusOr<ModelSpec> CreateTensors(const ModelSection& model);
  // Cuts every tensor into blocks of at most block_size floats, in order.
  void CutBlocks(int64_t block_size);

  ModelType type_ = ModelType::kMlp;
  std::vector<int> layers_;
  Task task_ = Task::kMulticlass;
  std::vector<TensorSpec> tensors_;
  std::vector<BlockSpec> blocks_;
  std::vector<SparseTableSpec> sparse_tables_;
  int64_t num_params_ = 0;
};

// Assigns blocks to `num_shards` shards balancing bytes: largest block first,
// each to the shard holding the fewest floats so far (ties to the lowest
// index). Returns one sorted list of block ids per shard. REQUIRES: num_shards
// >= 1.
std::vector<std::vector<uint32_t>> PlaceBlocks(const ModelSpec& spec,
                                               int num_shards);

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_MODEL_SPEC_H_
