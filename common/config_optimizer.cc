// The `optimizer` section: the names of its choices, its keys, and the text
// of its settings that a primary and its backup compare.
#include "common/config_optimizer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/config_field.h"

namespace downpour {
namespace {

using config_internal::Choice;
using config_internal::ChoiceName;
using config_internal::ParseChoice;

// The spellings of each choice, the first one the name.
constexpr Choice<OptimizerType> kOptimizerTypes[] = {
    {"sgd", OptimizerType::kSgd},
    {"momentum", OptimizerType::kMomentum},
    {"adagrad", OptimizerType::kAdagrad},
    {"adam", OptimizerType::kAdam},
    {"ftrl", OptimizerType::kFtrl}};
constexpr Choice<LrScheduleType> kLrScheduleTypes[] = {
    {"constant", LrScheduleType::kConstant},
    {"step", LrScheduleType::kStep},
    {"cosine", LrScheduleType::kCosine}};
constexpr Choice<AsyncMomentum> kAsyncMomentums[] = {
    {"auto", AsyncMomentum::kAuto}, {"off", AsyncMomentum::kOff}};

std::vector<std::pair<std::string, std::string>> OptimizerSettings(
    const OptimizerSection& o) {
  auto num = [](double v) { return absl::StrFormat("%.17g", v); };
  return {
      {"type", OptimizerTypeName(o.type)},
      {"learning_rate", num(o.learning_rate)},
      {"momentum", num(o.momentum)},
      {"beta1", num(o.beta1)},
      {"beta2", num(o.beta2)},
      {"epsilon", num(o.epsilon)},
      {"weight_decay", num(o.weight_decay)},
      {"schedule", LrScheduleTypeName(o.schedule)},
      {"warmup_updates", absl::StrCat(o.warmup_updates)},
      {"decay_updates", absl::StrCat(o.decay_updates)},
      {"decay_factor", num(o.decay_factor)},
      {"min_lr_fraction", num(o.min_lr_fraction)},
      {"staleness_lr", o.staleness_lr ? "true" : "false"},
      {"async_momentum", AsyncMomentumName(o.async_momentum)},
      {"delay_compensation", num(o.delay_compensation)},
      {"max_gradient_value", num(o.max_gradient_value)},
      {"max_gradient_norm", num(o.max_gradient_norm)},
      {"ftrl_beta", num(o.ftrl_beta)},
      {"l1", num(o.l1)},
      {"l2", num(o.l2)},
  };
}

}  // namespace

namespace config_internal {

std::vector<ConfigField> OptimizerKeys(OptimizerSection* o) {
  return {
      ChoiceField("optimizer.type", &o->type, ParseOptimizerType,
                  OptimizerTypeName),
      DoubleField("optimizer.learning_rate", &o->learning_rate,
                  PositiveAtMost(1000)),
      DoubleField("optimizer.momentum", &o->momentum, ZeroToOne()),
      DoubleField("optimizer.beta1", &o->beta1, ZeroToOne()),
      DoubleField("optimizer.beta2", &o->beta2, ZeroToOne()),
      // Below 1e-30 float32 rounds it to 0 (0 / 0 on a zero gradient).
      DoubleField("optimizer.epsilon", &o->epsilon, {1e-30, false, 1, false}),
      DoubleField("optimizer.weight_decay", &o->weight_decay,
                  NonNegativeAtMost(1)),
      ChoiceField("optimizer.schedule", &o->schedule, ParseLrScheduleType,
                  LrScheduleTypeName),
      Int64Field("optimizer.warmup_updates", &o->warmup_updates,
                 Between(0, kMaxUpdates)),
      Int64Field("optimizer.decay_updates", &o->decay_updates,
                 Between(0, kMaxUpdates)),
      DoubleField("optimizer.decay_factor", &o->decay_factor,
                  {0, true, 1, false}),
      DoubleField("optimizer.min_lr_fraction", &o->min_lr_fraction, Fraction()),
      BoolField("optimizer.staleness_lr", &o->staleness_lr),
      ChoiceField("optimizer.async_momentum", &o->async_momentum,
                  ParseAsyncMomentum, AsyncMomentumName),
      DoubleField("optimizer.delay_compensation", &o->delay_compensation,
                  NonNegativeAtMost(1000)),
      DoubleField("optimizer.max_gradient_value", &o->max_gradient_value,
                  NonNegativeAtMost(1e30)),
      DoubleField("optimizer.max_gradient_norm", &o->max_gradient_norm,
                  NonNegativeAtMost(1e30)),
      DoubleField("optimizer.ftrl_beta", &o->ftrl_beta, NonNegativeAtMost(1e6)),
      DoubleField("optimizer.l1", &o->l1, NonNegativeAtMost(1e6)),
      DoubleField("optimizer.l2", &o->l2, NonNegativeAtMost(1e6))};
}

}  // namespace config_internal

const char* OptimizerTypeName(OptimizerType type) {
  return ChoiceName(kOptimizerTypes, type);
}
absl::StatusOr<OptimizerType> ParseOptimizerType(absl::string_view name) {
  return ParseChoice("optimizer.type", kOptimizerTypes, name);
}

const char* LrScheduleTypeName(LrScheduleType schedule) {
  return ChoiceName(kLrScheduleTypes, schedule);
}
absl::StatusOr<LrScheduleType> ParseLrScheduleType(absl::string_view name) {
  return ParseChoice("optimizer.schedule", kLrScheduleTypes, name);
}

const char* AsyncMomentumName(AsyncMomentum mode) {
  return ChoiceName(kAsyncMomentums, mode);
}
absl::StatusOr<AsyncMomentum> ParseAsyncMomentum(absl::string_view name) {
  return ParseChoice("optimizer.async_momentum", kAsyncMomentums, name);
}

std::string OptimizerSettingsText(const OptimizerSection& optimizer) {
  std::string text;
  for (const auto& [key, value] : OptimizerSettings(optimizer)) {
    absl::StrAppend(&text, key, "=", value, "\n");
  }
  return text;
}

std::string FirstOptimizerDifference(const std::string& a,
                                     const std::string& a_name,
                                     const std::string& b,
                                     const std::string& b_name) {
  if (a == b) return "";
  auto parse = [](const std::string& text) {
    std::vector<std::pair<std::string, std::string>> out;
    for (absl::string_view line :
         absl::StrSplit(text, '\n', absl::SkipEmpty())) {
      const size_t eq = line.find('=');
      out.emplace_back(std::string(line.substr(0, eq)),
                       eq == absl::string_view::npos
                           ? ""
                           : std::string(line.substr(eq + 1)));
    }
    return out;
  };
  const auto first = parse(a), second = parse(b);
  for (const auto& [key, value] : first) {
    std::string other = "(unset)";
    for (const auto& [k, v] : second) {
      if (k == key) other = v;
    }
    if (other != value) {
      return absl::StrCat("optimizer.", key, " is ", value, " ", a_name,
                          " and ", other, " ", b_name);
    }
  }
  return absl::StrCat("the optimizer sections ", a_name, " and ", b_name,
                      " list different keys");
}

}  // namespace downpour
