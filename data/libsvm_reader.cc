// LIBSVM parsing: the rows are kept sparse (index, value) while reading, since
// the width is only known at the end, then spread into dense rows.
#include "data/libsvm_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "data/file_reader.h"
#include "data/label_map.h"
#include "data/reader_internal.h"

namespace downpour::data {
namespace {

using internal::ErrorAt;
using internal::NumberKind;
using internal::Quote;

constexpr absl::string_view kFormat = "LIBSVM";
// Indices become int columns: at most this, so that dim fits an int.
constexpr uint64_t kMaxIndex = std::numeric_limits<int>::max() - 1;

bool IsSpace(char c) { return c == ' ' || c == '\t'; }

// One file's parse. Not thread-safe; used once.
class LibsvmParser {
 public:
  LibsvmParser(absl::string_view text, const std::string& name,
               const LibsvmOptions& options)
      : text_(text),
        name_(name),
        options_(options),
        labels_(options.labels, options.classes) {}

  absl::StatusOr<Table> Parse();

 private:
  // Advances to the next line (line_, line_number_), without its line break
  // or comment. False at the end of the text.
  absl::Status NextLine(bool* found);
  absl::Status Error(const char* at, absl::string_view message) const {
    return ErrorAt(name_, line_number_, at - line_start_ + 1, message);
  }
  // The token at p: up to the next space, tab or line end.
  absl::string_view TokenAt(const char* p) const;
  absl::Status ParseLabel(const char** p);
  absl::Status ParseIndex(const char** p, int64_t previous, int* column);
  absl::Status ParseValue(const char** p, float* value);
  absl::Status ParseRow();
  absl::Status Densify();

  // Constant after construction.
  const absl::string_view text_;
  const std::string& name_;
  const LibsvmOptions& options_;

