// The cluster configuration: one YAML file describes the whole job.
//
//   absl::StatusOr<Config> config =
//   LoadConfig("deploy/configs/mnist_local.yaml");
//
// Every daemon loads the same file; flags then override single fields. The
// loader rejects unknown keys, wrong types and impossible values with
// InvalidArgument and a message naming the file, the line, the key and what is
// allowed. See docs/CONFIG.md.
//
// Each section has a file of its own, common/config_<section>.h, holding its
// struct, its choices and (in the .cc) its keys and their rules; this header
// includes them all, so callers include only this one. The loader
// (config.cc) reads the YAML, walks the sections in the order below and
// checks the rules that tie sections together.
#ifndef DOWNPOUR_COMMON_CONFIG_H_
#define DOWNPOUR_COMMON_CONFIG_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/config_checkpoint.h"
#include "common/config_cluster.h"
#include "common/config_compute.h"
#include "common/config_coordinator.h"
#include "common/config_data.h"
#include "common/config_export.h"
#include "common/config_heartbeat.h"
#include "common/config_launcher.h"
#include "common/config_logging.h"
#include "common/config_metrics.h"
#include "common/config_model.h"
#include "common/config_optimizer.h"
#include "common/config_robustness.h"
#include "common/config_rpc.h"
#include "common/config_security.h"
#include "common/config_sparse.h"
#include "common/config_training.h"

namespace downpour {

// --- Choices ----------------------------------------------------------------
//
// Each key with a fixed set of values is an enum. For every enum E (each in
// its section's header):
//   const char* EName(E)           the value as a config file writes it, for
//                                  messages, logs, JSON and exported models;
//                                  "?" for a value that is none of E's.
//   absl::StatusOr<E> ParseE(name) the inverse: the one parse of the key's
//                                  text, by the loader and by readers of
//                                  exported models. InvalidArgument
//                                  "KEY must be one of A, B, C; got 'x'" (and
//                                  "(did you mean 'y'?)" for a likely typo).
// The config loader is the only place that compares their text.

struct Config {
  std::string path;  // the file it was loaded from
  ClusterSection cluster;
  ModelSection model;
  OptimizerSection optimizer;
  TrainingSection training;
  DataSection data;
  CheckpointSection checkpoint;
  MetricsSection metrics;
  HeartbeatSection heartbeat;
  RpcSection rpc;
  LoggingSection logging;
  ComputeSection compute;
  CoordinatorSection coordinator;
  LauncherSection launcher;
  SecuritySection security;
  RobustnessSection robustness;
  AdmissionSection admission;
  EvictionSection eviction;
  ExportSection exports;  // YAML section `export`
  // The keys the file or an override set ("checkpoint.dir"), so that a
  // launcher can tell a user's choice from a default it may place elsewhere.
  std::set<std::string> explicit_keys;
};

// training.target_metric, or the task's main metric when that is "".
std::string TargetMetric(const Config& config);

// What the job aims at (JobTarget, common/config_training.h).
JobTarget TargetOf(const Config& config);

// Loads and validates `path`. InvalidArgument names file, line, key and the
// allowed values; NotFound when the file does not exist.
absl::StatusOr<Config> LoadConfig(const std::string& path);

// Like LoadConfig, then applies `overrides`, each "section.key=value" (value in
// YAML syntax, e.g. "training.steps=100", "cluster.ps=[127.0.0.1:0,
// 127.0.0.1:0]"), in order, before validation. Errors in an override name it:
// "--set training.steps=abc: training.steps must be an integer, got 'abc'".
absl::StatusOr<Config> LoadConfig(const std::string& path,
                                  const std::vector<std::string>& overrides);

// Parses YAML text (for tests); `name` stands in for the file name in messages.
absl::StatusOr<Config> ParseConfig(const std::string& yaml,
                                   const std::string& name);

// Checks every key's range and the rules across keys (e.g. model.layers vs
// model.type); messages name the keys but no file or line. LoadConfig calls it;
// daemons call it again after applying flag overrides.
absl::Status ValidateConfig(const Config& config);

// Flags split "--set a.b=[1, 2],c.d=3" at every comma; this glues the pieces
// without '=' back onto the assignment before them: {"a.b=[1, 2]", "c.d=3"}.
std::vector<std::string> MergeOverrideFragments(
    const std::vector<std::string>& pieces);

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_CONFIG_H_
