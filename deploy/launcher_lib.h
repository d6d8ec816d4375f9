// Runs a whole local cluster as child processes: the core of the `launcher`
// binary, and what the integration tests drive.
#ifndef DOWNPOUR_DEPLOY_LAUNCHER_LIB_H_
#define DOWNPOUR_DEPLOY_LAUNCHER_LIB_H_

#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/config.h"
#include "deploy/daemon_process.h"

namespace downpour {

struct LaunchOptions {
  std::string config_path;             // absolute path of the YAML file
  std::vector<std::string> overrides;  // --set overrides for every daemon
  std::string run_dir;                 // logs/ and summary.json go here
  std::string bin_dir;                 // bazel-bin or equivalent
  // Set: start each daemon on the host of its address in the config, over SSH
  // (the config then needs fixed ports, and the same YAML and binaries on
  // every host at remote->config_path and remote->bin_dir). Logs still come
  // here. Unset: every daemon is a child process on this machine.
  std::optional<RemoteOptions> remote;
  // Keep the previous run's ps checkpoints and coordinator state, so the job
  // continues where it stopped. Default: a fresh job (they are deleted first).
  bool resume = false;
  absl::Duration progress_period = absl::Seconds(2);
  double accuracy_mark = 0.95;  // report when a worker first reaches this
  // How long the coordinator may take to start listening.
  absl::Duration startup_timeout = absl::Seconds(20);
  // Polled often; true stops the cluster in order (Ctrl-C).
  std::function<bool()> interrupted = [] { return false; };
  std::FILE* out = stdout;  // progress lines; nullptr for none
  // `out` is a terminal: one progress line refreshing in place instead of a
  // line per period.
  bool tty = false;
};

struct WorkerResult {
  int index = 0;
  int64_t step = 0;
  int64_t examples = 0;
  double examples_per_sec = 0;
  double loss = NAN;
  double accuracy = NAN;
  bool finished = false;
};

struct LaunchSummary {
  // Mean over the workers of their test accuracy on the final parameters (each
  // pulls them after its last push and evaluates the whole test split).
  double final_accuracy = NAN;
  int64_t steps = 0;            // over all workers
  int64_t examples = 0;
  double seconds = 0;           // wall time from the first start to the end
  double examples_per_sec = 0;  // examples / training seconds, whole cluster
  double seconds_to_mark = -1;  // when accuracy_mark was first reached; -1: never
  double accuracy_mark = 0.95;
  std::string stop_reason;
  std::vector<WorkerResult> workers;
  std::string log_dir;
  std::string checkpoint_dir;
  std::string summary_path;
  // The coordinator's metrics history (JSON, for `psctl plot --history`) and
  // the training curves drawn from it (SVG), next to summary.json; "" when the
  // coordinator could not be asked for it.
  std::string history_path;
  std::string plot_path;
  bool interrupted = false;
};

// Starts coordinator, ps and workers; returns when every worker has exited and the
// rest were stopped. A daemon that fails (non-zero exit, or a ps/coordinator that
// exits while workers train) stops the others and gives Aborted with its name,
// exit status and the tail of its log. Writes <run_dir>/summary.json, and (on
// success or failure, just before the coordinator stops) <run_dir>/history.json
// and <run_dir>/training.svg.
absl::StatusOr<LaunchSummary> RunCluster(const Config& config,
                                         const LaunchOptions& options);

// The closing lines the launcher prints.
std::string FormatSummary(const LaunchSummary& summary);

// summary.json's content.
std::string SummaryJson(const LaunchSummary& summary);

}  // namespace downpour

#endif  // DOWNPOUR_DEPLOY_LAUNCHER_LIB_H_
