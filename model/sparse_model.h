// A trained sparse model (sparse_linear, fm or wide_deep) as a file, and its
// predictions: a NumPy .npz (model/npz.h) holding `bias` (float32 [1]),
// `keys` (uint64 [n], strictly ascending) and `weights` (float32 [n]) of the
// table rows whose weight is not 0, for fm also `embedding_keys` (uint64 [m],
// strictly ascending) and `embeddings` (float32 [m, k]) of every embedding
// row, for wide_deep those and the MLP's tensors `fc1.weight` ([in, out]),
// `fc1.bias` ([out]), ..., and `meta` (proto/model.proto's ModelMeta as JSON,
// as model/export.h writes it) with what a reader needs to turn a CSV or LIBSVM
// file into the same keys training used. docs/DATA.md shows the NumPy lines
// that reproduce a prediction.
//
//   SparseModel m = ...;  // from a checkpoint folder (tools/model_export.h)
//   RETURN_IF_ERROR(WriteSparseModel("model.npz", m));
//   ASSIGN_OR_RETURN(SparseModel back, ReadSparseModel("model.npz"));
//   ASSIGN_OR_RETURN(data::SparseDataset rows,
//                    ReadSparseExamples(back.meta, "test.svm", true));
//   std::vector<float> margins = Margins(back, rows);
#ifndef DOWNPOUR_MODEL_SPARSE_MODEL_H_
#define DOWNPOUR_MODEL_SPARSE_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/config.h"
#include "data/sparse_csv_reader.h"
#include "data/sparse_dataset.h"
#include "model/npz.h"
#include "proto/model.pb.h"

namespace downpour::model {

// A plain value.
struct SparseModel {
  proto::ModelMeta meta;
  float bias = 0;
  // Strictly ascending; a key not here weighs 0.
  std::vector<uint64_t> keys;
  // weights[i] belongs to keys[i]; finite and not 0.
  std::vector<float> weights;
  // fm (meta.fm_dim k > 0): embedding rows, keys strictly ascending, k
  // floats each; a key without one reads its initializer's values
  // (meta.fm_init_seed, meta.fm_init_scale), as on the ps.
  std::vector<uint64_t> embedding_keys;
  std::vector<float> embeddings;
  // wide_deep: the MLP's flat parameters (common/model_spec.h's layout for
  // meta.layers: fc1.weight, fc1.bias, ...), whose last bias is the model's
  // (`bias` is then 0).
  std::vector<float> mlp;

  // The weight of `key`, 0 when the model has none (binary search).
  float Weight(uint64_t key) const;
};

// The meta of a sparse model (sparse_linear, fm) of `config` whose training
// data had the
// classes `class_names` (binary; empty for regression) and, for data.source
// csv, was read with `columns` (worker::SparseSplit::columns: every column's
// kind, each bucketized column with the boundaries actually used).
proto::ModelMeta MakeSparseMeta(const Config& config,
                                const std::vector<std::string>& class_names,
                                const std::vector<data::SparseColumn>& columns);

// Writes the .npz. InvalidArgument when meta is not of a sparse_linear model,
// keys and weights differ in length, keys are not strictly ascending, or a
// weight is 0 or not finite (naming the first such key); the file system's
// error otherwise.
absl::Status WriteSparseModel(const std::string& path,
                              const SparseModel& model);

// Reads a file WriteSparseModel wrote: NotFound when missing; InvalidArgument
// naming the file when it is not a Downpour model, is a dense one (ReadModel
// reads those), lacks an array, or its arrays break the rules above (a weight
// of 0 is accepted).
absl::StatusOr<SparseModel> ReadSparseModel(const std::string& path);

// ReadSparseModel of the arrays ReadNpz(path) returned, for a caller that
// read them to look at the meta first (MetaFromArrays, IsSparseMeta).
absl::StatusOr<SparseModel> SparseModelFromArrays(const std::string& path,
                                                  std::vector<NpyArray> arrays);

// Reads `path` (CSV or LIBSVM, gzip read transparently) into keys exactly as
// the model's training data was read: the same reader (data/libsvm_reader.h,
// data/sparse_csv_reader.h), classes, CSV layout and column kinds, and the
// training file's bucket boundaries. `has_label` false: the CSV has no label
// column (each y is NaN); LIBSVM lines always start with a label.
// InvalidArgument when the meta names another source or an unknown column
// kind, and the readers' errors (file:line:column: what; the fix).
absl::StatusOr<data::SparseDataset> ReadSparseExamples(
    const proto::ModelMeta& meta, const std::string& path, bool has_label);

// A model's scoring, ready for many lookups: a hash index over its keys.
// Immutable once built, so any number of threads may score with one scorer
// (the serving daemon shares one per snapshot).
class SparseScorer {
 public:
  explicit SparseScorer(const SparseModel& model);

  // The raw output (margin) of one example of `n` entries: the bias plus
  // sum of weight(keys[i]) * values[i], and for fm the pairwise term of
  // model/fm_math.h, summed in double in the given order and rounded to
  // float, exactly as Margins and the worker's evaluation. *misses (if not
  // null) is increased by the entries whose key the model holds no row for
  // (sparse_linear: no weight, which is 0; fm: no embedding, whose
  // initializer's values are used).
  // wide_deep: the weights' sum plus the MLP of the pooled embeddings
  // (model/wide_deep_math.h), with fields[i] each entry's field (null: all
  // field 0).
  float Margin(const uint64_t* keys, const float* values, size_t n,
               int64_t* misses = nullptr,
               const uint16_t* fields = nullptr) const;

  const SparseModel& model() const { return model_; }
  // wide_deep: the fields its MLP pools (a field id must be below it); 0 for
  // other types, which ignore fields.
  int fields() const { return wide_deep_ ? layers_.front() / fm_dim_ : 0; }

 private:
  const SparseModel& model_;
  absl::flat_hash_map<uint64_t, float> weight_;
  // fm, wide_deep: embedding_keys[i] -> i.
  int fm_dim_ = 0;
  bool wide_deep_ = false;
  std::vector<int> layers_;          // wide_deep: the MLP's
  Pooling pooling_ = Pooling::kSum;  // wide_deep: meta.pooling
  absl::flat_hash_map<uint64_t, uint32_t> embedding_;
};

// The raw output of every row of `rows`: bias + sum of Weight(key) * value,
// summed in double in the row's key order and rounded to float, as the
// worker's evaluation computes it (worker/sparse_loop.cc), so that metrics
// of these outputs (model/metrics.h) are the job's.
std::vector<float> Margins(const SparseModel& model,
                           const data::SparseDataset& rows);

}  // namespace downpour::model

#endif  // DOWNPOUR_MODEL_SPARSE_MODEL_H_
