// Runs a whole cluster as child processes (or over SSH): the core of the
// `launcher` binary, and what the integration tests drive. RunCluster prepares
// the run folder, lets a ClusterSupervisor (deploy/cluster_supervisor.h) start,
// watch and stop the daemons, and writes the LaunchSummary
// (deploy/launch_summary.h).
#ifndef DOWNPOUR_DEPLOY_LAUNCHER_LIB_H_
#define DOWNPOUR_DEPLOY_LAUNCHER_LIB_H_

#include "absl/status/statusor.h"
#include "common/config.h"
#include "deploy/launch_options.h"
#include "deploy/launch_summary.h"

namespace downpour {

// Starts coordinator, ps and workers; returns when every worker has exited and
// the rest were stopped. A daemon that fails (non-zero exit, or a
// ps/coordinator that exits while workers train) stops the others and gives
// Aborted with its name, exit status and the tail of its log. A worker that
// exits after its training diverged is no such failure: the run ends (the
// others are stopped) and the summary carries it, as it does a final accuracy
// at chance level, in `failure` (JudgeTraining). Writes <run_dir>/summary.json,
// and (on success or failure, just before the coordinator stops)
// <run_dir>/history.json and <run_dir>/training.svg. Unless options.resume,
// first deletes the previous run's ps checkpoints (server::CheckpointPath) and
// coordinator state (coordinator::StateFilePath). With options.remote,
// InvalidArgument when an address in the config has port 0.
absl::StatusOr<LaunchSummary> RunCluster(const Config& config,
                                         const LaunchOptions& options);

}  // namespace downpour

#endif  // DOWNPOUR_DEPLOY_LAUNCHER_LIB_H_
