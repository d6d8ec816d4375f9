// Loads the cluster YAML into Config: reads the file and its one document,
// walks the sections (each read and checked by its file, config_<section>.cc)
// and checks the rules that tie sections together. yaml-cpp throws; nothing
// escapes this file.
#include "common/config.h"

#include <exception>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/config_field.h"
#include "common/config_schema.h"
#include "common/config_yaml.h"
#include "common/status_macros.h"
#include "yaml-cpp/yaml.h"

namespace downpour {
namespace {

using config_internal::AdmissionKeys;
using config_internal::Assign;
using config_internal::CheckCompute;
using config_internal::CheckData;
using config_internal::CheckDistinctAddresses;
using config_internal::CheckEviction;
using config_internal::CheckFields;
using config_internal::CheckHeartbeat;
using config_internal::CheckLauncher;
using config_internal::CheckModel;
using config_internal::CheckpointKeys;
using config_internal::CheckRobustness;
using config_internal::CheckSecurity;
using config_internal::CheckTraining;
using config_internal::ClusterKeys;
using config_internal::ComputeKeys;
using config_internal::CoordinatorKeys;
using config_internal::DataKeys;
using config_internal::EvictionKeys;
using config_internal::ExportKeys;
using config_internal::FmKeys;
using config_internal::HeartbeatKeys;
using config_internal::LauncherKeys;
using config_internal::Located;
using config_internal::LoggingKeys;
using config_internal::MetricsKeys;
using config_internal::ModelKeys;
using config_internal::OptimizerKeys;
using config_internal::RobustnessKeys;
using config_internal::RpcKeys;
using config_internal::Section;
using config_internal::SecurityKeys;
using config_internal::TrainingKeys;
using config_internal::Where;
using config_internal::WideDeepKeys;

// The schema: every section bound to `c`, in the order docs/CONFIG.md lists
// them (unknown-key messages list them so). Keep the two in step.
std::vector<Section> ConfigSchema(Config* c) {
  return {
      {"cluster", ClusterKeys(&c->cluster)},
      {"model", ModelKeys(&c->model)},
      {"optimizer", OptimizerKeys(&c->optimizer)},
      {"training", TrainingKeys(&c->training)},
      {"data", DataKeys(&c->data)},
      {"checkpoint", CheckpointKeys(&c->checkpoint)},
      {"heartbeat", HeartbeatKeys(&c->heartbeat)},
      {"rpc", RpcKeys(&c->rpc)},
      {"logging", LoggingKeys(&c->logging)},
      {"compute", ComputeKeys(&c->compute)},
      {"coordinator", CoordinatorKeys(&c->coordinator)},
      {"launcher", LauncherKeys(&c->launcher)},
      {"security", SecurityKeys(&c->security)},
      {"robustness", RobustnessKeys(&c->robustness)},
      {"fm", FmKeys(&c->model.fm)},
      {"metrics", MetricsKeys(&c->metrics)},
      {"wide_deep", WideDeepKeys(&c->model.wide_deep)},
      {"export", ExportKeys(&c->exports)},
      {"admission", AdmissionKeys(&c->admission)},
      {"eviction", EvictionKeys(&c->eviction)},
  };
}

// ParseConfig with overrides; may throw (yaml-cpp).
absl::StatusOr<Config> ParseUnsafe(const std::string& yaml,
                                   const std::string& file,
                                   const std::vector<std::string>& overrides) {
  Config config;
  config.path = file;
  {
    const std::vector<Section> schema = ConfigSchema(&config);
    ASSIGN_OR_RETURN(const YAML::Node root,
                     config_internal::LoadDocument(yaml, file));
    RETURN_IF_ERROR(config_internal::ReadDocument(schema, root, file,
                                                  &config.explicit_keys));
    for (const std::string& assignment : overrides) {
      RETURN_IF_ERROR(
          Located(absl::StrCat("--set ", assignment),
                  Assign(schema, assignment, &config.explicit_keys)));
    }
  }
  config_internal::ResolveTableDefaults(config.explicit_keys, &config.data);
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

// --- Rules across sections --------------------------------------------------

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

// The sections of sparse tables (admission, fm, wide_deep, eviction) against
// model.type and each other.
absl::Status CheckSparseSections(const Config& config) {
  const bool admission =
      config.admission.min_count > 1 || config.admission.probability < 1;
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
    const bool set =
        first != config.explicit_keys.end() && absl::StartsWith(*first, prefix);
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
      return absl::InvalidArgumentError(
          absl::StrCat(e.section,
                       ".embedding_min_count admits embeddings by count and "
                       "admission.probability admits keys by chance: set one"));
    }
  }
  if (config.admission.min_count > 1 && config.admission.probability < 1) {
    return absl::InvalidArgumentError(
        "admission.min_count and admission.probability are two ways to admit "
        "keys: set one");
  }
  return CheckEviction(config.eviction, config.model, config.checkpoint);
}

}  // namespace

