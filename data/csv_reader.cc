// CSV parsing into dense rows. The hot path is one std::from_chars per field
// straight from the text (no token copies); anything it does not accept
// (quotes, spaces, missing values, errors) takes the general path,
// CsvScanner::ScanField (data/csv_scanner.h: lines, quoting, header, labels).
#include "data/csv_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/csv_scanner.h"
#include "data/file_reader.h"
#include "data/reader_internal.h"

namespace downpour::data {
namespace {

using internal::ErrorAt;
using internal::NumberKind;
using internal::Quote;

// One file's parse into dense rows. Not thread-safe; used once.
class CsvParser {
 public:
  CsvParser(absl::string_view text, const std::string& name,
            const CsvOptions& options)
      : name_(name), options_(options), scanner_(text, name, options) {}

  absl::StatusOr<Table> Parse();

 private:
  absl::Status ParseRow();
  absl::Status ParseFeatureSlow(const char** p, int column, float* out);
  absl::Status FillMeans();

  // Constant after construction.
  const std::string& name_;
  const CsvOptions& options_;

  internal::CsvScanner scanner_;
  int64_t missing_ = 0;  // missing values stored as NaN (Missing::kMean)
  Table table_;
};

absl::Status CsvParser::ParseFeatureSlow(const char** p, int column,
                                         float* out) {
  absl::string_view token;
  const char* start;
  RETURN_IF_ERROR(scanner_.ScanField(p, &token, &start));
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
        return scanner_.Error(
            start, absl::StrCat("missing value ", Quote(token), " in ",
                                scanner_.ColumnName(column),
                                "; fill it in, or set data.missing: zero "
                                "or data.missing: mean"));
    }
  }
  switch (internal::ParseFloat(token, out)) {
    case NumberKind::kOk:
      return absl::OkStatus();
    case NumberKind::kNaN:
      return scanner_.Error(start,
                            absl::StrCat("value ", Quote(token), " in ",
                                         scanner_.ColumnName(column),
                                         " is NaN; write a missing value as an "
                                         "empty field and set data.missing"));
    case NumberKind::kInf:
      return scanner_.Error(start,
                            absl::StrCat("value ", Quote(token), " in ",
                                         scanner_.ColumnName(column),
                                         " is infinite or too large for a "
                                         "float; fix or drop the row"));
    case NumberKind::kNotNumber:
      break;
  }
  RETURN_IF_ERROR(scanner_.CheckText(start, token));
  std::string hint =
      "fix the value, drop the column, or if it holds the labels set "
      "data.label_column";
  if (!options_.header && scanner_.line_number() == scanner_.width_line()) {
    hint = "if the first line names the columns, set data.header: true";
  }
  return scanner_.Error(start, absl::StrCat("field ", Quote(token), " in ",
                                            scanner_.ColumnName(column),
                                            " is not a number; ", hint));
}

absl::Status CsvParser::ParseRow() {
  const char delimiter = options_.delimiter;
  const absl::string_view line = scanner_.line();
  const int columns = scanner_.columns();
  const char* p = line.data();
  const char* end = p + line.size();
  const size_t base = table_.x.size();
  table_.x.resize(base + table_.dim);
  float* out = table_.x.data() + base;
  table_.y.emplace_back();
  for (int column = 0; column < columns; ++column) {
    if (column == scanner_.label_column()) {
      absl::string_view token;
      const char* start;
      RETURN_IF_ERROR(scanner_.ScanField(&p, &token, &start));
      RETURN_IF_ERROR(scanner_.ParseLabel(start, token, &table_.y.back()));
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
    if (column + 1 < columns) {
      if (p == end) return scanner_.ColumnCountError();
      ++p;  // the delimiter
    }
  }
  if (p != end) return scanner_.ColumnCountError();
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
      return ErrorAt(name_, scanner_.width_line(), 1,
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
  bool found;
  RETURN_IF_ERROR(scanner_.Start(&found));
  const int columns = scanner_.columns();
  const std::vector<std::string>& names = scanner_.names();
  table_.dim = options_.has_label ? columns - 1 : columns;
  for (int c = 0; c < columns; ++c) {
    if (c == scanner_.label_column()) continue;
    table_.feature_names.push_back(
        names.empty() ? absl::StrCat("x", table_.feature_names.size())
                      : names[c]);
  }
  if (found) {
    // Room for about as many rows as lines of this length fit in the rest.
    const size_t text_size = scanner_.text_size();
    const size_t rows =
        (text_size - scanner_.line_offset()) / (scanner_.line().size() + 1) + 1;
    const size_t floats = std::min(
        rows * (rows > 1 ? 11 : 10) / 10 * static_cast<size_t>(table_.dim),
        text_size + table_.dim);
    table_.x.reserve(floats);
    table_.y.reserve(std::min(rows + rows / 10, text_size));
  }
  while (found) {
    RETURN_IF_ERROR(ParseRow());
    RETURN_IF_ERROR(scanner_.NextDataLine(&found));
  }
  if (table_.y.empty()) {
    return ErrorAt(name_, scanner_.line_number() + 1, 1,
                   "no data rows after the header; is the file complete?");
  }
  if (missing_ > 0) RETURN_IF_ERROR(FillMeans());
  if (options_.has_label) {
    scanner_.FinishLabels(&table_.y, &table_.class_names);
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
