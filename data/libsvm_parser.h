// The LIBSVM line parser behind both LIBSVM readers (data/libsvm_reader.h):
// lines, comments, qid, labels, index:value pairs and their errors, into
// sparse rows. The dense reader then spreads the rows into a Table; the
// sparse reader returns them as they are. Internal to data/.
//
//   LibsvmRules rules;
//   rules.sparse = true;
//   LibsvmRows rows;
//   RETURN_IF_ERROR(ParseLibsvmRows(text, name, rules, &rows));
#ifndef DOWNPOUR_DATA_LIBSVM_PARSER_H_
#define DOWNPOUR_DATA_LIBSVM_PARSER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "data/sparse_dataset.h"
#include "data/table.h"

namespace downpour::data::internal {

// How to read the indices and labels: the readers fill this from their
// options (LibsvmOptions, LibsvmSparseOptions), which it mirrors.
struct LibsvmRules {
  // false (dense): indices increase strictly along a line and are at most
  //   2^31 - 2; index 0 is an error unless zero_based; an index past a
  //   nonzero dim is an error.
  // true (sparse): any uint64 index (0 to 2^64 - 1), in any order; repeats
  //   are summed (SparseRowWriter); zero_based and dim are unused.
  bool sparse = false;
  bool zero_based = false;
  int dim = 0;
  LabelMode labels = LabelMode::kClass;
  std::vector<std::string> classes;
  int64_t max_line_bytes = 1 << 20;
  // The number of the text's first line in its file, for messages (a chunk
  // of a file starts past line 1).
  int64_t first_line = 1;
};

// What ParseLibsvmRows read.
struct LibsvmRows {
  // Keys are the indices as written; labels are final (LabelMap::Finish).
  // Sparse rules: rows as SparseRowWriter makes them (sorted, summed, no
  // zeros). Dense rules: the entries as written (ascending, zeros kept).
  SparseDataset data;
  bool any_index = false;      // some line has an index:value pair
  uint64_t max_index = 0;      // the largest index written (when any_index)
  int64_t max_index_line = 0;  // the first line holding it
  int64_t last_line = 0;       // the number of the last line read
};

// Parses LIBSVM text by `rules`; `name` stands for the file in messages.
// Errors are InvalidArgument "name:line:column: ..." as ParseLibsvm and
// ParseLibsvmSparse list them (data/libsvm_reader.h). REQUIRES: the rules
// are valid (dim >= 0, max_line_bytes > 0); the readers check them.
absl::Status ParseLibsvmRows(absl::string_view text, const std::string& name,
                             const LibsvmRules& rules, LibsvmRows* rows);

}  // namespace downpour::data::internal

#endif  // DOWNPOUR_DATA_LIBSVM_PARSER_H_
