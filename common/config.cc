// Loads the cluster YAML into Config: every key known, typed and in range, then
// the rules that tie keys together. yaml-cpp throws; nothing escapes this file.
#include "common/file_util.h"
#include "common/config.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/config_field.h"
#include "common/mnist.h"
#include "common/status_macros.h"
#include "yaml-cpp/eventhandler.h"
#include "yaml-cpp/yaml.h"

namespace downpour {
namespace {

using config_internal::AddressField;
using config_internal::AddressListField;
using config_internal::Between;
using config_internal::BoolField;
using config_internal::Choice;
using config_internal::ChoiceField;
using config_internal::ChoiceName;
using config_internal::ParseChoice;
using config_internal::ConfigField;
using config_internal::DoubleField;
using config_internal::EnumField;
using config_internal::Fraction;
using config_internal::Int64Field;
using config_internal::IntField;
using config_internal::StringListField;
using config_internal::IntListField;
using config_internal::NonNegative;
using config_internal::NonNegativeAtMost;
using config_internal::Positive;
using config_internal::PositiveAtMost;
using config_internal::StringField;
using config_internal::Uint64Field;
using config_internal::ZeroToOne;

// The spellings of each choice (config.h), the first one the name.
constexpr Choice<ComputeDevice> kComputeDevices[] = {
    {"auto", ComputeDevice::kAuto},
    {"cpu", ComputeDevice::kCpu},
    {"cuda", ComputeDevice::kCuda},
    {"simulated", ComputeDevice::kSimulated}};
constexpr Choice<Task> kTasks[] = {{"multiclass", Task::kMulticlass},
                                   {"binary", Task::kBinary},
                                   {"regression", Task::kRegression}};
constexpr Choice<ModelType> kModelTypes[] = {{"mlp", ModelType::kMlp},
                                             {"linear", ModelType::kLinear},
                                             {"softmax", ModelType::kSoftmax},
                                             {"sparse_linear",
                                              ModelType::kSparseLinear},
                                             {"fm", ModelType::kFm},
                                             {"wide_deep",
                                              ModelType::kWideDeep}};
constexpr Choice<OptimizerType> kOptimizerTypes[] = {
    {"sgd", OptimizerType::kSgd},
    {"momentum", OptimizerType::kMomentum},
    {"adagrad", OptimizerType::kAdagrad},
    {"adam", OptimizerType::kAdam},
    {"ftrl", OptimizerType::kFtrl}};
constexpr Choice<LrScheduleType> kLrScheduleTypes[] = {
    {"constant", LrScheduleType::kConstant},
    {"step", LrScheduleType::kStep},
    {"cosine", LrScheduleType::kCosine}};
constexpr Choice<AsyncMomentum> kAsyncMomentums[] = {
    {"auto", AsyncMomentum::kAuto}, {"off", AsyncMomentum::kOff}};
constexpr Choice<FetchMode> kFetchModes[] = {
    {"after_push", FetchMode::kAfterPush},
    {"overlap", FetchMode::kOverlap},
    {"layerwise", FetchMode::kLayerwise}};
constexpr Choice<ConsistencyMode> kConsistencyModes[] = {
    {"async", ConsistencyMode::kAsync},
    {"ssp", ConsistencyMode::kSsp},
    {"bsp", ConsistencyMode::kBsp}};
constexpr Choice<DataSource> kDataSources[] = {
    {"mnist", DataSource::kMnist},
    {"idx", DataSource::kIdx},
    {"csv", DataSource::kCsv},
    {"libsvm", DataSource::kLibsvm},
    {"synthetic", DataSource::kSynthetic}};
constexpr Choice<MissingPolicy> kMissingPolicies[] = {
    {"error", MissingPolicy::kError},
    {"zero", MissingPolicy::kZero},
    {"mean", MissingPolicy::kMean}};
// WireEncodingName spells these; config_test checks that the two agree.
constexpr Choice<WireEncoding> kRpcEncodings[] = {
    {"float32", WireEncoding::kFloat32},
    {"bf16", WireEncoding::kBf16},
    {"fp16", WireEncoding::kFp16}};
constexpr Choice<RestartMode> kRestartModes[] = {
    {"never", RestartMode::kNever}, {"on-failure", RestartMode::kOnFailure}};
constexpr Choice<LogLevel> kLogLevels[] = {{"trace", LogLevel::kTrace},
                                           {"debug", LogLevel::kDebug},
                                           {"info", LogLevel::kInfo},
                                           {"warn", LogLevel::kWarn},
                                           {"error", LogLevel::kError}};

// Upper bounds: generous for any real job, low enough that a typo cannot make
// a daemon allocate gigabytes or wait for ever (issue 12).
constexpr size_t kMaxPs = 1024;            // cluster.ps, cluster.standby_ps
constexpr size_t kMaxWorkers = 4096;       // cluster.workers
constexpr size_t kMaxLayers = 64;          // entries of model.layers
constexpr int64_t kMaxLayerWidth = 1 << 24;  // 16Mi units
constexpr int64_t kMaxBlockSize = 1 << 24;   // floats (64 MiB)
constexpr int64_t kMaxUpdates = int64_t{1} << 40;  // step/update counts
constexpr int64_t kMaxExamples = 100'000'000;
constexpr int64_t kMaxDataFloats = int64_t{1} << 32;  // 16 GiB of examples
constexpr double kMaxSeconds = 7 * 24 * 3600.0;  // durations: a week
constexpr double kMaxTimeoutSeconds = 24 * 3600.0;  // rpc and heartbeats

// One top-level key and the keys it holds, bound to a Config.
struct Section {
  std::string name;
  std::vector<ConfigField> fields;
};

// The schema: every key, its type and its range, in the order docs/CONFIG.md
// lists them. Keep the two in step.
std::vector<ConfigField> ClusterFields(ClusterSection* c) {
  return {AddressField("cluster.coordinator", &c->coordinator),
          AddressListField("cluster.ps", &c->ps, 1, kMaxPs),
          AddressListField("cluster.workers", &c->workers, 1, kMaxWorkers),
          AddressListField("cluster.standby_ps", &c->standby_ps, 0, kMaxPs),
          IntField("cluster.replication", &c->replication, {1, 2})};
}

std::vector<ConfigField> ModelFields(ModelSection* m) {
  return {ChoiceField("model.task", &m->task, ParseTask, TaskName),
          ChoiceField("model.type", &m->type, ParseModelType, ModelTypeName),
          IntListField("model.layers", &m->layers, 2, kMaxLayers,
                       Between(1, kMaxLayerWidth)),
          Int64Field("model.block_size", &m->block_size,
                     Between(1, kMaxBlockSize)),
          Uint64Field("model.init_seed", &m->init_seed),
          IntField("model.sparse_buckets", &m->sparse_buckets,
                   Between(1, 65536)),
          Int64Field("model.sparse_max_rows", &m->sparse_max_rows,
                     Between(1, (int64_t{1} << 31) - 1))};
}

std::vector<ConfigField> OptimizerFields(OptimizerSection* o) {
  return {
      ChoiceField("optimizer.type", &o->type, ParseOptimizerType,
                  OptimizerTypeName),
      DoubleField("optimizer.learning_rate", &o->learning_rate,
                  PositiveAtMost(1000)),
      DoubleField("optimizer.momentum", &o->momentum, ZeroToOne()),
      DoubleField("optimizer.beta1", &o->beta1, ZeroToOne()),
      DoubleField("optimizer.beta2", &o->beta2, ZeroToOne()),
      // Below 1e-30 float32 rounds it to 0 (0 / 0 on a zero gradient).
      DoubleField("optimizer.epsilon", &o->epsilon, {1e-30, false, 1, false}),
      DoubleField("optimizer.weight_decay", &o->weight_decay,
                  NonNegativeAtMost(1)),
      ChoiceField("optimizer.schedule", &o->schedule, ParseLrScheduleType,
                  LrScheduleTypeName),
      Int64Field("optimizer.warmup_updates", &o->warmup_updates,
                 Between(0, kMaxUpdates)),
      Int64Field("optimizer.decay_updates", &o->decay_updates,
                 Between(0, kMaxUpdates)),
      DoubleField("optimizer.decay_factor", &o->decay_factor,
                  {0, true, 1, false}),
      DoubleField("optimizer.min_lr_fraction", &o->min_lr_fraction, Fraction()),
      BoolField("optimizer.staleness_lr", &o->staleness_lr),
      ChoiceField("optimizer.async_momentum", &o->async_momentum,
                  ParseAsyncMomentum, AsyncMomentumName),
      DoubleField("optimizer.delay_compensation", &o->delay_compensation,
                  NonNegativeAtMost(1000)),
      DoubleField("optimizer.max_gradient_value", &o->max_gradient_value,
                  NonNegativeAtMost(1e30)),
      DoubleField("optimizer.max_gradient_norm", &o->max_gradient_norm,
                  NonNegativeAtMost(1e30)),
      DoubleField("optimizer.ftrl_beta", &o->ftrl_beta, NonNegativeAtMost(1e6)),
      DoubleField("optimizer.l1", &o->l1, NonNegativeAtMost(1e6)),
      DoubleField("optimizer.l2", &o->l2, NonNegativeAtMost(1e6))};
}

std::vector<ConfigField> TrainingFields(TrainingSection* t) {
  return {
      IntField("training.batch_size", &t->batch_size, Between(1, 1 << 20)),
      IntField("training.n_fetch", &t->n_fetch, Between(1, 1'000'000)),
      IntField("training.n_push", &t->n_push, Between(1, 1'000'000)),
      ChoiceField("training.fetch", &t->fetch, ParseFetchMode, FetchModeName),
      IntField("training.max_pushes_in_flight", &t->max_pushes_in_flight,
               Between(1, 1024)),
      ChoiceField("training.consistency", &t->consistency,
                  ParseConsistencyMode, ConsistencyModeName),
      IntField("training.max_staleness", &t->max_staleness,
               Between(0, 1'000'000)),
      IntField("training.epochs", &t->epochs, Between(0, 1'000'000)),
      Int64Field("training.steps", &t->steps, Between(0, kMaxUpdates)),
      DoubleField("training.target_accuracy", &t->target_accuracy, Fraction()),
      EnumField("training.target_metric", &t->target_metric,
                {"", "accuracy", "logloss", "auc", "rmse", "mae", "r2"}),
      DoubleField("training.target_value", &t->target_value,
                  {-1e30, false, 1e30, false}),
      BoolField("training.stop_at_target", &t->stop_at_target),
      IntField("training.eval_every_steps", &t->eval_every_steps,
               Between(0, 1'000'000'000)),
      Uint64Field("training.seed", &t->seed),
      Int64Field("training.warmstart_steps", &t->warmstart_steps,
                 Between(0, kMaxUpdates)),
      DoubleField("training.outage_timeout_s", &t->outage_timeout_s,
                  NonNegativeAtMost(kMaxSeconds))};
}

std::vector<ConfigField> DataFields(DataSection* d) {
  return {ChoiceField("data.source", &d->source, ParseDataSource,
                      DataSourceName),
          StringField("data.path", &d->path),
          StringField("data.test_path", &d->test_path),
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
          IntField("data.quantile_buckets", &d->quantile_buckets,
                   Between(2, 1000)),
          IntField("data.features", &d->features, Between(0, kMaxLayerWidth))};
}

std::vector<Section> Schema(Config* c) {
  return {
      {"cluster", ClusterFields(&c->cluster)},
      {"model", ModelFields(&c->model)},
      {"optimizer", OptimizerFields(&c->optimizer)},
      {"training", TrainingFields(&c->training)},
      {"data", DataFields(&c->data)},
      {"checkpoint",
       {StringField("checkpoint.dir", &c->checkpoint.dir),
        DoubleField("checkpoint.interval_s", &c->checkpoint.interval_s,
                    NonNegativeAtMost(kMaxSeconds)),
        IntField("checkpoint.keep", &c->checkpoint.keep, {1, 100}),
        BoolField("checkpoint.incremental", &c->checkpoint.incremental),
        IntField("checkpoint.full_every", &c->checkpoint.full_every,
                 {1, 1000})}},
      {"heartbeat",
       {DoubleField("heartbeat.interval_s", &c->heartbeat.interval_s,
                    {0.001, false, 3600, false}),
        DoubleField("heartbeat.timeout_s", &c->heartbeat.timeout_s,
                    PositiveAtMost(kMaxTimeoutSeconds))}},
      {"rpc",
       {DoubleField("rpc.deadline_s", &c->rpc.deadline_s,
                    PositiveAtMost(kMaxTimeoutSeconds)),
        DoubleField("rpc.connect_timeout_s", &c->rpc.connect_timeout_s,
                    PositiveAtMost(kMaxTimeoutSeconds)),
        ChoiceField("rpc.encoding", &c->rpc.encoding, ParseRpcEncoding,
                    WireEncodingName)}},
      {"logging",
       {ChoiceField("logging.level", &c->logging.level, ParseLogLevel,
                    LogLevelName)}},
      {"compute",
       {ChoiceField("compute.device", &c->compute.device, ParseComputeDevice,
                    ComputeDeviceName),
        IntField("compute.gpu", &c->compute.gpu, Between(0, 1023)),
        DoubleField("compute.simulated_step_ms", &c->compute.simulated_step_ms,
                    NonNegativeAtMost(3'600'000)),
        BoolField("compute.simulated_real_gradients",
                  &c->compute.simulated_real_gradients)}},
      {"coordinator",
       {StringField("coordinator.state_dir", &c->coordinator.state_dir),
        IntField("coordinator.history_size", &c->coordinator.history_size,
                 Between(1, 1'000'000)),
        DoubleField("coordinator.history_interval_s",
                    &c->coordinator.history_interval_s,
                    {0.01, false, 3600, false})}},
      {"launcher",
       {ChoiceField("launcher.restart", &c->launcher.restart,
                    ParseRestartMode, RestartModeName),
        IntField("launcher.max_restarts", &c->launcher.max_restarts,
                 Between(0, 1000)),
        DoubleField("launcher.restart_backoff_s",
                    &c->launcher.restart_backoff_s, NonNegativeAtMost(3600)),
        DoubleField("launcher.max_restart_backoff_s",
                    &c->launcher.max_restart_backoff_s,
                    NonNegativeAtMost(3600))}},
      {"security",
       {BoolField("security.tls", &c->security.tls),
        StringField("security.ca_file", &c->security.ca_file),
        StringField("security.cert_file", &c->security.cert_file),
        StringField("security.key_file", &c->security.key_file),
        StringField("security.server_name", &c->security.server_name),
        BoolField("security.mutual_tls", &c->security.mutual_tls),
        StringField("security.ps_token_file", &c->security.ps_token_file),
        StringField("security.worker_token_file",
                    &c->security.worker_token_file),
        StringField("security.admin_token_file", &c->security.admin_token_file),
        StringField("security.reader_token_file",
                    &c->security.reader_token_file)}},
      {"robustness",
       {DoubleField("robustness.norm_clip_factor",
                    &c->robustness.norm_clip_factor, NonNegativeAtMost(1e12)),
        DoubleField("robustness.norm_refuse_factor",
                    &c->robustness.norm_refuse_factor,
                    NonNegativeAtMost(1e12)),
        IntField("robustness.warmup_pushes", &c->robustness.warmup_pushes,
                 Between(1, 1'000'000)),
        DoubleField("robustness.rate_factor", &c->robustness.rate_factor,
                    NonNegativeAtMost(1e6)),
        DoubleField("robustness.rate_window_s", &c->robustness.rate_window_s,
                    {0.1, false, 3600, true})}},
      {"fm",
       {IntField("fm.dim", &c->model.fm.dim, Between(1, 256)),
        IntField("fm.embedding_min_count", &c->model.fm.embedding_min_count,
                 Between(1, 1'000'000)),
        DoubleField("fm.init_scale", &c->model.fm.init_scale,
                    {0, false, 1, true}),
        DoubleField("fm.l1", &c->model.fm.l1, NonNegativeAtMost(1e6)),
        DoubleField("fm.l2", &c->model.fm.l2, NonNegativeAtMost(1e6)),
        DoubleField("fm.learning_rate", &c->model.fm.learning_rate,
                    NonNegativeAtMost(1000))}},
      {"metrics",
       {IntField("metrics.port_offset", &c->metrics.port_offset,
                 Between(-65535, 65535))}},
      {"wide_deep",
       {IntField("wide_deep.dim", &c->model.wide_deep.dim, Between(1, 256)),
        IntField("wide_deep.embedding_min_count",
                 &c->model.wide_deep.embedding_min_count,
                 Between(1, 1'000'000)),
        DoubleField("wide_deep.init_scale", &c->model.wide_deep.init_scale,
                    {0, false, 1, true}),
        DoubleField("wide_deep.l1", &c->model.wide_deep.l1,
                    NonNegativeAtMost(1e6)),
        DoubleField("wide_deep.l2", &c->model.wide_deep.l2,
                    NonNegativeAtMost(1e6)),
        DoubleField("wide_deep.learning_rate",
                    &c->model.wide_deep.learning_rate,
                    NonNegativeAtMost(1000)),
        IntListField("wide_deep.hidden", &c->model.wide_deep.hidden, 0, 8,
                     Between(1, 4096)),
        EnumField("wide_deep.pooling", &c->model.wide_deep.pooling,
                  {"sum", "mean"}),
        DoubleField("wide_deep.mlp_learning_rate",
                    &c->model.wide_deep.mlp_learning_rate,
                    NonNegativeAtMost(1000))}},
      {"export",
       {DoubleField("export.interval_s", &c->exports.interval_s,
                    NonNegativeAtMost(86400))}},
      {"admission",
       {IntField("admission.min_count", &c->admission.min_count,
                 Between(1, 1'000'000)),
        DoubleField("admission.probability", &c->admission.probability,
                    {0, true, 1, false})}},
      {"eviction",
       {Int64Field("eviction.ttl_updates", &c->eviction.ttl_updates,
                   Between(0, kMaxUpdates)),
        Int64Field("eviction.max_rows", &c->eviction.max_rows,
                   Between(0, (int64_t{1} << 31) - 1))}},
  };
}

// --- Messages ---------------------------------------------------------------

std::string Where(const std::string& file, const YAML::Mark& mark) {
  if (mark.is_null()) return file;
  return absl::StrCat(file, ":", mark.line + 1);
}

// `status` with "WHERE: " in front of its message.
absl::Status Located(const std::string& where, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(where, ": ", status.message()));
}

std::vector<std::string> SectionNames(const std::vector<Section>& schema) {
  std::vector<std::string> names;
  for (const Section& section : schema) names.push_back(section.name);
  return names;
}

std::vector<std::string> KeyNames(const Section& section) {
  std::vector<std::string> names;
  for (const ConfigField& field : section.fields) names.push_back(field.name());
  return names;
}

// " (did you mean 'X'?)" when `name` looks like a typo of one of `candidates`.
std::string Hint(const std::string& name,
                 const std::vector<std::string>& candidates) {
  const std::string match = config_internal::ClosestMatch(name, candidates);
  return match.empty() ? "" : absl::StrCat(" (did you mean '", match, "'?)");
}

absl::Status UnknownSection(const std::vector<Section>& schema,
                            const std::string& name) {
  const std::vector<std::string> names = SectionNames(schema);
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown key '", name,
      "'; allowed sections: ", absl::StrJoin(names, ", "), Hint(name, names)));
}

// Keys that were settings once, with what to do now: a config written for an
// older release fails naming the fix rather than as a bare unknown key.
struct RemovedKey {
  const char* key;
  const char* fix;
};
constexpr RemovedKey kRemovedKeys[] = {
    {"rpc.push_window",
     "a worker's pushes in flight have one knob now, "
     "training.max_pushes_in_flight (whole pushes, default 1), and the client "
     "paces each push's requests to a shard itself (8 at a time, as "
     "push_window's default did): delete rpc.push_window, and raise "
     "training.max_pushes_in_flight to keep more pushes in flight"},
};

absl::Status UnknownKey(const std::vector<Section>& schema,
                        const Section& section, const std::string& name) {
  const std::string key = absl::StrCat(section.name, ".", name);
  for (const RemovedKey& removed : kRemovedKeys) {
    if (key == removed.key) {
      return absl::InvalidArgumentError(
          absl::StrCat(key, " is no longer a setting: ", removed.fix));
    }
  }
  const std::vector<std::string> names = KeyNames(section);
  std::string hint = Hint(name, names);
  // The first section that has the key (optimizer.learning_rate before
  // fm.learning_rate).
  bool found = false;
  for (const Section& other : schema) {
    for (const ConfigField& field : other.fields) {
      if (field.name() == name && !found) {
        hint = absl::StrCat(" (did you mean '", field.key, "'?)");
        found = true;
      }
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown key '", section.name, ".", name, "'; allowed keys in '",
      section.name, "': ", absl::StrJoin(names, ", "), hint));
}

// --- Lookup and reading -----------------------------------------------------

const Section* FindSection(const std::vector<Section>& schema,
                           const std::string& name) {
  for (const Section& section : schema) {
    if (section.name == name) return &section;
  }
  return nullptr;
}

const ConfigField* FindField(const Section& section, const std::string& name) {
  for (const ConfigField& field : section.fields) {
    if (field.name() == name) return &field;
  }
  return nullptr;
}

absl::Status ReadField(const ConfigField& field, const YAML::Node& value) {
  absl::Status status = field.read(value);
  return status.ok() ? field.check() : status;
}

// Calls visit(name, value, where) for each entry of `map` in file order, after
// rejecting non-scalar and duplicate keys. `visit` returns a located status.
template <typename Visit>
absl::Status ForEachEntry(const YAML::Node& map, const std::string& file,
                          const std::string& prefix, Visit visit) {
  std::map<std::string, int> first_line;
  for (const auto& entry : map) {
    const YAML::Node& key = entry.first;
    const std::string where = Where(file, key.Mark());
    if (!key.IsScalar()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": keys must be plain names, got ",
                       config_internal::DescribeValue(key)));
    }
    const auto [it, inserted] =
        first_line.emplace(key.Scalar(), key.Mark().line + 1);
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": duplicate key '", prefix, key.Scalar(),
                       "' (first at line ", it->second, ")"));
    }
    RETURN_IF_ERROR(visit(key.Scalar(), entry.second, where));
  }
  return absl::OkStatus();
}

