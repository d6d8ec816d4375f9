// Parity of the CUDA backend with the CPU backend on the same batch and
// parameters. Needs a usable GPU; elsewhere every GPU test skips, naming the
// reason (built without CUDA, no driver, no device).
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/config.h"
#include "common/model_spec.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/metrics.h"
#include "worker/compute_backend.h"
#include "worker/cpu/cpu_backend.h"
#include "worker/cuda/cuda_support.h"
#include "worker/mlp_math.h"
#include "worker/testing/pooled_inputs.h"

namespace downpour::worker {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Relative error bound, ||gpu - cpu||_2 / ||cpu||_2 per tensor, for the
// gradient. Both sides are float32 but sum in different orders (cuBLAS and
// OpenBLAS block K = 784 differently; the device's expf/logf are within 2 ulp
// of glibc's), which gives ~1e-6. 1e-4 leaves room for a ReLU input within
// rounding of zero landing on the other side, while a wrong index, transpose
// or scale gives errors of order 1.
constexpr double kGradientBound = 1e-4;
// Relative bound for the loss (a mean of per-example losses of order 1).
constexpr double kLossBound = 1e-5;

ModelSpec MakeSpec(const std::string& type, std::vector<int> layers,
                   const std::string& task = "multiclass") {
  ModelSection section;
  section.type = ParseModelType(type).value();
  section.task = ParseTask(task).value();
  section.layers = std::move(layers);
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(section);
  EXPECT_THAT(spec, IsOk());
  return *spec;
}

std::vector<float> RandomFloats(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = dist(gen);
  return v;
}

// Targets for the task: class indices (multiclass), 0/1 (binary) or values
// in [-2, 2] (regression).
std::vector<float> RandomLabels(int n, int classes, uint32_t seed,
                                Task task = Task::kMulticlass) {
  std::mt19937 gen(seed);
  std::vector<float> labels(n);
  for (float& y : labels) {
    y = task == Task::kMulticlass ? static_cast<float>(gen() % classes)
        : task == Task::kBinary   ? static_cast<float>(gen() % 2)
                                  : (gen() % 4001) / 1000.0f - 2.0f;
  }
  return labels;
}

// He-initialised weights and small non-zero biases, so every term counts.
std::vector<float> Params(const ModelSpec& spec, uint32_t seed) {
  std::vector<float> params = spec.InitAll(seed);
  const std::vector<float> noise =
      RandomFloats(params.size(), -0.05f, 0.05f, seed);
  for (const TensorSpec& t : spec.tensors()) {
    if (t.fan_in != 0) continue;  // a bias
    for (int64_t i = t.offset; i < t.offset + t.size; ++i) params[i] = noise[i];
  }
  return params;
}

double RelativeError(const float* got, const float* want, int64_t n) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < n; ++i) {
    diff += (static_cast<double>(got[i]) - want[i]) * (got[i] - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

void ExpectGradientsMatch(const ModelSpec& spec, const std::vector<float>& got,
                          const std::vector<float>& want) {
  for (const TensorSpec& t : spec.tensors()) {
    EXPECT_LE(RelativeError(&got[t.offset], &want[t.offset], t.size),
              kGradientBound)
        << t.name;
  }
}

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> gpu = ProbeCudaDevice(0);
    if (!gpu.ok()) GTEST_SKIP() << "no usable GPU: " << gpu.status().message();
  }

  std::unique_ptr<ComputeBackend> Gpu(const ModelSpec& spec, int max_batch) {
    absl::StatusOr<std::unique_ptr<ComputeBackend>> backend =
        MakeCudaBackend(spec, max_batch, 0);
    EXPECT_THAT(backend, IsOk());
    return backend.ok() ? *std::move(backend) : nullptr;
  }
};

struct ParityCase {
  std::string type;
  std::vector<int> layers;
  int max_batch;
  int batch;
};

