// Typed config keys: YAML conversion and range checks.
#include "common/config_field.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace downpour::config_internal {
namespace {

absl::Status TypeError(const std::string& key, const std::string& expected,
                       const YAML::Node& node) {
  return absl::InvalidArgumentError(
      absl::StrCat(key, " must be ", expected, ", got ", DescribeValue(node)));
}

absl::Status ReadInt64(const std::string& key, const YAML::Node& node,
                       int64_t* out) {
  if (node.IsScalar() && absl::SimpleAtoi(node.Scalar(), out)) {
    return absl::OkStatus();
  }
  return TypeError(key, "an integer", node);
}

// `range` narrowed to what T can hold, described by the end that `value` is
// past.
template <typename T>
absl::Status CheckInt(const std::string& key, int64_t value, IntRange range) {
  constexpr int64_t kTypeMin = std::numeric_limits<T>::min();
  constexpr int64_t kTypeMax = std::numeric_limits<T>::max();
  const int64_t min = std::max(range.min, kTypeMin);
  const int64_t max = std::min(range.max, kTypeMax);
  if (value >= min && value <= max) return absl::OkStatus();
  std::string allowed = absl::StrCat("in ", min, "..", max);
  if (value < min && max == kTypeMax) allowed = absl::StrCat(">= ", min);
  if (value > max && min == kTypeMin) allowed = absl::StrCat("<= ", max);
  return absl::InvalidArgumentError(
      absl::StrCat(key, " must be ", allowed, ", got ", value));
}

template <typename T>
ConfigField IntegerField(std::string key, T* value, IntRange range) {
  ConfigField field{std::move(key), nullptr, nullptr};
  field.read = [key = field.key, value, range](const YAML::Node& node) {
    int64_t v = 0;
    absl::Status status = ReadInt64(key, node, &v);
    if (status.ok()) status = CheckInt<T>(key, v, range);
    if (status.ok()) *value = static_cast<T>(v);
    return status;
  };
  field.check = [key = field.key, value, range] {
    return CheckInt<T>(key, *value, range);
  };
  return field;
}

// InvalidArgument "KEY must have at most MAX entries, got N" when a list is
// longer: checked before the entries are read.
absl::Status CheckMaxEntries(const std::string& key, const YAML::Node& node,
                             size_t max_entries) {
  if (node.size() <= max_entries) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      key, " must have at most ", max_entries, " entries, got ", node.size()));
}

std::string DescribeRange(const DoubleRange& r) {
  if (std::isinf(r.max)) return absl::StrCat(r.min_open ? "> " : ">= ", r.min);
  return absl::StrCat("in ", r.min_open ? "(" : "[", r.min, ", ", r.max,
                      r.max_open ? ")" : "]");
}

bool InRange(double v, const DoubleRange& r) {
  const bool above_min = r.min_open ? v > r.min : v >= r.min;
  const bool below_max = r.max_open ? v < r.max : v <= r.max;
  return std::isfinite(v) && above_min && below_max;
}

absl::Status CheckAddress(const std::string& key, const std::string& address) {
  if (IsHostPort(address)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      key, " must be host:port with a port in 0..65535, got '", address, "'"));
}

bool IsPort(absl::string_view port) {
  int value = 0;
  return !port.empty() && port.size() <= 5 &&
         std::all_of(port.begin(), port.end(), absl::ascii_isdigit) &&
         absl::SimpleAtoi(port, &value) && value <= 65535;
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitute});
    }
  }
  return row[b.size()];
}

}  // namespace

std::string Where(const std::string& file, const YAML::Mark& mark) {
  if (mark.is_null()) return file;
  return absl::StrCat(file, ":", mark.line + 1);
}

absl::Status Located(const std::string& where, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(where, ": ", status.message()));
}

