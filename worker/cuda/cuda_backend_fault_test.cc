// The CUDA backend's host side on the emulated runtime (fake_cuda.h): what
// ProbeCudaDevice says for each kind of unusable GPU, how CUDA and cuBLAS
// failures come back, and that the backend frees everything it made.
#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/model_spec.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/compute_backend.h"
#include "worker/cpu/cpu_backend.h"
#include "worker/cuda/cuda_support.h"
#include "worker/cuda/fake_cuda.h"
#include "worker/testing/pooled_inputs.h"

namespace downpour::worker {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

ModelSpec Spec() {
  ModelSection section;
  section.layers = {8, 6, 3};
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(section);
  EXPECT_THAT(spec, IsOk());
  return *spec;
}

class EmulatedCudaTest : public ::testing::Test {
 protected:
  void SetUp() override { gpu::fake::Reset(); }
  void TearDown() override { gpu::fake::Reset(); }

  // A step's inputs for Spec(): batch 4.
  std::vector<float> params_ = Spec().InitAll(5);
  std::vector<float> x_ = std::vector<float>(4 * 8, 0.25f);
  std::vector<float> labels_ = {0, 1, 2, 1};
  std::vector<float> grad_ = std::vector<float>(Spec().num_params());
};

struct ProbeCase {
  gpu::fake::Devices devices;
  int gpu;
  std::string says;
};

TEST_F(EmulatedCudaTest, ProbeSaysWhyAGpuIsNotUsable) {
  gpu::fake::Devices none, old, empty, t4, two;
  none.driver_version = 0;
  old.driver_version = 12040;
  empty.count = 0;
  t4.major = 7;
  t4.minor = 5;
  t4.name = "Tesla T4";
  two.count = 2;
  const ProbeCase cases[] = {
      {none, 0, "no NVIDIA driver is loaded"},
      {old, 0,
       "the NVIDIA driver supports CUDA 12.4 but this binary's CUDA "
       "runtime is 13.0"},
      {empty, 0, "no CUDA device is present"},
      {t4, 0, "GPU 0 (Tesla T4) has compute capability 7.5"},
      {two, 2, "GPU index 2 is out of range (2 devices: 0..1)"},
      {gpu::fake::Devices(), -1, "GPU index -1 is out of range (1 device"},
  };
  for (const ProbeCase& c : cases) {
    gpu::fake::SetDevices(c.devices);
    EXPECT_THAT(
        ProbeCudaDevice(c.gpu),
        StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(c.says)));
    EXPECT_THAT(
        MakeCudaBackend(Spec(), 4, c.gpu),
        StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(c.says)));
  }
  gpu::fake::SetDevices(two);
  absl::StatusOr<std::string> device = ProbeCudaDevice(1);
  ASSERT_THAT(device, IsOk());
  EXPECT_EQ(*device, "cuda:1 (Emulated GPU)");
}

TEST_F(EmulatedCudaTest, SgemmFailureNamesTheProductAndTheBackendRecovers) {
  absl::StatusOr<std::unique_ptr<ComputeBackend>> gpu =
      MakeCudaBackend(Spec(), 4, 0);
  ASSERT_THAT(gpu, IsOk());
  // The SGEMMs of a step: fc1 forward, fc2 forward, fc2 dW, fc2 dA, fc1 dW.
  gpu::fake::FailSgemmCall(3, CUBLAS_STATUS_EXECUTION_FAILED);
  EXPECT_THAT((*gpu)->LossAndGradient(params_.data(), x_.data(), labels_.data(),
                                      4, grad_.data()),
              StatusIs(absl::StatusCode::kInternal,
                       StartsWith("cublasSgemm (fc2 backward dW): "
                                  "CUBLAS_STATUS_EXECUTION_FAILED")));
  absl::StatusOr<float> loss = (*gpu)->LossAndGradient(
      params_.data(), x_.data(), labels_.data(), 4, grad_.data());
  ASSERT_THAT(loss, IsOk());
  CpuBackend cpu(Spec(), 4);
  std::vector<float> want(grad_.size());
  absl::StatusOr<float> cpu_loss = cpu.LossAndGradient(
      params_.data(), x_.data(), labels_.data(), 4, want.data());
  ASSERT_THAT(cpu_loss, IsOk());
  EXPECT_NEAR(*loss, *cpu_loss, 1e-6);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(grad_[i], want[i], 1e-6);
}

TEST_F(EmulatedCudaTest, FaultWhileRunningSurfacesAtTheSynchronisation) {
  absl::StatusOr<std::unique_ptr<ComputeBackend>> gpu =
      MakeCudaBackend(Spec(), 4, 0);
  ASSERT_THAT(gpu, IsOk());
  gpu::fake::FailSyncCall(1, cudaErrorIllegalAddress);
  EXPECT_THAT((*gpu)->LossAndGradient(params_.data(), x_.data(), labels_.data(),
                                      4, grad_.data()),
              StatusIs(absl::StatusCode::kInternal,
                       StartsWith("cudaStreamSynchronize (LossAndGradient): "
                                  "cudaErrorIllegalAddress")));
  std::vector<float> out(4 * 3);
  gpu::fake::FailSyncCall(1, cudaErrorIllegalAddress);
  EXPECT_THAT((*gpu)->Predict(params_.data(), x_.data(), 4, out.data()),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("cudaStreamSynchronize (Predict)")));
  // And the backend recovers: the next prediction is the CPU's.
  std::vector<float> want(out.size());
  CpuBackend cpu(Spec(), 4);
  ASSERT_THAT(cpu.Predict(params_.data(), x_.data(), 4, want.data()), IsOk());
  ASSERT_THAT((*gpu)->Predict(params_.data(), x_.data(), 4, out.data()),
              IsOk());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(out[i], want[i], 1e-5);
}

