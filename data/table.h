// Table: labelled examples as dense rows, the result of the CSV and LIBSVM
// readers (data/csv_reader.h, data/libsvm_reader.h), and the options the two
// readers share: how labels become targets and what a missing value means.
//
//   absl::StatusOr<Table> t = ReadCsv("iris.csv", CsvOptions());
//   const float* row = t->x.data() + i * t->dim;  // features of example i
//   int label = static_cast<int>(t->y[i]);         // with LabelMode::kClass
#ifndef DOWNPOUR_DATA_TABLE_H_
#define DOWNPOUR_DATA_TABLE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace downpour::data {

// Examples as dense rows of `dim` floats, one target each. A plain value.
struct Table {
  int dim = 0;           // features per row
  std::vector<float> x;  // rows() * dim floats, row-major: row i at x[i * dim]
  std::vector<float> y;  // one target per row (see LabelMode)
  // dim names: the CSV header's names (the label column left out), else
  // "x0".."x{dim-1}" (CSV without header) or the LIBSVM indices as written
  // ("1".."dim", or "0".."dim-1" when zero-based).
  std::vector<std::string> feature_names;
  // LabelMode::kClass: class i's label as first written in the file (or
  // classes[i] when given); empty with LabelMode::kReal.
  std::vector<std::string> class_names;
  int64_t rows() const { return static_cast<int64_t>(y.size()); }
};

// What the label column holds.
enum class LabelMode {
  // Class labels, mapped to indices 0..k-1 (stored as float). With explicit
  // `classes`, the token equal to classes[i] (or numerically equal: "+1" and
  // "1") maps to i and any other is an error. Otherwise, when every distinct
  // label is a number, classes are the distinct values in numeric order
  // (-1/+1 and 0/1 both map to 0/1; LIBSVM's 1,2,3 to 0,1,2); else classes
  // come in order of first appearance. More than 1000 distinct labels without
  // explicit classes is an error (it looks like a regression target).
  kClass,
  // A real target (regression): the label parsed as a float.
  kReal,
};

// What a missing CSV value (an empty field, or NA, N/A, NaN, ?, in any case)
// becomes. A missing label is always an error.
enum class Missing {
  kError,  // an error naming file:line:column
  kZero,   // 0
  kMean,   // the column's mean over the file's present values
};

}  // namespace downpour::data

#endif  // DOWNPOUR_DATA_TABLE_H_
