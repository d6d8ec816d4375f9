// CSV lines and fields: moved out of the dense reader so that the sparse
// reader quotes, trims, counts columns and maps labels the same way.
#include "data/csv_scanner.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "data/reader_internal.h"

namespace downpour::data::internal {

CsvScanner::CsvScanner(absl::string_view text, const std::string& name,
                       const CsvOptions& options)
    : text_(text),
      name_(name),
      options_(options),
      labels_(options.labels, options.classes) {}

absl::Status CsvScanner::NextLine(bool* found) {
  *found = next_offset_ < text_.size();
  if (!*found) return absl::OkStatus();
  line_offset_ = next_offset_;
  line_ = CutLine(text_, &next_offset_);
  ++line_number_;
  return CheckLineLength(line_, name_, line_number_, options_.max_line_bytes,
                         kFormat);
}

absl::Status CsvScanner::NextNonBlankLine(bool* found) {
  while (true) {
    RETURN_IF_ERROR(NextLine(found));
    if (!*found) return absl::OkStatus();
    const bool blank = std::all_of(line_.begin(), line_.end(), [](char c) {
      return c == ' ' || c == '\t' || c == '\r';
    });
    if (!blank) return absl::OkStatus();
  }
}

absl::Status CsvScanner::NextDataLine(bool* found) {
  return NextNonBlankLine(found);
}

absl::Status CsvScanner::Error(const char* at,
                               absl::string_view message) const {
  return ErrorAt(name_, line_number_, at - line_.data() + 1, message);
}

absl::Status CsvScanner::CheckText(const char* start,
                                   absl::string_view token) const {
  return CheckTokenIsText(text_, name_, start - text_.data(), token, kFormat);
}

absl::Status CsvScanner::ScanField(const char** p, absl::string_view* token,
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

absl::Status CsvScanner::SplitLine(std::vector<std::string>* fields,
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

std::string CsvScanner::ColumnName(int column) const {
  if (!names_.empty()) return absl::StrCat("column ", Quote(names_[column]));
  return absl::StrCat("column ", column, " (0-based)");
}

absl::Status CsvScanner::ReadHeader() {
  std::vector<std::string> fields;
  std::vector<const char*> starts;
  RETURN_IF_ERROR(SplitLine(&fields, &starts));
  for (size_t i = 0; i < fields.size(); ++i) {
    RETURN_IF_ERROR(CheckText(starts[i], fields[i]));
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

absl::Status CsvScanner::FindLabelColumn() {
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

absl::Status CsvScanner::ColumnCountError() {
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

absl::Status CsvScanner::ParseLabel(const char* start, absl::string_view token,
                                    float* y) {
  if (IsMissingMarker(token) &&
      (options_.classes.empty() ||
       std::find(options_.classes.begin(), options_.classes.end(), token) ==
           options_.classes.end())) {
    return Error(start, absl::StrCat("missing label ", Quote(token), " in ",
                                     ColumnName(label_column_),
                                     "; fill it in or drop the row"));
  }
  RETURN_IF_ERROR(CheckText(start, token));
  const absl::Status status = labels_.Add(token, y);
  if (!status.ok()) return Error(start, status.message());
  return absl::OkStatus();
}

void CsvScanner::FinishLabels(std::vector<float>* y,
                              std::vector<std::string>* class_names) {
  labels_.Finish(y, class_names);
}

absl::Status CsvScanner::Start(bool* found) {
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
  RETURN_IF_ERROR(CheckLooksLikeText(text_, name_, kFormat));
  StripByteOrderMark(text_, &next_offset_);
  *found = true;
  for (int i = 0; i < options_.skip_lines && *found; ++i) {
    RETURN_IF_ERROR(NextLine(found));
  }
  if (!*found) {
    return ErrorAt(
        name_, line_number_, 1,
        absl::StrCat("the file ends within the ", options_.skip_lines,
                     " lines of data.skip_lines; no data rows"));
  }
  RETURN_IF_ERROR(NextNonBlankLine(found));
  if (!*found) {
    return ErrorAt(name_, line_number_ + 1, 1,
                   "the file is empty (no header, no data rows)");
  }
  RETURN_IF_ERROR(ReadHeader());
  RETURN_IF_ERROR(FindLabelColumn());
  if (options_.header) RETURN_IF_ERROR(NextNonBlankLine(found));
  return absl::OkStatus();
}

}  // namespace downpour::data::internal