std::string DescribeValue(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Scalar:
      return absl::StrCat("'", node.Scalar(), "'");
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

std::string ConfigField::name() const {
  const size_t dot = key.find('.');
  return dot == std::string::npos ? key : key.substr(dot + 1);
}

ConfigField IntField(std::string key, int* value, IntRange range) {
  return IntegerField(std::move(key), value, range);
}

ConfigField Int64Field(std::string key, int64_t* value, IntRange range) {
  return IntegerField(std::move(key), value, range);
}

ConfigField Uint64Field(std::string key, uint64_t* value) {
  ConfigField field{std::move(key), nullptr, [] { return absl::OkStatus(); }};
  field.read = [key = field.key, value](const YAML::Node& node) {
    int64_t negative = 0;
    if (node.IsScalar() && absl::SimpleAtoi(node.Scalar(), value)) {
      return absl::OkStatus();
    }
    if (node.IsScalar() && absl::SimpleAtoi(node.Scalar(), &negative)) {
      return absl::InvalidArgumentError(
          absl::StrCat(key, " must be >= 0, got ", negative));
    }
    return TypeError(key, "an integer", node);
  };
  return field;
}

ConfigField DoubleField(std::string key, double* value, DoubleRange range) {
  ConfigField field{std::move(key), nullptr, nullptr};
  field.read = [key = field.key, value](const YAML::Node& node) {
    double v = 0;
    if (!node.IsScalar() || !absl::SimpleAtod(node.Scalar(), &v) ||
        !std::isfinite(v)) {
      return TypeError(key, "a number", node);
    }
    *value = v;
    return absl::OkStatus();
  };
  field.check = [key = field.key, value, range] {
    if (InRange(*value, range)) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat(key, " must be ", DescribeRange(range), ", got ", *value));
  };
  return field;
}

ConfigField BoolField(std::string key, bool* value) {
  ConfigField field{std::move(key), nullptr, [] { return absl::OkStatus(); }};
  field.read = [key = field.key, value](const YAML::Node& node) {
    // convert<bool> accepts true/false, yes/no, on/off and does not throw.
    if (node.IsScalar() && YAML::convert<bool>::decode(node, *value)) {
      return absl::OkStatus();
    }
    return TypeError(key, "true or false", node);
  };
  return field;
}

absl::Status ReadString(const std::string& key, const YAML::Node& node,
                        std::string* out) {
  if (node.IsNull()) {
    return absl::InvalidArgumentError(absl::StrCat(
        key, " must be a string, got null (write \"\" for an empty string)"));
  }
  if (!node.IsScalar()) return TypeError(key, "a string", node);
  if (node.Scalar().size() > kMaxStringLength) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, " must be at most ", kMaxStringLength,
                     " characters, got ", node.Scalar().size()));
  }
  *out = node.Scalar();
  return absl::OkStatus();
}

ConfigField StringField(std::string key, std::string* value) {
  ConfigField field{std::move(key), nullptr, [] { return absl::OkStatus(); }};
  field.read = [key = field.key, value](const YAML::Node& node) {
    return ReadString(key, node, value);
  };
  return field;
}

ConfigField EnumField(std::string key, std::string* value,
                      std::vector<std::string> allowed) {
  ConfigField field = StringField(std::move(key), value);
  field.check = [key = field.key, value, allowed = std::move(allowed)] {
    if (std::find(allowed.begin(), allowed.end(), *value) != allowed.end()) {
      return absl::OkStatus();
    }
    return ChoiceError(key, allowed, *value);
  };
  return field;
}

absl::Status ChoiceError(const std::string& key,
                         const std::vector<std::string>& allowed,
                         absl::string_view got) {
  std::string message =
      absl::StrCat(key, " must be one of ", absl::StrJoin(allowed, ", "),
                   "; got '", got, "'");
  const std::string hint = ClosestMatch(std::string(got), allowed);
  if (!hint.empty()) absl::StrAppend(&message, " (did you mean '", hint, "'?)");
  return absl::InvalidArgumentError(message);
}

ConfigField AddressField(std::string key, std::string* value) {
  ConfigField field = StringField(std::move(key), value);
  field.check = [key = field.key, value] { return CheckAddress(key, *value); };
  return field;
}

