// What the fetcher tests share: a small model on a FakePsClient, the loop's
// buffers and stats, and a backend whose gradient is a constant.
#ifndef DOWNPOUR_WORKER_FETCHER_TESTING_H_
#define DOWNPOUR_WORKER_FETCHER_TESTING_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/config.h"
#include "common/model_spec.h"
#include "gtest/gtest.h"
#include "worker/compute_backend.h"
#include "worker/fetcher.h"
#include "worker/loop_stats.h"
#include "worker/testing/fake_ps_client.h"

namespace downpour::worker {

// Every gradient element is `value` (ones by default); not thread-safe.
class ConstantBackend : public ComputeBackend {
 public:
  explicit ConstantBackend(int64_t n) : n_(n) {}
  absl::StatusOr<float> LossAndGradient(const float*, const float*,
                                        const float*, int,
                                        float* grad) override {
    std::fill(grad, grad + n_, value);
    return 1.0f;
  }
  absl::Status Predict(const float*, const float*, int, float*) override {
    return absl::OkStatus();
  }
  std::string device() const override { return "test"; }

  float value = 1.0f;

 private:
  const int64_t n_;
};

// A model of a dozen blocks, its parameters pulled into buffers_ as Run's
// first pull does; context() lends all of it to a fetcher.
class FetcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ModelSection model;
    model.layers = {8, 16, 3};
    model.block_size = 16;
    absl::StatusOr<ModelSpec> spec = ModelSpec::Create(model);
    ASSERT_TRUE(spec.ok());
    spec_ = std::make_unique<ModelSpec>(*spec);
    ps_ = std::make_unique<FakePsClient>(spec_->InitAll(1),
                                         spec_->blocks().size(), 0.1f);
    ps_->UseBlocks(spec_->blocks());
    backend_ = std::make_unique<ConstantBackend>(spec_->num_params());
    buffers_.params.resize(spec_->num_params());
    buffers_.grad.resize(spec_->num_params());
    ASSERT_TRUE(ps_->Pull(buffers_.params.data(), &buffers_.versions).ok());
    training_.batch_size = 4;
  }

  FetchContext context() {
    FetchContext context;
    context.spec = spec_.get();
    context.backend = backend_.get();
    context.client = ps_.get();
    context.buffers = &buffers_;
    context.stats = &stats_;
    context.stop = &stop_;
    context.training = training_;
    context.layer_group_floats = 1;  // a group per block
    return context;
  }

  // One step as DownpourLoop runs it, but for the evaluation: OK or the
  // first error; *bad as LossAndGradient's.
  absl::Status RunStep(Fetcher* fetcher, int64_t step, int64_t total,
                       std::string* bad) {
    absl::Status status = fetcher->BeforeStep(step);
    if (!status.ok()) return status;
    const float x[8 * 4] = {}, y[4] = {};
    absl::StatusOr<float> loss = fetcher->LossAndGradient(step, x, y, 4, bad);
    if (!loss.ok()) return loss.status();
    if (!bad->empty()) return absl::OkStatus();
    fetcher->TakeGradient();
    return fetcher->AfterStep(step, total);
  }

  std::unique_ptr<ModelSpec> spec_;
  std::unique_ptr<FakePsClient> ps_;
  std::unique_ptr<ConstantBackend> backend_;
  StepBuffers buffers_;
  LoopStats stats_{0, 4};
  std::atomic<bool> stop_{false};
  TrainingSection training_;
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_FETCHER_TESTING_H_
