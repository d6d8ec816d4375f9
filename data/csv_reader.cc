// CSV parsing. The hot path is one std::from_chars per field straight from
// the text (no token copies); anything it does not accept (quotes, spaces,
// missing values, errors) takes the general path, ScanField.
#include "data/csv_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "data/file_reader.h"
#include "data/label_map.h"
#include "data/reader_internal.h"

namespace downpour::data {
namespace {

using internal::ErrorAt;
using internal::NumberKind;
using internal::Quote;

constexpr absl::string_view kFormat = "CSV";

// One file's parse. Not thread-safe; used once.
class CsvParser {
 public:
  CsvParser(absl::string_view text, const std::string& name,
            const CsvOptions& options)
      : text_(text),
        name_(name),
        options_(options),
        labels_(options.labels, options.classes) {}

  absl::StatusOr<Table> Parse();

 private:
  // Advances to the next line: line_, line_offset_ and line_number_. False
  // at the end of the text.
  absl::Status NextLine(bool* found);
  // The same, skipping blank lines.
  absl::Status NextNonBlankLine(bool* found);
  absl::Status Error(const char* at, absl::string_view message) const;
  // Scans the field at *p (inside line_): *token is its text, unquoted and
  // trimmed, *start where it begins; *p ends at the delimiter or line end.
  absl::Status ScanField(const char** p, absl::string_view* token,
                         const char** start);
  // All fields of line_, as strings.
  absl::Status SplitLine(std::vector<std::string>* fields,
                         std::vector<const char*>* starts);
  absl::Status ReadHeader();
  absl::Status FindLabelColumn();
  absl::Status ParseRow();
  absl::Status ParseFeatureSlow(const char** p, int column, float* out);
  absl::Status ColumnCountError();
  std::string ColumnName(int column) const;
  absl::Status FillMeans();

  // Constant after construction.
  const absl::string_view text_;
  const std::string& name_;
  const CsvOptions& options_;

  // The current line, without its line break.
  absl::string_view line_;
  size_t line_offset_ = 0;   // of line_ in text_
  size_t next_offset_ = 0;   // where the next line starts
  int64_t line_number_ = 0;  // of line_, 1-based
  int64_t width_line_ = 0;   // the line that set the number of columns

