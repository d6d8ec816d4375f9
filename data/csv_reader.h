// CSV reader: delimited text of numbers, one example per line, one column of
// labels, into a Table (data/table.h).
//
//   CsvOptions options;
//   options.label_column = "species";   // a header name, or "4"
//   absl::StatusOr<Table> iris = ReadCsv("iris.csv.gz", options);
//
// Format: lines end in "\n" or "\r\n" (the last may lack it); blank lines are
// skipped; a leading UTF-8 byte order mark is dropped. Fields are separated by
// `delimiter` and trimmed of spaces (and tabs unless tab is the delimiter). A
// field may be quoted, "like this", with "" for a quote inside and the
// delimiter allowed inside; a quoted field cannot span lines. Every line has
// the header's number of fields (or, without header, the first data line's).
// Numbers are what std::from_chars reads, plus a leading '+': locale-free, a
// '.' for the decimal point, never a ','.
#ifndef DOWNPOUR_DATA_CSV_READER_H_
#define DOWNPOUR_DATA_CSV_READER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/csv_options.h"
#include "data/table.h"

namespace downpour::data {

// ReadFileMaybeGzip(path) (data/file_reader.h), then ParseCsv with `path` as
// the name. NotFound when the file is missing; InvalidArgument for a corrupt
// gzip file or as ParseCsv.
absl::StatusOr<Table> ReadCsv(const std::string& path,
                              const CsvOptions& options);

// Parses CSV text; `name` stands for the file in messages. Every error is
// InvalidArgument "name:line:column: what is wrong; the fix" (1-based line
// and byte column), for: a line with another number of columns than the
// header ("expected 5 columns as in the header, got 4"), a field that is not
// a number (quoted, cut to 40 bytes), a NaN or infinite value or label, a
// missing value with Missing::kError, a missing label, a label outside
// `classes`, more than 1000 distinct labels without `classes` ("use
// model.task: regression"), a label_column that names no column (the
// message lists the names), a file with no data rows, a single column, text
// that looks binary (a NUL byte, bytes that are not UTF-8, gzip data), an
// unterminated quote, a line longer than max_line_bytes, and bad options
// (then at line 1, column 1).
absl::StatusOr<Table> ParseCsv(absl::string_view text, const std::string& name,
                               const CsvOptions& options);

}  // namespace downpour::data

#endif  // DOWNPOUR_DATA_CSV_READER_H_
