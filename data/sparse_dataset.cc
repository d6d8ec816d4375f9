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

absl::Status SparseRowWriter::EndRow(float y) {
  const auto by_key = [](const std::pair<uint64_t, float>& a,
                         const std::pair<uint64_t, float>& b) {
    return a.first < b.first;
  };
  const auto not_ascending = [](const std::pair<uint64_t, float>& a,
                                const std::pair<uint64_t, float>& b) {
    return a.first >= b.first;
  };
  // Rows read from LIBSVM are usually strictly ascending already: nothing to
  // sort or sum, and finite values cannot overflow.
  if (std::adjacent_find(row_.begin(), row_.end(), not_ascending) ==
      row_.end()) {
    for (const auto& [key, value] : row_) {
      if (value == 0) continue;
      data_->keys.push_back(key);
      data_->values.push_back(value);
    }
    return CloseRow(y);
  }
  if (!std::is_sorted(row_.begin(), row_.end(), by_key)) {
    std::sort(row_.begin(), row_.end(), by_key);
  }
  const size_t row_start = data_->keys.size();
  size_t i = 0;
  while (i < row_.size()) {
    const uint64_t key = row_[i].first;
    // Summed in double so that many small duplicates do not lose precision.
    double sum = 0;
    for (; i < row_.size() && row_[i].first == key; ++i) sum += row_[i].second;
    if (std::fabs(sum) > std::numeric_limits<float>::max()) {
      data_->keys.resize(row_start);
      data_->values.resize(row_start);
      row_.clear();
      return absl::InvalidArgumentError(
          absl::StrCat("the values of key ", key, " in this row sum to ", sum,
                       ", too large for a float; fix or drop the row"));
    }
    const float value = static_cast<float>(sum);
    if (value == 0) continue;
    data_->keys.push_back(key);
    data_->values.push_back(value);
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