absl::Status ReadSection(const std::vector<Section>& schema,
                         const Section& section, const YAML::Node& node,
                         const std::string& file, const std::string& where,
                         std::set<std::string>* set_keys) {
  if (node.IsNull()) return absl::OkStatus();  // "training:" alone: defaults
  if (!node.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", section.name, " must be a map of keys (",
                     absl::StrJoin(KeyNames(section), ", "), "), got ",
                     config_internal::DescribeValue(node)));
  }
  auto read_key = [&](const std::string& name, const YAML::Node& value,
                      const std::string& at) {
    const ConfigField* field = FindField(section, name);
    if (field == nullptr) return Located(at, UnknownKey(schema, section, name));
    set_keys->insert(field->key);
    return Located(at, ReadField(*field, value));
  };
  return ForEachEntry(node, file, section.name + ".", read_key);
}

absl::Status ReadDocument(const std::vector<Section>& schema,
                          const YAML::Node& root, const std::string& file,
                          std::set<std::string>* set_keys) {
  if (root.IsNull()) return absl::OkStatus();  // empty file: defaults
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(file, root.Mark()), ": the top level must be a map of sections (",
        absl::StrJoin(SectionNames(schema), ", "), "), got ",
        config_internal::DescribeValue(root)));
  }
  auto read_section = [&](const std::string& name, const YAML::Node& value,
                          const std::string& at) {
    const Section* section = FindSection(schema, name);
    if (section == nullptr) return Located(at, UnknownSection(schema, name));
    return ReadSection(schema, *section, value, file, at, set_keys);
  };
  return ForEachEntry(root, file, "", read_section);
}