TEST_F(CudaBackendTest, GradientAndLossMatchCpu) {
  const ParityCase cases[] = {
      {"mlp", {784, 256, 128, 10}, 64, 64},
      {"mlp", {784, 256, 128, 10}, 64, 37},
      {"mlp", {784, 256, 128, 10}, 64, 1},
      {"mlp", {13, 9, 4}, 128, 128},
      {"softmax", {20, 7}, 8, 5},
  };
  uint32_t seed = 1;
  for (const ParityCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.type << " " << c.layers.size()
                                      << " layers, batch " << c.batch);
    const ModelSpec spec = MakeSpec(c.type, c.layers);
    CpuBackend cpu(spec, c.max_batch);
    std::unique_ptr<ComputeBackend> gpu = Gpu(spec, c.max_batch);
    ASSERT_NE(gpu, nullptr);
    EXPECT_THAT(gpu->device(), StartsWith("cuda:0 ("));
    const std::vector<float> params = Params(spec, ++seed);
    const std::vector<float> x =
        RandomFloats(static_cast<size_t>(c.batch) * c.layers[0], 0, 1, ++seed);
    const std::vector<float> labels =
        RandomLabels(c.batch, c.layers.back(), ++seed);
    std::vector<float> want(spec.num_params()), got(spec.num_params(), NAN);
    absl::StatusOr<float> cpu_loss = cpu.LossAndGradient(
        params.data(), x.data(), labels.data(), c.batch, want.data());
    absl::StatusOr<float> gpu_loss = gpu->LossAndGradient(
        params.data(), x.data(), labels.data(), c.batch, got.data());
    ASSERT_THAT(cpu_loss, IsOk());
    ASSERT_THAT(gpu_loss, IsOk());
    EXPECT_NEAR(*gpu_loss, *cpu_loss, kLossBound * std::max(1.0f, *cpu_loss));
    ExpectGradientsMatch(spec, got, want);
  }
}

TEST_F(CudaBackendTest, PredictMatchesCpu) {
  const ModelSpec spec = MakeSpec("mlp", {784, 256, 128, 10});
  const int max_batch = 64,
            n = 3 * max_batch + 5;  // three full chunks and a part
  CpuBackend cpu(spec, max_batch);
  std::unique_ptr<ComputeBackend> gpu = Gpu(spec, max_batch);
  ASSERT_NE(gpu, nullptr);
  const std::vector<float> params = Params(spec, 11);
  const std::vector<float> x =
      RandomFloats(static_cast<size_t>(n) * 784, 0, 1, 12);
  const std::vector<float> labels = RandomLabels(n, 10, 13);
  std::vector<float> cpu_out(n * 10, NAN), gpu_out(n * 10, NAN);
  ASSERT_THAT(cpu.Predict(params.data(), x.data(), n, cpu_out.data()), IsOk());
  ASSERT_THAT(gpu->Predict(params.data(), x.data(), n, gpu_out.data()), IsOk());
  EXPECT_LE(RelativeError(gpu_out.data(), cpu_out.data(), n * 10),
            kGradientBound);
  const model::Metrics want =
      model::ComputeMetrics(spec.task(), cpu_out.data(), labels.data(), n, 10);
  const model::Metrics got =
      model::ComputeMetrics(spec.task(), gpu_out.data(), labels.data(), n, 10);
  EXPECT_NEAR(got.loss, want.loss, kLossBound * want.loss);
  EXPECT_NEAR(OutputLoss(Task::kMulticlass, gpu_out.data(), labels.data(), n,
                         10, 0.0f, nullptr),
              OutputLoss(Task::kMulticlass, cpu_out.data(), labels.data(), n,
                         10, 0.0f, nullptr),
              kLossBound * n * want.loss);
  // Two logits equal to within rounding may rank either way on either device.
  EXPECT_NEAR(got.accuracy * n, want.accuracy * n, 1.0 + 1e-9);
}

