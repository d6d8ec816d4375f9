// Helpers the CSV and LIBSVM readers share: number parsing with
// std::from_chars (no locale), error messages that start with
// "file:line:column:", and the checks for text that looks binary.
// Internal to data/.
#ifndef DOWNPOUR_DATA_READER_INTERNAL_H_
#define DOWNPOUR_DATA_READER_INTERNAL_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace downpour::data::internal {

// How ParseFloat went.
enum class NumberKind {
  kOk,         // a finite float
  kNotNumber,  // not (all of it) a number
  kNaN,        // "nan" and the like
  kInf,        // "inf", or a number too large for a float ("1e50")
};

// Parses all of `token` as a float: an optional '+' or '-', then what
// std::from_chars accepts. Values too small for a float become 0 (or a
// denormal); values too large are kInf. Sets *value only when kOk.
NumberKind ParseFloat(absl::string_view token, float* value);

// True for the tokens that stand for a missing value: "" and, in any case,
// "NA", "N/A", "NaN" and "?".
bool IsMissingMarker(absl::string_view token);

// `token` in single quotes for a message: at most 40 bytes (then "..."), with
// control and non-ASCII bytes written as \xNN.
std::string Quote(absl::string_view token);

// InvalidArgument "<name>:<line>:<column>: <message>" (line and column
// 1-based; the column counts bytes).
absl::Status ErrorAt(absl::string_view name, int64_t line, int64_t column,
                     absl::string_view message);

// The 1-based line and column of byte `offset` of `text`.
void LineAndColumn(absl::string_view text, size_t offset, int64_t* line,
                   int64_t* column);

// ErrorAt for byte `offset` of `text` (counts lines: for error paths only).
absl::Status ErrorAtOffset(absl::string_view text, absl::string_view name,
                           size_t offset, absl::string_view message);

// The offset of the first byte that makes `text` look binary (a NUL byte, or
// a byte sequence that is not UTF-8), or npos.
size_t FindBinaryByte(absl::string_view text);

// Checks that `text` looks like text: OK, or an error at the first NUL or
// invalid byte saying the file looks binary ("... is it compressed or not a
// <format> file?"). Checks every byte for NUL and the first 64 KiB for UTF-8;
// the readers check each non-numeric token they keep. A gzip header gets its
// own message (ParseCsv/ParseLibsvm take text; ReadCsv/ReadLibsvm gunzip).
absl::Status CheckLooksLikeText(absl::string_view text, absl::string_view name,
                                absl::string_view format);

// An error for `token` (at `offset` of `text`) that holds a binary byte, or OK.
absl::Status CheckTokenIsText(absl::string_view text, absl::string_view name,
                              size_t offset, absl::string_view token,
                              absl::string_view format);

// The line of `text` that starts at *next_offset: up to its '\n' or the end,
// without the '\n' and a trailing '\r'. Moves *next_offset past the '\n'.
// REQUIRES: *next_offset < text.size().
absl::string_view CutLine(absl::string_view text, size_t* next_offset);

// OK, or ErrorAt(name, line_number, max_line_bytes + 1) "line is longer than
// <max_line_bytes> bytes (max_line_bytes); is this a <format> file with one
// example per line?" when `line` is longer than max_line_bytes.
absl::Status CheckLineLength(absl::string_view line, absl::string_view name,
                             int64_t line_number, int64_t max_line_bytes,
                             absl::string_view format);

// `text` without a leading UTF-8 byte order mark; *skipped is its size (0 or
// 3).
absl::string_view StripByteOrderMark(absl::string_view text, size_t* skipped);

}  // namespace downpour::data::internal

#endif  // DOWNPOUR_DATA_READER_INTERNAL_H_
