// The Criteo click-log text format into hashed sparse rows: one example per
// line, 40 tab-separated fields: a 0/1 click label, 13 integer fields I1..I13
// and 26 categorical fields C1..C26 (strings, typically 8 hex digits), any of
// them but the label possibly empty (missing). Lines end in '\n' or "\r\n".
//
//   SparseDataset rows;
//   RETURN_IF_ERROR(ParseCriteoRows(chunk.text, "day_0", line, &rows));
//
// Keys (data/feature_hash.h), each entry with value 1.0:
//   Ii = v (a signed 64-bit decimal): FeatureKey("I<i>", decimal t) with
//     t = v when v <= 2, else floor(ln(v)^2) (the Criteo competition's
//     transform; 3 -> 1, 100 -> 21), in field i - 1;
//   Cj = s: FeatureKey("C<j>", s) with s's bytes as written, in field 12 + j.
#ifndef DOWNPOUR_DATA_CRITEO_PARSER_H_
#define DOWNPOUR_DATA_CRITEO_PARSER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "data/sparse_dataset.h"

namespace downpour::data {

// Feature fields of a Criteo line: I1..I13 (fields 0..12), C1..C26 (13..38).
inline constexpr int kCriteoFields = 39;

// The name of field f: "I1".."I13" for f = 0..12, "C1".."C26" for 13..38.
// REQUIRES: 0 <= f < kCriteoFields.
std::string CriteoFieldName(int f);

// Parses whole lines of Criteo text (e.g. a TextChunk's text) and appends one
// row per line to *out through SparseRowWriter with fields, its entries as
// above, y 0 or 1 by the label. Lines empty or of spaces (after dropping a
// final '\r') are skipped; empty fields add nothing. `name` stands for the
// file and `first_line` is the number of text's first line, for messages.
// Errors: InvalidArgument "name:line:column: what; fix" (column 1-based, in
// bytes) for a label other than "0" or "1", a line without exactly 40 fields,
// an integer field that is not a signed 64-bit decimal ("I3 '12a' is not an
// integer; ..."). Rows before the bad line stay appended; nothing of the bad
// line is.
absl::Status ParseCriteoRows(absl::string_view text, const std::string& name,
                             int64_t first_line, SparseDataset* out);

}  // namespace downpour::data

#endif  // DOWNPOUR_DATA_CRITEO_PARSER_H_