TEST_F(CudaBackendTest, PredictedTiesGoToTheLowestClass) {
  const ModelSpec spec = MakeSpec("mlp", {6, 5, 4});
  std::unique_ptr<ComputeBackend> gpu = Gpu(spec, 4);
  ASSERT_NE(gpu, nullptr);
  const std::vector<float> zeros(spec.num_params(), 0.0f);  // all logits tie
  const std::vector<float> x = RandomFloats(10 * 6, 0, 1, 14);
  const std::vector<float> labels = {0, 1, 2, 3, 0, 0, 3, 2, 1, 0};
  std::vector<float> out(10 * 4, NAN);
  ASSERT_THAT(gpu->Predict(zeros.data(), x.data(), 10, out.data()), IsOk());
  for (float v : out) EXPECT_EQ(v, 0.0f);
  EXPECT_THAT(gpu->Predict(zeros.data(), nullptr, 0, nullptr), IsOk());
  const model::Metrics m =
      model::ComputeMetrics(spec.task(), out.data(), labels.data(), 10, 4);
  EXPECT_DOUBLE_EQ(m.accuracy, 0.4);  // the examples labelled 0
  EXPECT_NEAR(m.loss, std::log(4.0), 1e-6);
  EXPECT_NEAR(OutputLoss(Task::kMulticlass, out.data(), labels.data(), 10, 4,
                         0.0f, nullptr),
              10 * std::log(4.0), 1e-5);
}

// The binary (logistic) and regression (squared error) losses: a linear model
// and an MLP of each give the CPU backend's loss, gradient and outputs.
TEST_F(CudaBackendTest, BinaryAndRegressionMatchCpu) {
  struct TaskCase {
    std::string type;
    std::vector<int> layers;
    Task task;
    int max_batch;
    int batch;
  };
  const TaskCase cases[] = {
      {"linear", {20, 1}, Task::kBinary, 16, 16},
      {"mlp", {30, 24, 12, 1}, Task::kBinary, 32, 19},
      {"linear", {20, 1}, Task::kRegression, 16, 11},
      {"mlp", {30, 24, 12, 1}, Task::kRegression, 32, 32},
  };
  uint32_t seed = 100;
  for (const TaskCase& c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << TaskName(c.task) << " " << c.type << " " << c.layers.size()
                 << " layers, batch " << c.batch);
    const ModelSpec spec = MakeSpec(c.type, c.layers, TaskName(c.task));
    ASSERT_EQ(spec.task(), c.task);
    CpuBackend cpu(spec, c.max_batch);
    std::unique_ptr<ComputeBackend> gpu = Gpu(spec, c.max_batch);
    ASSERT_NE(gpu, nullptr);
    const std::vector<float> params = Params(spec, ++seed);
    const std::vector<float> x =
        RandomFloats(static_cast<size_t>(c.batch) * c.layers[0], 0, 1, ++seed);
    const std::vector<float> targets =
        RandomLabels(c.batch, c.layers.back(), ++seed, c.task);
    std::vector<float> want(spec.num_params()), got(spec.num_params(), NAN);
    absl::StatusOr<float> cpu_loss = cpu.LossAndGradient(
        params.data(), x.data(), targets.data(), c.batch, want.data());
    absl::StatusOr<float> gpu_loss = gpu->LossAndGradient(
        params.data(), x.data(), targets.data(), c.batch, got.data());
    ASSERT_THAT(cpu_loss, IsOk());
    ASSERT_THAT(gpu_loss, IsOk());
    EXPECT_NEAR(*gpu_loss, *cpu_loss, kLossBound * std::max(1.0f, *cpu_loss));
    ExpectGradientsMatch(spec, got, want);

    // Predict: one output a row, in chunks of max_batch (3 full and a part).
    const int n = 3 * c.max_batch + 3;
    const std::vector<float> test_x =
        RandomFloats(static_cast<size_t>(n) * c.layers[0], 0, 1, ++seed);
    const std::vector<float> test_y = RandomLabels(n, 1, ++seed, c.task);
    std::vector<float> cpu_out(n, NAN), gpu_out(n, NAN);
    ASSERT_THAT(cpu.Predict(params.data(), test_x.data(), n, cpu_out.data()),
                IsOk());
    ASSERT_THAT(gpu->Predict(params.data(), test_x.data(), n, gpu_out.data()),
                IsOk());
    for (int i = 0; i < n; ++i) {
      EXPECT_NEAR(gpu_out[i], cpu_out[i],
                  1e-4 * std::max(1.0f, std::fabs(cpu_out[i])))
          << "example " << i;
    }
    const double cpu_test_loss =
        OutputLoss(c.task, cpu_out.data(), test_y.data(), n, 1, 0.0f, nullptr) /
        n;
    const double gpu_test_loss =
        OutputLoss(c.task, gpu_out.data(), test_y.data(), n, 1, 0.0f, nullptr) /
        n;
    EXPECT_NEAR(gpu_test_loss, cpu_test_loss,
                kLossBound * std::max(1.0, cpu_test_loss));
    const model::Metrics m =
        model::ComputeMetrics(c.task, gpu_out.data(), test_y.data(), n, 1);
    EXPECT_NEAR(m.loss, cpu_test_loss,
                kLossBound * std::max(1.0, cpu_test_loss));
  }
}

