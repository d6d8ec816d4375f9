// Label tokens to targets: numeric classes sort by value, others keep their
// order of first appearance.
#include "data/label_map.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "data/reader_internal.h"

namespace downpour::data::internal {
namespace {

absl::Status BadNumber(NumberKind kind, absl::string_view token) {
  switch (kind) {
    case NumberKind::kNaN:
      return absl::InvalidArgumentError(
          absl::StrCat("label ", Quote(token), " is NaN; fix or drop the row"));
    case NumberKind::kInf:
      return absl::InvalidArgumentError(absl::StrCat(
          "label ", Quote(token),
          " is infinite (or too large for a float); fix or drop the row"));
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("label ", Quote(token),
                       " is not a number, as a regression target must be "
                       "(model.task: regression); for class labels use "
                       "model.task: classification"));
  }
}

// The classes for a message: at most 20, quoted.
std::string ListClasses(const std::vector<std::string>& classes) {
  std::vector<std::string> shown;
  for (size_t i = 0; i < classes.size() && i < 20; ++i) {
    shown.push_back(Quote(classes[i]));
  }
  std::string list = absl::StrJoin(shown, ", ");
  if (classes.size() > shown.size()) {
    absl::StrAppend(&list, ", ... (", classes.size(), " in all)");
  }
  return absl::StrCat("[", list, "]");
}

}  // namespace

LabelMap::LabelMap(LabelMode mode, const std::vector<std::string>& classes)
    : mode_(mode), classes_(classes) {
  if (mode_ != LabelMode::kClass) return;
  for (size_t i = 0; i < classes_.size(); ++i) {
    // The first of repeated names wins.
    index_.emplace(classes_[i], static_cast<int>(i));
    float v;
    class_values_.push_back(ParseFloat(classes_[i], &v) == NumberKind::kOk
                                ? v
                                : std::numeric_limits<float>::quiet_NaN());
  }
}

absl::Status LabelMap::Add(absl::string_view token, float* y) {
  if (mode_ == LabelMode::kReal) {
    const NumberKind kind = ParseFloat(token, y);
    return kind == NumberKind::kOk ? absl::OkStatus() : BadNumber(kind, token);
  }
  if (last_index_ >= 0 && token == last_token_) {
    *y = static_cast<float>(last_index_);
    return absl::OkStatus();
  }
  absl::Status status =
      classes_.empty() ? AddImplicit(token, y) : AddExplicit(token, y);
  if (status.ok()) {
    last_token_.assign(token.data(), token.size());
    last_index_ = static_cast<int>(*y);
  }
  return status;
}

absl::Status LabelMap::AddExplicit(absl::string_view token, float* y) {
  auto it = index_.find(token);
  if (it != index_.end()) {
    *y = static_cast<float>(it->second);
    return absl::OkStatus();
  }
  // "+1" for a class written "1", "1.0" for "1".
  float v;
  if (ParseFloat(token, &v) == NumberKind::kOk) {
    for (size_t i = 0; i < class_values_.size(); ++i) {
      if (class_values_[i] == v) {
        *y = static_cast<float>(i);
        return absl::OkStatus();
      }
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("label ", Quote(token), " is not one of the classes ",
                   ListClasses(classes_), "; add it to data.classes"));
}

absl::Status LabelMap::AddImplicit(absl::string_view token, float* y) {
  auto it = index_.find(token);
  if (it != index_.end()) {
    *y = static_cast<float>(it->second);
    return absl::OkStatus();
  }
  float v;
  const NumberKind kind = ParseFloat(token, &v);
  if (kind == NumberKind::kNaN || kind == NumberKind::kInf) {
    return BadNumber(kind, token);
  }
  if (static_cast<int>(tokens_.size()) >= kMaxImplicitClasses) {
    return absl::InvalidArgumentError(absl::StrCat(
        "more than ", kMaxImplicitClasses, " distinct labels (", Quote(token),
        " makes ", kMaxImplicitClasses + 1,
        "): this looks like a regression target; use model.task: regression "
        "(or list the classes in data.classes)"));
  }
  const int index = static_cast<int>(tokens_.size());
  tokens_.emplace_back(token);
  index_.emplace(tokens_.back(), index);
  *y = static_cast<float>(index);
  return absl::OkStatus();
}

void LabelMap::Finish(std::vector<float>* y,
                      std::vector<std::string>* class_names) {
  class_names->clear();
  if (mode_ != LabelMode::kClass) return;
  if (!classes_.empty()) {
    *class_names = classes_;
    return;
  }
  // Numeric labels sort by value; equal values ("1", "+1", "1.0") are one
  // class, named by the token written first.
  std::vector<float> values(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (ParseFloat(tokens_[i], &values[i]) != NumberKind::kOk) {
      *class_names = tokens_;  // order of first appearance
      return;
    }
  }
  std::vector<int> order(tokens_.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return values[a] < values[b]; });
  std::vector<float> final_index(tokens_.size());
  for (size_t k = 0; k < order.size(); ++k) {
    const int i = order[k];
    if (k == 0 || values[i] != values[order[k - 1]]) {
      class_names->push_back(tokens_[i]);  // the lowest provisional index
    }
    final_index[i] = static_cast<float>(class_names->size() - 1);
  }
  for (float& v : *y) v = final_index[static_cast<int>(v)];
}

}  // namespace downpour::data::internal
