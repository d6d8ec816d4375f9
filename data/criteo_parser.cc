// Fields are cut with memchr and hashed in place: each field's FNV-1a state
// after "<name>\x1f" is computed once, so no string is built per field.
#include "data/criteo_parser.h"

#include <charconv>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/feature_hash.h"
#include "data/reader_internal.h"

namespace downpour::data {
namespace {

using internal::ErrorAt;
using internal::Quote;

constexpr int kIntegerFields = 13;
constexpr int kLineFields = kCriteoFields + 1;  // with the label

// FeatureKeyPrefix of each field's name.
struct Prefixes {
  uint64_t of[kCriteoFields];
  Prefixes() {
    for (int f = 0; f < kCriteoFields; ++f) {
      of[f] = FeatureKeyPrefix(CriteoFieldName(f));
    }
  }
};

const Prefixes& FieldPrefixes() {
  static const Prefixes* const prefixes = new Prefixes();
  return *prefixes;
}

constexpr int kTokenTable = 1 << 12;

int64_t ComputeToken(int64_t v) {
  if (v <= 2) return v;
  const double l = std::log(static_cast<double>(v));
  return static_cast<int64_t>(std::floor(l * l));
}

// ComputeToken of 0 .. kTokenTable - 1: most Criteo integers are small.
struct TokenTable {
  int16_t of[kTokenTable];
  TokenTable() {
    for (int v = 0; v < kTokenTable; ++v) of[v] = ComputeToken(v);
  }
};

// The Criteo competition's bucket of an integer value.
int64_t IntegerToken(int64_t v) {
  static const TokenTable* const table = new TokenTable();
  if (v >= 0 && v < kTokenTable) return table->of[v];
  return ComputeToken(v);
}

// One line's parse; `line` has no line end.
class CriteoLine {
 public:
  CriteoLine(absl::string_view line, const std::string& name, int64_t number)
      : line_(line), name_(name), number_(number) {}

  absl::Status Parse(SparseRowWriter* writer);

 private:
  absl::Status Error(const char* at, absl::string_view message) const {
    return ErrorAt(name_, number_, at - line_.data() + 1, message);
  }
  // Cuts the fields into field_; an error unless there are kLineFields.
  absl::Status Split();
  absl::Status AddInteger(int f, absl::string_view value,
                          SparseRowWriter* writer) const;

  const absl::string_view line_;
  const std::string& name_;
  const int64_t number_;
  absl::string_view field_[kLineFields];
};

absl::Status CriteoLine::Split() {
  const char* p = line_.data();
  const char* end = p + line_.size();
  int n = 0;
  while (true) {
    const void* tab = std::memchr(p, '\t', end - p);
    const char* field_end =
        tab != nullptr ? static_cast<const char*>(tab) : end;
    if (n < kLineFields) field_[n] = absl::string_view(p, field_end - p);
    ++n;
    if (tab == nullptr) break;
    p = field_end + 1;
  }
  if (n == kLineFields) return absl::OkStatus();
  return Error(
      line_.data(),
      absl::StrCat("has ", n, " fields; a Criteo line has ", kLineFields,
                   " tab-separated fields (label, I1..I13, C1..C26)"));
}

absl::Status CriteoLine::AddInteger(int f, absl::string_view value,
                                    SparseRowWriter* writer) const {
  int64_t v = 0;
  const char* end = value.data() + value.size();
  const std::from_chars_result r = std::from_chars(value.data(), end, v);
  if (r.ec != std::errc() || r.ptr != end) {
    return Error(value.data(),
                 absl::StrCat(CriteoFieldName(f), " ", Quote(value),
                              " is not an integer; I1..I13 hold signed 64-bit "
                              "whole numbers, or nothing when missing"));
  }
  char digits[24];
  const std::to_chars_result t =
      std::to_chars(digits, digits + sizeof(digits), IntegerToken(v));
  writer->Add(FeatureKeyFrom(FieldPrefixes().of[f],
                             absl::string_view(digits, t.ptr - digits)),
              1.0f, static_cast<uint16_t>(f));
  return absl::OkStatus();
}

absl::Status CriteoLine::Parse(SparseRowWriter* writer) {
  RETURN_IF_ERROR(Split());
  const absl::string_view label = field_[0];
  if (label != "0" && label != "1") {
    return Error(label.data(),
                 absl::StrCat("label ", Quote(label),
                              " is not 0 or 1; Criteo lines start with a 0/1 "
                              "click label"));
  }
  for (int f = 0; f < kIntegerFields; ++f) {
    if (!field_[f + 1].empty()) {
      RETURN_IF_ERROR(AddInteger(f, field_[f + 1], writer));
    }
  }
  const Prefixes& prefixes = FieldPrefixes();
  for (int f = kIntegerFields; f < kCriteoFields; ++f) {
    const absl::string_view value = field_[f + 1];
    if (value.empty()) continue;
    writer->Add(FeatureKeyFrom(prefixes.of[f], value), 1.0f,
                static_cast<uint16_t>(f));
  }
  const absl::Status status = writer->EndRow(label == "1" ? 1.0f : 0.0f);
  if (!status.ok()) return Error(line_.data(), status.message());
  return absl::OkStatus();
}

bool IsBlank(absl::string_view line) {
  for (char c : line) {
    if (c != ' ') return false;
  }
  return true;
}

}  // namespace

std::string CriteoFieldName(int f) {
  return f < kIntegerFields ? absl::StrCat("I", f + 1)
                            : absl::StrCat("C", f - kIntegerFields + 1);
}

absl::Status ParseCriteoRows(absl::string_view text, const std::string& name,
                             int64_t first_line, SparseDataset* out) {
  SparseRowWriter writer(out, /*with_fields=*/true);
  const char* p = text.data();
  const char* const end = p + text.size();
  for (int64_t number = first_line; p < end; ++number) {
    const void* nl = std::memchr(p, '\n', end - p);
    const char* line_end = nl != nullptr ? static_cast<const char*>(nl) : end;
    absl::string_view line(p, line_end - p);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    p = nl != nullptr ? line_end + 1 : end;
    if (IsBlank(line)) continue;
    RETURN_IF_ERROR(CriteoLine(line, name, number).Parse(&writer));
  }
  return absl::OkStatus();
}

}  // namespace downpour::data
