// The `data` section: the names of its choices, its keys, the defaults of
// table sources and the rules on paths and example counts.
#include "common/config_data.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/config_field.h"
#include "common/mnist.h"
#include "common/status_macros.h"

namespace downpour {
namespace {

using config_internal::Choice;
using config_internal::ChoiceName;
using config_internal::ParseChoice;

// The spellings of each choice, the first one the name.
constexpr Choice<DataSource> kDataSources[] = {
    {"mnist", DataSource::kMnist},
    {"idx", DataSource::kIdx},
    {"csv", DataSource::kCsv},
    {"libsvm", DataSource::kLibsvm},
    {"synthetic", DataSource::kSynthetic},
    {"criteo", DataSource::kCriteo}};
constexpr Choice<MissingPolicy> kMissingPolicies[] = {
    {"error", MissingPolicy::kError},
    {"zero", MissingPolicy::kZero},
    {"mean", MissingPolicy::kMean}};

constexpr int64_t kMaxExamples = 100'000'000;

// data.path: a string (one file, folder or glob) or a list of them.
config_internal::ConfigField PathsField(std::string key, DataSection* d) {
  config_internal::ConfigField field{std::move(key), nullptr,
                                     [] { return absl::OkStatus(); }};
  field.read = [key = field.key, d](const YAML::Node& node) {
    std::vector<std::string> paths;
    if (node.IsSequence()) {
      RETURN_IF_ERROR(
          config_internal::StringListField(key, &paths, 100'000).read(node));
      if (paths.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(key, " is an empty list: name at least one file"));
      }
    } else {
      paths.emplace_back();
      RETURN_IF_ERROR(config_internal::ReadString(key, node, &paths[0]));
    }
    d->path = paths[0];
    d->paths = std::move(paths);
    return absl::OkStatus();
  };
  return field;
}

bool HasGlob(const std::string& path) {
  return path.find_first_of("*?[") != std::string::npos;
}

// The streaming rules: sparse models only (checked with the model), a test
// file, and several files or globs only when streaming.
absl::Status CheckStreaming(const DataSection& data) {
  const std::vector<std::string> paths = InputPatterns(data);
  const bool many = paths.size() > 1 || HasGlob(paths[0]);
  if (!StreamsData(data)) {
    if (!many) return absl::OkStatus();
    return absl::InvalidArgumentError(
        "data.path names several files or a glob pattern, which only the "
        "streaming readers read: set data.stream: true (sparse models), or "
        "name one file");
  }
  if (data.stream && !IsTableSource(data.source) &&
      data.source != DataSource::kCriteo) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.stream reads data.source libsvm, csv and criteo, "
                     "not ",
                     DataSourceName(data.source), ": set data.stream: false"));
  }
  if (data.test_path.empty()) {
    return absl::InvalidArgumentError(
        "a streamed data.path (data.stream, data.source criteo) needs "
        "data.test_path: a separate test file (nothing is held out of a "
        "stream)");
  }
  return absl::OkStatus();
}

}  // namespace

