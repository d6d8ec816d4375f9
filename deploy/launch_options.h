// How the launcher runs a job: where the config, binaries and run folder are,
// local or over SSH, fresh or resumed, and how it reports progress.
#ifndef DOWNPOUR_DEPLOY_LAUNCH_OPTIONS_H_
#define DOWNPOUR_DEPLOY_LAUNCH_OPTIONS_H_

#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/clock.h"
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
  // Report when a worker's test accuracy first reaches this. NaN (the
  // default): report on the config's target instead (training.target_metric
  // and target_value; nothing when target_value is 0).
  double accuracy_mark = NAN;
  // How long the coordinator may take to start listening.
  absl::Duration startup_timeout = absl::Seconds(20);
  // Polled often; true stops the cluster in order (Ctrl-C).
  std::function<bool()> interrupted = [] { return false; };
  std::FILE* out = stdout;  // progress lines; nullptr for none
  // `out` is a terminal: one progress line refreshing in place instead of a
  // line per period.
  bool tty = false;
  // What the launcher waits on (startup, polling, progress periods, the
  // figures in the summary); for tests. nullptr = Clock::Real(). Daemons'
  // own grace periods on Stop are real time.
  Clock* clock = nullptr;
};

}  // namespace downpour

#endif  // DOWNPOUR_DEPLOY_LAUNCH_OPTIONS_H_
