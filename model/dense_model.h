// A trained dense model (linear, mlp) ready to score rows of features: the
// tensors of an exported .npz (model/export.h), the input standardization
// its meta records, and the forward pass training runs
// (model/dense_forward.h), so that a prediction equals the worker's. Dense
// inference's home, beside sparse inference (model/sparse_model.h); `predict`
// and the serving daemon (serve/) both score through it.
//
//   ASSIGN_OR_RETURN(ExportedModel m, ReadModel("model.npz"));
//   ASSIGN_OR_RETURN(std::unique_ptr<DenseScorer> scorer,
//                    DenseScorer::Create(std::move(m)));
//   std::vector<float> out(n * scorer->outputs());
//   scorer->Margins(x, n, out.data());  // x: n rows of features() raw values
#ifndef DOWNPOUR_MODEL_DENSE_MODEL_H_
#define DOWNPOUR_MODEL_DENSE_MODEL_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "common/config.h"
#include "model/dense_forward.h"
#include "model/export.h"
#include "proto/model.pb.h"

namespace downpour::model {

// Immutable once built, so any number of threads may score with one scorer
// (each call has its own scratch; the serving daemon shares one per
// snapshot).
class DenseScorer {
 public:
  // Rows scored per forward pass (the scratch a call allocates), as
  // `predict` ran the CPU backend.
  static constexpr int kBatchRows = 1024;

  // The scorer of `model` (ReadModel's or ModelFromArrays'): InvalidArgument
  // when its meta names an unknown task or type (ModelOf), its layers make no
  // model (ModelSpec::Create), the parameters are not the layers' count, or
  // input_mean and input_std do not hold one value per input.
  static absl::StatusOr<std::unique_ptr<DenseScorer>> Create(
      ExportedModel model);

  DenseScorer(const DenseScorer&) = delete;
  DenseScorer& operator=(const DenseScorer&) = delete;

  // The raw outputs [n, outputs()] (logits; the value for regression) of n
  // rows of features() values each, as read from the data file: each input
  // standardized with the meta's (x - input_mean) / input_std, then the
  // forward pass, kBatchRows rows at a time. REQUIRES: n >= 0.
  void Margins(const float* x, int64_t n, float* out) const;

  int features() const { return layout_.layers.front(); }
  int outputs() const { return layout_.layers.back(); }
  Task task() const { return task_; }
  const proto::ModelMeta& meta() const { return model_.meta; }
  const ExportedModel& model() const { return model_; }

 private:
  DenseScorer(ExportedModel model, const ModelSpec& spec);

  // Constant after construction.
  const ExportedModel model_;
  const DenseLayout layout_;
  const Task task_;
};

}  // namespace downpour::model

#endif  // DOWNPOUR_MODEL_DENSE_MODEL_H_
