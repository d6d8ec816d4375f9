// The Downpour loop driving the CUDA backend, on the host emulation
// (fake_cuda.h): it trains as it does on the CPU backend, it keeps the
// contracts of ComputeBackend's ParamsChanged and Prefetch hooks, and the
// backend uses both (prefetched slots, uploads only of changed parameters).
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "common/config.h"
#include "common/model_spec.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "worker/compute_backend.h"
#include "worker/cpu/cpu_backend.h"
#include "worker/cuda/cuda_support.h"
#include "worker/cuda/fake_cuda.h"
#include "worker/dataset.h"
#include "worker/downpour.h"
#include "worker/testing/fake_ps_client.h"

namespace downpour::worker {
namespace {

using ::downpour::testing::IsOk;

// Forwards to `inner` and counts breaches of the hooks' contracts: params
// whose values changed with no ParamsChanged since the last step (once the
// caller uses it), and prefetched x or targets whose values at their step are
// not those of their latest Prefetch. Also counts the parameter uploads a
// caching backend needs: every Predict, and every step after a
// ParamsChanged or a Predict.
class ContractChecker : public ComputeBackend {
 public:
  ContractChecker(ComputeBackend* inner, int64_t num_params, int inputs)
      : inner_(inner), num_params_(num_params), inputs_(inputs) {}

  absl::StatusOr<float> LossAndGradient(const float* params, const float* x,
                                        const float* targets, int batch,
                                        float* grad) override {
    if (tracking_ && !changed_ && !last_params_.empty() &&
        std::memcmp(params, last_params_.data(), num_params_ * sizeof(float)) !=
            0) {
      ++stale_params;
    }
    last_params_.assign(params, params + num_params_);
    if (changed_ || predicted_) ++needed_uploads;
    changed_ = predicted_ = false;
    auto hint = hints_.find(x);
    if (hint != hints_.end() && hint->second.targets == targets &&
        hint->second.x.size() == static_cast<size_t>(batch) * inputs_) {
      ++prefetch_hits;
      if (std::memcmp(x, hint->second.x.data(),
                      hint->second.x.size() * sizeof(float)) != 0 ||
          std::memcmp(targets, hint->second.y.data(), batch * sizeof(float)) !=
              0) {
        ++prefetch_changed;
      }
      hints_.erase(hint);
    } else {
      ++prefetch_misses;
    }
    return inner_->LossAndGradient(params, x, targets, batch, grad);
  }
  absl::Status Predict(const float* params, const float* x, int n,
                       float* out) override {
    ++needed_uploads;
    predicted_ = true;
    return inner_->Predict(params, x, n, out);
  }
  std::string device() const override { return inner_->device(); }
  void ParamsChanged() override {
    tracking_ = changed_ = true;
    inner_->ParamsChanged();
  }
  void Prefetch(const float* x, const float* targets, int batch) override {
    Hint& hint = hints_[x];
    hint.targets = targets;
    hint.x.assign(x, x + static_cast<int64_t>(batch) * inputs_);
    hint.y.assign(targets, targets + batch);
    inner_->Prefetch(x, targets, batch);
  }

  int stale_params = 0, prefetch_hits = 0, prefetch_misses = 0,
      prefetch_changed = 0, needed_uploads = 0;

 private:
  ComputeBackend* const inner_;
  const int64_t num_params_;
  const int inputs_;
  bool tracking_ = false, changed_ = false, predicted_ = false;
  std::vector<float> last_params_;
  // Pending Prefetches by x pointer: their targets pointer and values.
  struct Hint {
    const float* targets;
    std::vector<float> x;
    std::vector<float> y;
  };
  std::map<const float*, Hint> hints_;
};

class DownpourOnCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ModelSection model;
    model.layers = {8, 16, 3};
    absl::StatusOr<ModelSpec> spec = ModelSpec::Create(model);
    ASSERT_THAT(spec, IsOk());
    spec_ = std::make_unique<ModelSpec>(*spec);
    const Dataset all = MakeSynthetic(1200, 8, 3, 5);
    train_ = test_ = all;
    train_.x.resize(1000 * 8);
    train_.y.resize(1000);
    test_.x.erase(test_.x.begin(), test_.x.begin() + 1000 * 8);
    test_.y.erase(test_.y.begin(), test_.y.begin() + 1000);
    options_.training.batch_size = 32;
    options_.training.epochs = 3;  // 32 steps each; the last batch wraps
    options_.training.eval_every_steps = 10;
    options_.local_learning_rate = 0.1;
  }

  std::unique_ptr<ComputeBackend> Gpu() {
    absl::StatusOr<std::unique_ptr<ComputeBackend>> gpu =
        MakeCudaBackend(*spec_, options_.training.batch_size, 0);
    EXPECT_THAT(gpu, IsOk());
    return gpu.ok() ? *std::move(gpu) : nullptr;
  }

  WorkerStats Train(ComputeBackend* backend, float ps_lr) {
    FakePsClient ps(spec_->InitAll(1), spec_->blocks().size(), ps_lr);
    DownpourLoop loop(*spec_, backend, &ps, &train_, &test_, options_);
    EXPECT_THAT(loop.Run(), IsOk());
    return loop.stats();
  }

  std::unique_ptr<ModelSpec> spec_;
  Dataset train_, test_;
  DownpourLoop::Options options_;
};

TEST_F(DownpourOnCudaTest, TrainsAsOnTheCpuWithCommunicationOff) {
  options_.no_communication = true;
  CpuBackend cpu(*spec_, options_.training.batch_size);
  std::unique_ptr<ComputeBackend> gpu = Gpu();
  ASSERT_NE(gpu, nullptr);
  const WorkerStats want = Train(&cpu, 0.0f);
  const WorkerStats got = Train(gpu.get(), 0.0f);
  EXPECT_GT(want.accuracy, 0.8);
  EXPECT_NEAR(got.accuracy, want.accuracy, 0.01);
  EXPECT_NEAR(got.test_loss, want.test_loss, 1e-3 * want.test_loss);
  EXPECT_NEAR(got.loss, want.loss, 1e-3 * want.loss);
}

TEST_F(DownpourOnCudaTest, LoopKeepsTheHooksContracts) {
  std::unique_ptr<ComputeBackend> gpu = Gpu();
  ASSERT_NE(gpu, nullptr);
  for (bool no_communication : {true, false}) {
    SCOPED_TRACE(no_communication ? "communication off" : "communication on");
    options_.no_communication = no_communication;
    ContractChecker checker(gpu.get(), spec_->num_params(), 8);
    gpu::fake::Reset();
    Train(&checker, 0.1f);
    EXPECT_EQ(checker.stale_params, 0);
    EXPECT_EQ(checker.prefetch_changed, 0);
    // Every step but the first of each epoch reads the batch prefetched for it,
    // and the backend takes it from the slot it was copied to...
    EXPECT_EQ(checker.prefetch_hits, 3 * 32 - 3);
    EXPECT_EQ(checker.prefetch_misses, 3);
    const gpu::fake::Calls calls = gpu::fake::CallsSoFar();
    EXPECT_EQ(calls.stream_waits, checker.prefetch_hits);
    // ...and uploads the parameters only when they changed.
    const size_t param_bytes = spec_->num_params() * sizeof(float);
    EXPECT_EQ(calls.h2d_by_bytes.at(param_bytes), checker.needed_uploads);
  }
}

}  // namespace
}  // namespace downpour::worker
