// A whole job through the launcher, as a process test runs one: the config
// file at `path`, the built daemons, run folder `run_dir`, progress every
// second. Shared by the tests that train a job and then look at what it left
// (checkpoints, an export, a served model).
//
//   absl::StatusOr<LaunchSummary> s = testing::RunJob(path, dir + "/run");
//   ASSERT_THAT(s, IsOk());
//   const double auc = testing::FinalMetric(*s, "auc");
#ifndef DOWNPOUR_TESTS_RUN_JOB_H_
#define DOWNPOUR_TESTS_RUN_JOB_H_

#include <string>

#include "absl/status/statusor.h"
#include "deploy/launch_summary.h"

namespace downpour::testing {

// LoadConfig's error when the file is not a valid config, else RunCluster's
// result.
absl::StatusOr<LaunchSummary> RunJob(const std::string& path,
                                     const std::string& run_dir);

// The summary's final test metric `name` ("auc", "accuracy", ...), NAN when
// it has none.
double FinalMetric(const LaunchSummary& summary, const std::string& name);

}  // namespace downpour::testing

#endif  // DOWNPOUR_TESTS_RUN_JOB_H_
