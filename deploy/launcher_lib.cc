// Local cluster supervision.
#include "deploy/launcher_lib.h"

#include <signal.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"
#include "common/subprocess.h"
#include "coordinator/coordinator_client.h"
#include "deploy/daemon_process.h"
#include "deploy/progress_line.h"
#include "tools/json_output.h"
#include "tools/training_plot.h"

namespace downpour {
namespace {

namespace fs = std::filesystem;

constexpr int kLogTailLines = 20;

struct Cluster {
  std::unique_ptr<DaemonProcess> coordinator;
  std::vector<std::unique_ptr<DaemonProcess>> ps;
  std::vector<std::unique_ptr<DaemonProcess>> workers;
};

std::string Dead(DaemonProcess& process, int status) {
  return absl::StrFormat(
      "%s exited with status %d after %.1f s; the end of its log (%s):\n%s",
      process.name(), status,
      absl::ToDoubleSeconds(absl::Now() - process.started()), process.log_path(),
      process.LogTail(kLogTailLines));
}

// Stops workers first (they push what they owe), then ps (final checkpoint), then
// the coordinator; `before_coordinator` runs just before that (it still answers).
void StopInOrder(Cluster& cluster,
                 const std::function<void()>& before_coordinator = nullptr) {
  for (auto& w : cluster.workers) w->Signal(SIGTERM);
  for (auto& w : cluster.workers) w->Stop(absl::Seconds(15));
  for (auto& p : cluster.ps) p->Signal(SIGTERM);
  for (auto& p : cluster.ps) p->Stop(absl::Seconds(15));
  if (before_coordinator) before_coordinator();
  if (cluster.coordinator) cluster.coordinator->Stop(absl::Seconds(5));
}

// Starts `binary` for the daemon that serves at `address` (its host, in SSH
// mode) with the shared flags and `args`.
absl::StatusOr<std::unique_ptr<DaemonProcess>> Launch(
    const LaunchOptions& options, const std::string& name, const std::string& binary,
    const std::string& address, std::vector<std::string> args) {
  const bool remote = options.remote.has_value();
  std::vector<std::string> flags = {
      "--config", remote ? options.remote->config_path : options.config_path};
  if (!options.overrides.empty()) {
    flags.push_back("--set=" + absl::StrJoin(options.overrides, ","));
  }
  for (std::string& a : args) flags.push_back(std::move(a));
  const std::string log = fs::path(options.run_dir) / "logs" /
                          (absl::StrReplaceAll(name, {{" ", "-"}}) + ".log");
  if (remote) {
    return DaemonProcess::StartRemote(name, *options.remote, HostOf(address), binary,
                                      flags, log);
  }
  std::vector<std::string> argv = {fs::path(options.bin_dir) / binary};
  for (std::string& f : flags) argv.push_back(std::move(f));
  return DaemonProcess::StartLocal(name, argv, log);
}

// SSH mode: the coordinator listens where the config says (a fixed port); wait
// until it answers.
absl::StatusOr<std::string> WaitForRemoteCoordinator(const Config& config,
                                                     const LaunchOptions& options,
                                                     DaemonProcess& process) {
  RpcSection rpc;
  rpc.deadline_s = 1;
  coordinator::CoordinatorClient client(config.cluster.coordinator, rpc, "launcher");
  const absl::Time deadline = absl::Now() + options.startup_timeout;
  while (absl::Now() < deadline) {
    if (auto status = process.Poll()) return absl::AbortedError(Dead(process, *status));
    if (client.ClusterStatus().ok()) return config.cluster.coordinator;
    absl::SleepFor(absl::Milliseconds(200));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "the coordinator did not answer at ", config.cluster.coordinator, " within ",
      absl::FormatDuration(options.startup_timeout), "; see ", process.log_path()));
}

// Starts the coordinator and returns the address the others should use (the
// bound port, which matters when the config asks for port 0).
absl::StatusOr<std::string> StartCoordinator(const Config& config,
                                             const LaunchOptions& options,
                                             Cluster& cluster) {
  const std::string port_file = fs::path(options.run_dir) / "coordinator.port";
  fs::remove(port_file);
  if (options.remote.has_value()) {
    auto process = Launch(options, "coordinator", "coordinator/coordinator",
                          config.cluster.coordinator, {});
    if (!process.ok()) return process.status();
    cluster.coordinator = *std::move(process);
    return WaitForRemoteCoordinator(config, options, *cluster.coordinator);
  }
  auto process = Launch(options, "coordinator", "coordinator/coordinator",
                        config.cluster.coordinator, {"--port_file", port_file});
  if (!process.ok()) return process.status();
  cluster.coordinator = *std::move(process);
  const absl::Time deadline = absl::Now() + options.startup_timeout;
  while (absl::Now() < deadline) {
    if (auto status = cluster.coordinator->Poll()) {
      return absl::AbortedError(Dead(*cluster.coordinator, *status));
    }
    absl::StatusOr<std::string> text = ReadFile(port_file);
    int port = 0;
    if (text.ok() && absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &port)) {
      const std::string host = config.cluster.coordinator.substr(
          0, config.cluster.coordinator.rfind(':'));
      return absl::StrCat(host, ":", port);
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "the coordinator did not start listening within ",
      absl::FormatDuration(options.startup_timeout), "; see ",
      cluster.coordinator->log_path()));
}

