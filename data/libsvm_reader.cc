// LIBSVM reading: data/libsvm_parser.h reads the lines into sparse rows; the
// dense reader spreads them into a Table, the sparse one returns them.
#include "data/libsvm_reader.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "data/file_reader.h"
#include "data/libsvm_parser.h"
#include "data/reader_internal.h"

namespace downpour::data {
namespace {

using internal::ErrorAt;

// The rows, spread into dense rows of dim floats.
absl::StatusOr<Table> Densify(const internal::LibsvmRows& rows,
                              const std::string& name,
                              const LibsvmOptions& options) {
  const SparseDataset& data = rows.data;
  const int first = options.zero_based ? 0 : 1;
  int dim = options.dim;
  if (dim == 0 && rows.any_index) {
    // The parser checked that max_index fits an int column.
    dim = static_cast<int>(rows.max_index) - first + 1;
  }
  if (dim == 0) {
    return ErrorAt(name, rows.last_line, 1,
                   "no line has a feature (every row would be empty); set "
                   "data.features or check the file");
  }
  const int64_t n = data.rows();
  const double bytes = static_cast<double>(n) * dim * sizeof(float);
  if (bytes > static_cast<double>(options.max_dense_bytes)) {
    return ErrorAt(
        name, options.dim > 0 ? 1 : rows.max_index_line, 1,
        absl::StrFormat("%d rows of %d features need %.3g GB as dense rows, "
                        "more than max_dense_bytes (%d); this reader makes "
                        "dense rows: lower data.features or the file's "
                        "largest index, or read the file as sparse "
                        "(ReadLibsvmSparse)",
                        n, dim, bytes / 1e9, options.max_dense_bytes));
  }
  Table table;
  table.dim = dim;
  table.x.assign(static_cast<size_t>(n) * dim, 0.0f);
  for (int64_t r = 0; r < n; ++r) {
    float* row = table.x.data() + r * dim;
    for (int64_t e = data.offsets[r]; e < data.offsets[r + 1]; ++e) {
      row[data.keys[e] - first] = data.values[e];
    }
  }
  table.feature_names.reserve(dim);
  for (int f = 0; f < dim; ++f) {
    table.feature_names.push_back(absl::StrCat(f + first));
  }
  table.y = data.y;
  table.class_names = data.class_names;
  return table;
}

}  // namespace

absl::StatusOr<Table> ParseLibsvm(absl::string_view text,
                                  const std::string& name,
                                  const LibsvmOptions& options) {
  if (options.dim < 0 || options.max_line_bytes <= 0 ||
      options.max_dense_bytes < 0) {
    return ErrorAt(name, 1, 1,
                   "data.features must be >= 0 (0: from the file), "
                   "max_line_bytes > 0 and max_dense_bytes >= 0");
  }
  internal::LibsvmRules rules;
  rules.zero_based = options.zero_based;
  rules.dim = options.dim;
  rules.labels = options.labels;
  rules.classes = options.classes;
  rules.max_line_bytes = options.max_line_bytes;
  internal::LibsvmRows rows;
  RETURN_IF_ERROR(internal::ParseLibsvmRows(text, name, rules, &rows));
  return Densify(rows, name, options);
}

absl::StatusOr<Table> ReadLibsvm(const std::string& path,
                                 const LibsvmOptions& options) {
  ASSIGN_OR_RETURN(std::string text, ReadFileMaybeGzip(path));
  return ParseLibsvm(text, path, options);
}

absl::StatusOr<SparseDataset> ParseLibsvmSparse(
    absl::string_view text, const std::string& name,
    const LibsvmSparseOptions& options) {
  if (options.max_line_bytes <= 0) {
    return ErrorAt(name, 1, 1, "max_line_bytes must be > 0");
  }
  internal::LibsvmRules rules;
  rules.sparse = true;
  rules.labels = options.labels;
  rules.classes = options.classes;
  rules.max_line_bytes = options.max_line_bytes;
  internal::LibsvmRows rows;
  RETURN_IF_ERROR(internal::ParseLibsvmRows(text, name, rules, &rows));
  // The parser reserved for one entry per 8 bytes of text.
  rows.data.keys.shrink_to_fit();
  rows.data.values.shrink_to_fit();
  return std::move(rows.data);
}

absl::StatusOr<SparseDataset> ReadLibsvmSparse(
    const std::string& path, const LibsvmSparseOptions& options) {
  ASSIGN_OR_RETURN(std::string text, ReadFileMaybeGzip(path));
  return ParseLibsvmSparse(text, path, options);
}

}  // namespace downpour::data