// Counts the documents of a YAML stream and notes where the second one's
// content starts. YAML::LoadAll cannot be used for that: yaml-cpp 0.7 loops
// forever, allocating, on a stream that starts with ',' (jbeder/yaml-cpp
// issues 1040, PR 1319; found by tools/fuzz/config_fuzzer), so the caller
// stops after two documents.
class DocumentCounter : public YAML::EventHandler {
 public:
  int documents = 0;
  bool first_content = false;
  std::optional<YAML::Mark> second_content;

  void OnDocumentStart(const YAML::Mark&) override { ++documents; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Content(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Content(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&,
                       YAML::anchor_t, YAML::EmitterStyle::value) override {
    Content(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Content(mark);
  }
  void OnMapEnd() override {}

 private:
  void Content(const YAML::Mark& mark) {
    if (documents == 1) first_content = true;
    if (documents == 2 && !second_content.has_value()) second_content = mark;
  }
};

absl::StatusOr<YAML::Node> LoadDocument(const std::string& yaml,
                                        const std::string& file) {
  YAML::Node root;
  DocumentCounter counter;
  try {
    std::istringstream in(yaml);
    YAML::Parser parser(in);
    for (int i = 0; i < 2 && parser.HandleNextDocument(counter); ++i) {
    }
    root = YAML::Load(yaml);  // the first document
  } catch (const YAML::ParserException& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(file, e.mark), ": malformed YAML: ", e.msg));
  }
  // yaml-cpp reads a stream that starts with ',' as empty documents: text
  // beyond comments and markers that yields no content is malformed.
  if (!counter.first_content) {
    std::istringstream lines(yaml);
    std::string line;
    for (int number = 1; std::getline(lines, line); ++number) {
      const absl::string_view text = absl::StripAsciiWhitespace(line);
      if (text.empty() || text[0] == '#' || text == "---" || text == "...") {
        continue;
      }
      return absl::InvalidArgumentError(absl::StrCat(
          file, ":", number, ": malformed YAML: '", text.substr(0, 40),
          "' holds no key: a config is a mapping of sections (cluster:, "
          "model:, ...)"));
    }
  }
  if (counter.second_content.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(file, *counter.second_content),
        ": expected one YAML document, found a second after '---'"));
  }
  return root;
}