std::vector<WorkerResult> Workers(const proto::ClusterStatusResponse& status) {
  std::vector<WorkerResult> workers;
  for (const proto::MemberStatus& m : status.members()) {
    if (m.role() != "worker") continue;
    const proto::MemberReport& r = m.report();
    // Before its first report a worker's figures are proto defaults, not zeros.
    const bool reported = r.step() > 0 || r.finished();
    workers.push_back({m.index(), static_cast<int64_t>(r.step()),
                       static_cast<int64_t>(r.examples()), r.examples_per_sec(),
                       reported ? r.loss() : NAN, reported ? r.accuracy() : NAN,
                       r.finished()});
  }
  return workers;
}

std::string Num(double v, int precision) {
  return std::isnan(v) ? "    -   " : absl::StrFormat("%.*f", precision, v);
}

// The live progress line and its events (a worker finished).
class Progress {
 public:
  Progress(const LaunchOptions& options, int64_t planned_steps)
      : line_(options.out, options.tty), planned_steps_(planned_steps) {}

  void Show(double elapsed, const std::vector<WorkerResult>& workers, int running) {
    ProgressFigures f;
    f.elapsed_s = elapsed;
    f.planned_steps = planned_steps_;
    f.running = running;
    f.workers = static_cast<int>(workers.size());
    double loss_sum = 0;
    int losses = 0;
    for (const WorkerResult& w : workers) {
      f.steps += w.step;
      if (!w.finished) f.examples_per_sec += w.examples_per_sec;
      if (std::isfinite(w.accuracy) && !(w.accuracy <= f.best_accuracy)) {
        f.best_accuracy = w.accuracy;
      }
      if (!w.finished && std::isfinite(w.loss)) {
        loss_sum += w.loss;
        ++losses;
      }
      if (w.finished && finished_.insert(w.index).second) {
        line_.Event(absl::StrFormat("[%6.1f s] worker %d finished after %d steps: test "
                                    "accuracy %s",
                                    elapsed, w.index, w.step, Num(w.accuracy, 4)));
      }
    }
    if (losses > 0) f.mean_loss = loss_sum / losses;
    if (elapsed > last_elapsed_ && last_elapsed_ > 0) {
      f.steps_per_sec = (f.steps - last_steps_) / (elapsed - last_elapsed_);
    }
    last_elapsed_ = elapsed;
    last_steps_ = f.steps;
    line_.Update(FormatProgress(f));
  }
  void Event(const std::string& text) { line_.Event(text); }
  void Finish() { line_.Finish(); }

 private:
  ProgressLine line_;
  const int64_t planned_steps_;
  double last_elapsed_ = 0;
  int64_t last_steps_ = 0;
  std::set<int> finished_;
};

