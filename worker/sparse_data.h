// The data of a sparse model (model.type sparse_linear): a LIBSVM file with
// 64-bit indices or a CSV file whose columns are hashed into keys
// (data.categorical, text, numeric, bucketize, ignore), split into train and
// test as the dense readers split csv and libsvm files (data.test_path, or a
// seeded hold-out of data.test_examples or data.test_fraction of the rows).
#ifndef DOWNPOUR_WORKER_SPARSE_DATA_H_
#define DOWNPOUR_WORKER_SPARSE_DATA_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config.h"
#include "data/sparse_csv_reader.h"
#include "data/sparse_dataset.h"

namespace downpour::worker {

struct SparseSplit {
  data::SparseDataset train;
  data::SparseDataset test;
  // csv: every column's kind as data.path was read with it, each
  // data.bucketize column with the quantile boundaries computed on data.path
  // (data.test_path was read with these, and so must a file to predict on:
  // psctl export keeps them in the model). Empty for libsvm.
  std::vector<data::SparseColumn> columns;
};

// The columns' kinds from data.categorical, text, numeric, bucketize (with
// data.quantile_buckets) and ignore, in that order.
std::vector<data::SparseColumn> SparseColumnsOf(const DataSection& data);

// Reads data.path (and data.test_path) for `task` (binary: two classes;
// regression: values). InvalidArgument for a source other than libsvm or
// csv, and the readers' errors (file:line:column: what; the fix).
absl::StatusOr<SparseSplit> LoadSparseData(const DataSection& data,
                                           uint64_t seed, Task task);

// Rows `rows` of `data`, in that order, with their fields when `data` has
// them (SparseDataset::fields; else none).
data::SparseDataset SelectRows(const data::SparseDataset& data,
                               const std::vector<int64_t>& rows);

// The rows i with i % num_parts in `parts`, in order (a worker's share, as
// Partition does for dense data), with their fields as SelectRows.
data::SparseDataset PartitionRows(const data::SparseDataset& data,
                                  const std::vector<int>& parts, int num_parts);

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_SPARSE_DATA_H_