// --- Overrides --------------------------------------------------------------

// Applies "section.key=value"; the caller names the assignment in errors.
absl::Status Assign(const std::vector<Section>& schema,
                    const std::string& assignment,
                    std::set<std::string>* set_keys) {
  const size_t equals = assignment.find('=');
  const size_t dot = assignment.find('.');
  if (equals == std::string::npos || dot == std::string::npos || dot > equals) {
    return absl::InvalidArgumentError(
        "expected section.key=value, e.g. training.steps=100");
  }
  const std::string section_name(
      absl::StripAsciiWhitespace(assignment.substr(0, dot)));
  const std::string key(
      absl::StripAsciiWhitespace(assignment.substr(dot + 1, equals - dot - 1)));
  const Section* section = FindSection(schema, section_name);
  if (section == nullptr) return UnknownSection(schema, section_name);
  const ConfigField* field = FindField(*section, key);
  if (field == nullptr) return UnknownKey(schema, *section, key);
  set_keys->insert(field->key);
  YAML::Node value;
  try {
    value = YAML::Load(assignment.substr(equals + 1));
  } catch (const YAML::ParserException& e) {
    return absl::InvalidArgumentError(absl::StrCat("malformed YAML: ", e.msg));
  }
  return ReadField(*field, value);
}

// csv and libsvm files hold however many rows they hold: unless the file or an
// override sets them, train on all rows (0) and test on test_path's rows or
// test_fraction of path's (-1).
void ResolveTableDefaults(Config* config) {
  DataSection& data = config->data;
  if (!IsTableSource(data.source)) return;
  if (config->explicit_keys.count("data.train_examples") == 0) {
    data.train_examples = 0;
  }
  if (config->explicit_keys.count("data.test_examples") == 0) {
    data.test_examples = -1;
  }
}

}  // namespace

int WideDeepFields(const DataSection& data) {
  if (data.source != DataSource::kCsv) return 1;
  return std::max<int>(1, static_cast<int>(data.categorical.size() +
                                           data.text.size() +
                                           data.numeric.size() +
                                           data.bucketize.size()));
}