namespace config_internal {

std::vector<ConfigField> DataKeys(DataSection* d) {
  return {
      ChoiceField("data.source", &d->source, ParseDataSource, DataSourceName),
      PathsField("data.path", d), StringField("data.test_path", &d->test_path),
      // -1 (test) and 0 (train) are the "not set" values of csv and
      // libsvm, placed by ResolveTableDefaults; CheckData refuses them
      // elsewhere.
      IntField("data.train_examples", &d->train_examples,
               Between(0, kMaxExamples)),
      IntField("data.test_examples", &d->test_examples,
               Between(-1, kMaxExamples)),
      DoubleField("data.test_fraction", &d->test_fraction, ZeroToOne()),
      BoolField("data.normalize", &d->normalize),
      BoolField("data.header", &d->header),
      StringField("data.label_column", &d->label_column),
      EnumField("data.delimiter", &d->delimiter, {",", ";", "\t", "\\t"}),
      IntField("data.skip_lines", &d->skip_lines, Between(0, 1'000'000)),
      StringListField("data.classes", &d->classes, 100'000),
      ChoiceField("data.missing", &d->missing, ParseMissingPolicy,
                  MissingPolicyName),
      BoolField("data.zero_based", &d->zero_based),
      StringListField("data.categorical", &d->categorical, 100'000),
      StringListField("data.text", &d->text, 100'000),
      StringListField("data.numeric", &d->numeric, 100'000),
      StringListField("data.bucketize", &d->bucketize, 100'000),
      StringListField("data.ignore", &d->ignore, 100'000),
      IntField("data.quantile_buckets", &d->quantile_buckets, Between(2, 1000)),
      IntField("data.features", &d->features, Between(0, kMaxLayerWidth)),
      BoolField("data.stream", &d->stream),
      IntField("data.shuffle_window", &d->shuffle_window,
               Between(0, 10'000'000)),
      IntField("data.eval_rows", &d->eval_rows, Between(0, kMaxExamples))};
}

void ResolveTableDefaults(const std::set<std::string>& set_keys,
                          DataSection* data) {
  if (!IsTableSource(data->source)) return;
  if (set_keys.count("data.train_examples") == 0) {
    data->train_examples = 0;
  }
  if (set_keys.count("data.test_examples") == 0) {
    data->test_examples = -1;
  }
}

absl::Status CheckData(const DataSection& data, const ClusterSection& cluster) {
  if (data.source != DataSource::kSynthetic && data.path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.path must name a ",
                     IsTableSource(data.source) ? "file" : "folder",
                     " for data.source ", DataSourceName(data.source)));
  }
  RETURN_IF_ERROR(CheckStreaming(data));
  if (data.source == DataSource::kCriteo) return absl::OkStatus();
  if (!data.test_path.empty() && !IsTableSource(data.source) &&
      data.source != DataSource::kIdx) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.test_path is read for data.source csv, libsvm and idx, not ",
        DataSourceName(data.source), ": remove it"));
  }
  if (IsTableSource(data.source)) return absl::OkStatus();  // counted on load
  if (data.train_examples < 1 || data.test_examples < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.train_examples must be >= 1 and data.test_examples >= 0 for "
        "data.source ",
        DataSourceName(data.source), ", got ", data.train_examples, " and ",
        data.test_examples));
  }
  if (data.train_examples < WorkerSlots(cluster)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.train_examples (", data.train_examples, ") is fewer than the ",
        WorkerSlots(cluster),
        " worker slots (cluster.workers, cluster.max_workers): each data part "
        "needs an example"));
  }
  const int64_t total = int64_t{data.train_examples} + data.test_examples;
  if (data.source == DataSource::kMnist && total > kMnistDigits) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.train_examples + data.test_examples (", total,
                     ") exceed the ", kMnistDigits,
                     " digits of data.source mnist; use data.source idx with "
                     "the full MNIST files for more"));
  }
  return absl::OkStatus();
}

}  // namespace config_internal

const char* DataSourceName(DataSource source) {
  return ChoiceName(kDataSources, source);
}
absl::StatusOr<DataSource> ParseDataSource(absl::string_view name) {
  return ParseChoice("data.source", kDataSources, name);
}

const char* MissingPolicyName(MissingPolicy policy) {
  return ChoiceName(kMissingPolicies, policy);
}
absl::StatusOr<MissingPolicy> ParseMissingPolicy(absl::string_view name) {
  return ParseChoice("data.missing", kMissingPolicies, name);
}

bool IsTableSource(DataSource source) {
  return source == DataSource::kCsv || source == DataSource::kLibsvm;
}

std::vector<std::string> InputPatterns(const DataSection& data) {
  if (!data.paths.empty() && data.paths[0] == data.path) return data.paths;
  return {data.path};
}

bool StreamsData(const DataSection& data) {
  return data.stream || data.source == DataSource::kCriteo;
}

char DelimiterChar(const DataSection& data) {
  return data.delimiter == "\\t" ? '\t' : data.delimiter[0];
}

}  // namespace downpour
