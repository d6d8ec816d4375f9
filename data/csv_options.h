// CsvOptions: how a CSV file is laid out (header, delimiter, label column)
// and what its labels and missing values mean; read by the dense and the
// sparse CSV readers (data/csv_reader.h, data/sparse_csv_reader.h). The
// format itself is described in data/csv_reader.h.
#ifndef DOWNPOUR_DATA_CSV_OPTIONS_H_
#define DOWNPOUR_DATA_CSV_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "data/table.h"

namespace downpour::data {

struct CsvOptions {
  // The first (non-skipped, non-blank) line names the columns. Default true.
  bool header = true;
  // The label column: a header name or a 0-based index as text; "" (the
  // default) is the last column. A name is looked up before an index.
  std::string label_column;
  // ',' (default), '\t' or ';'.
  char delimiter = ',';
  // Lines skipped before the header/data (scikit-learn's bundled CSVs start
  // with "n_rows,n_features,names..."). Default 0.
  int skip_lines = 0;
  // The file has a label column. false: every column is a feature and each
  // row's y is NaN (a file to predict on). Default true.
  bool has_label = true;
  // What the label column holds. Default kClass.
  LabelMode labels = LabelMode::kClass;
  // kClass: the class order, classes[i] -> i; empty (default): as LabelMode
  // describes.
  std::vector<std::string> classes;
  // What a missing feature value becomes in a dense Table. Default kError.
  // (The sparse reader leaves missing values out of the row instead.)
  Missing missing = Missing::kError;
  // A longer line (not counting its line break) is an error. Default 1 MiB.
  int64_t max_line_bytes = 1 << 20;
};

}  // namespace downpour::data

#endif  // DOWNPOUR_DATA_CSV_OPTIONS_H_
