// A launcher run: prepare the run folder, supervise the daemons, summarize.
#include "deploy/launcher_lib.h"

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/host_port.h"
#include "common/json.h"
#include "common/subprocess.h"
#include "coordinator/cluster_state.h"
#include "deploy/cluster_supervisor.h"
#include "deploy/run_dir_guard.h"
#include "membership/coordinator_client.h"
#include "server/checkpoint.h"
#include "tools/training_plot.h"

namespace downpour {
namespace {

namespace fs = std::filesystem;

// The files a new job must not pick up: each shard's checkpoints (the
// generations folder and the single file of earlier builds) and the
// coordinator's state, named by the code that writes them.
std::vector<std::string> PreviousRunFiles(const Config& config) {
  std::vector<std::string> files;
  if (!config.checkpoint.dir.empty()) {
    for (size_t shard = 0; shard < config.cluster.ps.size(); ++shard) {
      files.push_back(server::CheckpointPath(config.checkpoint.dir, shard));
      files.push_back(server::ShardCheckpointDir(config.checkpoint.dir, shard));
    }
  }
  const std::string state =
      coordinator::StateFilePath(config.coordinator.state_dir);
  if (!state.empty()) files.push_back(state);
  return files;
}

// A new job starts from fresh parameters and an empty cluster: the previous
// run's checkpoints and coordinator state would otherwise be picked up.
void ForgetPreviousRun(const Config& config) {
  std::error_code error;
  for (const std::string& file : PreviousRunFiles(config)) {
    fs::remove_all(file, error);
  }
}

// ForgetPreviousRun on the hosts of an SSH-mode job (paths are relative to
// remote.work_dir there): the coordinator's host and every ps host.
void ForgetPreviousRemoteRun(const Config& config,
                             const RemoteOptions& remote) {
  std::set<std::string> hosts;
  for (const ClusterAddress& a : ClusterAddresses(config.cluster)) {
    if (a.role == "coordinator" || a.role == "ps")
      hosts.insert(HostOf(a.address));
  }
  std::string command = remote.work_dir.empty()
                            ? std::string("true")
                            : absl::StrCat("cd ", ShellQuote(remote.work_dir));
  const std::vector<std::string> files = PreviousRunFiles(config);
  if (!files.empty()) {
    absl::StrAppend(&command, " && rm -rf");
    for (const std::string& file : files)
      absl::StrAppend(&command, " ", ShellQuote(file));
  }
  for (const std::string& host : hosts) {
    std::vector<std::string> argv = remote.ssh;
    argv.push_back(host);
    argv.push_back(command);
    auto forget = Subprocess::Start("forget " + host, argv, "/dev/null");
    if (forget.ok()) (*forget)->Wait(absl::Seconds(30));
  }
}

// SSH mode cannot read bound ports back from other hosts.
absl::Status CheckFixedPorts(const Config& config) {
  for (const ClusterAddress& a : ClusterAddresses(config.cluster)) {
    if (!absl::EndsWith(a.address, ":0")) continue;
    return absl::InvalidArgumentError(
        absl::StrCat("--ssh needs fixed ports, but ", a.key, " is ", a.address,
                     ": give each daemon a port in ", config.path));
  }
  return absl::OkStatus();
}

// Saves the coordinator's metrics history and the curves drawn from it into
// the run folder; says where (or why not) on the progress output.
void SaveHistory(ClusterSupervisor& supervisor, const std::string& run_dir,
                 LaunchSummary* summary) {
  if (supervisor.coordinator_address().empty()) return;
  RpcSection rpc;
  rpc.deadline_s = 5;
  membership::CoordinatorClient client(supervisor.coordinator_address(), rpc,
                                       "launcher");
  absl::StatusOr<proto::GetHistoryResponse> history = client.History(0);
  if (!history.ok()) {
    supervisor.Event(absl::StrCat("launcher: no metrics history saved: ",
                                  history.status().message()));
    return;
  }
  const std::string json_path = (fs::path(run_dir) / "history.json").string();
  const std::string svg_path = (fs::path(run_dir) / "training.svg").string();
  absl::Status saved = WriteFileAtomically(json_path, ToJson(*history));
  if (saved.ok())
    saved = WriteFileAtomically(svg_path, tools::TrainingPlotSvg(*history));
  if (!saved.ok()) {
    supervisor.Event(
        absl::StrCat("launcher: no metrics history saved: ", saved.message()));
    return;
  }
  summary->history_path = json_path;
  summary->plot_path = svg_path;
}

// Creates <run_dir>/logs, emptied of the previous run's logs.
absl::Status PrepareLogDir(const std::string& run_dir) {
  const fs::path logs = fs::path(run_dir) / "logs";
  std::error_code error;
  fs::create_directories(logs, error);
  if (error) {
    return absl::UnavailableError(
        absl::StrCat("cannot create ", logs.string(), ": ", error.message()));
  }
  for (const auto& entry : fs::directory_iterator(logs))
    fs::remove(entry.path(), error);
  return absl::OkStatus();
}

// Prints `text` on the progress output.
void Say(const LaunchOptions& options, const std::string& text) {
  if (options.out == nullptr) return;
  std::fprintf(options.out, "%s\n", text.c_str());
  std::fflush(options.out);
}

// Stops what an earlier launcher on this run folder left running, and says so.
void ClearLeftovers(const LaunchOptions& options) {
  std::string launcher = "an earlier launcher";
  for (const PidEntry& e : ReadPidFile(options.run_dir)) {
    if (e.name == "launcher")
      launcher = absl::StrCat("an earlier launcher (pid ", e.pid, ")");
  }
  const std::vector<PidEntry> stopped =
      StopLeftoverDaemons(options.run_dir, absl::Seconds(10));
  if (stopped.empty()) return;
  std::vector<std::string> names;
  for (const PidEntry& e : stopped)
    names.push_back(absl::StrCat(e.name, " pid ", e.pid));
  Say(options,
      absl::StrCat("launcher: stopped ", stopped.size(),
                   stopped.size() == 1 ? " daemon" : " daemons", " left by ",
                   launcher, ": ", absl::StrJoin(names, ", ")));
}

// The first line of a status message: which daemon ended, how, and why
// (ClusterSupervisor adds the log's tail below it).
std::string FirstLine(absl::string_view message) {
  return std::string(message.substr(0, message.find('\n')));
}

// Adds JobStateOverrides to the job's own copies of the config and options:
// its state goes under the run folder.
void PlaceJobState(const Config& user_config, const LaunchOptions& user_options,
                   Config* config, LaunchOptions* options) {
  for (const std::string& assignment :
       JobStateOverrides(user_config, user_options)) {
    options->overrides.push_back(assignment);
    const std::string value = assignment.substr(assignment.find('=') + 1);
    if (absl::StartsWith(assignment, "checkpoint.dir="))
      config->checkpoint.dir = value;
    if (absl::StartsWith(assignment, "coordinator.state_dir=")) {
      config->coordinator.state_dir = value;
    }
  }
}

// The summary's parts known before the cluster starts: the mark and where
// the run's files go.
LaunchSummary NewSummary(const Config& config, const LaunchOptions& options) {
  LaunchSummary summary;
  SetMark(config, options.accuracy_mark, &summary);
  summary.log_dir = (fs::path(options.run_dir) / "logs").string();
  summary.checkpoint_dir =
      config.checkpoint.dir.empty() ? "(checkpoints off)"
      : options.remote.has_value()
          ? absl::StrCat(config.checkpoint.dir, " on each ps host")
          : fs::absolute(config.checkpoint.dir).string();
  summary.summary_path = (fs::path(options.run_dir) / "summary.json").string();
  return summary;
}

// The summary's figures and verdict once the cluster stopped with `status`.
void FinishSummary(ClusterSupervisor& supervisor, const absl::Status& status,
                   const Config& config, LaunchSummary* summary) {
  summary->seconds = supervisor.elapsed_seconds();
  summary->stop_reason = supervisor.stop_reason();
  summary->seconds_to_mark = supervisor.seconds_to_mark();
  summary->interrupted = supervisor.interrupted();
  summary->faults = supervisor.faults();
  supervisor.AddRecoveryFigures(summary);
  AddWorkerResults(supervisor.workers(), summary);
  if (status.ok()) {
    summary->failure = JudgeTraining(*summary, config);
  } else {
    // The daemon's own reason when it gave one (ClusterSupervisor::Watch).
    summary->failure = FirstLine(status.message());
    summary->job_failed = true;
  }
  summary->accuracy_note = AccuracyNote(config);
  summary->saturation_warning = SaturationNote(*summary, config);
  summary->outcome =
      SummaryOutcome(*summary, status.ok() ? "" : FirstLine(status.message()));
}

}  // namespace

std::vector<std::string> JobStateOverrides(const Config& config,
                                           const LaunchOptions& options) {
  std::vector<std::string> overrides;
  if (options.remote.has_value()) return overrides;
  const fs::path run_dir(options.run_dir);
  if (config.explicit_keys.count("checkpoint.dir") == 0) {
    overrides.push_back("checkpoint.dir=" + (run_dir / "checkpoints").string());
  }
  if (config.explicit_keys.count("coordinator.state_dir") == 0) {
    overrides.push_back("coordinator.state_dir=" +
                        (run_dir / "coordinator").string());
  }
  return overrides;
}

absl::StatusOr<LaunchSummary> RunCluster(const Config& user_config,
                                         const LaunchOptions& user_options) {
  if (user_options.remote.has_value()) {
    absl::Status fixed = CheckFixedPorts(user_config);
    if (!fixed.ok()) return fixed;
  }
  absl::StatusOr<std::unique_ptr<RunDirLock>> lock =
      RunDirLock::Acquire(user_options.run_dir);
  if (!lock.ok()) return lock.status();
  ClearLeftovers(user_options);

  // The job's own copies, with its state placed under the run folder.
  Config config = user_config;
  LaunchOptions options = user_options;
  PlaceJobState(user_config, user_options, &config, &options);

  if (!options.resume && options.remote.has_value()) {
    ForgetPreviousRemoteRun(config, *options.remote);
  } else if (!options.resume) {
    ForgetPreviousRun(config);
  }
  absl::Status logs = PrepareLogDir(options.run_dir);
  if (!logs.ok()) return logs;

  LaunchSummary summary = NewSummary(config, options);
  ClusterSupervisor supervisor(config, options);
  absl::Status status = supervisor.Start();
  if (status.ok()) status = supervisor.Watch();
  supervisor.Stop([&] {
    // The ps's final heartbeats (sent as they stopped) carry the final loss
    // counts.
    supervisor.ReadFinalFigures();
    SaveHistory(supervisor, options.run_dir, &summary);
  });
  if (status.ok()) status = supervisor.PsExitStatus();

  FinishSummary(supervisor, status, config, &summary);
  absl::Status written = WriteSummary(summary);
  if (!written.ok()) {
    supervisor.Event(absl::StrCat("launcher: cannot write the summary: ",
                                  written.message()));
  }
  if (!status.ok()) return status;
  return summary;
}

}  // namespace downpour
