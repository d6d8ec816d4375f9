// LIBSVM lines into sparse rows. Indices are parsed as uint64 for both
// readers; only the checks on them differ (LibsvmRules::sparse).
#include "data/libsvm_parser.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/label_map.h"
#include "data/reader_internal.h"

namespace downpour::data::internal {
namespace {

constexpr absl::string_view kFormat = "LIBSVM";
// Dense: indices become int columns, so at most this (dim fits an int).
constexpr uint64_t kMaxDenseIndex = std::numeric_limits<int>::max() - 1;

bool IsSpace(char c) { return c == ' ' || c == '\t'; }

// One file's parse. Not thread-safe; used once.
class LibsvmParser {
 public:
  LibsvmParser(absl::string_view text, const std::string& name,
               const LibsvmRules& rules, LibsvmRows* rows)
      : text_(text),
        name_(name),
        rules_(rules),
        rows_(rows),
        line_number_(rules.first_line - 1),
        labels_(rules.labels, rules.classes),
        writer_(&rows->data) {}

  absl::Status Parse();

 private:
  // Advances to the next line (line_, line_number_), without its line break
  // or comment. False at the end of the text.
  absl::Status NextLine(bool* found);
  absl::Status Error(const char* at, absl::string_view message) const {
    return ErrorAt(name_, line_number_, at - line_start_ + 1, message);
  }
  // The token at p: up to the next space, tab or line end.
  absl::string_view TokenAt(const char* p) const;
  absl::Status ParseLabel(const char** p, float* y);
  absl::Status ParseIndex(const char** p, bool first, uint64_t previous,
                          uint64_t* index);
  absl::Status CheckDenseIndex(const char* at, bool first, uint64_t previous,
                               uint64_t index) const;
  absl::Status ParseValue(const char** p, float* value);
  absl::Status ParseRow();

  // Constant after construction.
  const absl::string_view text_;
  const std::string& name_;
  const LibsvmRules& rules_;
  LibsvmRows* const rows_;