namespace {

// ParseConfig with overrides; may throw (yaml-cpp).
absl::StatusOr<Config> ParseUnsafe(const std::string& yaml,
                                   const std::string& file,
                                   const std::vector<std::string>& overrides) {
  Config config;
  config.path = file;
  {
    const std::vector<Section> schema = Schema(&config);
    ASSIGN_OR_RETURN(const YAML::Node root, LoadDocument(yaml, file));
    RETURN_IF_ERROR(ReadDocument(schema, root, file, &config.explicit_keys));
    for (const std::string& assignment : overrides) {
      RETURN_IF_ERROR(Located(absl::StrCat("--set ", assignment),
                              Assign(schema, assignment, &config.explicit_keys)));
    }
  }
  ResolveTableDefaults(&config);
  config.model.wide_deep.fields = WideDeepFields(config.data);
  RETURN_IF_ERROR(Located(file, ValidateConfig(config)));
  return config;
}

absl::StatusOr<Config> Parse(const std::string& yaml, const std::string& file,
                             const std::vector<std::string>& overrides) {
  try {
    return ParseUnsafe(yaml, file, overrides);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(file, e.mark), ": ", e.msg));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(
        file, ": unexpected error reading the config: ", e.what()));
  }
}

// Config files are read up to this size: a cluster file is a few KiB.
constexpr size_t kMaxConfigBytes = 1 << 20;

// True when `text` holds no YAML content: only blank lines, comments and
// document markers.
bool IsBlank(const std::string& text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#' || line == "---" || line == "...") {
      continue;
    }
    return false;
  }
  return true;
}

absl::StatusOr<std::string> ReadConfigFile(const std::string& path) {
  std::error_code error;
  const std::filesystem::file_status status =
      std::filesystem::status(path, error);
  if (status.type() == std::filesystem::file_type::not_found) {
    return absl::NotFoundError(
        absl::StrCat("config file '", path,
                     "' not found: check the path given to --config"));
  }
  if (std::filesystem::is_directory(status)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config path '", path, "' is a directory: --config takes a YAML file"));
  }
  absl::StatusOr<std::string> text = ReadFile(path, kMaxConfigBytes);
  if (absl::IsResourceExhausted(text.status())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config file '", path, "' is larger than ", kMaxConfigBytes,
        " bytes (1 MiB): --config takes a YAML cluster file such as "
        "deploy/configs/mnist_local.yaml"));
  }
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("cannot read config file: ", text.status().message()));
  }
  if (IsBlank(*text)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": config file is empty (only whitespace or comments): a "
              "cluster file needs at least its cluster section; see "
              "deploy/configs/mnist_local.yaml and docs/CONFIG.md"));
  }
  return text;
}

// --- Rules across keys ------------------------------------------------------

// Two daemons cannot listen on one fixed address; port 0 is ephemeral, so free.
// Standbys are left out, as they always were: checking them too would reject
// configs that load today, which is a change of its own.
absl::Status CheckDistinctAddresses(const ClusterSection& cluster) {
  std::map<std::string, std::string> owner;
  for (const ClusterAddress& use : ClusterAddresses(cluster)) {
    if (use.role == "standby" || absl::EndsWith(use.address, ":0")) continue;
    const auto [it, inserted] = owner.emplace(use.address, use.key);
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat(use.key, " '", use.address, "' is also ", it->second,
                       ": each daemon needs its own address (or port 0)"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckModel(const ModelSection& model,
                        const OptimizerSection& optimizer,
                        const DataSection& data) {
  if (IsSparseModel(model.type)) {
    if (model.task == Task::kMulticlass) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model.type ", ModelTypeName(model.type),
          " is logistic (model.task: binary) or "
          "linear regression (model.task: regression), not multiclass"));
    }
    // model.layers do not apply: the keys are the features.
    return absl::OkStatus();
  }
  if (optimizer.type == OptimizerType::kFtrl) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer.type ftrl trains sparse tables (model.type sparse_linear, "
        "fm or wide_deep); "
        "model.type ", ModelTypeName(model.type),
        " is dense: use adagrad, adam, momentum or sgd"));
  }
  RETURN_IF_ERROR(CheckModelSize(model));
  const std::vector<int>& layers = model.layers;
  const int64_t examples = int64_t{data.train_examples} + data.test_examples;
  if (!layers.empty() && examples * layers.front() > kMaxDataFloats) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.train_examples + data.test_examples (", examples, ") x model.layers[0] (",
        layers.front(), ") = ", examples * layers.front(),
        " input floats; at most ", kMaxDataFloats,
        " (16 GiB) are allowed: check both for a typo"));
  }
  if (IsLinear(model.type) && layers.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.type ", ModelTypeName(model.type),
        " needs exactly 2 layers [inputs, outputs], got ",
        layers.size(), ": [", absl::StrJoin(layers, ", "), "]"));
  }
  if (model.task != Task::kMulticlass && !layers.empty() &&
      layers.back() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.task ", TaskName(model.task),
        " has one output, so the last entry of model.layers must be 1, got [",
        absl::StrJoin(layers, ", "), "]"));
  }
  if (model.task == Task::kMulticlass && !layers.empty() && layers.back() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.task multiclass needs at least 2 classes (the last entry of "
        "model.layers), got [", absl::StrJoin(layers, ", "),
        "]: for one output set model.task to binary or regression"));
  }
  if (data.source != DataSource::kMnist || layers.empty()) {
    return absl::OkStatus();
  }
  if (model.task != Task::kMulticlass) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.source mnist holds 10 digit classes: model.task must be "
        "multiclass, got ", TaskName(model.task)));
  }
  if (layers.front() != kMnistDim) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.layers[0] (", layers.front(), ") must be ",
                     kMnistDim, " for data.source mnist (28x28 pixels)"));
  }
  if (layers.back() != kMnistClasses) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.layers[", layers.size() - 1, "] (", layers.back(), ") must be ",
        kMnistClasses, " for data.source mnist (10 digit classes)"));
  }
  return absl::OkStatus();
}

absl::Status CheckTraining(const Config& config) {
  const TrainingSection& training = config.training;
  if (training.epochs == 0 && training.steps == 0) {
    return absl::InvalidArgumentError(
        "training.epochs and training.steps are both 0: set one so that "
        "workers know when to stop");
  }
  if (training.consistency == ConsistencyMode::kBsp &&
      training.n_fetch != training.n_push) {
    return absl::InvalidArgumentError(absl::StrCat(
        "training.consistency bsp computes every step on the parameters of the "
        "last round, so training.n_fetch (",
        training.n_fetch, ") must equal training.n_push (", training.n_push,
        "): set both to ", training.n_push));
  }
  if (training.fetch == FetchMode::kLayerwise &&
      (training.consistency != ConsistencyMode::kAsync ||
       training.n_fetch != 1 || training.n_push != 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "training.fetch layerwise pushes and pulls every step's blocks as "
        "backprop produces them, so it needs training.consistency async (not ",
        ConsistencyModeName(training.consistency),
        ") and training.n_fetch and n_push 1 (not ", training.n_fetch, " and ",
        training.n_push, "): set those, or use training.fetch after_push"));
  }
  if (training.consistency == ConsistencyMode::kBsp &&
      training.max_pushes_in_flight != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "training.consistency bsp waits for each round before the next step, "
        "so training.max_pushes_in_flight (",
        training.max_pushes_in_flight, ") must be 1: set it to 1"));
  }
  if (training.warmstart_steps > 0 &&
      training.consistency != ConsistencyMode::kAsync) {
    return absl::InvalidArgumentError(absl::StrCat(
        "training.warmstart_steps (", training.warmstart_steps,
        ") needs training.consistency async: with ",
        ConsistencyModeName(training.consistency),
        " the waiting workers would block worker 0's pushes; set "
        "warmstart_steps to 0 or use async"));
  }
  if (training.target_accuracy > 0 && config.data.test_examples == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "training.target_accuracy (", training.target_accuracy,
        ") needs test examples to measure, but data.test_examples is 0"));
  }
  if (training.target_value != 0 && config.data.test_examples == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "training.target_value (", training.target_value,
        ") needs test examples to measure, but data.test_examples is 0"));
  }
  const std::string& metric = training.target_metric;
  const std::vector<std::string> measured = TaskMetricNames(config.model.task);
  if (!metric.empty() &&
      std::find(measured.begin(), measured.end(), metric) == measured.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "training.target_metric ", metric, " is not measured for model.task ",
        TaskName(config.model.task), ": use one of ",
        absl::StrJoin(TaskMetricNames(config.model.task), ", ")));
  }
  return absl::OkStatus();
}