// Saves the coordinator's metrics history and the curves drawn from it into
// the run folder; says where (or why not) on the progress output.
void SaveHistory(const std::string& coordinator, const std::string& run_dir,
                 Progress& progress, LaunchSummary* summary) {
  if (coordinator.empty()) return;
  RpcSection rpc;
  rpc.deadline_s = 5;
  coordinator::CoordinatorClient client(coordinator, rpc, "launcher");
  absl::StatusOr<proto::GetHistoryResponse> history = client.History(0);
  if (!history.ok()) {
    progress.Event(absl::StrCat("launcher: no metrics history saved: ",
                                history.status().message()));
    return;
  }
  const std::string json_path = (fs::path(run_dir) / "history.json").string();
  const std::string svg_path = (fs::path(run_dir) / "training.svg").string();
  std::ofstream(json_path) << tools::ToJson(*history);
  std::ofstream(svg_path) << tools::TrainingPlotSvg(*history);
  summary->history_path = json_path;
  summary->plot_path = svg_path;
}

// A new job starts from fresh parameters and an empty cluster: the previous
// run's checkpoints and coordinator state would otherwise be picked up.
void ForgetPreviousRun(const Config& config) {
  std::error_code error;
  if (!config.checkpoint.dir.empty() && fs::is_directory(config.checkpoint.dir, error)) {
    for (const auto& entry : fs::directory_iterator(config.checkpoint.dir, error)) {
      if (entry.path().extension() == ".ckpt") fs::remove(entry.path(), error);
    }
  }
  if (!config.coordinator.state_dir.empty()) {
    fs::remove(fs::path(config.coordinator.state_dir) / "coordinator.state", error);
  }
}

// ForgetPreviousRun on the hosts of an SSH-mode job (paths are relative to
// remote.work_dir there).
void ForgetPreviousRemoteRun(const Config& config, const RemoteOptions& remote) {
  std::set<std::string> hosts = {HostOf(config.cluster.coordinator)};
  for (const std::string& ps : config.cluster.ps) hosts.insert(HostOf(ps));
  std::string command = remote.work_dir.empty()
                            ? std::string("true")
                            : absl::StrCat("cd ", ShellQuote(remote.work_dir));
  if (!config.checkpoint.dir.empty()) {
    absl::StrAppend(&command, " && rm -f ", ShellQuote(config.checkpoint.dir), "/*.ckpt");
  }
  if (!config.coordinator.state_dir.empty()) {
    absl::StrAppend(&command, " && rm -f ",
                    ShellQuote(config.coordinator.state_dir + "/coordinator.state"));
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
  std::vector<std::pair<std::string, std::string>> addresses = {
      {"cluster.coordinator", config.cluster.coordinator}};
  for (size_t i = 0; i < config.cluster.ps.size(); ++i) {
    addresses.push_back({absl::StrCat("cluster.ps[", i, "]"), config.cluster.ps[i]});
  }
  for (size_t i = 0; i < config.cluster.workers.size(); ++i) {
    addresses.push_back({absl::StrCat("cluster.workers[", i, "]"), config.cluster.workers[i]});
  }
  for (const auto& [key, address] : addresses) {
    if (absl::EndsWith(address, ":0")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--ssh needs fixed ports, but ", key, " is ", address,
          ": give each daemon a port in ", config.path));
    }
  }
  return absl::OkStatus();
}

void WriteSummary(const LaunchSummary& summary) {
  std::ofstream out(summary.summary_path);
  out << SummaryJson(summary);
}

}  // namespace