ConfigField AddressListField(std::string key, std::vector<std::string>* value,
                             size_t min_entries, size_t max_entries) {
  ConfigField field{std::move(key), nullptr, nullptr};
  field.read = [key = field.key, value, max_entries](const YAML::Node& node) {
    if (!node.IsSequence()) {
      return TypeError(key, "a list of host:port addresses", node);
    }
    absl::Status size = CheckMaxEntries(key, node, max_entries);
    if (!size.ok()) return size;
    std::vector<std::string> addresses;
    for (const YAML::Node& element : node) {
      const std::string name = absl::StrCat(key, "[", addresses.size(), "]");
      absl::Status status =
          ReadString(name, element, &addresses.emplace_back());
      if (!status.ok()) return status;
    }
    *value = std::move(addresses);
    return absl::OkStatus();
  };
  field.check = [key = field.key, value, min_entries, max_entries] {
    if (value->size() < min_entries) {
      return absl::InvalidArgumentError(absl::StrCat(
          key, " must list at least one host:port, got an empty list"));
    }
    if (value->size() > max_entries) {
      return absl::InvalidArgumentError(
          absl::StrCat(key, " must have at most ", max_entries,
                       " entries, got ", value->size()));
    }
    for (size_t i = 0; i < value->size(); ++i) {
      absl::Status status =
          CheckAddress(absl::StrCat(key, "[", i, "]"), (*value)[i]);
      if (!status.ok()) return status;
    }
    return absl::OkStatus();
  };
  return field;
}

ConfigField StringListField(std::string key, std::vector<std::string>* value,
                            size_t max_entries) {
  ConfigField field{std::move(key), nullptr, [] { return absl::OkStatus(); }};
  field.read = [key = field.key, value, max_entries](const YAML::Node& node) {
    if (!node.IsSequence()) return TypeError(key, "a list of strings", node);
    absl::Status size = CheckMaxEntries(key, node, max_entries);
    if (!size.ok()) return size;
    std::vector<std::string> values;
    for (const YAML::Node& element : node) {
      std::string v;
      absl::Status status =
          ReadString(absl::StrCat(key, "[", values.size(), "]"), element, &v);
      if (!status.ok()) return status;
      values.push_back(std::move(v));
    }
    *value = std::move(values);
    return absl::OkStatus();
  };
  return field;
}

ConfigField IntListField(std::string key, std::vector<int>* value,
                         size_t min_entries, size_t max_entries,
                         IntRange range) {
  ConfigField field{std::move(key), nullptr, nullptr};
  field.read = [key = field.key, value, max_entries](const YAML::Node& node) {
    if (!node.IsSequence()) return TypeError(key, "a list of integers", node);
    absl::Status size = CheckMaxEntries(key, node, max_entries);
    if (!size.ok()) return size;
    std::vector<int> values;
    for (const YAML::Node& element : node) {
      const std::string name = absl::StrCat(key, "[", values.size(), "]");
      int64_t v = 0;
      absl::Status status = ReadInt64(name, element, &v);
      if (status.ok()) status = CheckInt<int>(name, v, IntRange());
      if (!status.ok()) return status;
      values.push_back(static_cast<int>(v));
    }
    *value = std::move(values);
    return absl::OkStatus();
  };
  field.check = [key = field.key, value, min_entries, max_entries, range] {
    if (value->size() < min_entries || value->size() > max_entries) {
      return absl::InvalidArgumentError(
          absl::StrCat(key, " must have ",
                       value->size() < min_entries ? "at least " : "at most ",
                       value->size() < min_entries ? min_entries : max_entries,
                       " entries, got ", value->size()));
    }
    for (size_t i = 0; i < value->size(); ++i) {
      absl::Status status =
          CheckInt<int>(absl::StrCat(key, "[", i, "]"), (*value)[i], range);
      if (!status.ok()) return status;
    }
    return absl::OkStatus();
  };
  return field;
}

bool IsHostPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  const absl::string_view host(address.data(), colon);
  const bool bracketed = host.front() == '[';
  if (bracketed && (host.size() < 3 || host.back() != ']')) return false;
  if (!bracketed && host.find(':') != absl::string_view::npos) return false;
  if (std::any_of(host.begin(), host.end(), absl::ascii_isspace)) return false;
  return IsPort(absl::string_view(address).substr(colon + 1));
}

std::string ClosestMatch(const std::string& name,
                         const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(1, name.size() / 3) + 1;
  for (const std::string& candidate : candidates) {
    const size_t distance = EditDistance(name, candidate);
    if (distance < best_distance && distance < name.size()) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace downpour::config_internal
