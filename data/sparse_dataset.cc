// CSR rows: sorting and summing each row once, when it closes, keeps the
// dataset's invariants without a pass over the whole data at the end.
#include "data/sparse_dataset.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace downpour::data {

absl::Status ValidateSparseDataset(const SparseDataset& data) {
  const int64_t rows = data.rows();
  if (static_cast<int64_t>(data.offsets.size()) != rows + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(rows, " rows (y) but ", data.offsets.size(),
                     " offsets; expected rows + 1"));
  }
  if (data.keys.size() != data.values.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        data.keys.size(), " keys but ", data.values.size(), " values"));
  }
  if (!data.fields.empty() &&
      static_cast<int64_t>(data.fields.size()) != data.entries()) {
    return absl::InvalidArgumentError(
        absl::StrCat(data.fields.size(), " fields but ", data.entries(),
                     " entries; expected one field per entry, or none (all "
                     "in field 0)"));
  }
  if (data.offsets.front() != 0 || data.offsets.back() != data.entries()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "offsets run from ", data.offsets.front(), " to ", data.offsets.back(),
        "; expected 0 to ", data.entries(), " (the number of keys)"));
  }
  // All offsets first: the key checks below index keys by them.
  for (int64_t r = 0; r < rows; ++r) {
    if (data.offsets[r + 1] < data.offsets[r]) {
      return absl::InvalidArgumentError(
          absl::StrCat("row ", r, ": offsets decrease (", data.offsets[r],
                       " to ", data.offsets[r + 1], ")"));
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t begin = data.offsets[r], end = data.offsets[r + 1];
    for (int64_t e = begin; e < end; ++e) {
      if (e > begin && data.keys[e] <= data.keys[e - 1]) {
        return absl::InvalidArgumentError(
            absl::StrCat("row ", r, ": key ", data.keys[e], " after key ",
                         data.keys[e - 1], "; keys must increase in a row"));
      }
      if (!std::isfinite(data.values[e]) || data.values[e] == 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "row ", r, ": key ", data.keys[e], " has value ", data.values[e],
            "; values must be finite and nonzero"));
      }
    }
  }
  return absl::OkStatus();
}

SparseRowWriter::SparseRowWriter(SparseDataset* data, bool with_fields)
    : data_(data), with_fields_(with_fields || !data->fields.empty()) {
  // Entries written before without fields were in field 0.
  if (with_fields_ && data_->fields.size() < data_->keys.size()) {
    data_->fields.resize(data_->keys.size(), 0);
  }
}

absl::Status SparseRowWriter::EndRow(float y) {
  const auto by_key = [](const Entry& a, const Entry& b) {
    return a.key < b.key;
  };
  const auto not_ascending = [](const Entry& a, const Entry& b) {
    return a.key >= b.key;
  };
  // Rows read from LIBSVM are usually strictly ascending already: nothing to
  // sort or sum, and finite values cannot overflow.
  if (std::adjacent_find(row_.begin(), row_.end(), not_ascending) ==
      row_.end()) {
    for (const Entry& entry : row_) {
      if (entry.value != 0) Append(entry, entry.value);
    }
    return CloseRow(y);
  }
  if (!std::is_sorted(row_.begin(), row_.end(), by_key)) {
    // With fields, a stable sort keeps each key's first Add first (its field
    // is the one kept). Without, std::sort as before: duplicates are summed
    // in the same order, so rows come out bit for bit as they always did.
    if (with_fields_ && row_.size() <= 64) {
      // Short rows (Criteo's 39 fields): a stable insertion sort, without
      // the buffer std::stable_sort allocates on every call.
      for (size_t i = 1; i < row_.size(); ++i) {
        const Entry entry = row_[i];
        size_t j = i;
        for (; j > 0 && entry.key < row_[j - 1].key; --j) row_[j] = row_[j - 1];
        row_[j] = entry;
      }
    } else if (with_fields_) {
      std::stable_sort(row_.begin(), row_.end(), by_key);
    } else {
      std::sort(row_.begin(), row_.end(), by_key);
    }
  }
  const size_t row_start = data_->keys.size();
  size_t i = 0;
  while (i < row_.size()) {
    const Entry first = row_[i];  // its field is the one kept
    // Summed in double so that many small duplicates do not lose precision.
    double sum = 0;
    for (; i < row_.size() && row_[i].key == first.key; ++i) {
      sum += row_[i].value;
    }
    if (std::fabs(sum) > std::numeric_limits<float>::max()) {
      data_->keys.resize(row_start);
      data_->values.resize(row_start);
      if (with_fields_) data_->fields.resize(row_start);
      row_.clear();
      return absl::InvalidArgumentError(
          absl::StrCat("the values of key ", first.key, " in this row sum to ",
                       sum, ", too large for a float; fix or drop the row"));
    }
    const float value = static_cast<float>(sum);
    if (value != 0) Append(first, value);
  }
  return CloseRow(y);
}

absl::Status SparseRowWriter::CloseRow(float y) {
  data_->offsets.push_back(static_cast<int64_t>(data_->keys.size()));
  data_->y.push_back(y);
  row_.clear();
  return absl::OkStatus();
}

}  // namespace downpour::data
