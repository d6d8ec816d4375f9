// CsvScanner: the CSV lines, fields, quoting, header, label column and label
// parsing that the dense and the sparse CSV readers share (data/csv_reader.h,
// data/sparse_csv_reader.h). Internal to data/.
//
//   CsvScanner scanner(text, name, options);
//   bool found;
//   RETURN_IF_ERROR(scanner.Start(&found));        // header, label column
//   while (found) {
//     ... scanner.ScanField(&p, &token, &start) per column ...
//     RETURN_IF_ERROR(scanner.NextDataLine(&found));
//   }
#ifndef DOWNPOUR_DATA_CSV_SCANNER_H_
#define DOWNPOUR_DATA_CSV_SCANNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "data/csv_options.h"
#include "data/label_map.h"

namespace downpour::data::internal {

// One pass over one file's text. Not thread-safe. `text`, `name` and
// `options` must outlive the scanner.
class CsvScanner {
 public:
  static constexpr absl::string_view kFormat = "CSV";

  CsvScanner(absl::string_view text, const std::string& name,
             const CsvOptions& options);
  CsvScanner(const CsvScanner&) = delete;
  CsvScanner& operator=(const CsvScanner&) = delete;

  // Checks the options and the text (binary, gzip), skips the BOM and
  // options.skip_lines, reads the header (or the first data line, for the
  // width), finds the label column, and moves to the first data line:
  // *found is false when there is none. InvalidArgument
  // "name:line:column: ..." for bad options (line 1, column 1), binary text,
  // an empty file, one column only, or a label_column that names no column.
  absl::Status Start(bool* found);
  // Moves to the next non-blank data line; *found false at the end.
  absl::Status NextDataLine(bool* found);

  // Scans the field at *p (inside line()): *token is its text, unquoted and
  // trimmed, *start where it begins; *p ends at the delimiter or line end.
  // The token may point into a scratch buffer valid until the next call.
  absl::Status ScanField(const char** p, absl::string_view* token,
                         const char** start);
  // The error for a line with another number of columns than the header.
  absl::Status ColumnCountError();
  // InvalidArgument "name:line:column: message" at `at` inside line().
  absl::Status Error(const char* at, absl::string_view message) const;
  // An error unless `token` (at `start` in line()) is text (CheckTokenIsText).
  absl::Status CheckText(const char* start, absl::string_view token) const;
  // "column 'name'" (with a header) or "column 3 (0-based)".
  std::string ColumnName(int column) const;

  // Maps the label field `token` (at `start`) to *y with the LabelMap: an
  // error for a missing label (IsMissingMarker, unless it is one of
  // options.classes), binary bytes, or as LabelMap::Add, at `start`.
  absl::Status ParseLabel(const char* start, absl::string_view token, float* y);
  // LabelMap::Finish (class names; empty for kReal). Call once, at the end.
  void FinishLabels(std::vector<float>* y,
                    std::vector<std::string>* class_names);

  // The current line, without its line break.
  absl::string_view line() const { return line_; }
  int64_t line_number() const { return line_number_; }
  // The line that set the number of columns (the header, or the first line).
  int64_t width_line() const { return width_line_; }
  int columns() const { return columns_; }
  // -1 when !options.has_label.
  int label_column() const { return label_column_; }
  // The header's names; empty without a header.
  const std::vector<std::string>& names() const { return names_; }
  // Where line() starts in the text, and the text's size.
  size_t line_offset() const { return line_offset_; }
  size_t text_size() const { return text_.size(); }

 private:
  absl::Status NextLine(bool* found);
  absl::Status NextNonBlankLine(bool* found);
  absl::Status SplitLine(std::vector<std::string>* fields,
                         std::vector<const char*>* starts);
  absl::Status ReadHeader();
  absl::Status FindLabelColumn();

  // Constant after construction.
  const absl::string_view text_;
  const std::string& name_;
  const CsvOptions& options_;

  absl::string_view line_;
  size_t line_offset_ = 0;   // of line_ in text_
  size_t next_offset_ = 0;   // where the next line starts
  int64_t line_number_ = 0;  // of line_, 1-based
  int64_t width_line_ = 0;
  std::vector<std::string> names_;
  int columns_ = 0;
  int label_column_ = 0;
  std::string scratch_;  // a quoted field with "" inside, unescaped
  LabelMap labels_;
};

}  // namespace downpour::data::internal

#endif  // DOWNPOUR_DATA_CSV_SCANNER_H_
