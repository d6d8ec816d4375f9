// One loaded model as the daemon scores with it, whatever its kind: a Scorer
// per kind (a sparse model through model::SparseScorer, a dense one through
// model::DenseScorer), chosen by the file's meta when it is loaded.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<const Scorer> scorer,
//                    LoadScorer("model.npz"));
//   std::vector<float> margins;  // examples.count * scorer->outputs()
//   int64_t misses = 0;
//   RETURN_IF_ERROR(scorer->Score(examples, &margins, &misses));
#ifndef DOWNPOUR_SERVE_SCORER_H_
#define DOWNPOUR_SERVE_SCORER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/config.h"
#include "proto/model.pb.h"
#include "serve/examples.h"

namespace downpour::serve {

// Immutable once loaded: any number of threads may score with one scorer.
class Scorer {
 public:
  virtual ~Scorer() = default;

  // The raw outputs of every example into *margins (count * outputs(),
  // row-major, resized), summing into *misses the sparse keys the model
  // holds no row for. InvalidArgument naming expected and got when the
  // examples do not fit the model: the other form (dense rows for a sparse
  // model, keys for a dense one), a dense width other than the model's
  // inputs, a field at or past a wide_deep model's fields.
  virtual absl::Status Score(const Examples& examples,
                             std::vector<float>* margins,
                             int64_t* misses) const = 0;

  virtual const proto::ModelMeta& meta() const = 0;
  virtual Task task() const = 0;
  // Outputs per example: a multiclass dense model's classes, else 1.
  virtual int outputs() const = 0;
  // A sparse model's rows with a weight and embedding rows; 0 for dense.
  virtual uint64_t rows() const = 0;
  virtual uint64_t embedding_rows() const = 0;
};

// The scorer of the model exported at `path`, sparse (sparse_linear, fm,
// wide_deep) or dense (linear, mlp) as its meta says: the readers' errors
// (ReadNpz, MetaFromArrays, SparseModelFromArrays, ModelFromArrays:
// NotFound, InvalidArgument naming the file, ...), and InvalidArgument
// naming the file for a multiclass sparse model (one margin per example).
absl::StatusOr<std::unique_ptr<const Scorer>> LoadScorer(
    const std::string& path);

}  // namespace downpour::serve

#endif  // DOWNPOUR_SERVE_SCORER_H_
