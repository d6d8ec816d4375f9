// Runs a whole cluster as child processes (or over SSH): the core of the
// `launcher` binary, and what the integration tests drive. RunCluster prepares
// the run folder, lets a ClusterSupervisor (deploy/cluster_supervisor.h) start,
// watch and stop the daemons, and writes the LaunchSummary
// (deploy/launch_summary.h).
#ifndef DOWNPOUR_DEPLOY_LAUNCHER_LIB_H_
#define DOWNPOUR_DEPLOY_LAUNCHER_LIB_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config.h"
#include "deploy/launch_options.h"
#include "deploy/launch_summary.h"

namespace downpour {

// Starts coordinator, ps, standbys and workers; returns when every worker has
// finished and the rest were stopped. First takes <run_dir>/launcher.lock
// (FailedPrecondition when another launcher holds it; nothing is written
// then) and stops the daemons an earlier launcher on this run folder left
// running (<run_dir>/launcher.pids; it says so on options.out). A daemon that
// dies is restarted by config.launcher's policy (ClusterSupervisor::Watch);
// one the policy gives up on, or a startup failure, stops the others and
// gives Aborted with its name, exit, its own reason (the daemon's
// --exit_reason_file, else its log's last line) and the tail of its log.
// summary.json is written whatever happens after the lock (its outcome
// "failed: <first line>" then, `failure` that first line), with the faults
// seen. A worker that
// exits after its training diverged is no such failure: the run ends (the
// others are stopped) and the summary carries it, as it does a final accuracy
// at chance level, in `failure` (JudgeTraining). Writes <run_dir>/summary.json,
// and (on success or failure, just before the coordinator stops)
// <run_dir>/history.json and <run_dir>/training.svg. Unless options.resume,
// first deletes the previous run's ps checkpoints (server::CheckpointPath) and
// coordinator state (coordinator::StateFilePath). With options.remote,
// InvalidArgument when an address in the config has port 0. The job's state
// goes under the run folder unless the config sets it (JobStateOverrides).
absl::StatusOr<LaunchSummary> RunCluster(const Config& config,
                                         const LaunchOptions& options);

// The --set overrides that keep a local job's state in its run folder:
// checkpoint.dir=<run_dir>/checkpoints and
// coordinator.state_dir=<run_dir>/coordinator, each only when neither the file
// nor an override sets that key (Config::explicit_keys). None with
// options.remote: the state lives on the daemons' hosts, relative to
// --remote_dir there.
std::vector<std::string> JobStateOverrides(const Config& config,
                                           const LaunchOptions& options);

}  // namespace downpour

#endif  // DOWNPOUR_DEPLOY_LAUNCHER_LIB_H_