  absl::string_view line_;
  const char* line_start_ = nullptr;  // line_ may be cut at a comment
  size_t next_offset_ = 0;
  int64_t line_number_ = 0;
  LabelMap labels_;
  SparseRowWriter writer_;
};

absl::Status LibsvmParser::NextLine(bool* found) {
  *found = next_offset_ < text_.size();
  if (!*found) return absl::OkStatus();
  line_start_ = text_.data() + next_offset_;
  line_ = CutLine(text_, &next_offset_);
  ++line_number_;
  RETURN_IF_ERROR(CheckLineLength(line_, name_, line_number_,
                                  rules_.max_line_bytes, kFormat));
  const size_t comment = line_.find('#');
  if (comment != absl::string_view::npos) line_ = line_.substr(0, comment);
  return absl::OkStatus();
}

absl::string_view LibsvmParser::TokenAt(const char* p) const {
  const char* end = line_.data() + line_.size();
  const char* e = p;
  while (e != end && !IsSpace(*e)) ++e;
  return absl::string_view(p, e - p);
}

absl::Status LibsvmParser::ParseLabel(const char** p, float* y) {
  const absl::string_view token = TokenAt(*p);
  if (token.find(':') != absl::string_view::npos) {
    return Error(*p, absl::StrCat("the line starts with ", Quote(token),
                                  ", not a label; every line must start with "
                                  "its label"));
  }
  if (token.find(',') != absl::string_view::npos) {
    return Error(*p, absl::StrCat("multi-label line (labels ", Quote(token),
                                  ") is not supported; give one label per "
                                  "line"));
  }
  RETURN_IF_ERROR(
      CheckTokenIsText(text_, name_, *p - text_.data(), token, kFormat));
  const absl::Status status = labels_.Add(token, y);
  if (!status.ok()) return Error(*p, status.message());
  *p += token.size();
  return absl::OkStatus();
}

absl::Status LibsvmParser::ParseIndex(const char** p, bool first,
                                      uint64_t previous, uint64_t* index) {
  const char* end = line_.data() + line_.size();
  const char* s = *p;
  const auto [next, error] = std::from_chars(s, end, *index);
  if (error != std::errc() || next == end || *next != ':') {
    const absl::string_view token = TokenAt(s);
    RETURN_IF_ERROR(
        CheckTokenIsText(text_, name_, s - text_.data(), token, kFormat));
    if (error == std::errc::result_out_of_range) {
      return Error(
          s, absl::StrCat("feature index in ", Quote(token),
                          " is too large (at most ",
                          rules_.sparse ? std::numeric_limits<uint64_t>::max()
                                        : kMaxDenseIndex,
                          ")"));
    }
    return Error(s, absl::StrCat(Quote(token),
                                 " is not index:value (a feature index, a "
                                 "colon, a number); is this a LIBSVM file?"));
  }
  if (!rules_.sparse) {
    RETURN_IF_ERROR(CheckDenseIndex(s, first, previous, *index));
  }
  *p = next + 1;
  return absl::OkStatus();
}

absl::Status LibsvmParser::CheckDenseIndex(const char* at, bool first,
                                           uint64_t previous,
                                           uint64_t index) const {
  if (index == 0 && !rules_.zero_based) {
    return Error(at,
                 "feature index 0 in a file read as 1-based; if its indices "
                 "start at 0, set data.zero_based: true");
  }
  if (index > kMaxDenseIndex) {
    return Error(at, absl::StrCat("feature index ", index,
                                  " is too large (at most ", kMaxDenseIndex,
                                  "); for hashed or 64-bit indices read the "
                                  "file as sparse (ReadLibsvmSparse)"));
  }
  if (!first && index <= previous) {
    return Error(at, absl::StrCat("feature index ", index,
                                  index == previous
                                      ? " is repeated"
                                      : absl::StrCat(" comes after ", previous),
                                  "; indices must increase along a line (sort "
                                  "them and list each once)"));
  }
  const uint64_t base = rules_.zero_based ? 0 : 1;
  if (rules_.dim > 0 && index >= rules_.dim + base) {
    return Error(
        at, absl::StrCat("feature index ", index,
                         " is beyond data.features: ", rules_.dim, " (indices ",
                         base, " to ", rules_.dim + base - 1,
                         "); raise data.features, or set it to 0 to "
                         "take the largest index in the file"));
  }
  return absl::OkStatus();
}

absl::Status LibsvmParser::ParseValue(const char** p, float* value) {
  const char* end = line_.data() + line_.size();
  const char* s = *p;
  const auto [next, error] = std::from_chars(s, end, *value);
  if (error == std::errc() && next != s && (next == end || IsSpace(*next)) &&
      std::isfinite(*value)) {
    *p = next;
    return absl::OkStatus();
  }
  const absl::string_view token = TokenAt(s);
  switch (ParseFloat(token, value)) {
    case NumberKind::kOk:
      *p = s + token.size();
      return absl::OkStatus();
    case NumberKind::kNaN:
      return Error(s, absl::StrCat("value ", Quote(token),
                                   " is NaN; leave the feature out (it is "
                                   "then 0) or fix the file"));
    case NumberKind::kInf:
      return Error(s, absl::StrCat("value ", Quote(token),
                                   " is infinite or too large for a float; "
                                   "fix or drop the row"));
    case NumberKind::kNotNumber:
      break;
  }
  RETURN_IF_ERROR(
      CheckTokenIsText(text_, name_, s - text_.data(), token, kFormat));
  if (token.empty()) {
    return Error(s, "missing value after the ':'; write index:value");
  }
  return Error(s, absl::StrCat("value ", Quote(token),
                               " is not a number; write index:value"));
}

absl::Status LibsvmParser::ParseRow() {
  const char* p = line_.data();
  const char* end = p + line_.size();
  while (p != end && IsSpace(*p)) ++p;
  float y;
  RETURN_IF_ERROR(ParseLabel(&p, &y));
  while (p != end && IsSpace(*p)) ++p;
  if (absl::string_view(p, end - p).substr(0, 4) == "qid:") {
    p += TokenAt(p).size();
  }
  bool first = true;
  uint64_t previous = 0;
  while (true) {
    while (p != end && IsSpace(*p)) ++p;
    if (p == end) break;
    uint64_t index = 0;
    RETURN_IF_ERROR(ParseIndex(&p, first, previous, &index));
    float value;
    RETURN_IF_ERROR(ParseValue(&p, &value));
    if (rules_.sparse) {
      writer_.Add(index, value);
    } else {
      // Strictly ascending (checked): no sorting or summing to do.
      rows_->data.keys.push_back(index);
      rows_->data.values.push_back(value);
    }
    if (!rows_->any_index || index > rows_->max_index) {
      rows_->any_index = true;
      rows_->max_index = index;
      rows_->max_index_line = line_number_;
    }
    first = false;
    previous = index;
  }
  if (!rules_.sparse) {
    rows_->data.offsets.push_back(rows_->data.entries());
    rows_->data.y.push_back(y);
    return absl::OkStatus();
  }
  const absl::Status status = writer_.EndRow(y);
  if (!status.ok()) return Error(line_.data(), status.message());
  return absl::OkStatus();
}

absl::Status LibsvmParser::Parse() {
  RETURN_IF_ERROR(CheckLooksLikeText(text_, name_, kFormat));
  StripByteOrderMark(text_, &next_offset_);
  // About one entry per 8 bytes of text.
  rows_->data.keys.reserve(text_.size() / 8);
  rows_->data.values.reserve(text_.size() / 8);
  bool found;
  while (true) {
    RETURN_IF_ERROR(NextLine(&found));
    if (!found) break;
    if (std::all_of(line_.begin(), line_.end(), IsSpace)) continue;
    RETURN_IF_ERROR(ParseRow());
  }
  rows_->last_line = line_number_;
  if (rows_->data.rows() == 0) {
    return ErrorAt(name_, line_number_ + 1, 1,
                   "no data rows: the file is empty or holds only comments "
                   "and blank lines");
  }
  labels_.Finish(&rows_->data.y, &rows_->data.class_names);
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseLibsvmRows(absl::string_view text, const std::string& name,
                             const LibsvmRules& rules, LibsvmRows* rows) {
  return LibsvmParser(text, name, rules, rows).Parse();
}

}  // namespace downpour::data::internal
