// A stand-in for GPU compute in the scale-model benchmark (bench/scale_model):
// each step takes a set time and computes nothing, so many workers fit on a
// few cores while the Downpour loop, the gRPC pushes and pulls and the ps
// daemons all run for real.
//
//   SimulatedBackend backend(spec, /*max_batch=*/64, absl::Milliseconds(200));
//   backend.LossAndGradient(params, x, targets, 64, grad.data());  // ~200 ms
#ifndef DOWNPOUR_WORKER_SIMULATED_BACKEND_H_
#define DOWNPOUR_WORKER_SIMULATED_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/model_spec.h"
#include "worker/compute_backend.h"

namespace downpour::worker {

// compute.device "simulated". Thread-compatible (no state changes after
// construction besides the clock's). Metrics mean nothing here: Predict
// writes zeros (a uniform guess).
class SimulatedBackend : public ComputeBackend {
 public:
  // The gradient written on every step, for tests: 1e-6 with the sign of
  // (-1)^i, small and finite so that the ps accepts it and the model stays
  // where it is.
  static float GradientAt(int64_t i) { return i % 2 == 0 ? 1e-6f : -1e-6f; }

  // `clock` (not owned; Clock::Real() when null) is what a step sleeps on.
  // With `real` (compute.simulated_real_gradients), a step computes the real
  // gradient with it and sleeps only the rest of `step`, and Predict is its.
  // REQUIRES: max_batch >= 1, step > 0.
  SimulatedBackend(const ModelSpec& spec, int max_batch, absl::Duration step,
                   Clock* clock = nullptr,
                   std::unique_ptr<ComputeBackend> real = nullptr);

  SimulatedBackend(const SimulatedBackend&) = delete;
  SimulatedBackend& operator=(const SimulatedBackend&) = delete;

  // Sleeps the step time, then writes GradientAt(i) to every grad[i] and
  // returns log(classes) (the loss of a uniform guess). Targets are checked
  // as the contract asks; params and x are not read. With a real backend:
  // its loss and gradient, the step padded to the step time (a step slower
  // than that is not padded).
  absl::StatusOr<float> LossAndGradient(const float* params, const float* x,
                                        const float* targets, int batch,
                                        float* grad) override;
  // training.fetch layerwise. With a real backend: its stages, each piece
  // taking its share of the step time (the forward pass a third, the
  // backward pass two thirds, shared by parameter count, as the SGEMMs'
  // work is), so that a piece whose values are late delays the step as it
  // would on a device; time spent waiting for values is not counted in the
  // step. Without one: ComputeBackend's one stage.
  absl::StatusOr<float> LossAndGradientInStages(
      const float* params, const float* x, const float* targets, int batch,
      float* grad, const StageHooks& hooks) override;
  // At once: n * outputs zeros; with a real backend, its predictions.
  absl::Status Predict(const float* params, const float* x, int n,
                       float* out) override;
  // "simulated (200 ms per step)", "... with real gradients on the CPU)".
  std::string device() const override;

 private:
  // Constant after construction.
  const int64_t num_params_;
  const Task task_;
  const int classes_;
  const int max_batch_;
  const absl::Duration step_;
  Clock* const clock_;
  const std::unique_ptr<ComputeBackend> real_;
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_SIMULATED_BACKEND_H_
