// The `compute` section: the device names, the keys and their rules.
#include "common/config_compute.h"

#include "absl/strings/str_cat.h"
#include "common/config_field.h"

namespace downpour {
namespace config_internal {
namespace {

// The spellings of compute.device, the first one the name.
constexpr Choice<ComputeDevice> kComputeDevices[] = {
    {"auto", ComputeDevice::kAuto},
    {"cpu", ComputeDevice::kCpu},
    {"cuda", ComputeDevice::kCuda},
    {"simulated", ComputeDevice::kSimulated}};

}  // namespace

std::vector<ConfigField> ComputeKeys(ComputeSection* c) {
  return {ChoiceField("compute.device", &c->device, ParseComputeDevice,
                      ComputeDeviceName),
          IntField("compute.gpu", &c->gpu, Between(0, 1023)),
          DoubleField("compute.simulated_step_ms", &c->simulated_step_ms,
                      NonNegativeAtMost(3'600'000)),
          BoolField("compute.simulated_real_gradients",
                    &c->simulated_real_gradients)};
}

absl::Status CheckCompute(const ComputeSection& compute) {
  const bool simulated = compute.device == ComputeDevice::kSimulated;
  if (simulated && compute.simulated_step_ms <= 0) {
    return absl::InvalidArgumentError(
        "compute.device simulated needs compute.simulated_step_ms > 0 (the "
        "milliseconds one step takes), got 0: set it, e.g. "
        "compute.simulated_step_ms: 200");
  }
  if (!simulated && compute.simulated_real_gradients) {
    return absl::InvalidArgumentError(absl::StrCat(
        "compute.simulated_real_gradients only applies to compute.device "
        "simulated, but compute.device is ",
        ComputeDeviceName(compute.device),
        ": remove it (cpu and cuda always compute real gradients)"));
  }
  if (!simulated && compute.simulated_step_ms > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "compute.simulated_step_ms (", compute.simulated_step_ms,
        ") only applies to compute.device simulated, but compute.device is ",
        ComputeDeviceName(compute.device),
        ": remove it or set compute.device: simulated"));
  }
  return absl::OkStatus();
}

}  // namespace config_internal

const char* ComputeDeviceName(ComputeDevice device) {
  return config_internal::ChoiceName(config_internal::kComputeDevices, device);
}
absl::StatusOr<ComputeDevice> ParseComputeDevice(absl::string_view name) {
  return config_internal::ParseChoice("compute.device",
                                      config_internal::kComputeDevices, name);
}

}  // namespace downpour
