// Dense inference: standardization, then the shared forward pass.
#include "model/dense_model.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/model_spec.h"

namespace downpour::model {

absl::StatusOr<std::unique_ptr<DenseScorer>> DenseScorer::Create(
    ExportedModel model) {
  absl::StatusOr<ModelSpec> spec = SpecOf(model.meta);
  if (!spec.ok()) return spec.status();
  if (static_cast<int64_t>(model.params.size()) != spec->num_params()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the model's layers need ", spec->num_params(),
                     " parameters, it holds ", model.params.size()));
  }
  if (model.meta.input_mean_size() != spec->inputs() ||
      model.meta.input_std_size() != spec->inputs()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "meta.input_mean and input_std need ", spec->inputs(),
        " values (one per input), they hold ", model.meta.input_mean_size(),
        " and ", model.meta.input_std_size()));
  }
  return std::unique_ptr<DenseScorer>(new DenseScorer(std::move(model), *spec));
}

DenseScorer::DenseScorer(ExportedModel model, const ModelSpec& spec)
    : model_(std::move(model)), layout_(spec), task_(spec.task()) {}

void DenseScorer::Margins(const float* x, int64_t n, float* out) const {
  const int inputs = features();
  const int k = outputs();
  const proto::ModelMeta& meta = model_.meta;
  const int batch = static_cast<int>(std::min<int64_t>(n, kBatchRows));
  std::vector<float> rows(static_cast<size_t>(batch) * inputs);
  std::vector<std::vector<float>> act = layout_.Scratch(batch);
  for (int64_t start = 0; start < n; start += kBatchRows) {
    const int count =
        static_cast<int>(std::min<int64_t>(kBatchRows, n - start));
    const float* in = x + start * inputs;
    for (int i = 0; i < count; ++i) {
      for (int d = 0; d < inputs; ++d) {
        const int64_t at = static_cast<int64_t>(i) * inputs + d;
        rows[at] = (in[at] - meta.input_mean(d)) / meta.input_std(d);
      }
    }
    const float* logits =
        DenseForward(layout_, model_.params.data(), rows.data(), count, &act);
    std::copy(logits, logits + static_cast<int64_t>(count) * k,
              out + start * k);
  }
}

}  // namespace downpour::model
