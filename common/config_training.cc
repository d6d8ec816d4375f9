// The `training` section: the names of its choices, its keys and rules, and
// whether a metric has reached its target.
#include "common/config_training.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/config_field.h"

namespace downpour {
namespace {

using config_internal::Choice;
using config_internal::ChoiceName;
using config_internal::ParseChoice;

// The spellings of each choice, the first one the name.
constexpr Choice<FetchMode> kFetchModes[] = {
    {"after_push", FetchMode::kAfterPush},
    {"overlap", FetchMode::kOverlap},
    {"layerwise", FetchMode::kLayerwise}};
constexpr Choice<ConsistencyMode> kConsistencyModes[] = {
    {"async", ConsistencyMode::kAsync},
    {"ssp", ConsistencyMode::kSsp},
    {"bsp", ConsistencyMode::kBsp}};
constexpr Choice<TrainingMode> kTrainingModes[] = {
    {"downpour", TrainingMode::kDownpour}, {"easgd", TrainingMode::kEasgd}};

// training.mode easgd: the keys that do not go with it, InvalidArgument
// naming them and the fix.
absl::Status CheckEasgd(const TrainingSection& t) {
  if (t.mode != TrainingMode::kEasgd) return absl::OkStatus();
  if (t.consistency != ConsistencyMode::kAsync ||
      t.fetch != FetchMode::kAfterPush) {
    return absl::InvalidArgumentError(absl::StrCat(
        "training.mode easgd exchanges with the center every easgd_tau steps "
        "on its own, so it needs training.consistency async (not ",
        ConsistencyModeName(t.consistency),
        ") and training.fetch after_push (not ", FetchModeName(t.fetch),
        "): set those, or use training.mode downpour"));
  }
  if (t.n_fetch != 1 || t.n_push != 1 || t.warmstart_steps != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "training.mode easgd sets how often a worker talks to the ps with "
        "training.easgd_tau, so training.n_fetch and n_push must be 1 (not ",
        t.n_fetch, " and ", t.n_push, ") and training.warmstart_steps 0 (not ",
        t.warmstart_steps, "): remove them and set easgd_tau instead"));
  }
  return absl::OkStatus();
}

}  // namespace