TEST_F(CudaBackendTest, RejectsTargetsTheTaskCannotTake) {
  const ModelSpec binary = MakeSpec("linear", {5, 1}, "binary");
  const ModelSpec regression = MakeSpec("linear", {5, 1}, "regression");
  const std::vector<float> params(binary.num_params(), 0.1f), x(2 * 5, 0.5f);
  std::vector<float> grad(binary.num_params());
  std::unique_ptr<ComputeBackend> gpu = Gpu(binary, 2);
  ASSERT_NE(gpu, nullptr);
  const std::vector<float> half = {1, 0.5f};
  EXPECT_THAT(gpu->LossAndGradient(params.data(), x.data(), half.data(), 2,
                                   grad.data()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("example 1 is not 0 or 1")));
  gpu = Gpu(regression, 2);
  ASSERT_NE(gpu, nullptr);
  const std::vector<float> nan = {NAN, 1};
  EXPECT_THAT(
      gpu->LossAndGradient(params.data(), x.data(), nan.data(), 2, grad.data()),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("example 0 is not a finite value")));
  EXPECT_THAT(gpu->LossAndGradient(params.data(), x.data(), half.data(), 2,
                                   grad.data()),
              IsOk());
}

TEST_F(CudaBackendTest, ParamsAreReuploadedOnlyAfterParamsChanged) {
  const ModelSpec spec = MakeSpec("mlp", {30, 16, 5});
  CpuBackend cpu(spec, 8);
  std::unique_ptr<ComputeBackend> gpu = Gpu(spec, 8);
  ASSERT_NE(gpu, nullptr);
  const std::vector<float> x = RandomFloats(8 * 30, 0, 1, 15);
  const std::vector<float> labels = RandomLabels(8, 5, 16);
  std::vector<float> params = Params(spec, 17);
  const int64_t n = spec.num_params();
  std::vector<float> first(n), got(n), want(n);

  gpu->ParamsChanged();
  ASSERT_THAT(gpu->LossAndGradient(params.data(), x.data(), labels.data(), 8,
                                   first.data()),
              IsOk());
  // No ParamsChanged: the caller promised the values did not change, so the
  // device copy is not refreshed and the result is the first one.
  params = Params(spec, 18);
  ASSERT_THAT(gpu->LossAndGradient(params.data(), x.data(), labels.data(), 8,
                                   got.data()),
              IsOk());
  EXPECT_LE(RelativeError(got.data(), first.data(), n), 1e-6);
  // After ParamsChanged the new values are uploaded.
  gpu->ParamsChanged();
  ASSERT_THAT(gpu->LossAndGradient(params.data(), x.data(), labels.data(), 8,
                                   got.data()),
              IsOk());
  ASSERT_THAT(cpu.LossAndGradient(params.data(), x.data(), labels.data(), 8,
                                  want.data()),
              IsOk());
  ExpectGradientsMatch(spec, got, want);
  EXPECT_GT(RelativeError(got.data(), first.data(), n), 1e-2);
}

