// LabelMap: turns the label tokens of a file into targets, as LabelMode
// describes (data/table.h). Shared by the CSV and LIBSVM readers; internal to
// data/.
//
//   LabelMap labels(LabelMode::kClass, options.classes);
//   for each row: RETURN_IF_ERROR(labels.Add(token, &y));   // in file order
//   labels.Finish(&table.y, &table.class_names);
#ifndef DOWNPOUR_DATA_LABEL_MAP_H_
#define DOWNPOUR_DATA_LABEL_MAP_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "data/table.h"

namespace downpour::data::internal {

// Not thread-safe: one per file being read.
class LabelMap {
 public:
  // Without explicit classes, more labels than this in kClass is an error.
  static constexpr int kMaxImplicitClasses = 1000;

  LabelMap(LabelMode mode, const std::vector<std::string>& classes);
  LabelMap(const LabelMap&) = delete;
  LabelMap& operator=(const LabelMap&) = delete;

  // Maps the next row's label token (unquoted, trimmed) to *y: the float for
  // kReal, the class index with explicit classes, else a provisional index
  // that Finish rewrites. InvalidArgument (a message without a location, for
  // the caller to prefix) for a NaN/Inf or non-numeric kReal label, a token
  // outside explicit classes, or the 1001st distinct implicit class.
  absl::Status Add(absl::string_view token, float* y);

  // Rewrites the provisional indices in *y into the final class indices and
  // sets *class_names (left empty for kReal). Call once, after the last Add.
  void Finish(std::vector<float>* y, std::vector<std::string>* class_names);

 private:
  absl::Status AddExplicit(absl::string_view token, float* y);
  absl::Status AddImplicit(absl::string_view token, float* y);

  // Constant after construction.
  const LabelMode mode_;
  const std::vector<std::string> classes_;
  std::vector<float> class_values_;  // classes_[i] as a number, or NaN
  // token -> class index (explicit) or provisional index (implicit).
  absl::flat_hash_map<std::string, int> index_;
  std::vector<std::string> tokens_;  // implicit: by provisional index
  // The last token seen and its index: labels often repeat row after row.
  std::string last_token_;
  int last_index_ = -1;
};

}  // namespace downpour::data::internal

#endif  // DOWNPOUR_DATA_LABEL_MAP_H_
