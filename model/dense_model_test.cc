// DenseScorer against the training backend's forward pass on the same weights.
#include "model/dense_model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "common/config.h"
#include "common/model_spec.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/export.h"
#include "worker/cpu/cpu_backend.h"

namespace downpour::model {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;

Config MakeConfig(Task task, ModelType type, std::vector<int> layers) {
  Config config;
  config.model.task = task;
  config.model.type = type;
  config.model.layers = std::move(layers);
  config.data.source = DataSource::kCsv;
  return config;
}

// A model of `config` with parameters and standardization drawn from `seed`.
ExportedModel RandomModel(const Config& config, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  const int inputs = config.model.layers.front();
  std::vector<float> mean(inputs), std(inputs);
  for (int d = 0; d < inputs; ++d) {
    mean[d] = normal(rng);
    std[d] = 0.5f + std::abs(normal(rng));
  }
  ExportedModel model;
  model.meta = MakeMeta(config, {}, {}, mean, std);
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(config.model);
  EXPECT_THAT(spec, IsOk());
  model.params = spec->InitAll(seed);
  // Biases too, so that a wrong bias offset shows.
  for (float& p : model.params) p += 0.1f * normal(rng);
  return model;
}

std::vector<float> RandomRows(int64_t n, int inputs, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0, 2);
  std::vector<float> x(static_cast<size_t>(n) * inputs);
  for (float& v : x) v = normal(rng);
  return x;
}

struct Case {
  Task task;
  ModelType type;
  std::vector<int> layers;
};

TEST(DenseScorerTest, MarginsAreTheTrainingBackendsOnStandardizedRows) {
  const Case cases[] = {
      {Task::kMulticlass, ModelType::kMlp, {7, 16, 9, 4}},
      {Task::kBinary, ModelType::kMlp, {5, 8, 1}},
      {Task::kRegression, ModelType::kLinear, {6, 1}},
  };
  // More rows than one forward pass takes, and a partial last one.
  const int64_t n = 2 * DenseScorer::kBatchRows + 37;
  for (const Case& c : cases) {
    const Config config = MakeConfig(c.task, c.type, c.layers);
    ExportedModel model = RandomModel(config, 11);
    const std::vector<float> params = model.params;
    const proto::ModelMeta meta = model.meta;
    absl::StatusOr<std::unique_ptr<DenseScorer>> scorer =
        DenseScorer::Create(std::move(model));
    ASSERT_THAT(scorer, IsOk());
    const int inputs = c.layers.front(), k = c.layers.back();
    EXPECT_EQ((*scorer)->features(), inputs);
    EXPECT_EQ((*scorer)->outputs(), k);
    EXPECT_EQ((*scorer)->task(), c.task);
    const std::vector<float> x = RandomRows(n, inputs, 3);
    std::vector<float> served(static_cast<size_t>(n) * k);
    (*scorer)->Margins(x.data(), n, served.data());

    // Training's forward pass on the rows standardized as predict did.
    std::vector<float> standardized = x;
    for (int64_t i = 0; i < n; ++i) {
      for (int d = 0; d < inputs; ++d) {
        float& v = standardized[i * inputs + d];
        v = (v - meta.input_mean(d)) / meta.input_std(d);
      }
    }
    absl::StatusOr<ModelSpec> spec = ModelSpec::Create(config.model);
    ASSERT_THAT(spec, IsOk());
    worker::CpuBackend backend(*spec, DenseScorer::kBatchRows);
    std::vector<float> trained(served.size());
    ASSERT_THAT(
        backend.Predict(params.data(), standardized.data(), n, trained.data()),
        IsOk());
    EXPECT_EQ(served, trained) << "layers " << c.layers.size();

    // And the textbook loops, in double, within float rounding.
    const DenseLayout layout(*spec);
    for (int64_t i = 0; i < n; i += 97) {
      std::vector<double> a(standardized.begin() + i * inputs,
                            standardized.begin() + (i + 1) * inputs);
      for (int l = 0; l < layout.num_layers(); ++l) {
        const int fan_in = layout.layers[l], fan_out = layout.layers[l + 1];
        std::vector<double> z(fan_out);
        for (int o = 0; o < fan_out; ++o) {
          z[o] = params[layout.bias_offset[l] + o];
          for (int j = 0; j < fan_in; ++j) {
            z[o] += a[j] * params[layout.weight_offset[l] + j * fan_out + o];
          }
          if (l + 1 < layout.num_layers()) z[o] = std::max(z[o], 0.0);
        }
        a = std::move(z);
      }
      for (int o = 0; o < k; ++o) {
        EXPECT_NEAR(served[i * k + o], a[o], 1e-4 * (1 + std::abs(a[o])))
            << "example " << i << " output " << o;
      }
    }
  }
}

TEST(DenseScorerTest, NoRowsIsNoOutput) {
  const Config config = MakeConfig(Task::kBinary, ModelType::kMlp, {3, 2, 1});
  absl::StatusOr<std::unique_ptr<DenseScorer>> scorer =
      DenseScorer::Create(RandomModel(config, 1));
  ASSERT_THAT(scorer, IsOk());
  (*scorer)->Margins(nullptr, 0, nullptr);
}

TEST(DenseScorerTest, RefusesParametersOrStandardizationThatDoNotFit) {
  const Config config = MakeConfig(Task::kBinary, ModelType::kMlp, {3, 2, 1});
  ExportedModel short_params = RandomModel(config, 1);
  short_params.params.pop_back();
  EXPECT_THAT(DenseScorer::Create(std::move(short_params)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("need 11 parameters, it holds 10")));
  ExportedModel no_std = RandomModel(config, 1);
  no_std.meta.clear_input_std();
  EXPECT_THAT(DenseScorer::Create(std::move(no_std)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("need 3 values (one per input), they hold 3 "
                                 "and 0")));
  ExportedModel unknown = RandomModel(config, 1);
  unknown.meta.set_task("ranking");
  EXPECT_THAT(DenseScorer::Create(std::move(unknown)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace downpour::model
