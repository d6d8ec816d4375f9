#include "worker/backend_factory.h"

#include <memory>
#include <string>

#include "common/config.h"
#include "common/model_spec.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/cuda/cuda_support.h"

namespace downpour::worker {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::StartsWith;

ModelSpec Spec() {
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(ModelSection());
  EXPECT_THAT(spec, IsOk());
  return *spec;
}

ComputeSection Compute(const std::string& device, int gpu = 0) {
  ComputeSection compute;
  compute.device = ParseComputeDevice(device).value();
  compute.gpu = gpu;
  return compute;
}

TEST(BackendFactoryTest, CpuAlwaysWorks) {
  absl::StatusOr<std::unique_ptr<ComputeBackend>> backend =
      MakeBackend(Compute("cpu"), Spec(), 16);
  ASSERT_THAT(backend, IsOk());
  EXPECT_EQ((*backend)->device(), "cpu");
}

TEST(BackendFactoryTest, AutoTakesTheGpuWhenUsableElseTheCpu) {
  absl::StatusOr<std::unique_ptr<ComputeBackend>> backend =
      MakeBackend(Compute("auto"), Spec(), 16);
  ASSERT_THAT(backend, IsOk());
  if (ProbeCudaDevice(0).ok()) {
    EXPECT_THAT((*backend)->device(), StartsWith("cuda:0 ("));
  } else {
    EXPECT_EQ((*backend)->device(), "cpu");
  }
  // An index past the last GPU is never usable: the CPU, everywhere.
  backend = MakeBackend(Compute("auto", 1000), Spec(), 16);
  ASSERT_THAT(backend, IsOk());
  EXPECT_EQ((*backend)->device(), "cpu");
}

TEST(BackendFactoryTest, CudaWithoutAUsableGpuIsFailedPreconditionSayingWhy) {
  absl::StatusOr<std::string> probe = ProbeCudaDevice(0);
  if (probe.ok()) {
    absl::StatusOr<std::unique_ptr<ComputeBackend>> backend =
        MakeBackend(Compute("cuda"), Spec(), 16);
    ASSERT_THAT(backend, IsOk());
    EXPECT_EQ((*backend)->device(), *probe);
  } else {
    EXPECT_THAT(MakeBackend(Compute("cuda"), Spec(), 16),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         HasSubstr(std::string(probe.status().message()))));
  }
  EXPECT_THAT(
      MakeBackend(Compute("cuda", 1000), Spec(), 16),
      StatusIs(
          absl::StatusCode::kFailedPrecondition,
          StartsWith("compute.device is cuda but GPU 1000 is not usable: ")));
}

TEST(BackendFactoryTest, ExplainsWhyCudaIsUnusableHere) {
  absl::StatusOr<std::string> probe = ProbeCudaDevice(0);
  if (probe.ok()) GTEST_SKIP() << "a GPU is usable here: " << *probe;
  // The reasons this machine can give (docs/GPU.md).
  const std::string why(probe.status().message());
  if (!CudaBuilt()) {
    EXPECT_THAT(why, HasSubstr("built without CUDA"));
  } else {
    EXPECT_THAT(why, ::testing::AnyOf(HasSubstr("NVIDIA driver"),
                                      HasSubstr("no CUDA device"),
                                      HasSubstr("compute capability"),
                                      HasSubstr("cudaGetDevice")));
  }
}

TEST(BackendFactoryTest, SimulatedSleepsTheConfiguredStep) {
  ComputeSection compute = Compute("simulated");
  compute.simulated_step_ms = 250;
  absl::StatusOr<std::unique_ptr<ComputeBackend>> backend =
      MakeBackend(compute, Spec(), 16);
  ASSERT_THAT(backend, IsOk());
  EXPECT_EQ((*backend)->device(), "simulated (250 ms per step)");
  EXPECT_THAT(MakeBackend(Compute("simulated"), Spec(), 16),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("compute.simulated_step_ms > 0")));
}

// Only a value cast from an integer can be none of the devices.
TEST(BackendFactoryTest, UnknownDeviceIsInvalidArgument) {
  ComputeSection compute = Compute("cpu");
  compute.device = static_cast<ComputeDevice>(99);
  EXPECT_THAT(MakeBackend(compute, Spec(), 16),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("compute.device must be auto, cpu, cuda or "
                                 "simulated, got '?'")));
}

}  // namespace
}  // namespace downpour::worker
