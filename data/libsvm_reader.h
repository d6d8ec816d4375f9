// LIBSVM / svmlight reader: sparse "label index:value ..." lines into a dense
// Table (data/table.h), or kept sparse with 64-bit indices as keys
// (data/sparse_dataset.h).
//
//   LibsvmOptions options;
//   options.dim = 784;   // else the largest index in the file
//   absl::StatusOr<Table> mnist = ReadLibsvm("mnist.scale.gz", options);
//   absl::StatusOr<SparseDataset> clicks =
//       ReadLibsvmSparse("clicks.svm.gz", LibsvmSparseOptions());
//
// Format: one example per line, "<label> <index>:<value> <index>:<value> ...",
// separated by spaces or tabs, indices strictly increasing within a line;
// absent indices are 0. A '#' starts a comment to the end of the line, a
// "qid:<n>" right after the label is skipped, blank lines are skipped, and
// lines end in "\n" or "\r\n". Labels are tokens as LabelMode describes
// ("+1", "-1", "3", or names); multi-label lists ("1,3") are refused.
#ifndef DOWNPOUR_DATA_LIBSVM_READER_H_
#define DOWNPOUR_DATA_LIBSVM_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/sparse_dataset.h"
#include "data/table.h"

namespace downpour::data {

struct LibsvmOptions {
  // Indices start at 0; else (the default) at 1, and index 0 is an error.
  bool zero_based = false;
  // Features per row; 0 (default) = the largest index in the file (+1 when
  // zero_based). An index beyond a nonzero dim is an error.
  int dim = 0;
  // What the label holds. Default kClass.
  LabelMode labels = LabelMode::kClass;
  // kClass: the class order, classes[i] -> i; empty (default): as LabelMode
  // describes.
  std::vector<std::string> classes;
  // A longer line (not counting its line break) is an error. Default 1 MiB.
  int64_t max_line_bytes = 1 << 20;
  // The dense table may take at most this many bytes (rows * dim * 4): a
  // sparse file of 10^6 features is not a dense one. Default 16 GiB.
  int64_t max_dense_bytes = int64_t{16} << 30;
};

// ReadFileMaybeGzip(path) (data/file_reader.h), then ParseLibsvm with `path`
// as the name. NotFound when the file is missing; InvalidArgument for a
// corrupt gzip file or as ParseLibsvm.
absl::StatusOr<Table> ReadLibsvm(const std::string& path,
                                 const LibsvmOptions& options);

// Parses LIBSVM text; `name` stands for the file in messages. Every error is
// InvalidArgument "name:line:column: what is wrong; the fix", for: index 0
// when 1-based ("set data.zero_based: true"), indices out of order or
// repeated, an index beyond a nonzero dim (naming data.features), a token
// that is not index:value, a value or label that is not a number or is
// NaN/Inf, a label outside `classes` or the 1001st distinct label without
// them, a multi-label line, no data rows, no features at all with dim 0, a
// dense table over max_dense_bytes, text that looks binary, a line longer
// than max_line_bytes, and bad options (then at line 1, column 1).
absl::StatusOr<Table> ParseLibsvm(absl::string_view text,
                                  const std::string& name,
                                  const LibsvmOptions& options);

struct LibsvmSparseOptions {
  // What the label holds. Default kClass (binary -1/+1 and 0/1 map to 0/1).
  LabelMode labels = LabelMode::kClass;
  // kClass: the class order, classes[i] -> i; empty (default): as LabelMode
  // describes.
  std::vector<std::string> classes;
  // A longer line (not counting its line break) is an error. Default 1 MiB.
  int64_t max_line_bytes = 1 << 20;
};

// ReadFileMaybeGzip(path), then ParseLibsvmSparse with `path` as the name.
// NotFound when the file is missing; InvalidArgument for a corrupt gzip file
// or as ParseLibsvmSparse.
absl::StatusOr<SparseDataset> ReadLibsvmSparse(
    const std::string& path, const LibsvmSparseOptions& options);

// Parses LIBSVM text into sparse rows without a dense expansion: memory
// follows the nonzeros. Each index is parsed as a uint64 (0 to 2^64 - 1) and
// becomes the key as written, with no 0/1-based shift and no hashing (the ps
// mixes keys with MixKey before picking a shard, data/feature_hash.h). Within
// a line indices may come in any order and repeat: each row is sorted by key,
// repeated keys have their values summed, and zero values are dropped. A
// LIBSVM file has one field: the result records no fields (`fields` is
// empty: every entry is in field 0, data/sparse_dataset.h). The lines,
// comments, qid and labels are read as ParseLibsvm reads them. Every error
// is InvalidArgument "name:line:column: what is wrong; the fix", for: an
// index above 2^64 - 1, a token that is not index:value (a negative index,
// too), a value or label that is not a number or is NaN/Inf, values of one
// key summing past the float range, a label outside `classes` or the 1001st
// distinct label without them, a multi-label line, no data rows, text that
// looks binary, a line longer than max_line_bytes, and bad options.
absl::StatusOr<SparseDataset> ParseLibsvmSparse(
    absl::string_view text, const std::string& name,
    const LibsvmSparseOptions& options);

}  // namespace downpour::data

#endif  // DOWNPOUR_DATA_LIBSVM_READER_H_