namespace config_internal {

std::vector<ConfigField> TrainingKeys(TrainingSection* t) {
  return {
      IntField("training.batch_size", &t->batch_size, Between(1, 1 << 20)),
      IntField("training.n_fetch", &t->n_fetch, Between(1, 1'000'000)),
      IntField("training.n_push", &t->n_push, Between(1, 1'000'000)),
      ChoiceField("training.fetch", &t->fetch, ParseFetchMode, FetchModeName),
      IntField("training.max_pushes_in_flight", &t->max_pushes_in_flight,
               Between(1, 1024)),
      ChoiceField("training.consistency", &t->consistency, ParseConsistencyMode,
                  ConsistencyModeName),
      IntField("training.max_staleness", &t->max_staleness,
               Between(0, 1'000'000)),
      IntField("training.epochs", &t->epochs, Between(0, 1'000'000)),
      Int64Field("training.steps", &t->steps, Between(0, kMaxUpdates)),
      DoubleField("training.target_accuracy", &t->target_accuracy, Fraction()),
      EnumField("training.target_metric", &t->target_metric,
                {"", "accuracy", "logloss", "auc", "rmse", "mae", "r2"}),
      DoubleField("training.target_value", &t->target_value,
                  {-1e30, false, 1e30, false}),
      BoolField("training.stop_at_target", &t->stop_at_target),
      IntField("training.eval_every_steps", &t->eval_every_steps,
               Between(0, 1'000'000'000)),
      Uint64Field("training.seed", &t->seed),
      Int64Field("training.warmstart_steps", &t->warmstart_steps,
                 Between(0, kMaxUpdates)),
      DoubleField("training.outage_timeout_s", &t->outage_timeout_s,
                  NonNegativeAtMost(kMaxSeconds)),
      ChoiceField("training.mode", &t->mode, ParseTrainingMode,
                  TrainingModeName),
      DoubleField("training.easgd_alpha", &t->easgd_alpha, ZeroToOne()),
      IntField("training.easgd_tau", &t->easgd_tau, Between(1, 1'000'000))};
}

absl::Status CheckTraining(const TrainingSection& training, Task task,
                           const DataSection& data) {
  if (training.epochs == 0 && training.steps == 0) {
    return absl::InvalidArgumentError(
        "training.epochs and training.steps are both 0: set one so that "
        "workers know when to stop");
  }
  if (training.consistency == ConsistencyMode::kBsp &&
      training.n_fetch != training.n_push) {
    return absl::InvalidArgumentError(absl::StrCat(
        "training.consistency bsp computes every step on the parameters of the "
        "last round, so training.n_fetch (",
        training.n_fetch, ") must equal training.n_push (", training.n_push,
        "): set both to ", training.n_push));
  }
  if (training.fetch == FetchMode::kLayerwise &&
      (training.consistency != ConsistencyMode::kAsync ||
       training.n_fetch != 1 || training.n_push != 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "training.fetch layerwise pushes and pulls every step's blocks as "
        "backprop produces them, so it needs training.consistency async (not ",
        ConsistencyModeName(training.consistency),
        ") and training.n_fetch and n_push 1 (not ", training.n_fetch, " and ",
        training.n_push, "): set those, or use training.fetch after_push"));
  }
  if (training.consistency == ConsistencyMode::kBsp &&
      training.max_pushes_in_flight != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "training.consistency bsp waits for each round before the next step, "
        "so training.max_pushes_in_flight (",
        training.max_pushes_in_flight, ") must be 1: set it to 1"));
  }
  if (training.warmstart_steps > 0 &&
      training.consistency != ConsistencyMode::kAsync) {
    return absl::InvalidArgumentError(
        absl::StrCat("training.warmstart_steps (", training.warmstart_steps,
                     ") needs training.consistency async: with ",
                     ConsistencyModeName(training.consistency),
                     " the waiting workers would block worker 0's pushes; set "
                     "warmstart_steps to 0 or use async"));
  }
  if (absl::Status easgd = CheckEasgd(training); !easgd.ok()) return easgd;
  if (training.target_accuracy > 0 && data.test_examples == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "training.target_accuracy (", training.target_accuracy,
        ") needs test examples to measure, but data.test_examples is 0"));
  }
  if (training.target_value != 0 && data.test_examples == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "training.target_value (", training.target_value,
        ") needs test examples to measure, but data.test_examples is 0"));
  }
  const std::string& metric = training.target_metric;
  const std::vector<std::string> measured = TaskMetricNames(task);
  if (!metric.empty() &&
      std::find(measured.begin(), measured.end(), metric) == measured.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "training.target_metric ", metric, " is not measured for model.task ",
        TaskName(task), ": use one of ",
        absl::StrJoin(TaskMetricNames(task), ", ")));
  }
  return absl::OkStatus();
}

absl::Status CheckTrainingMode(const TrainingSection& training,
                               const ModelSection& model,
                               const OptimizerSection& optimizer) {
  if (training.mode != TrainingMode::kEasgd) return absl::OkStatus();
  if (IsSparseModel(model.type) || optimizer.type == OptimizerType::kFtrl) {
    return absl::InvalidArgumentError(absl::StrCat(
        "training.mode easgd keeps a local copy of dense parameters; "
        "model.type ",
        ModelTypeName(model.type), " with optimizer.type ",
        OptimizerTypeName(optimizer.type),
        " is not one: use a dense model (linear, mlp) with sgd, momentum, "
        "adagrad or adam, or training.mode downpour"));
  }
  if (optimizer.staleness_lr || optimizer.delay_compensation > 0) {
    return absl::InvalidArgumentError(
        "training.mode easgd steps each worker's own copy, never on stale "
        "parameters, so optimizer.staleness_lr and "
        "optimizer.delay_compensation do not apply: remove them");
  }
  return absl::OkStatus();
}

}  // namespace config_internal

const char* FetchModeName(FetchMode fetch) {
  return ChoiceName(kFetchModes, fetch);
}
absl::StatusOr<FetchMode> ParseFetchMode(absl::string_view name) {
  return ParseChoice("training.fetch", kFetchModes, name);
}

const char* ConsistencyModeName(ConsistencyMode mode) {
  return ChoiceName(kConsistencyModes, mode);
}
absl::StatusOr<ConsistencyMode> ParseConsistencyMode(absl::string_view name) {
  return ParseChoice("training.consistency", kConsistencyModes, name);
}

const char* TrainingModeName(TrainingMode mode) {
  return ChoiceName(kTrainingModes, mode);
}
absl::StatusOr<TrainingMode> ParseTrainingMode(absl::string_view name) {
  return ParseChoice("training.mode", kTrainingModes, name);
}

bool ReachedTarget(const std::string& metric, double value, double target) {
  if (metric.empty() || std::isnan(value)) return false;
  return HigherIsBetter(metric) ? value >= target : value <= target;
}

}  // namespace downpour