TEST_F(CudaBackendTest, WithoutParamsChangedEveryCallReadsParams) {
  const ModelSpec spec = MakeSpec("softmax", {12, 3});
  CpuBackend cpu(spec, 4);
  std::unique_ptr<ComputeBackend> gpu = Gpu(spec, 4);
  ASSERT_NE(gpu, nullptr);
  const std::vector<float> x = RandomFloats(4 * 12, 0, 1, 19);
  const std::vector<float> labels = {0, 2, 1, 2};
  std::vector<float> params = Params(spec, 20);
  std::vector<float> got(spec.num_params()), want(spec.num_params());
  for (int round = 0; round < 2; ++round) {
    for (float& p : params) p += 0.1f;  // changed in place, same pointer
    ASSERT_THAT(gpu->LossAndGradient(params.data(), x.data(), labels.data(), 4,
                                     got.data()),
                IsOk());
    ASSERT_THAT(cpu.LossAndGradient(params.data(), x.data(), labels.data(), 4,
                                    want.data()),
                IsOk());
    ExpectGradientsMatch(spec, got, want);
  }
}

TEST_F(CudaBackendTest, PrefetchedAndMissedBatchesGiveTheCpuResult) {
  const ModelSpec spec = MakeSpec("mlp", {40, 24, 6});
  const int batch = 16;
  CpuBackend cpu(spec, batch);
  std::unique_ptr<ComputeBackend> gpu = Gpu(spec, batch);
  ASSERT_NE(gpu, nullptr);
  const std::vector<float> params = Params(spec, 21);
  gpu->ParamsChanged();
  std::vector<std::vector<float>> xs;
  std::vector<std::vector<float>> ys;
  for (uint32_t i = 0; i < 4; ++i) {
    xs.push_back(RandomFloats(batch * 40, 0, 1, 30 + i));
    ys.push_back(RandomLabels(batch, 6, 40 + i));
  }
  std::vector<float> got(spec.num_params()), want(spec.num_params());
  auto check = [&](int i) {
    SCOPED_TRACE(::testing::Message() << "batch " << i);
    ASSERT_THAT(gpu->LossAndGradient(params.data(), xs[i].data(), ys[i].data(),
                                     batch, got.data()),
                IsOk());
    ASSERT_THAT(cpu.LossAndGradient(params.data(), xs[i].data(), ys[i].data(),
                                    batch, want.data()),
                IsOk());
    ExpectGradientsMatch(spec, got, want);
  };
  // As the Downpour loop does: prefetch the next step's batch, then compute
  // the current one (prefetched a step earlier).
  gpu->Prefetch(xs[0].data(), ys[0].data(), batch);
  gpu->Prefetch(xs[1].data(), ys[1].data(), batch);
  check(0);
  gpu->Prefetch(xs[2].data(), ys[2].data(), batch);
  check(1);
  // A prediction and an unannounced batch leave pending hints intact.
  gpu->Prefetch(xs[3].data(), ys[3].data(), batch);
  std::vector<float> out(batch * 6);
  ASSERT_THAT(gpu->Predict(params.data(), xs[1].data(), batch, out.data()),
              IsOk());
  check(0);
  check(2);
  check(3);
  // New values behind prefetched pointers: the latest Prefetch counts.
  std::vector<float> x = xs[3];
  std::vector<float> y = ys[3];
  gpu->Prefetch(x.data(), y.data(), batch);
  std::copy(xs[0].begin(), xs[0].end(), x.begin());
  std::copy(ys[0].begin(), ys[0].end(), y.begin());
  gpu->Prefetch(x.data(), y.data(), batch);
  ASSERT_THAT(gpu->LossAndGradient(params.data(), x.data(), y.data(), batch,
                                   got.data()),
              IsOk());
  ASSERT_THAT(cpu.LossAndGradient(params.data(), xs[0].data(), ys[0].data(),
                                  batch, want.data()),
              IsOk());
  ExpectGradientsMatch(spec, got, want);
  // A consumed hint is gone: new values behind the same pointers are read.
  std::copy(xs[2].begin(), xs[2].end(), x.begin());
  std::copy(ys[2].begin(), ys[2].end(), y.begin());
  ASSERT_THAT(gpu->LossAndGradient(params.data(), x.data(), y.data(), batch,
                                   got.data()),
              IsOk());
  ASSERT_THAT(cpu.LossAndGradient(params.data(), xs[2].data(), ys[2].data(),
                                  batch, want.data()),
              IsOk());
  ExpectGradientsMatch(spec, got, want);
  // More hints than slots: the oldest are dropped, the results stay right.
  for (int i = 0; i < 4; ++i) gpu->Prefetch(xs[i].data(), ys[i].data(), batch);
  for (int i = 3; i >= 0; --i) check(i);
}