std::string TargetMetric(const Config& config) {
  return config.training.target_metric.empty()
             ? TaskMetricNames(config.model.task).front()
             : config.training.target_metric;
}

JobTarget TargetOf(const Config& config) {
  const TrainingSection& t = config.training;
  if (t.target_value != 0) {
    return {TargetMetric(config), t.target_value, t.stop_at_target};
  }
  if (t.target_accuracy > 0) return {"accuracy", t.target_accuracy, true};
  return {};
}

absl::StatusOr<Config> LoadConfig(const std::string& path) {
  return LoadConfig(path, {});
}

absl::StatusOr<Config> LoadConfig(const std::string& path,
                                  const std::vector<std::string>& overrides) {
  ASSIGN_OR_RETURN(const std::string text,
                   config_internal::ReadConfigFile(path));
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

// Sparse models read libsvm, csv and criteo; only they stream.
static absl::Status CheckModelReadsSource(const ModelSection& model,
                                          const DataSection& data) {
  if (!IsSparseModel(model.type)) {
    if (!StreamsData(data)) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "model.type ", ModelTypeName(model.type), " reads its data in memory: ",
        data.source == DataSource::kCriteo
            ? "data.source criteo is read by the sparse models (sparse_linear, "
              "fm, wide_deep)"
            : "data.stream is for the sparse models (sparse_linear, fm, "
              "wide_deep); set data.stream: false"));
  }
  if (data.source != DataSource::kLibsvm && data.source != DataSource::kCsv &&
      data.source != DataSource::kCriteo) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.type ", ModelTypeName(model.type),
        " reads data.source libsvm (64-bit indices), criteo (click-log text) "
        "or csv (columns hashed by data.categorical, text, numeric, "
        "bucketize)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateConfig(const Config& config) {
  Config copy = config;  // the schema binds to a mutable config
  RETURN_IF_ERROR(CheckFields(ConfigSchema(&copy)));
  RETURN_IF_ERROR(CheckDistinctAddresses(config.cluster));
  RETURN_IF_ERROR(config_internal::CheckReplication(config.cluster));
  RETURN_IF_ERROR(config_internal::CheckMaxWorkers(config.cluster));
  RETURN_IF_ERROR(CheckModel(config.model, config.optimizer, config.data));
  RETURN_IF_ERROR(CheckSparseSections(config));
  if (config.metrics.port_offset != 0 && config.security.tls &&
      config.security.reader_token_file.empty()) {
    return absl::InvalidArgumentError(
        "metrics.port_offset with security.tls needs "
        "security.reader_token_file: /metrics answers only requests bearing "
        "the reader token");
  }
  RETURN_IF_ERROR(CheckModelReadsSource(config.model, config.data));
  RETURN_IF_ERROR(
      CheckTraining(config.training, config.model.task, config.data));
  RETURN_IF_ERROR(config_internal::CheckTrainingMode(
      config.training, config.model, config.optimizer));
  RETURN_IF_ERROR(CheckData(config.data, config.cluster));
  RETURN_IF_ERROR(CheckSchedule(config));
  RETURN_IF_ERROR(CheckCompute(config.compute));
  RETURN_IF_ERROR(CheckSecurity(config.security));
  RETURN_IF_ERROR(CheckLauncher(config.launcher));
  RETURN_IF_ERROR(CheckRobustness(config.robustness));
  return CheckHeartbeat(config.heartbeat);
}

}  // namespace downpour