absl::Status CheckData(const DataSection& data, const ClusterSection& cluster) {
  if (data.source != DataSource::kSynthetic && data.path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.path must name a ", IsTableSource(data.source) ? "file" : "folder",
        " for data.source ", DataSourceName(data.source)));
  }
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
        "data.source ", DataSourceName(data.source), ", got ",
        data.train_examples, " and ",
        data.test_examples));
  }
  if (data.train_examples < static_cast<int64_t>(cluster.workers.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.train_examples (", data.train_examples, ") is fewer than the ",
        cluster.workers.size(), " cluster.workers: each needs an example"));
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

// step and cosine decay over decay_updates updates; 0 would divide by zero, so
// the message computes the usual value from this config.
absl::Status CheckSchedule(const Config& config) {
  const OptimizerSection& o = config.optimizer;
  if (o.schedule == LrScheduleType::kConstant || o.decay_updates > 0) {
    return absl::OkStatus();
  }
  const TrainingSection& t = config.training;
  std::string estimate;
  if (t.steps > 0) {
    const int64_t workers = static_cast<int64_t>(config.cluster.workers.size());
    estimate = absl::StrCat(
        ", or with training.steps, steps * workers / n_push; for this config ",
        t.steps, " * ", workers, " / ", t.n_push, " = ",
        t.steps * workers / t.n_push);
  } else {
    estimate = absl::StrCat("; for this config ", t.epochs, " * ",
                            config.data.train_examples, " / (", t.batch_size,
                            " * ", t.n_push, ") = ",
                            int64_t{t.epochs} * config.data.train_examples /
                                (int64_t{t.batch_size} * t.n_push));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "optimizer.schedule ", LrScheduleTypeName(o.schedule),
      " needs optimizer.decay_updates > 0, got 0: set it to the number of "
      "updates to decay over (after warmup_updates); a whole job applies "
      "updates = epochs * train_examples / (batch_size * n_push)",
      estimate));
}

absl::Status CheckCompute(const ComputeSection& compute) {
  const bool simulated = compute.device == ComputeDevice::kSimulated;
  if (simulated && compute.simulated_step_ms <= 0) {
    return absl::InvalidArgumentError(
        "compute.device simulated needs compute.simulated_step_ms > 0 (the "
        "milliseconds one step takes), got 0: set it, e.g. "
        "compute.simulated_step_ms: 200");
  }
  if (!simulated && compute.simulated_real_gradients) {
    return absl::InvalidArgumentError(absl::StrCat(
        "compute.simulated_real_gradients only applies to compute.device "
        "simulated, but compute.device is ",
        ComputeDeviceName(compute.device),
        ": remove it (cpu and cuda always compute real gradients)"));
  }
  if (!simulated && compute.simulated_step_ms > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "compute.simulated_step_ms (", compute.simulated_step_ms,
        ") only applies to compute.device simulated, but compute.device is ",
        ComputeDeviceName(compute.device),
        ": remove it or set compute.device: simulated"));
  }
  return absl::OkStatus();
}

absl::Status CheckHeartbeat(const HeartbeatSection& heartbeat) {
  if (heartbeat.timeout_s > heartbeat.interval_s) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "heartbeat.timeout_s (", heartbeat.timeout_s,
      ") must be > heartbeat.interval_s (", heartbeat.interval_s, ")"));
}

// A factor in (0, 1) would act on the typical honest push itself.
absl::Status CheckFactor(const char* key, double factor, const char* what) {
  if (factor == 0 || factor >= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      key, " (", factor, ") must be 0 (off) or >= 1: below 1 it would ", what,
      " the typical honest push"));
}

absl::Status CheckRobustness(const RobustnessSection& robustness) {
  RETURN_IF_ERROR(CheckFactor("robustness.norm_clip_factor",
                              robustness.norm_clip_factor, "clip"));
  RETURN_IF_ERROR(CheckFactor("robustness.norm_refuse_factor",
                              robustness.norm_refuse_factor, "refuse"));
  RETURN_IF_ERROR(CheckFactor("robustness.rate_factor", robustness.rate_factor,
                              "rate-limit"));
  if (robustness.norm_clip_factor > 0 && robustness.norm_refuse_factor > 0 &&
      robustness.norm_refuse_factor < robustness.norm_clip_factor) {
    return absl::InvalidArgumentError(absl::StrCat(
        "robustness.norm_refuse_factor (", robustness.norm_refuse_factor,
        ") must be >= robustness.norm_clip_factor (",
        robustness.norm_clip_factor,
        "): a push is clipped before it is refused (0 turns either off)"));
  }
  return absl::OkStatus();
}

absl::Status CheckLauncher(const LauncherSection& launcher) {
  if (launcher.max_restart_backoff_s >= launcher.restart_backoff_s) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "launcher.max_restart_backoff_s (", launcher.max_restart_backoff_s,
      ") must be >= launcher.restart_backoff_s (", launcher.restart_backoff_s,
      "): it caps the wait that starts there"));
}

absl::Status CheckSecurity(const SecuritySection& security) {
  const bool any_token =
      !security.ps_token_file.empty() || !security.worker_token_file.empty() ||
      !security.admin_token_file.empty() || !security.reader_token_file.empty();
  if (!security.tls) {
    if (any_token) {
      return absl::InvalidArgumentError(
          "security.*_token_file needs security.tls: true (a bearer token sent "
          "over plaintext can be read by anyone on the path); turn TLS on "
          "(deploy/make_certs.sh makes the files) or remove the token files");
    }
    if (security.mutual_tls) {
      return absl::InvalidArgumentError(
          "security.mutual_tls needs security.tls: true");
    }
    return absl::OkStatus();
  }
  if (security.ca_file.empty()) {
    return absl::InvalidArgumentError(
        "security.tls needs security.ca_file (the CA that signed every "
        "daemon's certificate; deploy/make_certs.sh writes ca.pem)");
  }
  if (security.cert_file.empty() != security.key_file.empty()) {
    return absl::InvalidArgumentError(
        "security.cert_file and security.key_file go together: set both or "
        "neither");
  }
  return absl::OkStatus();
}

