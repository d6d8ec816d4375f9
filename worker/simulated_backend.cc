// The simulated device: a calibrated sleep and a fixed tiny gradient.
#include "worker/simulated_backend.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace downpour::worker {

SimulatedBackend::SimulatedBackend(const ModelSpec& spec, int max_batch,
                                   absl::Duration step, Clock* clock)
    : num_params_(spec.num_params()),
      classes_(spec.layers().back()),
      max_batch_(max_batch),
      step_(step),
      clock_(clock != nullptr ? clock : Clock::Real()) {}

absl::Status SimulatedBackend::CheckLabels(const int* labels, int n) const {
  for (int i = 0; i < n; ++i) {
    if (labels[i] < 0 || labels[i] >= classes_) {
      return absl::InvalidArgumentError(
          absl::StrCat("label ", labels[i], " of example ", i,
                       " is outside [0, ", classes_, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<float> SimulatedBackend::LossAndGradient(const float* params,
                                                        const float* x,
                                                        const int* labels,
                                                        int batch,
                                                        float* grad) {
  if (batch < 1 || batch > max_batch_) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch ", batch, " is outside [1, ", max_batch_, "]"));
  }
  if (absl::Status labels_ok = CheckLabels(labels, batch); !labels_ok.ok()) {
    return labels_ok;
  }
  // The sleep is the point: it stands in for a GPU step, costing no CPU.
  clock_->SleepFor(step_);
  for (int64_t i = 0; i < num_params_; ++i) grad[i] = GradientAt(i);
  return static_cast<float>(std::log(static_cast<double>(classes_)));
}

absl::Status SimulatedBackend::Evaluate(const float* params, const float* x,
                                        const int* labels, int n,
                                        double* loss_sum, int64_t* correct) {
  if (n < 0) {
    return absl::InvalidArgumentError(absl::StrCat("n is ", n, ", below 0"));
  }
  if (absl::Status labels_ok = CheckLabels(labels, n); !labels_ok.ok()) {
    return labels_ok;
  }
  *loss_sum = n * std::log(static_cast<double>(classes_));
  *correct = 0;
  return absl::OkStatus();
}

std::string SimulatedBackend::device() const {
  return absl::StrCat("simulated (", absl::ToDoubleMilliseconds(step_),
                      " ms per step)");
}

}  // namespace downpour::worker
