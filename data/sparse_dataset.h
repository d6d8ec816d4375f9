// SparseDataset: labelled examples as sparse rows of (uint64 key, value), the
// result of the sparse LIBSVM and CSV readers (data/libsvm_reader.h,
// data/sparse_csv_reader.h) and the input of a sparse_linear model.
//
//   absl::StatusOr<SparseDataset> d = ReadLibsvmSparse("a.svm", {});
//   for (int64_t e = d->offsets[i]; e < d->offsets[i + 1]; ++e)
//     margin += w[d->keys[e]] * d->values[e];        // row i
//
// Each entry may also name its field (fields), the group of features it
// belongs to, for models that pool per field (wide_deep): the sparse CSV
// reader records each entry's column as its field; LIBSVM has one field.
//
// Memory follows the nonzeros: 12 bytes per entry (14 with fields) and 12
// per row.
#ifndef DOWNPOUR_DATA_SPARSE_DATASET_H_
#define DOWNPOUR_DATA_SPARSE_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace downpour::data {

// Rows in compressed sparse row (CSR) form. Within a row, keys are sorted
// ascending and unique, and no value is 0 (SparseRowWriter sums duplicate
// keys and drops the zeros). A row may be empty. A plain value.
struct SparseDataset {
  // Row i's entries are [offsets[i], offsets[i + 1]) of keys and values;
  // rows() + 1 entries, offsets[0] == 0, offsets.back() == keys.size().
  std::vector<int64_t> offsets = {0};
  std::vector<uint64_t> keys;  // feature keys (data/feature_hash.h)
  std::vector<float> values;   // one per key, finite and nonzero
  // Each entry's field, parallel to keys and values: empty means every entry
  // is in field 0; otherwise exactly one per entry (entries()).
  std::vector<uint16_t> fields;
  std::vector<float> y;  // one target per row (see LabelMode)
  // LabelMode::kClass: class i's label as first written (or classes[i]);
  // binary -1/+1 and 0/1 labels are classes "-1","+1" / "0","1" -> 0, 1.
  // Empty with LabelMode::kReal.
  std::vector<std::string> class_names;

  int64_t rows() const { return static_cast<int64_t>(y.size()); }
  int64_t entries() const { return static_cast<int64_t>(keys.size()); }
};

// OK when `data` keeps the invariants above (sizes, fields empty or one per
// entry, offsets from 0 to keys.size() without decreasing, keys strictly
// ascending within each row, values finite and nonzero); else
// InvalidArgument naming the first broken one ("row 3: key 7 after key 9").
absl::Status ValidateSparseDataset(const SparseDataset& data);

// Appends rows to a SparseDataset whose entries come in any order and may
// repeat: each row is sorted by key on EndRow, duplicates are summed, and
// entries whose value (or sum) is 0 are dropped. Not thread-safe; `data` must
// outlive the writer and not be changed elsewhere while it is used.
//
// Fields: a writer made with `with_fields` false (the default) ignores Add's
// field and appends none, so data->fields stays as it was (empty for a new
// dataset). With `with_fields` true, or when data->fields is not empty
// already, each kept entry appends its field to data->fields (a dataset that
// had entries but no fields first gets field 0 for each): a key added
// several times to a row keeps the field of its first Add, and an entry
// dropped as 0 drops its field.
class SparseRowWriter {
 public:
  explicit SparseRowWriter(SparseDataset* data)
      : SparseRowWriter(data, /*with_fields=*/false) {}
  SparseRowWriter(SparseDataset* data, bool with_fields);
  SparseRowWriter(const SparseRowWriter&) = delete;
  SparseRowWriter& operator=(const SparseRowWriter&) = delete;

  // Adds an entry to the row being built. REQUIRES: value is finite.
  void Add(uint64_t key, float value, uint16_t field = 0) {
    row_.push_back({key, value, field});
  }
  // Closes the row: appends its entries (sorted, summed), their fields when
  // recorded, and `y`. When the values of a key sum to an infinite float,
  // InvalidArgument ("key 7: its values sum to inf ...", without a location,
  // for the caller to prefix) and the row is dropped; the dataset stays
  // valid and the writer usable.
  absl::Status EndRow(float y);

 private:
  struct Entry {
    uint64_t key;
    float value;
    uint16_t field;
  };

  // Appends one kept entry.
  void Append(const Entry& entry, float value) {
    data_->keys.push_back(entry.key);
    data_->values.push_back(value);
    if (with_fields_) data_->fields.push_back(entry.field);
  }
  // Appends the row's end and y, and empties row_.
  absl::Status CloseRow(float y);

  SparseDataset* const data_;
  const bool with_fields_;
  std::vector<Entry> row_;  // the open row, in Add order
};

}  // namespace downpour::data

#endif  // DOWNPOUR_DATA_SPARSE_DATASET_H_