// eviction.*: sparse models only, run with the periodic checkpoints, and
// below the hard bound of model.sparse_max_rows.
absl::Status CheckEviction(const Config& config) {
  const EvictionSection& e = config.eviction;
  if (e.ttl_updates == 0 && e.max_rows == 0) return absl::OkStatus();
  if (!IsSparseModel(config.model.type)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "eviction.ttl_updates and eviction.max_rows drop rows of sparse "
        "tables: they apply to model.type sparse_linear, fm and wide_deep "
        "only, not ",
        ModelTypeName(config.model.type)));
  }
  if (config.checkpoint.interval_s == 0) {
    return absl::InvalidArgumentError(
        "eviction runs when a ps takes its periodic checkpoint, every "
        "checkpoint.interval_s; with checkpoint.interval_s 0 it would never "
        "run: set checkpoint.interval_s > 0 (checkpoint.dir may stay \"\")");
  }
  if (e.max_rows > config.model.sparse_max_rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "eviction.max_rows ", e.max_rows, " is above model.sparse_max_rows ",
        config.model.sparse_max_rows,
        ": pushes are refused at that bound before eviction trims a table; "
        "lower eviction.max_rows or raise model.sparse_max_rows"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckModelSize(const ModelSection& model) {
  if (model.block_size < 1) return absl::OkStatus();
  int64_t params = 0, blocks = 0;
  for (size_t l = 0; l + 1 < model.layers.size(); ++l) {
    const int64_t in = model.layers[l], out = model.layers[l + 1];
    if (in < 1 || out < 1) return absl::OkStatus();
    // Each term is below 2^62 and the sums stop at the limits, so nothing
    // overflows.
    for (const int64_t size : {in * out, out}) {
      params += size;
      blocks += (size - 1) / model.block_size + 1;
      if (params > kMaxModelParams || blocks > kMaxModelBlocks) {
        return absl::InvalidArgumentError(absl::StrCat(
            "model.layers [", absl::StrJoin(model.layers, ", "),
            "] with model.block_size ", model.block_size, " make over ",
            params > kMaxModelParams ? kMaxModelParams : kMaxModelBlocks,
            params > kMaxModelParams ? " parameters" : " blocks",
            ", the most a model may have: ",
            params > kMaxModelParams ? "use narrower or fewer layers"
                                     : "raise model.block_size"));
      }
    }
  }
  return absl::OkStatus();
}

const char* ComputeDeviceName(ComputeDevice device) {
  return ChoiceName(kComputeDevices, device);
}
absl::StatusOr<ComputeDevice> ParseComputeDevice(absl::string_view name) {
  return ParseChoice("compute.device", kComputeDevices, name);
}

const char* TaskName(Task task) { return ChoiceName(kTasks, task); }
absl::StatusOr<Task> ParseTask(absl::string_view name) {
  return ParseChoice("model.task", kTasks, name);
}

const char* ModelTypeName(ModelType type) {
  return ChoiceName(kModelTypes, type);
}
absl::StatusOr<ModelType> ParseModelType(absl::string_view name) {
  return ParseChoice("model.type", kModelTypes, name);
}

const char* OptimizerTypeName(OptimizerType type) {
  return ChoiceName(kOptimizerTypes, type);
}
absl::StatusOr<OptimizerType> ParseOptimizerType(absl::string_view name) {
  return ParseChoice("optimizer.type", kOptimizerTypes, name);
}

const char* LrScheduleTypeName(LrScheduleType schedule) {
  return ChoiceName(kLrScheduleTypes, schedule);
}
absl::StatusOr<LrScheduleType> ParseLrScheduleType(absl::string_view name) {
  return ParseChoice("optimizer.schedule", kLrScheduleTypes, name);
}

const char* AsyncMomentumName(AsyncMomentum mode) {
  return ChoiceName(kAsyncMomentums, mode);
}
absl::StatusOr<AsyncMomentum> ParseAsyncMomentum(absl::string_view name) {
  return ParseChoice("optimizer.async_momentum", kAsyncMomentums, name);
}

const char* FetchModeName(FetchMode fetch) {
  return ChoiceName(kFetchModes, fetch);
}
absl::StatusOr<FetchMode> ParseFetchMode(absl::string_view name) {
  return ParseChoice("training.fetch", kFetchModes, name);
}

const char* ConsistencyModeName(ConsistencyMode mode) {
  return ChoiceName(kConsistencyModes, mode);
}
absl::StatusOr<ConsistencyMode> ParseConsistencyMode(absl::string_view name) {
  return ParseChoice("training.consistency", kConsistencyModes, name);
}

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

absl::StatusOr<WireEncoding> ParseRpcEncoding(absl::string_view name) {
  return ParseChoice("rpc.encoding", kRpcEncodings, name);
}

const char* RestartModeName(RestartMode mode) {
  return ChoiceName(kRestartModes, mode);
}
absl::StatusOr<RestartMode> ParseRestartMode(absl::string_view name) {
  return ParseChoice("launcher.restart", kRestartModes, name);
}

const char* LogLevelName(LogLevel level) {
  return ChoiceName(kLogLevels, level);
}
absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name) {
  return ParseChoice("logging.level", kLogLevels, name);
}

bool IsTableSource(DataSource source) {
  return source == DataSource::kCsv || source == DataSource::kLibsvm;
}

char DelimiterChar(const DataSection& data) {
  return data.delimiter == "\\t" ? '\t' : data.delimiter[0];
}

std::vector<std::string> TaskMetricNames(Task task) {
  if (task == Task::kBinary) return {"auc", "logloss", "accuracy"};
  if (task == Task::kRegression) return {"rmse", "mae", "r2"};
  return {"accuracy", "logloss"};
}

std::string TargetMetric(const Config& config) {
  return config.training.target_metric.empty()
             ? TaskMetricNames(config.model.task).front()
             : config.training.target_metric;
}

bool HigherIsBetter(const std::string& metric) {
  return metric == "accuracy" || metric == "auc" || metric == "r2";
}

namespace {

std::vector<std::pair<std::string, std::string>> OptimizerSettings(
    const OptimizerSection& o) {
  auto num = [](double v) { return absl::StrFormat("%.17g", v); };
  return {
      {"type", OptimizerTypeName(o.type)},
      {"learning_rate", num(o.learning_rate)},
      {"momentum", num(o.momentum)},
      {"beta1", num(o.beta1)},
      {"beta2", num(o.beta2)},
      {"epsilon", num(o.epsilon)},
      {"weight_decay", num(o.weight_decay)},
      {"schedule", LrScheduleTypeName(o.schedule)},
      {"warmup_updates", absl::StrCat(o.warmup_updates)},
      {"decay_updates", absl::StrCat(o.decay_updates)},
      {"decay_factor", num(o.decay_factor)},
      {"min_lr_fraction", num(o.min_lr_fraction)},
      {"staleness_lr", o.staleness_lr ? "true" : "false"},
      {"async_momentum", AsyncMomentumName(o.async_momentum)},
      {"delay_compensation", num(o.delay_compensation)},
      {"max_gradient_value", num(o.max_gradient_value)},
      {"max_gradient_norm", num(o.max_gradient_norm)},
      {"ftrl_beta", num(o.ftrl_beta)},
      {"l1", num(o.l1)},
      {"l2", num(o.l2)},
  };
}

}  // namespace

