// Test metrics from raw model outputs.
#include "model/metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/config.h"

namespace downpour::model {
namespace {

// log(sum_c exp(z_c)), stably.
double LogSumExp(const float* z, int k) {
  const float max = *std::max_element(z, z + k);
  double sum = 0;
  for (int c = 0; c < k; ++c) sum += std::exp(static_cast<double>(z[c] - max));
  return max + std::log(sum);
}

// log(1 + e^z), stably.
double Softplus(double z) {
  return std::max(z, 0.0) + std::log1p(std::exp(-std::fabs(z)));
}

void Multiclass(const float* out, const float* y, int64_t n, int k,
                Metrics* m) {
  double logloss = 0;
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* z = out + i * k;
    const int label = static_cast<int>(y[i]);
    logloss += LogSumExp(z, k) - z[label];
    // max_element returns the first maximum: ties go to the lowest class.
    if (std::max_element(z, z + k) - z == label) ++correct;
  }
  m->accuracy = static_cast<double>(correct) / n;
  m->logloss = m->loss = logloss / n;
}

// The smaller of p and 1 - p for p = sigmoid(z): sigmoid(-|z|).
double Closeness(double z) { return 1 / (1 + std::exp(std::fabs(z))); }

void Binary(const float* out, const float* y, int64_t n, Metrics* m) {
  double logloss = 0;
  int64_t correct = 0, saturated = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double z = out[i];
    logloss += Softplus(z) - y[i] * z;
    if ((z > 0) == (y[i] == 1.0f)) ++correct;
    if (Closeness(z) <= kSaturatedDistance) ++saturated;
  }
  m->accuracy = static_cast<double>(correct) / n;
  m->logloss = m->loss = logloss / n;
  m->saturated = static_cast<double>(saturated) / n;
  m->auc = Auc(std::vector<float>(out, out + n), std::vector<float>(y, y + n));
}

void Regression(const float* out, const float* y, int64_t n, Metrics* m) {
  double sq = 0, abs = 0, mean = 0;
  for (int64_t i = 0; i < n; ++i) mean += y[i];
  mean /= n;
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double diff = static_cast<double>(out[i]) - y[i];
    sq += diff * diff;
    abs += std::fabs(diff);
    total += (y[i] - mean) * (y[i] - mean);
  }
  m->loss = sq / n;
  m->rmse = std::sqrt(sq / n);
  m->mae = abs / n;
  m->r2 = total > 0 ? 1 - sq / total : NAN;
}

}  // namespace

double Metrics::Get(const std::string& name) const {
  if (name == "accuracy") return accuracy;
  if (name == "logloss") return logloss;
  if (name == "auc") return auc;
  if (name == "rmse") return rmse;
  if (name == "mae") return mae;
  if (name == "r2") return r2;
  if (name == "saturated") return saturated;
  return NAN;
}

std::vector<std::pair<std::string, double>> Metrics::Named(Task task) const {
  std::vector<std::pair<std::string, double>> out;
  for (const std::string& name : TaskMetricNames(task)) {
    out.emplace_back(name, Get(name));
  }
  return out;
}

std::vector<std::pair<std::string, double>> Metrics::Reported(Task task) const {
  std::vector<std::pair<std::string, double>> out = Named(task);
  if (!std::isnan(saturated)) out.emplace_back("saturated", saturated);
  return out;
}

const char* SaturationKey(ModelType type) {
  switch (type) {
    case ModelType::kFm:
      return "fm.learning_rate";
    case ModelType::kWideDeep:
      return "wide_deep.mlp_learning_rate";
    default:
      return "optimizer.learning_rate";
  }
}

std::string SaturationWarning(double saturated, ModelType type) {
  if (std::isnan(saturated) || saturated <= kSaturationWarnShare) return "";
  return absl::StrFormat(
      "%.1f %% of the test predictions are saturated (probability within %g "
      "of 0 or 1; the logloss counts each wrong one as %.0f nats or more): "
      "lower %s",
      100 * saturated, kSaturatedDistance,
      std::log((1 - kSaturatedDistance) / kSaturatedDistance),
      SaturationKey(type));
}

Metrics ComputeMetrics(Task task, const float* outputs, const float* targets,
                       int64_t n, int k) {
  Metrics m;
  if (n <= 0) return m;
  switch (task) {
    case Task::kMulticlass:
      Multiclass(outputs, targets, n, k, &m);
      break;
    case Task::kBinary:
      Binary(outputs, targets, n, &m);
      break;
    case Task::kRegression:
      Regression(outputs, targets, n, &m);
      break;
  }
  return m;
}

void OutputsToPredictions(Task task, int64_t n, int k, float* outputs) {
  if (task == Task::kRegression) return;
  if (task == Task::kBinary) {
    for (int64_t i = 0; i < n; ++i) {
      outputs[i] = static_cast<float>(1 / (1 + std::exp(-double{outputs[i]})));
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    float* z = outputs + i * k;
    const double lse = LogSumExp(z, k);
    for (int c = 0; c < k; ++c) z[c] = static_cast<float>(std::exp(z[c] - lse));
  }
}

std::string FormatMetrics(
    const std::vector<std::pair<std::string, double>>& named) {
  if (named.empty()) return "not measured yet";
  std::string out;
  for (const auto& [name, value] : named) {
    absl::StrAppendFormat(&out, "%s%s %.4f", out.empty() ? "" : ", ", name,
                          value);
  }
  return out;
}

double Auc(const std::vector<float>& scores, const std::vector<float>& labels) {
  const int64_t n = static_cast<int64_t>(scores.size());
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return scores[a] < scores[b]; });
  double positive_rank_sum = 0;
  int64_t positives = 0;
  for (int64_t i = 0; i < n;) {
    int64_t j = i;
    while (j < n && scores[order[j]] == scores[order[i]]) ++j;
    const double rank = (i + 1 + j) / 2.0;  // average of ranks i+1 .. j
    for (int64_t t = i; t < j; ++t) {
      if (labels[order[t]] == 1.0f) {
        positive_rank_sum += rank;
        ++positives;
      }
    }
    i = j;
  }
  const int64_t negatives = n - positives;
  if (positives == 0 || negatives == 0) return NAN;
  return (positive_rank_sum - positives * (positives + 1) / 2.0) /
         (static_cast<double>(positives) * negatives);
}

absl::Status CheckTargets(Task task, const float* targets, int n, int outputs) {
  for (int i = 0; i < n; ++i) {
    const float y = targets[i];
    bool ok = std::isfinite(y);
    const char* want = "a finite value";
    if (task == Task::kMulticlass) {
      ok = ok && y >= 0 && y < outputs && y == std::floor(y);
      want = "a class index";
    } else if (task == Task::kBinary) {
      ok = y == 0.0f || y == 1.0f;
      want = "0 or 1";
    }
    if (!ok) {
      std::string range = task == Task::kMulticlass
                              ? absl::StrCat(" in [0, ", outputs, ")")
                              : "";
      return absl::InvalidArgumentError(
          absl::StrCat("target ", y, " of example ", i, " is not ", want, range,
                       " (model.task ", TaskName(task), ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace downpour::model