TEST_F(EmulatedCudaTest, OutOfDeviceMemoryIsResourceExhaustedAndLeaksNothing) {
  gpu::fake::FailMallocCall(3);
  EXPECT_THAT(MakeCudaBackend(Spec(), 4, 0),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(StartsWith("cuda:0 (Emulated GPU): cudaMalloc ("),
                             HasSubstr("cudaErrorMemoryAllocation"))));
  const gpu::fake::Live live = gpu::fake::LiveObjects();
  EXPECT_EQ(live.device_buffers, 0);
  EXPECT_EQ(live.pinned_buffers, 0);
  EXPECT_EQ(live.streams, 0);
  EXPECT_EQ(live.events, 0);
  EXPECT_EQ(live.cublas_handles, 0);
}

// PooledLossAndGradient's failures: its buffers' allocation (at its first
// call), an SGEMM (the last of its step, fc1's dX) and the synchronisation
// come back naming the call; the next step gives the CPU's answer, and the
// backend frees its pooled buffers too.
TEST_F(EmulatedCudaTest, PooledStepFailuresAreReturnedAndTheBackendRecovers) {
  ModelSection section;
  section.task = Task::kBinary;
  section.layers = {8, 6, 1};  // 2 fields of 4 floats
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(section);
  ASSERT_THAT(spec, IsOk());
  const std::vector<float> params = spec->InitAll(6);
  PooledInputs in;
  in.embeddings = {0.1f, 0.2f,  -0.3f, 0.4f, 0.5f, -0.6f,
                   0.7f, -0.8f, 0.9f,  1.0f, 1.1f, 1.2f};
  in.offsets = {0, 2, 3};
  in.slot = {0, 2, 0};
  in.field = {0, 1, 1};
  in.value = {1, -0.5f, 2};
  in.embedding_rows = 3;
  in.fields = 2;
  in.dim = 4;
  const PooledBatch batch = in.batch();
  const std::vector<float> labels = {1, 0}, offset = {0.25f, -0.5f};
  std::vector<float> grad(spec->num_params()), emb_grad(12), out_grad(2);
  auto run = [&](ComputeBackend* backend) {
    return backend->PooledLossAndGradient(params.data(), batch, offset.data(),
                                          labels.data(), 2, grad.data(),
                                          emb_grad.data(), out_grad.data());
  };
  {
    absl::StatusOr<std::unique_ptr<ComputeBackend>> gpu =
        MakeCudaBackend(*spec, 2, 0);
    ASSERT_THAT(gpu, IsOk());
    gpu::fake::FailMallocCall(1);
    EXPECT_THAT(run(gpu->get()),
                StatusIs(absl::StatusCode::kResourceExhausted,
                         StartsWith("cudaMalloc (pooled inputs, ")));
    // Forward fc1, fc2; backward fc2 dW, fc2 dA, fc1 dW, fc1 dX.
    gpu::fake::FailSgemmCall(6, CUBLAS_STATUS_EXECUTION_FAILED);
    EXPECT_THAT(run(gpu->get()),
                StatusIs(absl::StatusCode::kInternal,
                         StartsWith("cublasSgemm (fc1 backward dX): "
                                    "CUBLAS_STATUS_EXECUTION_FAILED")));
    gpu::fake::FailSyncCall(1, cudaErrorIllegalAddress);
    EXPECT_THAT(run(gpu->get()),
                StatusIs(absl::StatusCode::kInternal,
                         StartsWith("cudaStreamSynchronize "
                                    "(PooledLossAndGradient): "
                                    "cudaErrorIllegalAddress")));
    absl::StatusOr<float> loss = run(gpu->get());
    ASSERT_THAT(loss, IsOk());
    const std::vector<float> got = grad, got_emb = emb_grad, got_out = out_grad;
    CpuBackend cpu(*spec, 2);
    absl::StatusOr<float> cpu_loss = run(&cpu);
    ASSERT_THAT(cpu_loss, IsOk());
    EXPECT_NEAR(*loss, *cpu_loss, 1e-6);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], grad[i], 1e-6);
    for (size_t i = 0; i < got_emb.size(); ++i) {
      EXPECT_NEAR(got_emb[i], emb_grad[i], 1e-6);
    }
    for (int r = 0; r < 2; ++r) EXPECT_NEAR(got_out[r], out_grad[r], 1e-6);
  }
  const gpu::fake::Live live = gpu::fake::LiveObjects();
  EXPECT_EQ(live.device_buffers, 0);
  EXPECT_EQ(live.pinned_buffers, 0);
}

TEST_F(EmulatedCudaTest, BackendFreesEverythingItMade) {
  {
    absl::StatusOr<std::unique_ptr<ComputeBackend>> gpu =
        MakeCudaBackend(Spec(), 4, 0);
    ASSERT_THAT(gpu, IsOk());
    const gpu::fake::Live live = gpu::fake::LiveObjects();
    EXPECT_EQ(live.streams, 2);  // compute and copy
    EXPECT_EQ(live.events, 3);   // one per input slot
    EXPECT_EQ(live.cublas_handles, 1);
    (*gpu)->Prefetch(x_.data(), labels_.data(), 4);  // left pending
  }
  const gpu::fake::Live live = gpu::fake::LiveObjects();
  EXPECT_EQ(live.device_buffers, 0);
  EXPECT_EQ(live.pinned_buffers, 0);
  EXPECT_EQ(live.streams, 0);
  EXPECT_EQ(live.events, 0);
  EXPECT_EQ(live.cublas_handles, 0);
}

}  // namespace
}  // namespace downpour::worker