std::string OptimizerSettingsText(const OptimizerSection& optimizer) {
  std::string text;
  for (const auto& [key, value] : OptimizerSettings(optimizer)) {
    absl::StrAppend(&text, key, "=", value, "\n");
  }
  return text;
}

std::string FirstOptimizerDifference(const std::string& a,
                                     const std::string& a_name,
                                     const std::string& b,
                                     const std::string& b_name) {
  if (a == b) return "";
  auto parse = [](const std::string& text) {
    std::vector<std::pair<std::string, std::string>> out;
    for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
      const size_t eq = line.find('=');
      out.emplace_back(std::string(line.substr(0, eq)),
                       eq == absl::string_view::npos
                           ? ""
                           : std::string(line.substr(eq + 1)));
    }
    return out;
  };
  const auto first = parse(a), second = parse(b);
  for (const auto& [key, value] : first) {
    std::string other = "(unset)";
    for (const auto& [k, v] : second) {
      if (k == key) other = v;
    }
    if (other != value) {
      return absl::StrCat("optimizer.", key, " is ", value, " ", a_name,
                          " and ", other, " ", b_name);
    }
  }
  return absl::StrCat("the optimizer sections ", a_name, " and ", b_name,
                      " list different keys");
}

JobTarget TargetOf(const Config& config) {
  const TrainingSection& t = config.training;
  if (t.target_value != 0) {
    return {TargetMetric(config), t.target_value, t.stop_at_target};
  }
  if (t.target_accuracy > 0) return {"accuracy", t.target_accuracy, true};
  return {};
}

bool ReachedTarget(const std::string& metric, double value, double target) {
  if (metric.empty() || std::isnan(value)) return false;
  return HigherIsBetter(metric) ? value >= target : value <= target;
}

std::vector<ClusterAddress> ClusterAddresses(const ClusterSection& cluster) {
  std::vector<ClusterAddress> out = {
      {"cluster.coordinator", "coordinator", 0, cluster.coordinator}};
  const struct {
    const char* key;
    const char* role;
    const std::vector<std::string>* list;
  } lists[] = {{"cluster.ps", "ps", &cluster.ps},
               {"cluster.standby_ps", "standby", &cluster.standby_ps},
               {"cluster.workers", "worker", &cluster.workers}};
  for (const auto& list : lists) {
    for (size_t i = 0; i < list.list->size(); ++i) {
      out.push_back({absl::StrCat(list.key, "[", i, "]"), list.role,
                     static_cast<int>(i), (*list.list)[i]});
    }
  }
  return out;
}

absl::StatusOr<Config> LoadConfig(const std::string& path) {
  return LoadConfig(path, {});
}

absl::StatusOr<Config> LoadConfig(const std::string& path,
                                  const std::vector<std::string>& overrides) {
  ASSIGN_OR_RETURN(const std::string text, ReadConfigFile(path));
  return Parse(text, path, overrides);
}

absl::StatusOr<Config> ParseConfig(const std::string& yaml,
                                   const std::string& name) {
  return Parse(yaml, name, {});
}

std::vector<std::string> MergeOverrideFragments(
    const std::vector<std::string>& pieces) {
  std::vector<std::string> merged;
  for (const std::string& piece : pieces) {
    if (!merged.empty() && piece.find('=') == std::string::npos) {
      absl::StrAppend(&merged.back(), ",", piece);
    } else {
      merged.push_back(piece);
    }
  }
  return merged;
}

absl::Status ValidateConfig(const Config& config) {
  Config copy = config;  // the schema binds to a mutable config
  for (const Section& section : Schema(&copy)) {
    for (const ConfigField& field : section.fields) {
      RETURN_IF_ERROR(field.check());
    }
  }
  RETURN_IF_ERROR(CheckDistinctAddresses(config.cluster));
  RETURN_IF_ERROR(CheckModel(config.model, config.optimizer, config.data));
  const bool admission = config.admission.min_count > 1 ||
                         config.admission.probability < 1;
  if (admission && !IsSparseModel(config.model.type)) {
    return absl::InvalidArgumentError(
        "admission.min_count and admission.probability decide which keys of a "
        "sparse table get a row: they apply to model.type sparse_linear, fm "
        "and wide_deep only");
  }
  // The embedding models' sections (fm, wide_deep): a key of one set by the
  // file or an override (explicit_keys is sorted, so the first key at or
  // after "<section>." tells) needs its model type, and its
  // embedding_min_count admits by count where admission.probability would
  // admit by chance.
  const struct {
    const char* section;
    ModelType type;
  } kEmbeddingSections[] = {{"fm", ModelType::kFm},
                            {"wide_deep", ModelType::kWideDeep}};
  for (const auto& e : kEmbeddingSections) {
    const std::string prefix = absl::StrCat(e.section, ".");
    const auto first = config.explicit_keys.lower_bound(prefix);
    const bool set = first != config.explicit_keys.end() &&
                     absl::StartsWith(*first, prefix);
    const std::string name = ModelTypeName(e.type);
    if (set && config.model.type != e.type) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the ", e.section, " section configures model.type ", name,
          ", but model.type is ", ModelTypeName(config.model.type),
          ": set model.type: ", name, " or remove the section"));
    }
    if (config.model.type == e.type &&
        EmbeddingOptions(config.model).embedding_min_count > 1 &&
        config.admission.probability < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          e.section,
          ".embedding_min_count admits embeddings by count and "
          "admission.probability admits keys by chance: set one"));
    }
  }
  if (config.admission.min_count > 1 && config.admission.probability < 1) {
    return absl::InvalidArgumentError(
        "admission.min_count and admission.probability are two ways to admit "
        "keys: set one");
  }
  RETURN_IF_ERROR(CheckEviction(config));
  if (config.metrics.port_offset != 0 && config.security.tls &&
      config.security.reader_token_file.empty()) {
    return absl::InvalidArgumentError(
        "metrics.port_offset with security.tls needs "
        "security.reader_token_file: /metrics answers only requests bearing "
        "the reader token");
  }
  if (IsSparseModel(config.model.type)) {
    if (config.data.source != DataSource::kLibsvm &&
        config.data.source != DataSource::kCsv) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model.type ", ModelTypeName(config.model.type),
          " reads data.source libsvm (64-bit indices) "
          "or csv (columns hashed by data.categorical, text, numeric, "
          "bucketize)"));
    }
  }
  RETURN_IF_ERROR(CheckTraining(config));
  RETURN_IF_ERROR(CheckData(config.data, config.cluster));
  RETURN_IF_ERROR(CheckSchedule(config));
  RETURN_IF_ERROR(CheckCompute(config.compute));
  RETURN_IF_ERROR(CheckSecurity(config.security));
  RETURN_IF_ERROR(CheckLauncher(config.launcher));
  RETURN_IF_ERROR(CheckRobustness(config.robustness));
  return CheckHeartbeat(config.heartbeat);
}

}  // namespace downpour
