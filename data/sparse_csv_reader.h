// Sparse CSV reader: CSV columns declared categorical, text or numeric become
// hashed feature keys (data/feature_hash.h) in a SparseDataset
// (data/sparse_dataset.h), for a sparse_linear model.
//
//   SparseCsvOptions options;
//   options.csv.label_column = "Class";
//   options.csv.classes = {"good", "bad"};           // "bad" is class 1
//   options.columns = {{"term", SparseColumnKind::kCategorical},
//                      {"funded_amnt", SparseColumnKind::kNumeric},
//                      {"notes", SparseColumnKind::kText}};
//   options.columns[1].quantile_buckets = 10;
//   std::vector<SparseColumn> applied;  // keep for predict: same keys
//   absl::StatusOr<SparseDataset> d = ReadCsvSparse(path, options, &applied);
//
// The file is read as data/csv_reader.h describes (lines, quoting, trimming,
// the label column and its classes), with a header, which names the columns.
// Each column other than the label has a kind, and each row's entries are:
//   categorical: key FeatureKey(name, value), value 1 (the field's text after
//     unquoting and trimming; case and inner spaces kept);
//   text: for each token of the field (Tokenize: lower-cased [a-z0-9]+ runs),
//     key FeatureKey(name, token), value 1; a repeated token sums (2, 3, ...);
//   numeric, as a value (no boundaries, quantile_buckets 0): key
//     FieldKey(name), value the number;
//   numeric, bucketized: key FeatureKey(name, "b" + decimal i), value 1,
//     where i is the number of boundaries <= the number (0 to
//     boundaries.size());
//   ignore: nothing.
// A missing value (an empty field, or NA, N/A, NaN, ? in any case) adds
// nothing, in every kind. Rows are sorted by key with repeated keys summed
// and zero values dropped (SparseRowWriter).
//
// Every entry records its field (SparseDataset::fields, always one per
// entry): the index of its column among the columns of options.columns
// whose kind is not kIgnore, in the order of options.columns (not of the
// header). A key that two columns both give (a hash collision) is one entry,
// with the field of the column that comes first in the file. At most
// kMaxSparseCsvFields columns may be other than kIgnore.
#ifndef DOWNPOUR_DATA_SPARSE_CSV_READER_H_
#define DOWNPOUR_DATA_SPARSE_CSV_READER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/csv_options.h"
#include "data/sparse_dataset.h"

namespace downpour::data {

// The most columns of SparseCsvOptions::columns that may be other than
// kIgnore: each is a field, numbered in a uint16_t.
inline constexpr int kMaxSparseCsvFields = 65535;

// How a CSV column becomes keys (see the file comment).
enum class SparseColumnKind {
  kCategorical,
  kText,
  kNumeric,
  kIgnore,
};

// "categorical", "text", "numeric", "ignore".
const char* SparseColumnKindName(SparseColumnKind kind);
// The kind SparseColumnKindName names; InvalidArgument naming the valid
// names otherwise.
absl::StatusOr<SparseColumnKind> ParseSparseColumnKind(absl::string_view name);

// One column's kind, named by its header name.
struct SparseColumn {
  std::string name;
  SparseColumnKind kind = SparseColumnKind::kCategorical;
  // kNumeric only: strictly ascending finite boundaries; non-empty makes the
  // column bucketized on them. Default empty.
  std::vector<double> boundaries;
  // kNumeric only, with empty boundaries: >= 2 makes the column bucketized
  // into this many buckets at quantiles of the file's values: with the n
  // present values sorted as v[0..n-1], the boundaries are v[floor(j*n/B)]
  // for j = 1..B-1, repeats removed (so ties give fewer buckets). The
  // boundaries chosen are returned in `applied` (ReadCsvSparse). Default 0.
  int quantile_buckets = 0;
};

struct SparseCsvOptions {
  // Layout and labels: header (must be true), label_column, delimiter,
  // skip_lines, has_label, labels, classes, max_line_bytes. `missing` is
  // unused: a missing value adds no entry.
  CsvOptions csv;
  // The kind of every column but the label column, by header name, each
  // named once; a column left out is an error (list it as kIgnore).
  std::vector<SparseColumn> columns;
};

// ReadFileMaybeGzip(path), then ParseCsvSparse with `path` as the name.
// NotFound when the file is missing; InvalidArgument for a corrupt gzip file
// or as ParseCsvSparse.
absl::StatusOr<SparseDataset> ReadCsvSparse(
    const std::string& path, const SparseCsvOptions& options,
    std::vector<SparseColumn>* applied = nullptr);

// Parses CSV text into hashed sparse rows; `name` stands for the file in
// messages. On success, when `applied` is not null, *applied is
// options.columns with each quantile_buckets column replaced by the
// boundaries computed (quantile_buckets 0): reading a test or predict file
// with those columns gives its examples the same keys. Every error is
// InvalidArgument "name:line:column: what is wrong; the fix", for: every
// error of ParseCsv about the layout and labels (column count, quotes, a
// missing or unknown label, binary text, an empty file, long lines, ...); a
// numeric field that is not a number, is NaN or is infinite; a column of the
// options that is not in the header (the message lists the header), named
// twice, or that is the label column; a header column that the options leave
// out, a header name repeated, or one holding '\x1f' (all at the header
// line); a quantile column without values; and bad options at line 1,
// column 1 (no header, more than kMaxSparseCsvFields columns other than
// kIgnore, boundaries not ascending or not finite, quantile_buckets of 1 or
// below 0, boundaries or quantile_buckets on a column that is not numeric,
// both on one column).
absl::StatusOr<SparseDataset> ParseCsvSparse(
    absl::string_view text, const std::string& name,
    const SparseCsvOptions& options,
    std::vector<SparseColumn>* applied = nullptr);

}  // namespace downpour::data

#endif  // DOWNPOUR_DATA_SPARSE_CSV_READER_H_
