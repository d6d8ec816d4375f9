#include "worker/sparse_batches.h"

#include <algorithm>
#include <numeric>
#include <utility>

namespace downpour::worker {

void AppendRow(const data::SparseDataset& from, int64_t r,
               data::SparseDataset* to) {
  const int64_t begin = from.offsets[r];
  const int64_t end = from.offsets[r + 1];
  to->keys.insert(to->keys.end(), from.keys.begin() + begin,
                  from.keys.begin() + end);
  to->values.insert(to->values.end(), from.values.begin() + begin,
                    from.values.begin() + end);
  if (!from.fields.empty()) {
    to->fields.insert(to->fields.end(), from.fields.begin() + begin,
                      from.fields.begin() + end);
  }
  to->offsets.push_back(static_cast<int64_t>(to->keys.size()));
  to->y.push_back(from.y[r]);
}

void ClearRows(data::SparseDataset* out) {
  out->offsets.assign(1, 0);
  out->keys.clear();
  out->values.clear();
  out->fields.clear();
  out->y.clear();
}

InMemoryBatches::InMemoryBatches(
    std::shared_ptr<const data::SparseDataset> data, uint64_t seed,
    int64_t total)
    : data_(std::move(data)),
      total_(data_->rows() == 0 ? 0 : total),
      rng_(seed),
      order_(data_->rows()),
      cursor_(data_->rows()) {
  std::iota(order_.begin(), order_.end(), 0);
}

absl::StatusOr<bool> InMemoryBatches::Next(int batch, data::SparseDataset* out,
                                           std::vector<int32_t>* epochs) {
  if (given_ >= total_) return false;
  const int64_t n = data_->rows();
  if (cursor_ >= n) {
    std::shuffle(order_.begin(), order_.end(), rng_);
    cursor_ = 0;
    ++epoch_;
  }
  const int64_t end = std::min(n, cursor_ + std::max(1, batch));
  ClearRows(out);
  out->class_names = data_->class_names;
  for (int64_t i = cursor_; i < end; ++i) AppendRow(*data_, order_[i], out);
  epochs->assign(static_cast<size_t>(end - cursor_), epoch_);
  cursor_ = end;
  ++given_;
  return true;
}

ShuffleWindow::ShuffleWindow(size_t capacity, uint64_t seed)
    : capacity_(capacity), rng_(seed) {}

void ShuffleWindow::Add(const data::SparseDataset& from, int64_t r,
                        int32_t epoch) {
  live_.push_back(pool_.rows());
  AppendRow(from, r, &pool_);
  epoch_.push_back(epoch);
}

int32_t ShuffleWindow::Take(data::SparseDataset* out) {
  int64_t row;
  if (capacity_ == 0) {
    row = live_[head_++];
  } else {
    const size_t pick = head_ + rng_() % size();
    row = live_[pick];
    live_[pick] = live_.back();
    live_.pop_back();
  }
  AppendRow(pool_, row, out);
  const int32_t epoch = epoch_[row];
  MaybeCompact();
  return epoch;
}

void ShuffleWindow::MaybeCompact() {
  const size_t live = size();
  const size_t pool = static_cast<size_t>(pool_.rows());
  if (pool < 1024 || pool < live + std::max<size_t>(live / 2, 1024)) return;
  // Into the other buffer, then swapped: the two keep their capacity, so
  // compactions allocate nothing once the window is full.
  ClearRows(&spare_);
  std::vector<int32_t> epoch;
  epoch.reserve(live);
  for (size_t i = head_; i < live_.size(); ++i) {
    AppendRow(pool_, live_[i], &spare_);
    epoch.push_back(epoch_[live_[i]]);
  }
  std::swap(pool_, spare_);
  epoch_ = std::move(epoch);
  live_.resize(live);
  std::iota(live_.begin(), live_.end(), 0);
  head_ = 0;
}

}  // namespace downpour::worker
