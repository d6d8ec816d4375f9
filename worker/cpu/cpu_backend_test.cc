#include "worker/cpu/cpu_backend.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "common/config.h"
#include "common/model_spec.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/metrics.h"
#include "worker/dataset.h"
#include "worker/mlp_math.h"
#include "worker/testing/pooled_inputs.h"

namespace downpour::worker {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;

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

std::vector<float> RandomFloats(size_t n, float scale, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
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

// The model written out directly in double precision, independent of the
// backend: fills logits [batch, outputs] and returns the mean loss of the
// task (softmax cross-entropy, logistic loss, squared error); offset (one
// output) is added to row r's output before the loss.
template <typename X>
double ReferenceLoss(const std::vector<int>& layers,
                     const std::vector<double>& params, const X* x,
                     const float* labels, int batch,
                     std::vector<double>* logits = nullptr,
                     Task task = Task::kMulticlass,
                     const double* output_offset = nullptr) {
  double total = 0.0;
  for (int r = 0; r < batch; ++r) {
    std::vector<double> a(x + r * layers[0], x + (r + 1) * layers[0]);
    int64_t offset = 0;
    for (size_t l = 0; l + 1 < layers.size(); ++l) {
      const int in = layers[l], out = layers[l + 1];
      std::vector<double> z(out);
      for (int j = 0; j < out; ++j) {
        z[j] = params[offset + in * out + j];  // bias
        for (int i = 0; i < in; ++i)
          z[j] += a[i] * params[offset + i * out + j];
        if (l + 2 < layers.size()) z[j] = std::max(z[j], 0.0);
      }
      offset += in * out + out;
      a = z;
    }
    if (output_offset != nullptr) a[0] += output_offset[r];
    if (task == Task::kBinary) {
      total += std::log1p(std::exp(a[0])) - labels[r] * a[0];
    } else if (task == Task::kRegression) {
      total += (a[0] - labels[r]) * (a[0] - labels[r]);
    } else {
      double max = a[0], sum = 0.0;
      for (double v : a) max = std::max(max, v);
      for (double v : a) sum += std::exp(v - max);
      total += max + std::log(sum) - a[static_cast<int>(labels[r])];
    }
    if (logits != nullptr) logits->insert(logits->end(), a.begin(), a.end());
  }
  return total / batch;
}

struct GradientCase {
  std::string type;
  std::vector<int> layers;
  int batch;
  Task task = Task::kMulticlass;
};

class GradientTest : public ::testing::TestWithParam<GradientCase> {};

// The analytic gradient (float) matches central differences of the double
// reference, |analytic - numeric| <= 1e-5 + 1e-3 * |numeric|, and the loss
// matches to 1e-5 relative.
TEST_P(GradientTest, MatchesFiniteDifferences) {
  const GradientCase& c = GetParam();
  const ModelSpec spec = MakeSpec(c.type, c.layers, TaskName(c.task));
  const std::vector<float> params = RandomFloats(spec.num_params(), 0.5f, 1);
  const std::vector<float> x = RandomFloats(c.batch * c.layers[0], 1.0f, 2);
  const std::vector<float> labels =
      RandomLabels(c.batch, c.layers.back(), 3, c.task);

  CpuBackend backend(spec, c.batch);
  // NaN everywhere, so a parameter whose gradient is never written shows up.
  std::vector<float> grad(spec.num_params(),
                          std::numeric_limits<float>::quiet_NaN());
  absl::StatusOr<float> loss = backend.LossAndGradient(
      params.data(), x.data(), labels.data(), c.batch, grad.data());
  ASSERT_THAT(loss, IsOk());

  std::vector<double> p(params.begin(), params.end());
  const double reference = ReferenceLoss(c.layers, p, x.data(), labels.data(),
                                         c.batch, nullptr, c.task);
  EXPECT_NEAR(*loss, reference, 1e-5 * std::abs(reference));

  constexpr double kEps = 1e-6;
  for (int64_t i = 0; i < spec.num_params(); ++i) {
    const double saved = p[i];
    p[i] = saved + kEps;
    const double plus = ReferenceLoss(c.layers, p, x.data(), labels.data(),
                                      c.batch, nullptr, c.task);
    p[i] = saved - kEps;
    const double minus = ReferenceLoss(c.layers, p, x.data(), labels.data(),
                                       c.batch, nullptr, c.task);
    p[i] = saved;
    const double numeric = (plus - minus) / (2 * kEps);
    EXPECT_NEAR(grad[i], numeric, 1e-5 + 1e-3 * std::abs(numeric))
        << "parameter " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, GradientTest,
    ::testing::Values(GradientCase{"mlp", {5, 4, 3}, 6},
                      GradientCase{"mlp", {7, 6, 5, 4}, 9},
                      GradientCase{"softmax", {6, 4}, 5},
                      GradientCase{"mlp", {3, 2}, 1},
                      GradientCase{"linear", {6, 1}, 5, Task::kBinary},
                      GradientCase{"mlp", {5, 4, 1}, 7, Task::kBinary},
                      GradientCase{"linear", {6, 1}, 5, Task::kRegression},
                      GradientCase{"mlp", {5, 4, 3, 1}, 6, Task::kRegression}));

// LossAndGradientInStages keeps its contract with a caller whose
// parameters arrive and leave piece by piece: every float of params is NaN
// until awaited and again once its gradient is reported, so a read outside
// that window poisons the result; each reported piece is copied at once, so
// a write after the report shows; together they give LossAndGradient's
// figures, each gradient float reported once, in the order the forward pass
// reads: the first weight's last rows first.
TEST(CpuBackendTest, StagesReadOnlyWhatWasAwaitedAndReportEachGradientOnce) {
  const std::vector<int> layers = {20, 16, 8, 3};
  const ModelSpec spec = MakeSpec("mlp", layers);
  const int64_t n = spec.num_params();
  const std::vector<float> params = RandomFloats(n, 0.5f, 4);
  const int batch = 7;
  const std::vector<float> x = RandomFloats(batch * layers[0], 1.0f, 5);
  const std::vector<float> labels = RandomLabels(batch, layers.back(), 6);
  CpuBackend backend(spec, batch);
  std::vector<float> want(n);
  absl::StatusOr<float> want_loss = backend.LossAndGradient(
      params.data(), x.data(), labels.data(), batch, want.data());
  ASSERT_THAT(want_loss, IsOk());

  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> seen(n, nan), grad(n, nan), reported(n, nan);
  std::vector<int> times_reported(n, 0);
  std::vector<int64_t> first_report;
  StageHooks hooks;
  hooks.num_params = n;
  // Cuts inside the weights (rows split mid-way too) and at their ends.
  for (int64_t cut = 37; cut < n; cut += 37) hooks.cuts.push_back(cut);
  hooks.await_params = [&](int64_t begin, int64_t end) {
    std::copy(params.begin() + begin, params.begin() + end,
              seen.begin() + begin);
    return absl::OkStatus();
  };
  hooks.gradient_ready = [&](int64_t begin, int64_t end) {
    if (first_report.empty()) first_report = {begin, end};
    for (int64_t i = begin; i < end; ++i) {
      reported[i] = grad[i];
      ++times_reported[i];
      seen[i] = nan;  // the caller may overwrite what was reported
    }
  };
  absl::StatusOr<float> loss = backend.LossAndGradientInStages(
      seen.data(), x.data(), labels.data(), batch, grad.data(), hooks);
  ASSERT_THAT(loss, IsOk());
  EXPECT_NEAR(*loss, *want_loss, 1e-5 * std::abs(*want_loss));
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(times_reported[i], 1) << "parameter " << i;
    EXPECT_NEAR(reported[i], want[i], 1e-5 + 1e-4 * std::abs(want[i]))
        << "parameter " << i;
    EXPECT_EQ(grad[i], reported[i]) << "parameter " << i << " after its report";
  }
  // The first weight's last chunk comes first.
  const TensorSpec& first_weight = spec.tensors().front();
  EXPECT_GT(first_report[0], first_weight.offset);
  EXPECT_EQ(first_report[1], first_weight.offset + first_weight.size);

  // An await that fails ends the call with its status.
  hooks.await_params = [](int64_t, int64_t) {
    return absl::CancelledError("stopped");
  };
  EXPECT_THAT(
      backend.LossAndGradientInStages(params.data(), x.data(), labels.data(),
                                      batch, grad.data(), hooks),
      StatusIs(absl::StatusCode::kCancelled));
}

TEST(CpuBackendTest, PredictAgreesWithLossAndGradient) {
  const std::vector<int> layers = {12, 10, 8, 5};
  const ModelSpec spec = MakeSpec("mlp", layers);
  constexpr int kN = 37;
  const std::vector<float> params = RandomFloats(spec.num_params(), 0.5f, 4);
  const std::vector<float> x = RandomFloats(kN * layers[0], 1.0f, 5);
  const std::vector<float> labels = RandomLabels(kN, layers.back(), 6);

  CpuBackend whole(spec, kN);
  std::vector<float> grad(spec.num_params());
  absl::StatusOr<float> loss = whole.LossAndGradient(
      params.data(), x.data(), labels.data(), kN, grad.data());
  ASSERT_THAT(loss, IsOk());

  CpuBackend chunked(spec, 8);  // five chunks, the last of 5 examples
  std::vector<float> out(kN * layers.back(), NAN);
  ASSERT_THAT(chunked.Predict(params.data(), x.data(), kN, out.data()), IsOk());
  const double test_loss =
      OutputLoss(Task::kMulticlass, out.data(), labels.data(), kN,
                 layers.back(), 0.0f, nullptr) /
      kN;
  EXPECT_NEAR(test_loss, *loss, 1e-5 * *loss);

  std::vector<double> logits;
  ReferenceLoss(layers, std::vector<double>(params.begin(), params.end()),
                x.data(), labels.data(), kN, &logits);
  ASSERT_EQ(logits.size(), out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_NEAR(out[i], logits[i], 1e-4 + 1e-4 * std::abs(logits[i])) << i;
  }
}

TEST(CpuBackendTest, PredictOfNothingWritesNothing) {
  const ModelSpec spec = MakeSpec("softmax", {4, 3});
  CpuBackend backend(spec, 2);
  const std::vector<float> params(spec.num_params(), 0.0f);
  EXPECT_THAT(backend.Predict(params.data(), nullptr, 0, nullptr), IsOk());
}

TEST(CpuBackendTest, RejectsBadBatchesAndLabels) {
  const ModelSpec spec = MakeSpec("mlp", {4, 3, 2});
  CpuBackend backend(spec, 4);
  EXPECT_EQ(backend.device(), "cpu");
  const std::vector<float> params(spec.num_params(), 0.1f);
  const std::vector<float> x(8 * 4, 1.0f);
  std::vector<float> labels = {0, 1, 0, 1, 0, 1, 0, 1};
  std::vector<float> grad(spec.num_params());

  EXPECT_THAT(
      backend.LossAndGradient(params.data(), x.data(), labels.data(), 0,
                              grad.data()),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[1, 4]")));
  EXPECT_THAT(
      backend.LossAndGradient(params.data(), x.data(), labels.data(), 5,
                              grad.data()),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_batch")));
  labels[2] = 2;
  EXPECT_THAT(backend.LossAndGradient(params.data(), x.data(), labels.data(), 4,
                                      grad.data()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("target 2 of example 2 is not a class index "
                                 "in [0, 2)")));
  std::vector<float> out(8);
  EXPECT_THAT(backend.Predict(params.data(), x.data(), -1, out.data()),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

struct TrainCase {
  std::string type;
  std::vector<int> layers;
};

class TrainTest : public ::testing::TestWithParam<TrainCase> {};

// 300 steps of plain SGD (lr 0.1, batch 32) on Gaussian blobs: the test loss
// falls to under a third and the test accuracy passes 0.9.
TEST_P(TrainTest, SgdLearnsSyntheticBlobs) {
  const TrainCase& c = GetParam();
  const ModelSpec spec = MakeSpec(c.type, c.layers);
  constexpr int kTrain = 1000, kTest = 500, kBatch = 32;
  const Dataset data =
      MakeSynthetic(kTrain + kTest, c.layers[0], c.layers.back(), 7);
  const float* test_x = data.x.data() + kTrain * data.dim;
  const float* test_y = data.y.data() + kTrain;
  const int k = c.layers.back();

  CpuBackend backend(spec, kBatch);
  std::vector<float> params = spec.InitAll(1);
  std::vector<float> grad(spec.num_params());
  std::vector<float> out(kTest * k);
  ASSERT_THAT(backend.Predict(params.data(), test_x, kTest, out.data()),
              IsOk());
  const double initial_loss =
      model::ComputeMetrics(spec.task(), out.data(), test_y, kTest, k).loss;
  for (int step = 0; step < 300; ++step) {
    const int start = (step * kBatch) % (kTrain - kBatch);
    ASSERT_THAT(
        backend.LossAndGradient(params.data(), data.x.data() + start * data.dim,
                                data.y.data() + start, kBatch, grad.data()),
        IsOk());
    for (size_t i = 0; i < params.size(); ++i) params[i] -= 0.1f * grad[i];
  }
  ASSERT_THAT(backend.Predict(params.data(), test_x, kTest, out.data()),
              IsOk());
  const model::Metrics final_metrics =
      model::ComputeMetrics(spec.task(), out.data(), test_y, kTest, k);
  EXPECT_LT(final_metrics.loss, initial_loss / 3);
  EXPECT_GT(final_metrics.accuracy, 0.9);
}

// wide_deep's step: pooled embeddings through an MLP plus a per-row offset.
// Every output (the loss, the parameters' gradient of the mean loss, the
// embeddings' and the outputs' gradients of the summed loss) matches central
// differences of a double reference that pools, runs the MLP and adds the
// offset itself.
TEST(PooledLossAndGradientTest, MatchesFiniteDifferences) {
  constexpr int kFields = 3, kDim = 2, kRows = 4, kEmbeddingRows = 5;
  const std::vector<int> layers = {kFields * kDim, 5, 1};
  for (Task task : {Task::kBinary, Task::kRegression}) {
    SCOPED_TRACE(TaskName(task));
    const ModelSpec spec = MakeSpec("mlp", layers, TaskName(task));
    const std::vector<float> params = RandomFloats(spec.num_params(), 0.5f, 1);
    const std::vector<float> emb = RandomFloats(kEmbeddingRows * kDim, 1.0f, 2);
    const std::vector<float> labels = RandomLabels(kRows, 1, 3, task);
    const std::vector<float> offset = {0.3f, -0.2f, 0.0f, 1.1f};
    // Row 2 has no entry of field 1; embedding row 4 is used by no entry;
    // row 3 uses row 0 twice in one field.
    PooledInputs in;
    in.offsets = {0, 3, 5, 7, 10};
    in.slot = {0, 1, 2, 3, 1, 0, 2, 0, 0, 3};
    in.field = {0, 1, 2, 0, 1, 0, 2, 1, 1, 2};
    in.value = {1, 0.5f, -2, 1, 1, 0.25f, 1, 1, 3, -1};
    in.embeddings = emb;
    in.embedding_rows = kEmbeddingRows;
    in.fields = kFields;
    in.dim = kDim;
    const PooledBatch batch = in.batch();
    const std::vector<int64_t>& offsets = in.offsets;
    const std::vector<uint32_t>& slot = in.slot;
    const std::vector<uint16_t>& field = in.field;
    const std::vector<float>& value = in.value;

    CpuBackend backend(spec, kRows);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> grad(spec.num_params(), nan);
    std::vector<float> emb_grad(emb.size(), nan);
    std::vector<float> out_grad(kRows, nan);
    absl::StatusOr<float> loss = backend.PooledLossAndGradient(
        params.data(), batch, offset.data(), labels.data(), kRows, grad.data(),
        emb_grad.data(), out_grad.data());
    ASSERT_THAT(loss, IsOk());

    std::vector<double> p(params.begin(), params.end());
    std::vector<double> e(emb.begin(), emb.end());
    std::vector<double> o(offset.begin(), offset.end());
    // The mean loss in double.
    auto reference = [&] {
      std::vector<double> x(kRows * kFields * kDim, 0.0);
      for (int r = 0; r < kRows; ++r) {
        for (int64_t i = offsets[r]; i < offsets[r + 1]; ++i) {
          for (int j = 0; j < kDim; ++j) {
            x[(r * kFields + field[i]) * kDim + j] +=
                value[i] * e[slot[i] * kDim + j];
          }
        }
      }
      return ReferenceLoss(layers, p, x.data(), labels.data(), kRows, nullptr,
                           task, o.data());
    };
    EXPECT_NEAR(*loss, reference(), 1e-5 * std::abs(reference()));
    constexpr double kEps = 1e-6;
    auto numeric = [&](double* v) {
      const double saved = *v;
      *v = saved + kEps;
      const double plus = reference();
      *v = saved - kEps;
      const double minus = reference();
      *v = saved;
      return (plus - minus) / (2 * kEps);
    };
    auto expect_near = [](double analytic, double numeric, const char* what,
                          int i) {
      EXPECT_NEAR(analytic, numeric, 1e-4 + 1e-3 * std::abs(numeric))
          << what << " " << i;
    };
    for (size_t i = 0; i < p.size(); ++i) {
      expect_near(grad[i], numeric(&p[i]), "param", i);
    }
    // Embeddings and outputs: gradients of the summed loss.
    for (size_t i = 0; i < e.size(); ++i) {
      expect_near(emb_grad[i], kRows * numeric(&e[i]), "embedding", i);
    }
    for (int r = 0; r < kRows; ++r) {
      expect_near(out_grad[r], kRows * numeric(&o[r]), "output", r);
    }
  }
}

TEST(PooledLossAndGradientTest, RefusesAFieldOrSlotOutOfRange) {
  const ModelSpec spec = MakeSpec("mlp", {4, 3, 1}, "binary");
  const std::vector<float> params(spec.num_params(), 0.1f);
  PooledInputs in;
  in.embeddings.assign(6, 0.1f);
  in.offsets = {0, 2};
  in.slot = {0, 2};
  in.field = {0, 1};
  in.value = {1, 1};
  in.embedding_rows = 3;
  in.fields = 2;
  in.dim = 2;
  PooledBatch batch = in.batch();
  std::vector<uint32_t>& slot = in.slot;
  std::vector<uint16_t>& field = in.field;
  const std::vector<float> labels = {1};
  CpuBackend backend(spec, 4);
  std::vector<float> grad(spec.num_params()), emb_grad(6), out_grad(1);
  auto run = [&] {
    return backend
        .PooledLossAndGradient(params.data(), batch, nullptr, labels.data(), 1,
                               grad.data(), emb_grad.data(), out_grad.data())
        .status();
  };
  EXPECT_THAT(run(), IsOk());
  slot[1] = 3;
  EXPECT_THAT(run(), StatusIs(absl::StatusCode::kInvalidArgument,
                              HasSubstr("embedding row 3 of 3")));
  slot[1] = 2;
  field[1] = 2;
  EXPECT_THAT(run(), StatusIs(absl::StatusCode::kInvalidArgument,
                              HasSubstr("field 2 of 2")));
  field[1] = 1;
  batch.dim = 1;
  EXPECT_THAT(run(), StatusIs(absl::StatusCode::kInvalidArgument,
                              HasSubstr("do not make the model's 4 inputs")));
}

INSTANTIATE_TEST_SUITE_P(Models, TrainTest,
                         ::testing::Values(TrainCase{"mlp", {20, 32, 16, 4}},
                                           TrainCase{"softmax", {20, 4}}));

}  // namespace
}  // namespace downpour::worker
