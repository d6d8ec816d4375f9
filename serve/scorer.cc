// The two kinds of served model behind one interface: sparse and dense.
#include "serve/scorer.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "model/dense_model.h"
#include "model/export.h"
#include "model/npz.h"
#include "model/sparse_model.h"

namespace downpour::serve {
namespace {

// sparse_linear, fm, wide_deep: keys and values, one margin per example.
class SparseModelScorer : public Scorer {
 public:
  SparseModelScorer(model::SparseModel model, Task task)
      : model_(std::move(model)), scorer_(model_), task_(task) {}

  absl::Status Score(const Examples& examples, std::vector<float>* margins,
                     int64_t* misses) const override {
    if (examples.dense_form) {
      return absl::InvalidArgumentError(absl::StrCat(
          "predict: the model is ", model_.meta.type(),
          ", a sparse model: it takes keys, values and offsets, got dense "
          "rows of ",
          examples.features, " features"));
    }
    // Fields (wide_deep only; other models ignore them): each below the
    // model's count.
    const int model_fields = scorer_.fields();
    std::vector<uint16_t> fields;
    if (model_fields > 0 && examples.fields != nullptr) {
      fields.resize(examples.fields->size() / 2);
      if (!fields.empty()) {
        std::memcpy(fields.data(), examples.fields->data(), fields.size() * 2);
      }
    }
    for (size_t i = 0; i < fields.size(); ++i) {
      if (fields[i] >= model_fields) {
        return absl::InvalidArgumentError(
            absl::StrCat("predict: key ", i, " is in field ", fields[i],
                         " but the model has ", model_fields,
                         " fields (its columns that are not ignored)"));
      }
    }
    const std::vector<uint32_t>& offsets = examples.offsets;
    margins->resize(examples.count);
    for (int64_t i = 0; i < examples.count; ++i) {
      (*margins)[i] = scorer_.Margin(
          examples.keys.data() + offsets[i],
          examples.values.data() + offsets[i], offsets[i + 1] - offsets[i],
          misses, fields.empty() ? nullptr : fields.data() + offsets[i]);
    }
    return absl::OkStatus();
  }

  const proto::ModelMeta& meta() const override { return model_.meta; }
  Task task() const override { return task_; }
  int outputs() const override { return 1; }
  uint64_t rows() const override { return model_.keys.size(); }
  uint64_t embedding_rows() const override {
    return model_.embedding_keys.size();
  }

 private:
  const model::SparseModel model_;
  const model::SparseScorer scorer_;  // over model_ (keeps a reference)
  const Task task_;
};

// linear, mlp: rows of raw features, outputs() margins per example.
class DenseModelScorer : public Scorer {
 public:
  explicit DenseModelScorer(std::unique_ptr<model::DenseScorer> scorer)
      : scorer_(std::move(scorer)) {}

  absl::Status Score(const Examples& examples, std::vector<float>* margins,
                     int64_t* misses) const override {
    if (!examples.dense_form) {
      return absl::InvalidArgumentError(absl::StrCat(
          "predict: the model is ", meta().type(),
          ", a dense model: it takes dense rows of ", scorer_->features(),
          " features (PredictRequest.dense and .features), got keys, values "
          "and offsets"));
    }
    if (examples.features != scorer_->features()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "predict: the model takes ", scorer_->features(),
          " features per example, the request has ", examples.features));
    }
    margins->resize(static_cast<size_t>(examples.count) * outputs());
    scorer_->Margins(examples.dense.data(), examples.count, margins->data());
    return absl::OkStatus();
  }

  const proto::ModelMeta& meta() const override { return scorer_->meta(); }
  Task task() const override { return scorer_->task(); }
  int outputs() const override { return scorer_->outputs(); }
  uint64_t rows() const override { return 0; }
  uint64_t embedding_rows() const override { return 0; }

 private:
  const std::unique_ptr<const model::DenseScorer> scorer_;
};

absl::StatusOr<std::unique_ptr<const Scorer>> LoadSparse(
    const std::string& path, std::vector<model::NpyArray> arrays) {
  absl::StatusOr<model::SparseModel> model =
      model::SparseModelFromArrays(path, std::move(arrays));
  if (!model.ok()) return model.status();
  absl::StatusOr<Task> task = ParseTask(model->meta.task());
  if (!task.ok()) return task.status();
  if (*task == Task::kMulticlass) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        ": a multiclass sparse model; serve answers binary and regression "
        "models (one margin per example)"));
  }
  return std::unique_ptr<const Scorer>(
      new SparseModelScorer(*std::move(model), *task));
}

absl::StatusOr<std::unique_ptr<const Scorer>> LoadDense(
    const std::string& path, std::vector<model::NpyArray> arrays) {
  absl::StatusOr<model::ExportedModel> model =
      model::ModelFromArrays(path, std::move(arrays));
  if (!model.ok()) return model.status();
  absl::StatusOr<std::unique_ptr<model::DenseScorer>> scorer =
      model::DenseScorer::Create(*std::move(model));
  if (!scorer.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", scorer.status().message()));
  }
  return std::unique_ptr<const Scorer>(
      new DenseModelScorer(*std::move(scorer)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<const Scorer>> LoadScorer(
    const std::string& path) {
  absl::StatusOr<std::vector<model::NpyArray>> arrays = model::ReadNpz(path);
  if (!arrays.ok()) return arrays.status();
  absl::StatusOr<proto::ModelMeta> meta = model::MetaFromArrays(path, *arrays);
  if (!meta.ok()) return meta.status();
  if (model::IsSparseMeta(*meta)) return LoadSparse(path, *std::move(arrays));
  return LoadDense(path, *std::move(arrays));
}

}  // namespace downpour::serve
