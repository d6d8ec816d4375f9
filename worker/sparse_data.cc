#include "worker/sparse_data.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/libsvm_reader.h"
#include "data/sparse_csv_reader.h"

namespace downpour::worker {
namespace {

data::LabelMode LabelsOf(Task task) {
  return task == Task::kRegression ? data::LabelMode::kReal
                                   : data::LabelMode::kClass;
}

absl::StatusOr<data::SparseDataset> ReadOne(
    const DataSection& d, const std::string& path, Task task,
    std::vector<data::SparseColumn>* columns) {
  if (d.source == DataSource::kLibsvm) {
    data::LibsvmSparseOptions options;
    options.labels = LabelsOf(task);
    options.classes = d.classes;
    return data::ReadLibsvmSparse(path, options);
  }
  if (d.source == DataSource::kCsv) {
    data::SparseCsvOptions options;
    options.csv.header = d.header;
    options.csv.label_column = d.label_column;
    options.csv.delimiter = DelimiterChar(d);
    options.csv.skip_lines = d.skip_lines;
    options.csv.labels = LabelsOf(task);
    options.csv.classes = d.classes;
    options.columns = *columns;
    std::vector<data::SparseColumn> applied;
    ASSIGN_OR_RETURN(data::SparseDataset read,
                     data::ReadCsvSparse(path, options, &applied));
    *columns = std::move(applied);  // the test file gets the same buckets
    return read;
  }
  return absl::InvalidArgumentError(
      "a sparse model (sparse_linear, fm) reads data.source libsvm (64-bit "
      "indices) or "
      "csv (columns hashed by data.categorical, text, numeric, bucketize)");
}

absl::Status CheckBinary(const data::SparseDataset& d, Task task,
                         const std::string& path) {
  if (task != Task::kBinary) return absl::OkStatus();
  if (d.class_names.size() > 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " has ", d.class_names.size(),
        " classes; model.task binary needs 2 (name them in data.classes)"));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<data::SparseColumn> SparseColumnsOf(const DataSection& d) {
  std::vector<data::SparseColumn> columns;
  auto add = [&](const std::vector<std::string>& names,
                 data::SparseColumnKind kind, int buckets) {
    for (const std::string& name : names) {
      data::SparseColumn c;
      c.name = name;
      c.kind = kind;
      c.quantile_buckets = buckets;
      columns.push_back(std::move(c));
    }
  };
  add(d.categorical, data::SparseColumnKind::kCategorical, 0);
  add(d.text, data::SparseColumnKind::kText, 0);
  add(d.numeric, data::SparseColumnKind::kNumeric, 0);
  add(d.bucketize, data::SparseColumnKind::kNumeric, d.quantile_buckets);
  add(d.ignore, data::SparseColumnKind::kIgnore, 0);
  return columns;
}

data::SparseDataset SelectRows(const data::SparseDataset& data,
                               const std::vector<int64_t>& rows) {
  data::SparseDataset out;
  out.class_names = data.class_names;
  // Sized once: a worker's share of a large file is most of its memory.
  int64_t entries = 0;
  for (int64_t r : rows) entries += data.offsets[r + 1] - data.offsets[r];
  const bool fields = !data.fields.empty();
  out.offsets.reserve(rows.size() + 1);
  out.keys.reserve(entries);
  out.values.reserve(entries);
  if (fields) out.fields.reserve(entries);
  out.y.reserve(rows.size());
  for (int64_t r : rows) {
    const int64_t begin = data.offsets[r], end = data.offsets[r + 1];
    out.keys.insert(out.keys.end(), data.keys.begin() + begin,
                    data.keys.begin() + end);
    out.values.insert(out.values.end(), data.values.begin() + begin,
                      data.values.begin() + end);
    if (fields) {
      out.fields.insert(out.fields.end(), data.fields.begin() + begin,
                        data.fields.begin() + end);
    }
    out.offsets.push_back(static_cast<int64_t>(out.keys.size()));
    out.y.push_back(data.y[r]);
  }
  return out;
}

data::SparseDataset PartitionRows(const data::SparseDataset& data,
                                  const std::vector<int>& parts,
                                  int num_parts) {
  const std::set<int> mine(parts.begin(), parts.end());
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < data.rows(); ++r) {
    if (mine.count(static_cast<int>(r % std::max(1, num_parts))) > 0) {
      rows.push_back(r);
    }
  }
  return SelectRows(data, rows);
}

absl::StatusOr<SparseSplit> LoadSparseData(const DataSection& d, uint64_t seed,
                                           Task task) {
  std::vector<data::SparseColumn> columns = SparseColumnsOf(d);
  ASSIGN_OR_RETURN(data::SparseDataset all, ReadOne(d, d.path, task, &columns));
  RETURN_IF_ERROR(CheckBinary(all, task, d.path));
  SparseSplit split;
  if (d.source == DataSource::kCsv) split.columns = columns;
  if (!d.test_path.empty()) {
    ASSIGN_OR_RETURN(split.test, ReadOne(d, d.test_path, task, &columns));
    RETURN_IF_ERROR(CheckBinary(split.test, task, d.test_path));
    split.train = std::move(all);
  } else {
    // A seeded shuffle, then test_examples (or test_fraction of the rows)
    // held out.
    std::vector<int64_t> order(all.rows());
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(seed);
    std::shuffle(order.begin(), order.end(), rng);
    const int64_t n_test =
        d.test_examples >= 0
            ? std::min<int64_t>(d.test_examples, all.rows())
            : static_cast<int64_t>(d.test_fraction * all.rows());
    std::vector<int64_t> test(order.begin(), order.begin() + n_test);
    std::vector<int64_t> train(order.begin() + n_test, order.end());
    std::sort(test.begin(), test.end());
    std::sort(train.begin(), train.end());
    split.test = SelectRows(all, test);
    split.train = SelectRows(all, train);
  }
  if (d.train_examples > 0 && d.train_examples < split.train.rows()) {
    std::vector<int64_t> first(d.train_examples);
    std::iota(first.begin(), first.end(), 0);
    split.train = SelectRows(split.train, first);
  }
  if (split.train.rows() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        d.path, ": no training rows are left after the test split"));
  }
  return split;
}

}  // namespace downpour::worker
