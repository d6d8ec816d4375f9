// Where a sparse worker's minibatches come from: the rows of its parts held
// in memory (InMemoryBatches), or streamed from its byte-range parts of the
// input files (StreamingBatches, worker/sparse_stream.h). SparseLoop draws
// batches from either through SparseBatches.
//
//   InMemoryBatches batches(train, seed, /*total=*/1000);
//   data::SparseDataset batch;
//   std::vector<int32_t> epochs;
//   while (*batches.Next(64, &batch, &epochs)) Train(batch);
//
// ShuffleWindow is the streaming side's shuffle: rows enter as they are
// read and leave in a seeded random order, so memory follows the window, not
// the input.
#ifndef DOWNPOUR_WORKER_SPARSE_BATCHES_H_
#define DOWNPOUR_WORKER_SPARSE_BATCHES_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "data/sparse_dataset.h"

namespace downpour::worker {

// Next() from the training thread; Stop() from any thread.
class SparseBatches {
 public:
  virtual ~SparseBatches() = default;
  // The next minibatch of at most `batch` rows into *out (replaced: rows,
  // fields when the data have them, targets), and for each row the epoch it
  // was read in (0-based) into *epochs. false when every epoch has been read
  // or after Stop(); an error when the data cannot be read (the reader's
  // message: file:line:column).
  virtual absl::StatusOr<bool> Next(int batch, data::SparseDataset* out,
                                    std::vector<int32_t>* epochs) = 0;
  // Training examples in one epoch of this worker's parts; -1 when not known
  // before reading them (streaming).
  virtual int64_t rows_per_epoch() const = 0;
  // Batches Next() gives in all; -1 when not known.
  virtual int64_t total_batches() const = 0;
  // Seconds Next() spent waiting for data to be read since the start.
  virtual double wait_seconds() const { return 0; }
  virtual void Stop() {}
};

// The test rows a sparse loop evaluates on: a sample for the periodic
// evaluations, and every row, chunk by chunk, for the final one.
class SparseTestSet {
 public:
  virtual ~SparseTestSet() = default;
  virtual const data::SparseDataset& sample() const = 0;
  // Calls `fn` on every test row, in chunks, in file order; the first
  // error (the reader's or fn's) ends it.
  virtual absl::Status ForEachChunk(
      const std::function<absl::Status(const data::SparseDataset&)>& fn)
      const = 0;
};

// A test set in memory: the sample and the one chunk are all of it.
class InMemoryTestSet : public SparseTestSet {
 public:
  // Borrows `data` (null: no test rows); it must outlive this object.
  explicit InMemoryTestSet(const data::SparseDataset* data) : data_(data) {}
  const data::SparseDataset& sample() const override {
    return data_ != nullptr ? *data_ : empty_;
  }
  absl::Status ForEachChunk(
      const std::function<absl::Status(const data::SparseDataset&)>& fn)
      const override {
    return fn(sample());
  }

 private:
  const data::SparseDataset* const data_;
  const data::SparseDataset empty_;
};

// Empties *out's rows but keeps its buffers and class names.
void ClearRows(data::SparseDataset* out);

// Appends row `r` of `from` to *to: its entries, their fields when `from`
// has fields, and its target. REQUIRES: `to` has fields exactly when `from`
// has (or is empty).
void AppendRow(const data::SparseDataset& from, int64_t r,
               data::SparseDataset* to);

// The rows of a training set held in memory: `total` batches (of the size
// Next is asked for), walking a fresh std::mt19937_64(seed) shuffle of the rows
// each epoch (the last batch of an epoch may be short). Not thread-safe.
class InMemoryBatches : public SparseBatches {
 public:
  // REQUIRES: total >= 0.
  InMemoryBatches(std::shared_ptr<const data::SparseDataset> data,
                  uint64_t seed, int64_t total);

  absl::StatusOr<bool> Next(int batch, data::SparseDataset* out,
                            std::vector<int32_t>* epochs) override;
  int64_t rows_per_epoch() const override { return data_->rows(); }
  int64_t total_batches() const override { return total_; }

 private:
  const std::shared_ptr<const data::SparseDataset> data_;
  const int64_t total_;
  std::mt19937_64 rng_;
  std::vector<int64_t> order_;
  int64_t cursor_;
  int64_t given_ = 0;  // batches given
  int32_t epoch_ = -1;
};

// A bounded pool of rows that gives them back in a seeded random order
// (capacity 0: in the order they came). Rows are copied in; memory is about
// two and a half times the rows held (taken rows are dropped by a
// compaction into a second buffer once they are a third of the pool). Not
// thread-safe.
class ShuffleWindow {
 public:
  ShuffleWindow(size_t capacity, uint64_t seed);

  size_t capacity() const { return capacity_; }
  size_t size() const { return live_.size() - head_; }
  // Holds `capacity` rows, or enough for a batch of `batch` (capacity 0).
  bool Full(size_t batch) const {
    return size() >= std::max<size_t>(capacity_, batch);
  }
  // Copies row `r` of `from`, read in epoch `epoch`, into the window.
  void Add(const data::SparseDataset& from, int64_t r, int32_t epoch);
  // Moves a row out (a random one; the oldest with capacity 0) to the end
  // of *out and returns its epoch. REQUIRES: size() > 0.
  int32_t Take(data::SparseDataset* out);

 private:
  // Copies the live rows into the other buffer once the taken ones are half
  // as many (and 1024 or more).
  void MaybeCompact();

  const size_t capacity_;
  std::mt19937_64 rng_;
  data::SparseDataset pool_;
  data::SparseDataset spare_;   // the pool's other buffer, for compactions
  std::vector<int32_t> epoch_;  // per pool row
  std::vector<int64_t> live_;   // pool rows not taken yet, from head_
  size_t head_ = 0;             // capacity 0: the oldest live row
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_SPARSE_BATCHES_H_