  absl::string_view line_;
  const char* line_start_ = nullptr;  // line_ may be cut at a comment
  size_t next_offset_ = 0;
  int64_t line_number_ = 0;
  internal::LabelMap labels_;
  // Row r's entries are [row_end_[r-1], row_end_[r]) of columns_ and values_.
  std::vector<size_t> row_end_;
  std::vector<int> columns_;  // 0-based
  std::vector<float> values_;
  int max_column_ = -1;
  int64_t max_column_line_ = 0;
  Table table_;
};

absl::Status LibsvmParser::NextLine(bool* found) {
  *found = next_offset_ < text_.size();
  if (!*found) return absl::OkStatus();
  const char* begin = text_.data() + next_offset_;
  const size_t left = text_.size() - next_offset_;
  const void* nl = std::memchr(begin, '\n', left);
  const size_t length =
      nl == nullptr ? left : static_cast<const char*>(nl) - begin;
  next_offset_ += length + 1;
  ++line_number_;
  line_start_ = begin;
  line_ = absl::string_view(begin, length);
  if (!line_.empty() && line_.back() == '\r') line_.remove_suffix(1);
  if (static_cast<int64_t>(line_.size()) > options_.max_line_bytes) {
    return ErrorAt(name_, line_number_, options_.max_line_bytes + 1,
                   absl::StrCat("line is longer than ", options_.max_line_bytes,
                                " bytes (max_line_bytes); is this a LIBSVM "
                                "file with one example per line?"));
  }
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

absl::Status LibsvmParser::ParseLabel(const char** p) {
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
  RETURN_IF_ERROR(internal::CheckTokenIsText(text_, name_, *p - text_.data(),
                                             token, kFormat));
  float y;
  const absl::Status status = labels_.Add(token, &y);
  if (!status.ok()) return Error(*p, status.message());
  table_.y.push_back(y);
  *p += token.size();
  return absl::OkStatus();
}

absl::Status LibsvmParser::ParseIndex(const char** p, int64_t previous,
                                      int* column) {
  const char* end = line_.data() + line_.size();
  const char* s = *p;
  uint64_t index;
  const auto [next, error] = std::from_chars(s, end, index);
  if (error != std::errc() || next == end || *next != ':') {
    const absl::string_view token = TokenAt(s);
    RETURN_IF_ERROR(internal::CheckTokenIsText(text_, name_, s - text_.data(),
                                               token, kFormat));
    if (error == std::errc::result_out_of_range) {
      return Error(s, absl::StrCat("feature index in ", Quote(token),
                                   " is too large (at most ", kMaxIndex, ")"));
    }
    return Error(s, absl::StrCat(Quote(token),
                                 " is not index:value (a feature index, a "
                                 "colon, a number); is this a LIBSVM file?"));
  }
  if (index == 0 && !options_.zero_based) {
    return Error(s,
                 "feature index 0 in a file read as 1-based; if its indices "
                 "start at 0, set data.zero_based: true");
  }
  if (index > kMaxIndex) {
    return Error(s, absl::StrCat("feature index ", index,
                                 " is too large (at most ", kMaxIndex, ")"));
  }
  if (static_cast<int64_t>(index) <= previous) {
    return Error(
        s, absl::StrCat("feature index ", index,
                        static_cast<int64_t>(index) == previous
                            ? " is repeated"
                            : absl::StrCat(" comes after ", previous),
                        "; indices must increase along a line (sort them and "
                        "list each once)"));
  }
  const int64_t first = options_.zero_based ? 0 : 1;
  if (options_.dim > 0 && static_cast<int64_t>(index) >= options_.dim + first) {
    return Error(
        s, absl::StrCat("feature index ", index,
                        " is beyond data.features: ", options_.dim,
                        " (indices ", first, " to ", options_.dim + first - 1,
                        "); raise data.features, or set it to 0 to "
                        "take the largest index in the file"));
  }
  *column = static_cast<int>(index - first);
  *p = next + 1;
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
  switch (internal::ParseFloat(token, value)) {
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
  RETURN_IF_ERROR(internal::CheckTokenIsText(text_, name_, s - text_.data(),
                                             token, kFormat));
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
  RETURN_IF_ERROR(ParseLabel(&p));
  while (p != end && IsSpace(*p)) ++p;
  if (absl::string_view(p, end - p).substr(0, 4) == "qid:") {
    p += TokenAt(p).size();
  }
  int64_t previous = -1;
  while (true) {
    while (p != end && IsSpace(*p)) ++p;
    if (p == end) break;
    int column = 0;
    RETURN_IF_ERROR(ParseIndex(&p, previous, &column));
    previous = column + (options_.zero_based ? 0 : 1);
    float value;
    RETURN_IF_ERROR(ParseValue(&p, &value));
    columns_.push_back(column);
    values_.push_back(value);
    if (column > max_column_) {
      max_column_ = column;
      max_column_line_ = line_number_;
    }
  }
  row_end_.push_back(columns_.size());
  return absl::OkStatus();
}

absl::Status LibsvmParser::Densify() {
  const int64_t rows = static_cast<int64_t>(row_end_.size());
  const int dim = options_.dim > 0 ? options_.dim : max_column_ + 1;
  if (dim == 0) {
    return ErrorAt(name_, line_number_, 1,
                   "no line has a feature (every row would be empty); set "
                   "data.features or check the file");
  }
  const double bytes = static_cast<double>(rows) * dim * sizeof(float);
  if (bytes > static_cast<double>(options_.max_dense_bytes)) {
    return ErrorAt(
        name_, options_.dim > 0 ? 1 : max_column_line_, 1,
        absl::StrFormat("%d rows of %d features need %.3g GB as dense rows, "
                        "more than max_dense_bytes (%d); this reader makes "
                        "dense rows: lower data.features or the file's "
                        "largest index",
                        rows, dim, bytes / 1e9, options_.max_dense_bytes));
  }
  table_.dim = dim;
  table_.x.assign(static_cast<size_t>(rows) * dim, 0.0f);
  size_t entry = 0;
  for (int64_t r = 0; r < rows; ++r) {
    float* row = table_.x.data() + r * dim;
    for (; entry < row_end_[r]; ++entry) row[columns_[entry]] = values_[entry];
  }
  const int first = options_.zero_based ? 0 : 1;
  table_.feature_names.reserve(dim);
  for (int f = 0; f < dim; ++f) {
    table_.feature_names.push_back(absl::StrCat(f + first));
  }
  return absl::OkStatus();
}

absl::StatusOr<Table> LibsvmParser::Parse() {
  if (options_.dim < 0 || options_.max_line_bytes <= 0 ||
      options_.max_dense_bytes < 0) {
    return ErrorAt(name_, 1, 1,
                   "data.features must be >= 0 (0: from the file), "
                   "max_line_bytes > 0 and max_dense_bytes >= 0");
  }
  RETURN_IF_ERROR(internal::CheckLooksLikeText(text_, name_, kFormat));
  internal::StripByteOrderMark(text_, &next_offset_);
  // About one entry per 8 bytes of text.
  columns_.reserve(text_.size() / 8);
  values_.reserve(text_.size() / 8);
  bool found;
  while (true) {
    RETURN_IF_ERROR(NextLine(&found));
    if (!found) break;
    if (std::all_of(line_.begin(), line_.end(), IsSpace)) continue;
    RETURN_IF_ERROR(ParseRow());
  }
  if (row_end_.empty()) {
    return ErrorAt(name_, line_number_ + 1, 1,
                   "no data rows: the file is empty or holds only comments "
                   "and blank lines");
  }
  RETURN_IF_ERROR(Densify());
  labels_.Finish(&table_.y, &table_.class_names);
  return std::move(table_);
}

}  // namespace

absl::StatusOr<Table> ParseLibsvm(absl::string_view text,
                                  const std::string& name,
                                  const LibsvmOptions& options) {
  return LibsvmParser(text, name, options).Parse();
}

absl::StatusOr<Table> ReadLibsvm(const std::string& path,
                                 const LibsvmOptions& options) {
  ASSIGN_OR_RETURN(std::string text, ReadFileMaybeGzip(path));
  return ParseLibsvm(text, path, options);
}

}  // namespace downpour::data
