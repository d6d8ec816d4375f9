// Typed keys of the YAML config. A ConfigField binds one key
// ("training.batch_size") to the struct field that holds it; it reads the key
// from a YAML node and checks the value it holds. Internal to the config
// loader: common/config.cc and the section files common/config_*.cc.
//
//   ConfigField f =
//       IntField("training.batch_size", &training.batch_size, AtLeast(1));
//   absl::Status s = f.read(node);  // "... must be an integer, got 'x'"
//   if (s.ok()) s = f.check();      // "... must be >= 1, got 0"
//
// Messages name the key but not the place; the caller prefixes "FILE:LINE: ".
#ifndef DOWNPOUR_COMMON_CONFIG_FIELD_H_
#define DOWNPOUR_COMMON_CONFIG_FIELD_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "yaml-cpp/yaml.h"

namespace downpour::config_internal {

// One key of a config section, bound to the field that holds its value. Holds
// raw pointers into a config struct, which must outlive it. Not thread-safe.
struct ConfigField {
  std::string key;  // full name, e.g. "training.batch_size"
  // Converts a YAML value and stores it: InvalidArgument on a wrong type. Does
  // not throw.
  std::function<absl::Status(const YAML::Node&)> read;
  // Checks the value now held: InvalidArgument when it is out of range.
  std::function<absl::Status()> check;

  // The key's name inside its section ("batch_size").
  std::string name() const;
};

// Allowed integers, inclusive at both ends.
struct IntRange {
  int64_t min = std::numeric_limits<int64_t>::min();
  int64_t max = std::numeric_limits<int64_t>::max();
};
inline IntRange AtLeast(int64_t min) { return {min}; }
inline IntRange Between(int64_t min, int64_t max) { return {min, max}; }

// Allowed real numbers; each end open or closed. Only finite values are
// allowed.
struct DoubleRange {
  double min = -std::numeric_limits<double>::infinity();
  bool min_open = false;
  double max = std::numeric_limits<double>::infinity();
  bool max_open = false;
};
inline DoubleRange Positive() { return {0, true}; }             // > 0
inline DoubleRange NonNegative() { return {0, false}; }         // >= 0
inline DoubleRange ZeroToOne() { return {0, false, 1, true}; }  // [0, 1)
inline DoubleRange Fraction() { return {0, false, 1, false}; }  // [0, 1]
inline DoubleRange PositiveAtMost(double max) {                 // (0, max]
  return {0, true, max, false};
}
inline DoubleRange NonNegativeAtMost(double max) {  // [0, max]
  return {0, false, max, false};
}

// The longest string value (paths, addresses) a config accepts.
inline constexpr size_t kMaxStringLength = 4096;

// Upper bounds that several sections share: generous for any real job, low
// enough that a typo cannot make a daemon allocate gigabytes or wait for ever
// (issue 12).
inline constexpr int64_t kMaxLayerWidth = 1 << 24;         // 16Mi units
inline constexpr int64_t kMaxUpdates = int64_t{1} << 40;   // step/update counts
inline constexpr double kMaxSeconds = 7 * 24 * 3600.0;     // durations: a week
inline constexpr double kMaxTimeoutSeconds = 24 * 3600.0;  // rpc, heartbeats

ConfigField IntField(std::string key, int* value, IntRange range);
ConfigField Int64Field(std::string key, int64_t* value, IntRange range);
ConfigField Uint64Field(std::string key, uint64_t* value);
ConfigField DoubleField(std::string key, double* value, DoubleRange range);
ConfigField BoolField(std::string key, bool* value);
// Any string ("" included).
ConfigField StringField(std::string key, std::string* value);
// One of `allowed`, matched exactly.
ConfigField EnumField(std::string key, std::string* value,
                      std::vector<std::string> allowed);

// Reads a scalar as text into *out: InvalidArgument for null, a list, a map
// or more than kMaxStringLength characters.
absl::Status ReadString(const std::string& key, const YAML::Node& node,
                        std::string* out);

// One spelling of a choice and the enum value it stands for.
template <typename E>
struct Choice {
  const char* name;
  E value;
};

// InvalidArgument "KEY must be one of A, B, C; got 'x'", with " (did you mean
// 'y'?)" appended when x is a likely typo of one of them.
absl::Status ChoiceError(const std::string& key,
                         const std::vector<std::string>& allowed,
                         absl::string_view got);

// The first spelling of `value` in `choices`; "?" when there is none.
template <typename E, size_t N>
const char* ChoiceName(const Choice<E> (&choices)[N], E value) {
  for (const Choice<E>& choice : choices) {
    if (choice.value == value) return choice.name;
  }
  return "?";
}

// The value `name` spells in `choices`; ChoiceError naming `key` otherwise.
template <typename E, size_t N>
absl::StatusOr<E> ParseChoice(const std::string& key,
                              const Choice<E> (&choices)[N],
                              absl::string_view name) {
  std::vector<std::string> allowed;
  for (const Choice<E>& choice : choices) {
    if (name == choice.name) return choice.value;
    allowed.push_back(choice.name);
  }
  return ChoiceError(key, allowed, name);
}

// A string key with a fixed set of values, held as an enum E. `parse` turns
// the text into E (its error names the key and the allowed names); `name`
// spells an E back. check() refuses a value `name` cannot spell (an integer
// cast to E).
template <typename E, typename Parse, typename Name>
ConfigField ChoiceField(std::string key, E* value, Parse parse, Name name) {
  ConfigField field{std::move(key), nullptr, nullptr};
  field.read = [key = field.key, value, parse](const YAML::Node& node) {
    std::string text;
    absl::Status status = ReadString(key, node, &text);
    if (!status.ok()) return status;
    absl::StatusOr<E> parsed = parse(text);
    if (!parsed.ok()) return parsed.status();
    *value = *parsed;
    return absl::OkStatus();
  };
  field.check = [value, parse, name] {
    return parse(std::string(name(*value))).status();
  };
  return field;
}
// "host:port" (or "[v6-address]:port") with a port in 0..65535.
ConfigField AddressField(std::string key, std::string* value);
// A list of host:port; min_entries..max_entries of them.
ConfigField AddressListField(std::string key, std::vector<std::string>* value,
                             size_t min_entries, size_t max_entries);
// A list of at most max_entries strings (numbers are read as written).
ConfigField StringListField(std::string key, std::vector<std::string>* value,
                            size_t max_entries);
// A list of min_entries..max_entries integers, each in `range`.
ConfigField IntListField(std::string key, std::vector<int>* value,
                         size_t min_entries, size_t max_entries,
                         IntRange range);

// "FILE:LINE" for a place in a YAML file; FILE alone when `mark` is null.
std::string Where(const std::string& file, const YAML::Mark& mark);

// `status` with "WHERE: " in front of its message; OK stays OK.
absl::Status Located(const std::string& where, const absl::Status& status);

// How a YAML value looks in a message: "'abc'", "null", "a list" or "a map".
std::string DescribeValue(const YAML::Node& node);

// True for "host:port" with a non-empty host and a port in 0..65535.
bool IsHostPort(const std::string& address);

// The candidate closest to `name` by edit distance when it is close enough to
// be a likely typo; "" otherwise.
std::string ClosestMatch(const std::string& name,
                         const std::vector<std::string>& candidates);

}  // namespace downpour::config_internal

#endif  // DOWNPOUR_COMMON_CONFIG_FIELD_H_
