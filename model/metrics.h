// Test metrics of a trained model, from its raw outputs: the one place where
// the worker, `predict` and the parity benchmark turn outputs into figures.
//
//   std::vector<float> out(n * spec.outputs());
//   backend->Predict(params, x, n, out.data());
//   Metrics m = ComputeMetrics(spec.task(), out.data(), y, n, spec.outputs());
//   m.Get("auc");
#ifndef DOWNPOUR_MODEL_METRICS_H_
#define DOWNPOUR_MODEL_METRICS_H_

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/config.h"
#include "common/model_spec.h"

namespace downpour::model {

// Every figure is NaN where the task does not measure it (or n is 0).
struct Metrics {
  double accuracy = NAN;  // multiclass, binary: share of examples right
  double logloss = NAN;   // multiclass, binary: mean -log p(true class)
  double auc = NAN;       // binary: area under the ROC curve (ties count 1/2)
  double rmse = NAN;      // regression: sqrt(mean squared error)
  double mae = NAN;       // regression: mean absolute error
  double r2 = NAN;        // regression: 1 - SS_res / SS_tot
  // The training loss on these examples, as the backends compute it: logloss
  // for classification, the mean squared error for regression.
  double loss = NAN;
  // binary: the share of examples whose predicted probability of class 1
  // is within kSaturatedDistance of 0 or 1, i.e. a |margin| of 13.8 or more
  // (a float sigmoid rounds to exactly 0 or 1 past about 17). A model that
  // says 0 or 1 is wrong at a cost of ~14 nats or more: more than
  // kSaturationWarnShare of them means its rates are too high
  // (SaturationWarning). Not measured for multiclass, where a well-trained
  // MNIST model is that sure of most digits.
  double saturated = NAN;

  // The value of "accuracy", "logloss", "auc", "rmse", "mae" or "r2"; NaN for
  // any other name.
  double Get(const std::string& name) const;
  // The task's metrics in TaskMetricNames order (common/config.h), main first.
  std::vector<std::pair<std::string, double>> Named(Task task) const;
  // What a worker reports: Named(task), then "saturated" where measured.
  std::vector<std::pair<std::string, double>> Reported(Task task) const;
};

// A probability within this of 0 or 1 is saturated (Metrics::saturated).
inline constexpr double kSaturatedDistance = 1e-6;
// SaturationWarning speaks when more than this share is saturated.
inline constexpr double kSaturationWarnShare = 0.01;

// The config key whose lowering most often cures saturated predictions of a
// model of `type`: "fm.learning_rate" (fm), "wide_deep.mlp_learning_rate"
// (wide_deep), else "optimizer.learning_rate".
const char* SaturationKey(ModelType type);

// "" when `saturated` (a share, Metrics::saturated) is NaN or at most
// kSaturationWarnShare; else a warning naming the share and the key to lower:
// "93.4 % of the test predictions are saturated (probability within 1e-06 of
// 0 or 1; the logloss counts each wrong one as 14 nats or more): lower
// fm.learning_rate".
std::string SaturationWarning(double saturated, ModelType type);

// InvalidArgument naming the first example whose target the task cannot
// take: a class index that is not an integer in [0, outputs) (kMulticlass),
// a target other than 0 or 1 (kBinary), or a non-finite value (kRegression).
// The training backends (worker/mlp_math.h) and `predict` check with it.
absl::Status CheckTargets(Task task, const float* targets, int n, int outputs);

// Metrics of n examples from `outputs` (n * k raw outputs as
// ComputeBackend::Predict writes them) against `targets` (class indices, 0/1
// or values). REQUIRES: CheckTargets(task, targets, n, k) is OK.
Metrics ComputeMetrics(Task task, const float* outputs, const float* targets,
                       int64_t n, int k);

// Turns n rows of k raw outputs into what a user reads, in place: class
// probabilities (softmax, multiclass), the probability of class 1 (sigmoid,
// binary) or the value itself (regression).
void OutputsToPredictions(Task task, int64_t n, int k, float* outputs);

// "accuracy 0.9612, logloss 0.1345" (4 decimals), or "not measured yet"
// when `named` is empty.
std::string FormatMetrics(
    const std::vector<std::pair<std::string, double>>& named);

// The area under the ROC curve of `scores` against 0/1 `labels`
// (Mann-Whitney U with average ranks for ties). NaN when one class is absent.
double Auc(const std::vector<float>& scores, const std::vector<float>& labels);

}  // namespace downpour::model

#endif  // DOWNPOUR_MODEL_METRICS_H_