  std::vector<std::string> names_;  // the header's, when there is one
  int columns_ = 0;
  int label_column_ = 0;
  int64_t missing_ = 0;  // missing values stored as NaN (Missing::kMean)
  std::string scratch_;  // a quoted field with "" inside, unescaped
  internal::LabelMap labels_;
  Table table_;
};

absl::Status CsvParser::NextLine(bool* found) {
  *found = next_offset_ < text_.size();
  if (!*found) return absl::OkStatus();
  const char* begin = text_.data() + next_offset_;
  const size_t left = text_.size() - next_offset_;
  const void* nl = std::memchr(begin, '\n', left);
  const size_t length =
      nl == nullptr ? left : static_cast<const char*>(nl) - begin;
  line_offset_ = next_offset_;
  next_offset_ += length + 1;
  ++line_number_;
  line_ = absl::string_view(begin, length);
  if (!line_.empty() && line_.back() == '\r') line_.remove_suffix(1);
  if (static_cast<int64_t>(line_.size()) > options_.max_line_bytes) {
    return ErrorAt(name_, line_number_, options_.max_line_bytes + 1,
                   absl::StrCat("line is longer than ", options_.max_line_bytes,
                                " bytes (max_line_bytes); is this a CSV file "
                                "with one example per line?"));
  }
  return absl::OkStatus();
}

absl::Status CsvParser::NextNonBlankLine(bool* found) {
  while (true) {
    RETURN_IF_ERROR(NextLine(found));
    if (!*found) return absl::OkStatus();
    const bool blank = std::all_of(line_.begin(), line_.end(), [](char c) {
      return c == ' ' || c == '\t' || c == '\r';
    });
    if (!blank) return absl::OkStatus();
  }
}

absl::Status CsvParser::Error(const char* at, absl::string_view message) const {
  return ErrorAt(name_, line_number_, at - line_.data() + 1, message);
}

absl::Status CsvParser::ScanField(const char** p, absl::string_view* token,
                                  const char** start) {
  const char delimiter = options_.delimiter;
  const char* end = line_.data() + line_.size();
  const auto is_space = [delimiter](char c) {
    return c == ' ' || (c == '\t' && delimiter != '\t');
  };
  const char* s = *p;
  while (s != end && is_space(*s)) ++s;
  *start = s;
  if (s == end || *s != '"') {
    const void* d = std::memchr(s, delimiter, end - s);
    const char* field_end = d == nullptr ? end : static_cast<const char*>(d);
    const char* e = field_end;
    while (e != s && is_space(e[-1])) --e;
    *token = absl::string_view(s, e - s);
    *p = field_end;
    return absl::OkStatus();
  }
  // Quoted: up to the quote not followed by another; "" stands for ".
  const char* q = s + 1;
  bool escaped = false;
  const char* close;
  while (true) {
    const void* found = std::memchr(q, '"', end - q);
    if (found == nullptr) {
      return Error(s,
                   "unterminated quote: the field has no closing '\"' on this "
                   "line (quoted fields cannot span lines)");
    }
    close = static_cast<const char*>(found);
    if (close + 1 != end && close[1] == '"') {
      escaped = true;
      q = close + 2;
      continue;
    }
    break;
  }
  absl::string_view inner(s + 1, close - s - 1);
  if (escaped) {
    scratch_.clear();
    for (size_t i = 0; i < inner.size(); ++i) {
      scratch_ += inner[i];
      if (inner[i] == '"') ++i;  // the second of ""
    }
    inner = scratch_;
  }
  const char* after = close + 1;
  while (after != end && is_space(*after)) ++after;
  if (after != end && *after != delimiter) {
    return Error(after,
                 absl::StrCat("unexpected ", Quote(absl::string_view(after, 1)),
                              " after a closing quote; expected the "
                              "delimiter or the end of the line"));
  }
  *token = inner;
  *p = after;
  return absl::OkStatus();
}

absl::Status CsvParser::SplitLine(std::vector<std::string>* fields,
                                  std::vector<const char*>* starts) {
  fields->clear();
  starts->clear();
  const char* p = line_.data();
  const char* end = p + line_.size();
  while (true) {
    absl::string_view token;
    const char* start;
    RETURN_IF_ERROR(ScanField(&p, &token, &start));
    fields->emplace_back(token);
    starts->push_back(start);
    if (p == end) return absl::OkStatus();
    ++p;  // the delimiter
  }
}

std::string CsvParser::ColumnName(int column) const {
  if (!names_.empty()) return absl::StrCat("column ", Quote(names_[column]));
  return absl::StrCat("column ", column, " (0-based)");
}

absl::Status CsvParser::ReadHeader() {
  std::vector<std::string> fields;
  std::vector<const char*> starts;
  RETURN_IF_ERROR(SplitLine(&fields, &starts));
  for (size_t i = 0; i < fields.size(); ++i) {
    RETURN_IF_ERROR(internal::CheckTokenIsText(
        text_, name_, starts[i] - text_.data(), fields[i], kFormat));
  }
  columns_ = static_cast<int>(fields.size());
  width_line_ = line_number_;
  if (columns_ < (options_.has_label ? 2 : 1)) {
    std::string hint = "check data.delimiter";
    for (char d : {',', '\t', ';'}) {
      if (d != options_.delimiter && line_.find(d) != absl::string_view::npos) {
        hint =
            absl::StrCat("the line holds ", d == '\t' ? "tabs" : Quote({&d, 1}),
                         ": set data.delimiter to it");
      }
    }
    return Error(
        line_.data(),
        absl::StrCat("found one column (the label) and no features; ", hint));
  }
  if (options_.header) names_ = std::move(fields);
  return absl::OkStatus();
}

absl::Status CsvParser::FindLabelColumn() {
  const std::string& want = options_.label_column;
  if (!options_.has_label) {
    label_column_ = -1;  // no column is the label
    return absl::OkStatus();
  }
  if (want.empty()) {
    label_column_ = columns_ - 1;
    return absl::OkStatus();
  }
  for (int i = 0; i < static_cast<int>(names_.size()); ++i) {
    if (names_[i] == want) {
      label_column_ = i;
      return absl::OkStatus();
    }
  }
  int index;
  if (absl::SimpleAtoi(want, &index) &&
      std::all_of(want.begin(), want.end(), absl::ascii_isdigit)) {
    if (index < columns_) {
      label_column_ = index;
      return absl::OkStatus();
    }
    return ErrorAt(name_, width_line_, 1,
                   absl::StrCat("data.label_column ", want,
                                " is beyond the last column: the file has ",
                                columns_, " columns (0 to ", columns_ - 1,
                                "); check data.label_column and "
                                "data.delimiter"));
  }
  if (names_.empty()) {
    return ErrorAt(name_, width_line_, 1,
                   absl::StrCat("data.label_column ", Quote(want),
                                " names a column but the file has no header "
                                "(data.header: false); give a 0-based index "
                                "from 0 to ",
                                columns_ - 1));
  }
  std::vector<std::string> quoted;
  for (const std::string& n : names_) quoted.push_back(Quote(n));
  return ErrorAt(
      name_, width_line_, 1,
      absl::StrCat("data.label_column ", Quote(want),
                   " is not in the header; the columns are ",
                   absl::StrJoin(quoted, ", "), " (or give a 0-based index)"));
}

absl::Status CsvParser::ColumnCountError() {
  std::vector<std::string> fields;
  std::vector<const char*> starts;
  RETURN_IF_ERROR(SplitLine(&fields, &starts));
  const int got = static_cast<int>(fields.size());
  const char* at =
      got > columns_ ? starts[columns_] : line_.data() + line_.size();
  std::string message =
      absl::StrCat("expected ", columns_, " columns as in ",
                   options_.header ? std::string("the header")
                                   : absl::StrCat("line ", width_line_),
                   ", got ", got);
  if (got == 1) {
    absl::StrAppend(&message, "; is data.delimiter right?");
  } else {
    absl::StrAppend(&message,
                    "; fix the line (a trailing delimiter counts as an empty "
                    "column)");
  }
  return Error(at, message);
}

absl::Status CsvParser::ParseFeatureSlow(const char** p, int column,
                                         float* out) {
  absl::string_view token;
  const char* start;
  RETURN_IF_ERROR(ScanField(p, &token, &start));
  if (internal::IsMissingMarker(token)) {
    switch (options_.missing) {
      case Missing::kZero:
        *out = 0;
        return absl::OkStatus();
      case Missing::kMean:
        *out = std::numeric_limits<float>::quiet_NaN();
        ++missing_;
        return absl::OkStatus();
      case Missing::kError:
        return Error(start,
                     absl::StrCat("missing value ", Quote(token), " in ",
                                  ColumnName(column),
                                  "; fill it in, or set data.missing: zero "
                                  "or data.missing: mean"));
    }
  }
  switch (internal::ParseFloat(token, out)) {
    case NumberKind::kOk:
      return absl::OkStatus();
    case NumberKind::kNaN:
      return Error(start, absl::StrCat("value ", Quote(token), " in ",
                                       ColumnName(column),
                                       " is NaN; write a missing value as an "
                                       "empty field and set data.missing"));
    case NumberKind::kInf:
      return Error(start, absl::StrCat("value ", Quote(token), " in ",
                                       ColumnName(column),
                                       " is infinite or too large for a "
                                       "float; fix or drop the row"));
    case NumberKind::kNotNumber:
      break;
  }
  RETURN_IF_ERROR(internal::CheckTokenIsText(text_, name_, start - text_.data(),
                                             token, kFormat));
  std::string hint =
      "fix the value, drop the column, or if it holds the labels set "
      "data.label_column";
  if (!options_.header && line_number_ == width_line_) {
    hint = "if the first line names the columns, set data.header: true";
  }
  return Error(start,
               absl::StrCat("field ", Quote(token), " in ", ColumnName(column),
                            " is not a number; ", hint));
}

absl::Status CsvParser::ParseRow() {
  const char delimiter = options_.delimiter;
  const char* p = line_.data();
  const char* end = p + line_.size();
  const size_t base = table_.x.size();
  table_.x.resize(base + table_.dim);
  float* out = table_.x.data() + base;
  table_.y.emplace_back();
  for (int column = 0; column < columns_; ++column) {
    if (column == label_column_) {
      absl::string_view token;
      const char* start;
      RETURN_IF_ERROR(ScanField(&p, &token, &start));
      if (internal::IsMissingMarker(token) &&
          (options_.classes.empty() ||
           std::find(options_.classes.begin(), options_.classes.end(), token) ==
               options_.classes.end())) {
        return Error(start, absl::StrCat("missing label ", Quote(token), " in ",
                                         ColumnName(column),
                                         "; fill it in or drop the row"));
      }
      RETURN_IF_ERROR(internal::CheckTokenIsText(
          text_, name_, start - text_.data(), token, kFormat));
      const absl::Status status = labels_.Add(token, &table_.y.back());
      if (!status.ok()) return Error(start, status.message());
    } else {
      // The fast path: a plain number followed by the delimiter or line end.
      float v;
      const auto [next, error] = std::from_chars(p, end, v);
      if (error == std::errc() && next != p &&
          (next == end || *next == delimiter) && std::isfinite(v)) {
        *out++ = v;
        p = next;
      } else {
        RETURN_IF_ERROR(ParseFeatureSlow(&p, column, out++));
      }
    }
    if (column + 1 < columns_) {
      if (p == end) return ColumnCountError();
      ++p;  // the delimiter
    }
  }
  if (p != end) return ColumnCountError();
  return absl::OkStatus();
}

absl::Status CsvParser::FillMeans() {
  const int dim = table_.dim;
  std::vector<double> sum(dim, 0.0);
  std::vector<int64_t> count(dim, 0);
  for (size_t i = 0; i < table_.x.size(); ++i) {
    const float v = table_.x[i];
    if (!std::isnan(v)) {
      sum[i % dim] += v;
      ++count[i % dim];
    }
  }
  for (int f = 0; f < dim; ++f) {
    if (count[f] == 0) {
      return ErrorAt(name_, width_line_, 1,
                     absl::StrCat("feature ", Quote(table_.feature_names[f]),
                                  " has no values to take the mean of; drop "
                                  "the column or set data.missing: zero"));
    }
  }
  for (size_t i = 0; i < table_.x.size(); ++i) {
    float& v = table_.x[i];
    if (std::isnan(v)) v = static_cast<float>(sum[i % dim] / count[i % dim]);
  }
  return absl::OkStatus();
}

absl::StatusOr<Table> CsvParser::Parse() {
  const char d = options_.delimiter;
  if (d != ',' && d != '\t' && d != ';') {
    return ErrorAt(name_, 1, 1,
                   absl::StrCat("data.delimiter ", Quote({&d, 1}),
                                " is not supported; use ',', '\\t' or ';'"));
  }
  if (options_.skip_lines < 0 || options_.max_line_bytes <= 0) {
    return ErrorAt(name_, 1, 1,
                   "data.skip_lines must be >= 0 and max_line_bytes > 0");
  }
  RETURN_IF_ERROR(internal::CheckLooksLikeText(text_, name_, kFormat));
  internal::StripByteOrderMark(text_, &next_offset_);
  bool found = true;
  for (int i = 0; i < options_.skip_lines && found; ++i) {
    RETURN_IF_ERROR(NextLine(&found));
  }
  if (!found) {
    return ErrorAt(
        name_, line_number_, 1,
        absl::StrCat("the file ends within the ", options_.skip_lines,
                     " lines of data.skip_lines; no data rows"));
  }
  RETURN_IF_ERROR(NextNonBlankLine(&found));
  if (!found) {
    return ErrorAt(name_, line_number_ + 1, 1,
                   "the file is empty (no header, no data rows)");
  }
  RETURN_IF_ERROR(ReadHeader());
  RETURN_IF_ERROR(FindLabelColumn());
  table_.dim = options_.has_label ? columns_ - 1 : columns_;
  for (int c = 0; c < columns_; ++c) {
    if (c == label_column_) continue;
    table_.feature_names.push_back(
        names_.empty() ? absl::StrCat("x", table_.feature_names.size())
                       : names_[c]);
  }
  if (options_.header) RETURN_IF_ERROR(NextNonBlankLine(&found));
  if (found) {
    // Room for about as many rows as lines of this length fit in the rest.
    const size_t rows = (text_.size() - line_offset_) / (line_.size() + 1) + 1;
    const size_t floats = std::min(
        rows * (rows > 1 ? 11 : 10) / 10 * static_cast<size_t>(table_.dim),
        text_.size() + table_.dim);
    table_.x.reserve(floats);
    table_.y.reserve(std::min(rows + rows / 10, text_.size()));
  }
  while (found) {
    RETURN_IF_ERROR(ParseRow());
    RETURN_IF_ERROR(NextNonBlankLine(&found));
  }
  if (table_.y.empty()) {
    return ErrorAt(name_, line_number_ + 1, 1,
                   "no data rows after the header; is the file complete?");
  }
  if (missing_ > 0) RETURN_IF_ERROR(FillMeans());
  if (options_.has_label) {
    labels_.Finish(&table_.y, &table_.class_names);
  } else {
    std::fill(table_.y.begin(), table_.y.end(), std::nanf(""));
  }
  return std::move(table_);
}

}  // namespace

absl::StatusOr<Table> ParseCsv(absl::string_view text, const std::string& name,
                               const CsvOptions& options) {
  return CsvParser(text, name, options).Parse();
}

absl::StatusOr<Table> ReadCsv(const std::string& path,
                              const CsvOptions& options) {
  ASSIGN_OR_RETURN(std::string text, ReadFileMaybeGzip(path));
  return ParseCsv(text, path, options);
}

}  // namespace downpour::data
