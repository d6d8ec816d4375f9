// The `compute` section of the config: where workers compute (CPU, GPU or a
// simulated stand-in).
#ifndef DOWNPOUR_COMMON_CONFIG_COMPUTE_H_
#define DOWNPOUR_COMMON_CONFIG_COMPUTE_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace downpour {

// compute.device (Name and Parse as config.h describes for every choice).
enum class ComputeDevice { kAuto, kCpu, kCuda, kSimulated };
const char* ComputeDeviceName(ComputeDevice device);
absl::StatusOr<ComputeDevice> ParseComputeDevice(absl::string_view name);

struct ComputeSection {
  // Where workers compute: "auto" (the GPU when one is usable, else the CPU),
  // "cpu" or "cuda" (fail at start when no usable GPU), or "simulated" (a
  // stand-in that sleeps simulated_step_ms per step and computes nothing, for
  // the scale-model benchmark). Default kAuto.
  ComputeDevice device = ComputeDevice::kAuto;
  // Which GPU a cuda worker uses, >= 0. Default 0.
  int gpu = 0;
  // simulated only: milliseconds one LossAndGradient takes, > 0 (required
  // then). Default 0 (unset).
  double simulated_step_ms = 0;
  // simulated only: compute the real gradient on the CPU within the step
  // and sleep only the rest of simulated_step_ms (evaluation is real too),
  // so that a scale model measures time to accuracy, not only throughput.
  // Default false (compute nothing).
  bool simulated_real_gradients = false;
};

// Internal to the config loader (common/config.cc).
namespace config_internal {
struct ConfigField;
// The section's keys bound to `compute`, in docs/CONFIG.md's order.
std::vector<ConfigField> ComputeKeys(ComputeSection* compute);
// The simulated_* keys against compute.device: InvalidArgument naming them.
absl::Status CheckCompute(const ComputeSection& compute);
}  // namespace config_internal

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_CONFIG_COMPUTE_H_
