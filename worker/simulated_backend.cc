// The simulated device: a calibrated sleep and a fixed tiny gradient.
#include "worker/simulated_backend.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "worker/mlp_math.h"

namespace downpour::worker {

SimulatedBackend::SimulatedBackend(const ModelSpec& spec, int max_batch,
                                   absl::Duration step, Clock* clock,
                                   std::unique_ptr<ComputeBackend> real)
    : num_params_(spec.num_params()),
      task_(spec.task()),
      classes_(spec.layers().back()),
      max_batch_(max_batch),
      step_(step),
      clock_(clock != nullptr ? clock : Clock::Real()),
      real_(std::move(real)) {}

absl::StatusOr<float> SimulatedBackend::LossAndGradient(const float* params,
                                                        const float* x,
                                                        const float* targets,
                                                        int batch,
                                                        float* grad) {
  if (batch < 1 || batch > max_batch_) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch ", batch, " is outside [1, ", max_batch_, "]"));
  }
  if (absl::Status ok = CheckTargets(task_, targets, batch, classes_);
      !ok.ok()) {
    return ok;
  }
  if (real_ != nullptr) {
    const absl::Time start = clock_->Now();
    absl::StatusOr<float> loss =
        real_->LossAndGradient(params, x, targets, batch, grad);
    const absl::Duration left = step_ - (clock_->Now() - start);
    if (loss.ok() && left > absl::ZeroDuration()) clock_->SleepFor(left);
    return loss;
  }
  // The sleep is the point: it stands in for a GPU step, costing no CPU.
  clock_->SleepFor(step_);
  for (int64_t i = 0; i < num_params_; ++i) grad[i] = GradientAt(i);
  return static_cast<float>(std::log(static_cast<double>(classes_)));
}

absl::StatusOr<float> SimulatedBackend::LossAndGradientInStages(
    const float* params, const float* x, const float* targets, int batch,
    float* grad, const StageHooks& hooks) {
  if (real_ == nullptr) {
    return ComputeBackend::LossAndGradientInStages(params, x, targets, batch,
                                                   grad, hooks);
  }
  // `done`: when the piece being computed is finished on the simulated
  // device. Each hook first lets that time pass.
  const double n = static_cast<double>(std::max<int64_t>(1, num_params_));
  const absl::Duration forward = step_ / 3, backward = step_ - forward;
  absl::Time done = clock_->Now();
  auto finish = [&] {
    const absl::Duration left = done - clock_->Now();
    if (left > absl::ZeroDuration()) clock_->SleepFor(left);
  };
  StageHooks timed;
  timed.num_params = hooks.num_params;
  timed.cuts = hooks.cuts;
  timed.await_params = [&](int64_t begin, int64_t end) {
    finish();
    absl::Status ready = hooks.await_params(begin, end);
    done = clock_->Now() + forward * ((end - begin) / n);
    return ready;
  };
  timed.gradient_ready = [&](int64_t begin, int64_t end) {
    finish();
    done = clock_->Now() + backward * ((end - begin) / n);
    finish();
    hooks.gradient_ready(begin, end);
  };
  return real_->LossAndGradientInStages(params, x, targets, batch, grad, timed);
}

absl::Status SimulatedBackend::Predict(const float* params, const float* x,
                                       int n, float* out) {
  if (n < 0) {
    return absl::InvalidArgumentError(absl::StrCat("n is ", n, ", below 0"));
  }
  if (real_ != nullptr) return real_->Predict(params, x, n, out);
  std::fill(out, out + static_cast<int64_t>(n) * classes_, 0.0f);
  return absl::OkStatus();
}

std::string SimulatedBackend::device() const {
  return absl::StrCat(
      "simulated (", absl::ToDoubleMilliseconds(step_), " ms per step",
      real_ != nullptr ? ", real gradients on the CPU" : "", ")");
}

}  // namespace downpour::worker
