#include "tests/run_job.h"

#include <cmath>

#include "absl/time/time.h"
#include "common/config.h"
#include "deploy/launcher_lib.h"
#include "tests/daemon_harness.h"

namespace downpour::testing {

absl::StatusOr<LaunchSummary> RunJob(const std::string& path,
                                     const std::string& run_dir) {
  absl::StatusOr<Config> config = LoadConfig(path);
  if (!config.ok()) return config.status();
  LaunchOptions options;
  options.config_path = path;
  options.run_dir = run_dir;
  options.bin_dir = BinDir();
  options.progress_period = absl::Seconds(1);
  return RunCluster(*config, options);
}

double FinalMetric(const LaunchSummary& summary, const std::string& name) {
  for (const auto& [metric, value] : summary.final_metrics) {
    if (metric == name) return value;
  }
  return NAN;
}

}  // namespace downpour::testing
