// The parsers a streamed worker reads its chunks of whole lines with, by
// data.source: Criteo text, LIBSVM with 64-bit indices, and CSV columns
// hashed into keys (data/sparse_csv_reader.h) without quantile buckets.
// Each turns a chunk into rows appended to a SparseDataset, so that a file
// read in byte-range parts gives the rows the whole-file readers give.
//
//   ASSIGN_OR_RETURN(LineParser parse, MakeLineParser(data, task, files));
//   RETURN_IF_ERROR(parse(chunk.text, path, chunk.offset == 0 ? 1 : 0, &rows));
#ifndef DOWNPOUR_WORKER_LINE_PARSERS_H_
#define DOWNPOUR_WORKER_LINE_PARSERS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/config.h"
#include "data/input_parts.h"
#include "data/sparse_csv_reader.h"
#include "data/sparse_dataset.h"

namespace downpour::worker {

// Parses whole lines (`text`, of file `name`) into rows appended to *out.
// `first_line` is the number of text's first line in its file: 1 when text
// starts the file (a CSV file's header comes first), 0 when not known (the
// reader numbers lines only when it reports an error: it parses the chunk
// again with its line number). Errors "name:line:column: what; the fix".
using LineParser =
    std::function<absl::Status(absl::string_view text, const std::string& name,
                               int64_t first_line, data::SparseDataset* out)>;

// The parser of data.source for `task`: criteo (binary only), libsvm, csv
// (its header read from the first of `files`: every file of a streamed CSV
// input starts with data.skip_lines lines and the same header). A stream
// cannot look at every label or value first, so InvalidArgument for
// classification without data.classes (two), for data.bucketize (its
// quantiles need the whole file), and for another source.
absl::StatusOr<LineParser> MakeLineParser(
    const DataSection& data, Task task,
    const std::vector<data::InputFile>& files);

// The schema of a streamed job, which is its config's: the class names
// (criteo's "0", "1"; data.classes; none for regression) and, for csv, the
// columns (data.categorical, text, numeric, ignore, in that order).
std::vector<std::string> StreamClassNames(const DataSection& data, Task task);
std::vector<data::SparseColumn> StreamColumns(const DataSection& data);

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_LINE_PARSERS_H_