absl::StatusOr<LaunchSummary> RunCluster(const Config& config,
                                         const LaunchOptions& options) {
  if (options.remote.has_value()) {
    absl::Status fixed = CheckFixedPorts(config);
    if (!fixed.ok()) return fixed;
  }
  std::error_code error;
  if (!options.resume && options.remote.has_value()) {
    ForgetPreviousRemoteRun(config, *options.remote);
  } else if (!options.resume) {
    ForgetPreviousRun(config);
  }
  fs::create_directories(fs::path(options.run_dir) / "logs", error);
  if (error) {
    return absl::UnavailableError(absl::StrCat("cannot create ", options.run_dir,
                                               "/logs: ", error.message()));
  }
  for (const auto& entry : fs::directory_iterator(fs::path(options.run_dir) / "logs")) {
    fs::remove(entry.path(), error);
  }
  const absl::Time start = absl::Now();
  LaunchSummary summary;
  summary.accuracy_mark = options.accuracy_mark;
  summary.log_dir = (fs::path(options.run_dir) / "logs").string();
  summary.checkpoint_dir = config.checkpoint.dir.empty() ? "(checkpoints off)"
                           : options.remote.has_value()
                               ? absl::StrCat(config.checkpoint.dir, " on each ps host")
                               : fs::absolute(config.checkpoint.dir).string();
  summary.summary_path = (fs::path(options.run_dir) / "summary.json").string();

  Cluster cluster;
  Progress progress(options, PlannedSteps(config));
  std::string coordinator_address;  // set once it listens
  auto save_history = [&] {
    progress.Finish();
    SaveHistory(coordinator_address, options.run_dir, progress, &summary);
  };
  auto fail = [&](absl::Status status) {
    StopInOrder(cluster, save_history);
    return status;
  };
  absl::StatusOr<std::string> coordinator = StartCoordinator(config, options, cluster);
  if (!coordinator.ok()) return fail(coordinator.status());
  coordinator_address = *coordinator;
  for (size_t i = 0; i < config.cluster.ps.size(); ++i) {
    auto p = Launch(options, absl::StrCat("ps ", i), "server/ps_server", config.cluster.ps[i],
                    {"--index", absl::StrCat(i), "--coordinator", *coordinator});
    if (!p.ok()) return fail(p.status());
    cluster.ps.push_back(*std::move(p));
  }
  for (size_t i = 0; i < config.cluster.workers.size(); ++i) {
    auto w = Launch(options, absl::StrCat("worker ", i), "worker/ps_worker",
                    config.cluster.workers[i],
                    {"--index", absl::StrCat(i), "--coordinator", *coordinator});
    if (!w.ok()) return fail(w.status());
    cluster.workers.push_back(*std::move(w));
  }
  if (options.out != nullptr) {
    absl::FPrintF(options.out,
                  "launcher: coordinator at %s, %d ps, %d workers; logs in %s\n",
                  *coordinator, cluster.ps.size(), cluster.workers.size(),
                  summary.log_dir);
  }

  RpcSection rpc;
  rpc.deadline_s = 1;
  coordinator::CoordinatorClient client(*coordinator, rpc, "launcher");
  absl::Time next_progress = absl::Now() + options.progress_period;
  std::vector<WorkerResult> latest;
  while (true) {
    if (options.interrupted()) {
      progress.Event("launcher: interrupted; stopping the cluster in order");
      summary.interrupted = true;
      break;
    }
    int running = 0;
    for (auto& w : cluster.workers) {
      std::optional<int> status = w->Poll();
      if (!status.has_value()) {
        ++running;
      } else if (*status != 0) {
        return fail(absl::AbortedError(Dead(*w, *status)));
      }
    }
    for (auto* group : {&cluster.ps}) {
      for (auto& p : *group) {
        if (auto status = p->Poll()) return fail(absl::AbortedError(Dead(*p, *status)));
      }
    }
    if (auto status = cluster.coordinator->Poll()) {
      return fail(absl::AbortedError(Dead(*cluster.coordinator, *status)));
    }
    const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
    if (running == 0 || absl::Now() >= next_progress) {
      absl::StatusOr<proto::ClusterStatusResponse> status = client.ClusterStatus();
      // The final figures matter: ask again if the last poll went unanswered.
      for (int retry = 0; running == 0 && !status.ok() && retry < 10; ++retry) {
        absl::SleepFor(absl::Milliseconds(200));
        status = client.ClusterStatus();
      }
      if (status.ok()) {
        latest = Workers(*status);
        summary.stop_reason = status->stop_reason();
        for (const WorkerResult& w : latest) {
          if (summary.seconds_to_mark < 0 && w.accuracy >= options.accuracy_mark) {
            summary.seconds_to_mark = elapsed;
            progress.Event(absl::StrFormat("[%6.1f s] worker %d reached test accuracy %.4f",
                                           elapsed, w.index, w.accuracy));
          }
        }
        progress.Show(elapsed, latest, running);
      }
      next_progress = absl::Now() + options.progress_period;
    }
    if (running == 0) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  StopInOrder(cluster, save_history);
  summary.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  summary.workers = latest;
  double accuracy_sum = 0;
  int evaluated = 0;
  for (const WorkerResult& w : latest) {
    summary.steps += w.step;
    summary.examples += w.examples;
    summary.examples_per_sec += w.examples_per_sec;
    if (w.finished && !std::isnan(w.accuracy)) {
      accuracy_sum += w.accuracy;
      ++evaluated;
    }
  }
  if (evaluated > 0) summary.final_accuracy = accuracy_sum / evaluated;
  for (auto& p : cluster.ps) {
    if (p->Poll().value_or(0) != 0) {
      return absl::AbortedError(Dead(*p, *p->Poll()));
    }
  }
  WriteSummary(summary);
  return summary;
}

std::string FormatSummary(const LaunchSummary& s) {
  std::string out = "\n";
  absl::StrAppendFormat(&out, "%s\n", s.interrupted ? "Training interrupted." : "Training done.");
  if (!s.stop_reason.empty()) absl::StrAppendFormat(&out, "  why it stopped:       %s\n", s.stop_reason);
  absl::StrAppendFormat(&out, "  final test accuracy:  %s (mean of the workers' evaluations of the final parameters)\n", Num(s.final_accuracy, 4));
  if (s.seconds_to_mark >= 0) {
    absl::StrAppendFormat(&out, "  reached %.2f after:   %.1f s\n", s.accuracy_mark,
                          s.seconds_to_mark);
  } else {
    absl::StrAppendFormat(&out, "  reached %.2f:         never\n", s.accuracy_mark);
  }
  absl::StrAppendFormat(&out, "  steps (all workers):  %d\n", s.steps);
  absl::StrAppendFormat(&out, "  examples/s (cluster): %.0f\n", s.examples_per_sec);
  absl::StrAppendFormat(&out, "  wall time:            %.1f s\n", s.seconds);
  absl::StrAppendFormat(&out, "  logs:                 %s\n", s.log_dir);
  absl::StrAppendFormat(&out, "  checkpoints:          %s\n", s.checkpoint_dir);
  absl::StrAppendFormat(&out, "  summary:              %s\n", s.summary_path);
  if (!s.history_path.empty()) {
    absl::StrAppendFormat(&out, "  metrics history:      %s\n", s.history_path);
    absl::StrAppendFormat(&out, "  training curves:      %s (open in a browser)\n",
                          s.plot_path);
  }
  return out;
}

std::string SummaryJson(const LaunchSummary& s) {
  auto number = [](double v) {
    return std::isfinite(v) ? absl::StrFormat("%.6g", v) : std::string("null");
  };
  std::vector<std::string> workers;
  for (const WorkerResult& w : s.workers) {
    workers.push_back(absl::StrFormat(
        "    {\"index\": %d, \"steps\": %d, \"examples\": %d, \"examples_per_sec\": %s, "
        "\"loss\": %s, \"accuracy\": %s, \"finished\": %s}",
        w.index, w.step, w.examples, number(w.examples_per_sec), number(w.loss),
        number(w.accuracy), w.finished ? "true" : "false"));
  }
  auto quote = [](const std::string& text) {
    return absl::StrCat("\"", absl::StrReplaceAll(text, {{"\\", "\\\\"}, {"\"", "\\\""}}), "\"");
  };
  return absl::StrCat(
      "{\n  \"accuracy\": ", number(s.final_accuracy), ",\n  \"steps\": ", s.steps,
      ",\n  \"seconds\": ", number(s.seconds), ",\n  \"examples_per_sec\": ",
      number(s.examples_per_sec), ",\n  \"seconds_to_accuracy_mark\": ",
      s.seconds_to_mark >= 0 ? number(s.seconds_to_mark) : "null",
      ",\n  \"accuracy_mark\": ", number(s.accuracy_mark),
      ",\n  \"stop_reason\": ", quote(s.stop_reason),
      ",\n  \"interrupted\": ", s.interrupted ? "true" : "false",
      ",\n  \"log_dir\": ", quote(s.log_dir),
      ",\n  \"checkpoint_dir\": ", quote(s.checkpoint_dir),
      ",\n  \"history\": ", quote(s.history_path),
      ",\n  \"plot\": ", quote(s.plot_path),
      ",\n  \"workers\": [\n", absl::StrJoin(workers, ",\n"), "\n  ]\n}\n");
}

}  // namespace downpour