TEST_F(CudaBackendTest, RejectsBadInputAndKeepsWorking) {
  const ModelSpec spec = MakeSpec("softmax", {5, 3});
  std::unique_ptr<ComputeBackend> gpu = Gpu(spec, 2);
  ASSERT_NE(gpu, nullptr);
  const std::vector<float> params(spec.num_params(), 0.1f), x(3 * 5, 0.5f);
  std::vector<float> grad(spec.num_params());
  const std::vector<float> labels = {0, 1, 2}, bad = {0, 3};
  EXPECT_THAT(
      gpu->LossAndGradient(params.data(), x.data(), labels.data(), 3,
                           grad.data()),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_batch")));
  EXPECT_THAT(gpu->LossAndGradient(params.data(), x.data(), labels.data(), 0,
                                   grad.data()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(
      gpu->LossAndGradient(params.data(), x.data(), bad.data(), 2, grad.data()),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("target 3 of example 1 is not a class index in "
                         "[0, 3) (model.task multiclass)")));
  std::vector<float> out(3 * 3);
  EXPECT_THAT(gpu->Predict(params.data(), x.data(), -1, out.data()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(gpu->LossAndGradient(params.data(), x.data(), labels.data(), 2,
                                   grad.data()),
              IsOk());
}

// wide_deep's step (PooledLossAndGradient): the pooling sums a few terms per
// input and the MLP's SGEMMs are short (K <= 32), so the only differences
// from the CPU are summation order (cuBLAS's blocking, the scatter's atomic
// adds), of order 1e-7; a wrong index, offset or scale is of order 1.
constexpr double kPooledBound = 1e-5;

// `rows` rows of 0 to 3 entries per field, in shuffled field order, over
// embedding_rows rows that many entries share, except: row 0 has no entry of
// field 1, row 1 has no entry at all, row 2 uses embedding row 0 twice in
// field 0, and the last embedding row is used by no entry. REQUIRES: rows >= 3,
// fields >= 2, embedding_rows >= 2.
PooledInputs RandomPooled(int rows, int fields, int dim, int64_t embedding_rows,
                          uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> weight(-1.5f, 1.5f);
  PooledInputs in;
  in.embedding_rows = embedding_rows;
  in.fields = fields;
  in.dim = dim;
  in.embeddings =
      RandomFloats(static_cast<size_t>(embedding_rows) * dim, -1, 1, seed + 1);
  in.offsets.push_back(0);
  for (int r = 0; r < rows; ++r) {
    std::vector<std::pair<uint16_t, uint32_t>> entries;  // (field, slot)
    if (r == 2) entries = {{0, 0}, {0, 0}};
    for (int f = 0; f < fields && r != 1; ++f) {
      if (r == 0 && f == 1) continue;
      const int count = static_cast<int>(gen() % 4);
      for (int k = 0; k < count; ++k) {
        entries.emplace_back(
            static_cast<uint16_t>(f),
            static_cast<uint32_t>(gen() % (embedding_rows - 1)));
      }
    }
    std::shuffle(entries.begin(), entries.end(), gen);
    for (const auto& [f, slot] : entries) {
      in.field.push_back(f);
      in.slot.push_back(slot);
      in.value.push_back(weight(gen));
    }
    in.offsets.push_back(static_cast<int64_t>(in.slot.size()));
  }
  return in;
}

TEST_F(CudaBackendTest, PooledLossAndGradientMatchesCpu) {
  constexpr int kFields = 4, kDim = 8, kMaxBatch = 32;
  struct Step {
    int rows;
    int64_t embedding_rows;
    bool offset;
  };
  // Growing batches (the device buffers grow), then smaller ones (reused).
  const Step steps[] = {
      {19, 40, true}, {32, 200, true}, {7, 12, false}, {32, 90, true}};
  uint32_t seed = 200;
  for (Task task : {Task::kBinary, Task::kRegression}) {
    SCOPED_TRACE(TaskName(task));
    const ModelSpec spec =
        MakeSpec("mlp", {kFields * kDim, 24, 12, 1}, TaskName(task));
    CpuBackend cpu(spec, kMaxBatch);
    std::unique_ptr<ComputeBackend> gpu = Gpu(spec, kMaxBatch);
    ASSERT_NE(gpu, nullptr);
    const std::vector<float> params = Params(spec, ++seed);
    // The cached parameters (uploaded once) in one task, fresh in the other.
    if (task == Task::kRegression) gpu->ParamsChanged();
    for (const Step& step : steps) {
      SCOPED_TRACE(::testing::Message()
                   << step.rows << " rows, " << step.embedding_rows
                   << " embedding rows");
      const PooledInputs in =
          RandomPooled(step.rows, kFields, kDim, step.embedding_rows, ++seed);
      const PooledBatch batch = in.batch();
      const std::vector<float> targets =
          RandomLabels(step.rows, 1, ++seed, task);
      const std::vector<float> offset = RandomFloats(step.rows, -1, 1, ++seed);
      const float* offset_or_null = step.offset ? offset.data() : nullptr;
      const size_t emb_size = in.embeddings.size();
      std::vector<float> want(spec.num_params()), want_emb(emb_size),
          want_out(step.rows);
      std::vector<float> got(spec.num_params(), NAN), got_emb(emb_size, NAN),
          got_out(step.rows, NAN);
      absl::StatusOr<float> cpu_loss = cpu.PooledLossAndGradient(
          params.data(), batch, offset_or_null, targets.data(), step.rows,
          want.data(), want_emb.data(), want_out.data());
      absl::StatusOr<float> gpu_loss = gpu->PooledLossAndGradient(
          params.data(), batch, offset_or_null, targets.data(), step.rows,
          got.data(), got_emb.data(), got_out.data());
      ASSERT_THAT(cpu_loss, IsOk());
      ASSERT_THAT(gpu_loss, IsOk());
      EXPECT_NEAR(*gpu_loss, *cpu_loss,
                  kPooledBound * std::max(1.0f, *cpu_loss));
      for (const TensorSpec& t : spec.tensors()) {
        EXPECT_LE(RelativeError(&got[t.offset], &want[t.offset], t.size),
                  kPooledBound)
            << t.name;
      }
      EXPECT_LE(RelativeError(got_emb.data(), want_emb.data(), emb_size),
                kPooledBound);
      EXPECT_LE(RelativeError(got_out.data(), want_out.data(), step.rows),
                kPooledBound);
      // The embedding row no entry uses gets exactly 0.
      for (int j = 0; j < kDim; ++j) {
        EXPECT_EQ(got_emb[emb_size - kDim + j], 0.0f) << j;
      }
    }
    // A dense step after the pooled ones is unaffected by them.
    const std::vector<float> x =
        RandomFloats(kMaxBatch * kFields * kDim, 0, 1, ++seed);
    const std::vector<float> targets = RandomLabels(kMaxBatch, 1, ++seed, task);
    std::vector<float> want(spec.num_params()), got(spec.num_params(), NAN);
    ASSERT_THAT(cpu.LossAndGradient(params.data(), x.data(), targets.data(),
                                    kMaxBatch, want.data()),
                IsOk());
    ASSERT_THAT(gpu->LossAndGradient(params.data(), x.data(), targets.data(),
                                     kMaxBatch, got.data()),
                IsOk());
    ExpectGradientsMatch(spec, got, want);
  }
}

TEST_F(CudaBackendTest, PooledLossAndGradientRejectsBadInputAndKeepsWorking) {
  const ModelSpec spec = MakeSpec("mlp", {4, 3, 1}, "binary");
  CpuBackend cpu(spec, 2);
  std::unique_ptr<ComputeBackend> gpu = Gpu(spec, 2);
  ASSERT_NE(gpu, nullptr);
  const std::vector<float> params = Params(spec, 300);
  PooledInputs in;
  in.embeddings = RandomFloats(6, -1, 1, 301);
  in.offsets = {0, 2, 3};
  in.slot = {0, 2, 1};
  in.field = {0, 1, 1};
  in.value = {1, 0.5f, 2};
  in.embedding_rows = 3;
  in.fields = 2;
  in.dim = 2;
  PooledBatch batch = in.batch();
  std::vector<uint32_t>& slot = in.slot;
  std::vector<uint16_t>& field = in.field;
  const std::vector<float> labels = {1, 0}, offset = {0.5f, -1};
  std::vector<float> grad(spec.num_params()), emb_grad(6), out_grad(2);
  auto run = [&](ComputeBackend* backend, int rows) {
    return backend->PooledLossAndGradient(params.data(), batch, offset.data(),
                                          labels.data(), rows, grad.data(),
                                          emb_grad.data(), out_grad.data());
  };
  slot[1] = 3;
  EXPECT_THAT(run(gpu.get(), 2),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("names embedding row 3 of 3")));
  slot[1] = 2;
  field[2] = 2;
  EXPECT_THAT(run(gpu.get(), 2), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("is in field 2 of 2")));
  field[2] = 1;
  EXPECT_THAT(run(gpu.get(), 3), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("max_batch")));
  const std::vector<float> half = {0.5f, 1};
  EXPECT_THAT(
      gpu->PooledLossAndGradient(params.data(), batch, offset.data(),
                                 half.data(), 2, grad.data(), emb_grad.data(),
                                 out_grad.data()),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is not 0 or 1")));
  batch.dim = 1;
  EXPECT_THAT(run(gpu.get(), 2),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("do not make the model's 4 inputs")));
  batch.dim = 2;
  // A model of several outputs cannot take an offset per row.
  std::unique_ptr<ComputeBackend> multiclass =
      Gpu(MakeSpec("mlp", {4, 3, 2}), 2);
  ASSERT_NE(multiclass, nullptr);
  EXPECT_THAT(run(multiclass.get(), 2),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("need a model with one output")));
  // And the backend still gives the CPU's answer.
  absl::StatusOr<float> gpu_loss = run(gpu.get(), 2);
  ASSERT_THAT(gpu_loss, IsOk());
  const std::vector<float> got = grad, got_emb = emb_grad, got_out = out_grad;
  absl::StatusOr<float> cpu_loss = run(&cpu, 2);
  ASSERT_THAT(cpu_loss, IsOk());
  EXPECT_NEAR(*gpu_loss, *cpu_loss, kPooledBound * std::max(1.0f, *cpu_loss));
  EXPECT_LE(RelativeError(got.data(), grad.data(), grad.size()), kPooledBound);
  EXPECT_LE(RelativeError(got_emb.data(), emb_grad.data(), 6), kPooledBound);
  EXPECT_LE(RelativeError(got_out.data(), out_grad.data(), 2), kPooledBound);
}

// Runs everywhere: an unusable GPU is FailedPrecondition with a reason.
TEST(CudaSupportTest, UnusableGpuIsFailedPreconditionSayingWhy) {
  const ModelSpec spec = MakeSpec("softmax", {5, 3});
  absl::StatusOr<std::unique_ptr<ComputeBackend>> backend =
      MakeCudaBackend(spec, 2, /*gpu=*/1000);
  ASSERT_THAT(backend, StatusIs(absl::StatusCode::kFailedPrecondition));
  const std::string why(backend.status().message());
  if (!CudaBuilt()) {
    EXPECT_THAT(why, HasSubstr("built without CUDA"));
  } else if (ProbeCudaDevice(0).ok()) {
    EXPECT_THAT(why, HasSubstr("GPU index 1000 is out of range"));
  } else {
    EXPECT_EQ(why, std::string(ProbeCudaDevice(0).status().message()));
  }
}

}  // namespace
}  // namespace downpour::worker
