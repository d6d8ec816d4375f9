// Starting, watching and stopping the daemons of one job.
#include "deploy/cluster_supervisor.h"

#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/exit_codes.h"
#include "common/file_util.h"
#include "common/host_port.h"
#include "common/subprocess.h"
#include "deploy/run_dir_guard.h"
#include "membership/coordinator_client.h"

namespace downpour {
namespace {

namespace fs = std::filesystem;

// launcher.worker_command with its program as a path (FindProgram).
// InvalidArgument naming the key when it is not an executable file.
absl::StatusOr<std::vector<std::string>> ResolveProgram(
    std::vector<std::string> command) {
  std::string& program = command[0];
  program = FindProgram(program);
  if (::access(program.c_str(), X_OK) == 0) return command;
  return absl::InvalidArgumentError(absl::StrCat(
      "launcher.worker_command: '", program,
      "' is not an executable file (give its path, or a program in PATH; a "
      "script runs as [/usr/bin/python3, script.py])"));
}

constexpr int kLogTailLines = 20;
// How often the daemons' exit is checked, and the coordinator's port file read.
constexpr absl::Duration kPollPeriod = absl::Milliseconds(100);
constexpr absl::Duration kPortFilePeriod = absl::Milliseconds(20);
constexpr absl::Duration kRemoteProbePeriod = absl::Milliseconds(200);
// The final figures matter: an unanswered last ClusterStatus is asked again
// this many times, this far apart.
constexpr int kFinalStatusRetries = 10;
constexpr absl::Duration kFinalStatusPeriod = absl::Milliseconds(200);

std::string Num(double v, int precision) {
  return std::isnan(v) ? "    -   " : absl::StrFormat("%.*f", precision, v);
}

// The steps the workers said they take in all (csv and libsvm files, whose
// rows the config does not count), once every worker has said; else 0.
int64_t ReportedPlan(const std::vector<WorkerResult>& workers) {
  int64_t planned = 0;
  for (const WorkerResult& w : workers) {
    if (w.planned_steps <= 0) return 0;
    planned += w.planned_steps;
  }
  return planned;
}

}  // namespace

// The live progress line and its events (a worker finished).
class ClusterSupervisor::Progress {
 public:
  Progress(const LaunchOptions& options, int64_t planned_steps, Task task)
      : line_(options.out, options.tty),
        planned_steps_(planned_steps),
        metric_(TaskMetricNames(task).front()) {}

  void Show(double elapsed, const std::vector<WorkerResult>& workers,
            int running) {
    ProgressFigures f;
    f.elapsed_s = elapsed;
    f.planned_steps =
        planned_steps_ > 0 ? planned_steps_ : ReportedPlan(workers);
    f.running = running;
    f.workers = static_cast<int>(workers.size());
    NoteMembership(elapsed, workers, &f);
    f.metric = metric_ == "accuracy" ? "acc" : metric_;
    double loss_sum = 0;
    int losses = 0;
    for (const WorkerResult& w : workers) {
      f.steps += w.step;
      f.data_bytes_read += w.data_bytes_read;
      f.data_bytes_total += w.data_bytes_total;
      const bool training = !w.finished && !w.drained;
      if (training) f.examples_per_sec += w.examples_per_sec;
      const auto it = w.metrics.find(metric_);
      const double value = it != w.metrics.end() ? it->second : NAN;
      if (std::isfinite(value) &&
          (std::isnan(f.best_accuracy) ||
           (HigherIsBetter(metric_) ? value > f.best_accuracy
                                    : value < f.best_accuracy))) {
        f.best_accuracy = value;
      }
      if (training && std::isfinite(w.loss)) {
        loss_sum += w.loss;
        ++losses;
      }
      if (std::isfinite(w.staleness_p99) &&
          !(w.staleness_p99 <= f.staleness_p99)) {
        f.staleness_p99 = w.staleness_p99;
      }
      if (w.finished && !w.drained && finished_.insert(w.index).second) {
        line_.Event(absl::StrFormat(
            "[%6.1f s] worker %d finished after %d steps: test %s, "
            "staleness p50/p99/max %s",
            elapsed, w.index, w.step, TestMetrics(w),
            FormatStaleness(w.staleness_p50, w.staleness_p99,
                            w.staleness_max)));
      }
    }
    if (losses > 0) f.mean_loss = loss_sum / losses;
    if (elapsed > last_elapsed_ && last_elapsed_ > 0) {
      f.steps_per_sec = (f.steps - last_steps_) / (elapsed - last_elapsed_);
    }
    last_elapsed_ = elapsed;
    last_steps_ = f.steps;
    f.data_bytes_per_sec = DataRate(elapsed, f.data_bytes_read);
    line_.Update(FormatProgress(f));
  }
  void Event(const std::string& text) { line_.Event(text); }
  void Finish() { line_.Finish(); }

 private:
  // Events for workers that joined or were drained since the last poll; the
  // joined ones that train count as running (the launcher did not start
  // them).
  void NoteMembership(double elapsed, const std::vector<WorkerResult>& workers,
                      ProgressFigures* f) {
    for (const WorkerResult& w : workers) {
      f->joined += w.joined ? 1 : 0;
      f->drained += w.drained ? 1 : 0;
      if (w.joined && w.alive && !w.finished) ++f->running;
      if (w.joined && joined_.insert(w.index).second) {
        line_.Event(absl::StrFormat(
            "[%6.1f s] worker %d joined the job: data parts [%s]", elapsed,
            w.index, absl::StrJoin(w.parts, ", ")));
      }
      if (w.drained && drained_.insert(w.index).second) {
        line_.Event(absl::StrFormat(
            "[%6.1f s] worker %d drained after %d steps: its data parts went "
            "to the other workers",
            elapsed, w.index, w.step));
      }
    }
  }

  // "accuracy 0.9612, logloss 0.1345", main metric first.
  std::string TestMetrics(const WorkerResult& w) const {
    std::vector<std::string> parts;
    if (w.metrics.count(metric_) > 0) {
      parts.push_back(
          absl::StrCat(metric_, " ", Num(w.metrics.at(metric_), 4)));
    }
    for (const auto& [name, value] : w.metrics) {
      if (name != metric_)
        parts.push_back(absl::StrCat(name, " ", Num(value, 4)));
    }
    if (parts.empty()) return absl::StrCat("accuracy ", Num(w.accuracy, 4));
    return absl::StrJoin(parts, ", ");
  }

  // Bytes per second the workers read since the first figure that had any
  // (a resumed job's workers count what they read before: not this run's).
  double DataRate(double elapsed, int64_t bytes_read) {
    if (bytes_read == 0) return 0;
    if (data_since_s_ < 0) {
      data_since_s_ = elapsed;
      data_since_bytes_ = bytes_read;
    }
    if (elapsed <= data_since_s_) return 0;
    return (bytes_read - data_since_bytes_) / (elapsed - data_since_s_);
  }

  ProgressLine line_;
  const int64_t planned_steps_;
  const std::string metric_;
  double last_elapsed_ = 0;
  int64_t last_steps_ = 0;
  double data_since_s_ = -1;  // DataRate's start; -1 before it
  int64_t data_since_bytes_ = 0;
  std::set<int> finished_;
  std::set<int> joined_;   // workers whose joining was shown
  std::set<int> drained_;  // workers whose draining was shown
};

ClusterSupervisor::ClusterSupervisor(const Config& config,
                                     const LaunchOptions& options)
    : config_(config),
      options_(options),
      clock_(options.clock != nullptr ? options.clock : Clock::Real()),
      start_(clock_->Now()),
      progress_(std::make_unique<Progress>(options, PlannedSteps(config),
                                           config.model.task)) {
  SetMark(config, options.accuracy_mark, &mark_);
}

ClusterSupervisor::~ClusterSupervisor() = default;

double ClusterSupervisor::elapsed_seconds() const {
  return absl::ToDoubleSeconds(clock_->Now() - start_);
}

void ClusterSupervisor::Event(const std::string& text) {
  progress_->Event(text);
}

std::string ClusterSupervisor::ExitReason(const Slot& slot) const {
  if (slot.reason_path.empty()) return "";
  absl::StatusOr<std::string> text = ReadFile(slot.reason_path);
  if (!text.ok()) return "";
  // A summary line: a message of several lines reads as one.
  return absl::StrReplaceAll(absl::StripAsciiWhitespace(*text),
                             {{"\r\n", " "}, {"\n", " "}});
}

std::string ClusterSupervisor::ExitLine(const Slot& slot, int status) const {
  const DaemonProcess& process = *slot.process;
  // started() is the process's real start time, so this one figure is real
  // time.
  const std::string ended =
      absl::StrFormat("%s %s after %.1f s", slot.name,
                      DescribeExit({status, process.term_signal(), false}),
                      absl::ToDoubleSeconds(absl::Now() - process.started()));
  const std::string reason = ExitReason(slot);
  if (!reason.empty()) return absl::StrCat(ended, ": ", reason);
  const std::string last = process.LogTail(1);
  if (last.empty()) {
    return absl::StrCat(ended, "; it gave no reason and its log (",
                        process.log_path(), ") is empty");
  }
  return absl::StrCat(ended, "; its log (", process.log_path(),
                      ") ends: ", last);
}

std::string ClusterSupervisor::Dead(const Slot& slot, int status) const {
  return absl::StrFormat("%s\nthe end of its log (%s):\n%s",
                         ExitLine(slot, status), slot.process->log_path(),
                         slot.process->LogTail(kLogTailLines));
}

// Starts slot.binary for the daemon that serves at slot.address (its host, in
// SSH mode) with the shared flags and slot.args.
absl::Status ClusterSupervisor::Launch(Slot& slot) {
  const bool remote = options_.remote.has_value();
  std::vector<std::string> flags = {
      "--config", remote ? options_.remote->config_path : options_.config_path};
  if (!options_.overrides.empty()) {
    flags.push_back("--set=" + absl::StrJoin(options_.overrides, ","));
  }
  const fs::path logs = fs::path(options_.run_dir) / "logs";
  const std::string file = absl::StrReplaceAll(slot.name, {{" ", "-"}});
  const std::string log = logs / (file + ".log");
  // A local daemon says why it gave up in a file of its own; the previous
  // start's reason must not be taken for this one's.
  slot.reason_path = remote ? "" : (logs / (file + ".reason")).string();
  if (!remote) {
    std::error_code error;
    fs::remove(slot.reason_path, error);
    flags.push_back("--exit_reason_file");
    flags.push_back(slot.reason_path);
  }
  for (const std::string& a : slot.args) flags.push_back(a);
  absl::StatusOr<std::unique_ptr<DaemonProcess>> process;
  if (remote) {
    process = DaemonProcess::StartRemote(slot.name, *options_.remote,
                                         HostOf(slot.address), slot.binary,
                                         flags, log);
  } else {
    std::vector<std::string> argv = slot.command;
    if (argv.empty()) argv.push_back(fs::path(options_.bin_dir) / slot.binary);
    for (std::string& f : flags) argv.push_back(std::move(f));
    process = DaemonProcess::StartLocal(slot.name, argv, log);
  }
  if (!process.ok()) return process.status();
  slot.process = *std::move(process);
  slot.down = false;
  WritePids();
  return absl::OkStatus();
}

void ClusterSupervisor::WritePids() {
  std::vector<PidEntry> entries = {
      {::getpid(), ProcessStartTime(::getpid()).value_or(0), "launcher"}};
  auto add = [&](const Slot& slot) {
    if (slot.process == nullptr || slot.process->Poll().has_value()) return;
    absl::StatusOr<unsigned long long> start =
        ProcessStartTime(slot.process->pid());
    if (start.ok()) entries.push_back({slot.process->pid(), *start, slot.name});
  };
  add(coordinator_);
  for (const auto* slots : {&ps_, &standbys_, &workers_}) {
    for (const Slot& slot : *slots) add(slot);
  }
  absl::Status written = WritePidFile(options_.run_dir, entries);
  if (!written.ok()) {
    Event(absl::StrCat("launcher: cannot write the pid file: ",
                       written.message()));
  }
}

// SSH mode: the coordinator listens where the config says (a fixed port); wait
// until it answers.
absl::Status ClusterSupervisor::WaitForRemoteCoordinator() {
  RpcSection rpc;
  rpc.deadline_s = 1;
  const absl::Time deadline = clock_->Now() + options_.startup_timeout;
  while (clock_->Now() < deadline) {
    if (auto status = coordinator_.process->Poll()) {
      return absl::AbortedError(Dead(coordinator_, *status));
    }
    // A connection of its own each probe: gRPC gives a connection attempt
    // at least 5 s (MakeChannel), so one begun before the coordinator
    // listened held every probe on a shared connection that long.
    membership::CoordinatorClient client(config_.cluster.coordinator, rpc,
                                         "launcher", /*fresh_connection=*/true);
    if (client.ClusterStatus().ok()) {
      coordinator_address_ = config_.cluster.coordinator;
      return absl::OkStatus();
    }
    clock_->SleepFor(kRemoteProbePeriod);
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "the coordinator did not answer at ", config_.cluster.coordinator,
      " within ", absl::FormatDuration(options_.startup_timeout), "; see ",
      coordinator_.process->log_path()));
}

// Starts the coordinator and learns the address the others should use (the
// bound port, which matters when the config asks for port 0).
absl::Status ClusterSupervisor::StartCoordinator() {
  const std::string port_file = fs::path(options_.run_dir) / "coordinator.port";
  fs::remove(port_file);
  coordinator_.kind = DaemonKind::kCoordinator;
  coordinator_.name = "coordinator";
  coordinator_.binary = "coordinator/coordinator";
  coordinator_.address = config_.cluster.coordinator;
  if (!options_.remote.has_value())
    coordinator_.args = {"--port_file", port_file};
  absl::Status started = Launch(coordinator_);
  if (!started.ok()) return started;
  if (options_.remote.has_value()) return WaitForRemoteCoordinator();
  const absl::Time deadline = clock_->Now() + options_.startup_timeout;
  while (clock_->Now() < deadline) {
    if (auto status = coordinator_.process->Poll()) {
      return absl::AbortedError(Dead(coordinator_, *status));
    }
    absl::StatusOr<std::string> text = ReadFile(port_file);
    int port = 0;
    if (text.ok() &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &port)) {
      const std::string& configured = config_.cluster.coordinator;
      coordinator_address_ =
          absl::StrCat(configured.substr(0, configured.rfind(':')), ":", port);
      // A restarted coordinator must be found where the others look.
      coordinator_.args.push_back("--listen=" + coordinator_address_);
      return absl::OkStatus();
    }
    clock_->SleepFor(kPortFilePeriod);
  }
  return absl::DeadlineExceededError(
      absl::StrCat("the coordinator did not start listening within ",
                   absl::FormatDuration(options_.startup_timeout), "; see ",
                   coordinator_.process->log_path()));
}

// launcher.worker_command: the workers' slots run it (local mode only).
absl::Status ClusterSupervisor::UseWorkerCommand() {
  if (config_.launcher.worker_command.empty()) return absl::OkStatus();
  if (options_.remote.has_value()) {
    return absl::InvalidArgumentError(
        "launcher.worker_command runs workers in local mode only: in SSH "
        "mode start them on their hosts with the launcher's flags "
        "(docs/PYTHON.md)");
  }
  absl::StatusOr<std::vector<std::string>> command =
      ResolveProgram(config_.launcher.worker_command);
  if (!command.ok()) return command.status();
  for (Slot& slot : workers_) slot.command = *command;
  return absl::OkStatus();
}

absl::Status ClusterSupervisor::Start() {
  absl::Status coordinator = StartCoordinator();
  if (!coordinator.ok()) return coordinator;
  auto slots =
      [&](DaemonKind kind, const std::string& role, const std::string& binary,
          const std::vector<std::string>& addresses, std::vector<Slot>* out) {
        for (size_t i = 0; i < addresses.size(); ++i) {
          Slot slot;
          slot.kind = kind;
          slot.index = static_cast<int>(i);
          slot.name = absl::StrCat(role, " ", i);
          slot.binary = binary;
          slot.address = addresses[i];
          if (kind == DaemonKind::kStandby) slot.args.push_back("--standby");
          for (std::string a :
               {std::string("--index"), absl::StrCat(i),
                std::string("--coordinator"), coordinator_address_}) {
            slot.args.push_back(std::move(a));
          }
          out->push_back(std::move(slot));
        }
      };
  slots(DaemonKind::kPs, "ps", "server/ps_server", config_.cluster.ps, &ps_);
  slots(DaemonKind::kStandby, "standby", "server/ps_server",
        config_.cluster.standby_ps, &standbys_);
  slots(DaemonKind::kWorker, "worker", "worker/ps_worker",
        config_.cluster.workers, &workers_);
  absl::Status command = UseWorkerCommand();
  if (!command.ok()) return command;
  // ps before standbys: a standby that registered first would be idle anyway,
  // but the shards should go to the daemons named for them.
  for (auto* group : {&ps_, &standbys_, &workers_}) {
    for (Slot& slot : *group) {
      absl::Status started = Launch(slot);
      if (!started.ok()) return started;
    }
  }
  if (options_.out != nullptr) {
    absl::FPrintF(options_.out,
                  "launcher: coordinator at %s, %d ps, %d standby, %d workers; "
                  "logs in %s\n",
                  coordinator_address_, ps_.size(), standbys_.size(),
                  workers_.size(),
                  (fs::path(options_.run_dir) / "logs").string());
    if (config_.cluster.replication >= 2 && !standbys_.empty() &&
        standbys_.size() < ps_.size()) {
      absl::FPrintF(options_.out,
                    "launcher: cluster.replication %d with %d standby for %d "
                    "ps: %d shard(s) start without a backup (a ps restarted "
                    "after a take-over rejoins as a spare and backs one up)\n",
                    config_.cluster.replication, standbys_.size(), ps_.size(),
                    ps_.size() - standbys_.size());
    }
  }
  return absl::OkStatus();
}

FaultRecord ClusterSupervisor::FaultOf(const Slot& slot, const DaemonExit& exit,
                                       double elapsed) {
  FaultRecord fault;
  fault.time_s = elapsed;
  fault.daemon = slot.name;
  fault.what = DescribeExit(exit);
  fault.exit_status = exit.status;
  fault.signal = exit.signal;
  return fault;
}

DaemonExit ClusterSupervisor::ExitOf(const Slot& slot, int status) {
  DaemonExit exit;
  exit.status = status;
  exit.signal = slot.process->term_signal();
  if (slot.kind == DaemonKind::kWorker && status != 0) {
    // Its last heartbeat came before it exited: a divergence is a training
    // result for the summary, not a crash.
    PollCoordinator(1);
    for (const WorkerResult& w : latest_) {
      if (w.index == slot.index && !w.diverged.empty()) exit.diverged = true;
    }
  }
  return exit;
}

void ClusterSupervisor::EndDiverged(Slot& slot) {
  for (const WorkerResult& w : latest_) {
    if (w.index == slot.index)
      progress_->Event(absl::StrCat("launcher: ", w.diverged));
  }
  slot.finished = true;
  diverged_ = true;
}

absl::Status ClusterSupervisor::ScheduleRestart(Slot& slot, FaultRecord fault,
                                                double elapsed,
                                                const std::string& ended,
                                                const std::string& why) {
  ++slot.restarts;
  // How long the process lived is real time (as in ExitLine); the wait
  // is on clock_, like every wait of the launcher.
  const RestartBackoff backoff =
      NextRestartBackoff(config_.launcher, slot.backoff_streak,
                         absl::Now() - slot.process->started());
  slot.backoff_streak = backoff.streak;
  fault.action = "restarted";
  progress_->Event(absl::StrFormat(
      "[%6.1f s] %s%s; restarting it%s (restart %d of %d)", elapsed, ended, why,
      backoff.delay > absl::ZeroDuration()
          ? absl::StrCat(" in ", absl::FormatDuration(backoff.delay))
          : "",
      slot.restarts, config_.launcher.max_restarts));
  // Scheduled, not slept: the others are watched meanwhile.
  slot.down = false;
  slot.restart_pending = true;
  slot.restart_at = clock_->Now() + backoff.delay;
  slot.restart_fault = faults_.size();
  faults_.push_back(std::move(fault));
  return RestartWhenDue(slot);
}

std::string ClusterSupervisor::JobOverReason() const {
  if (coordinator_address_.empty()) return "";
  RpcSection rpc;
  rpc.deadline_s = 1;
  membership::CoordinatorClient client(coordinator_address_, rpc, "launcher");
  absl::StatusOr<proto::ClusterStatusResponse> status = client.ClusterStatus();
  if (!status.ok() || !status->stop()) return "";
  return status->stop_reason();
}

RestartDecision ClusterSupervisor::DecideFor(const Slot& slot,
                                             const DaemonExit& exit) {
  RestartDecision decision =
      DecideRestart(config_.launcher, slot.kind, exit, slot.restarts);
  if (slot.kind != DaemonKind::kWorker ||
      decision.action != RestartAction::kRestart) {
    return decision;
  }
  const std::string over = JobOverReason();
  if (over.empty()) return decision;
  return {RestartAction::kLeaveDown,
          absl::StrCat("the job is over (", over,
                       "): a restart would only be told to stop")};
}

absl::Status ClusterSupervisor::HandleExit(Slot& slot, int status) {
  const DaemonExit exit = ExitOf(slot, status);
  const RestartDecision decision = DecideFor(slot, exit);
  if (decision.action == RestartAction::kFinished) {
    slot.finished = true;
    return absl::OkStatus();
  }
  if (decision.action == RestartAction::kDiverged) {
    EndDiverged(slot);
    return absl::OkStatus();
  }
  const double elapsed = elapsed_seconds();
  FaultRecord fault = FaultOf(slot, exit, elapsed);
  fault.reason = decision.reason;
  // "ps 1 exited with status 1: <what it said>", for the progress lines.
  const std::string said = ExitReason(slot);
  const std::string ended =
      absl::StrCat(slot.name, " ", fault.what, said.empty() ? "" : ": ", said);
  const std::string why =
      decision.reason.empty() ? "" : absl::StrCat("; ", decision.reason);
  slot.down = true;
  absl::Status result = absl::OkStatus();
  switch (decision.action) {
    case RestartAction::kRestart:
      return ScheduleRestart(slot, std::move(fault), elapsed, ended, why);
    case RestartAction::kLeaveDown:
      fault.action = "left down";
      progress_->Event(absl::StrFormat("[%6.1f s] %s%s", elapsed, ended, why));
      WritePids();
      break;
    default:
      fault.action = "gave up";
      progress_->Event(absl::StrFormat("[%6.1f s] %s%s; ending the job",
                                       elapsed, ended, why));
      result = absl::AbortedError(
          absl::StrCat(Dead(slot, status), "\n(", decision.reason, ")"));
      break;
  }
  faults_.push_back(std::move(fault));
  return result;
}

absl::Status ClusterSupervisor::RestartWhenDue(Slot& slot) {
  if (!slot.restart_pending || clock_->Now() < slot.restart_at) {
    return absl::OkStatus();
  }
  slot.restart_pending = false;
  absl::Status started = Launch(slot);
  if (started.ok()) return started;
  slot.down = true;
  FaultRecord& fault = faults_[slot.restart_fault];
  fault.action = "gave up";
  fault.reason = absl::StrCat("the restart failed: ", started.message());
  return absl::AbortedError(
      absl::StrCat(slot.name, " ", fault.what,
                   " and could not be restarted: ", started.message()));
}

absl::Status ClusterSupervisor::CheckDaemons(int* running) {
  *running = 0;
  auto check = [&](Slot& slot) -> absl::Status {
    if (slot.restart_pending) {
      // A worker waiting for its restart still owes its training.
      if (slot.kind == DaemonKind::kWorker) ++*running;
      return RestartWhenDue(slot);
    }
    if (slot.process == nullptr || slot.finished || slot.down)
      return absl::OkStatus();
    std::optional<int> status = slot.process->Poll();
    if (!status.has_value()) {
      if (slot.kind == DaemonKind::kWorker) ++*running;
      return absl::OkStatus();
    }
    absl::Status handled = HandleExit(slot, *status);
    if (slot.kind == DaemonKind::kWorker && !slot.finished && !slot.down)
      ++*running;
    return handled;
  };
  for (auto* group : {&workers_, &ps_, &standbys_}) {
    for (Slot& slot : *group) {
      absl::Status alive = check(slot);
      if (!alive.ok() || diverged_) return alive;
    }
  }
  return check(coordinator_);
}

void ClusterSupervisor::KeepRecoveryFigures(
    const proto::ClusterStatusResponse& status, double elapsed) {
  recoveries_.assign(status.recoveries().begin(), status.recoveries().end());
  acked_pushes_lost_ = status.acked_pushes_lost();
  acked_loss_final_ = status.acked_loss_final();
  replication_.assign(status.shard_replication().begin(),
                      status.shard_replication().end());
  outages_.assign(status.outages().begin(), status.outages().end());
  coordinator_offset_s_ = elapsed - status.uptime_seconds();
}

void ClusterSupervisor::AddRecoveryFigures(LaunchSummary* summary) const {
  summary->shard_recoveries = recoveries_;
  summary->acked_pushes_lost = acked_pushes_lost_;
  summary->acked_loss_final = acked_loss_final_;
  summary->shard_replication = replication_;
  summary->outages = outages_;
  summary->coordinator_offset_s = coordinator_offset_s_;
}

void ClusterSupervisor::ReadFinalFigures() {
  if (coordinator_address_.empty()) return;
  RpcSection rpc;
  rpc.deadline_s = 2;
  membership::CoordinatorClient client(coordinator_address_, rpc, "launcher");
  const double elapsed = elapsed_seconds();
  absl::StatusOr<proto::ClusterStatusResponse> status = client.ClusterStatus();
  if (!status.ok()) return;
  // The workers' final heartbeats too: what an interrupted job trained up
  // to its stop (examples by epoch), not the last poll's.
  latest_ = WorkerResults(*status);
  KeepRecoveryFigures(*status, elapsed);
}

void ClusterSupervisor::PollCoordinator(int running) {
  RpcSection rpc;
  rpc.deadline_s = 1;
  membership::CoordinatorClient client(coordinator_address_, rpc, "launcher");
  const double elapsed = elapsed_seconds();
  absl::StatusOr<proto::ClusterStatusResponse> status = client.ClusterStatus();
  for (int retry = 0;
       running == 0 && !status.ok() && retry < kFinalStatusRetries; ++retry) {
    clock_->SleepFor(kFinalStatusPeriod);
    status = client.ClusterStatus();
  }
  if (!status.ok()) return;
  latest_ = WorkerResults(*status);
  stop_reason_ = status->stop_reason();
  KeepRecoveryFigures(*status, elapsed);
  for (const proto::ShardReplication& r : status->shard_replication()) {
    const bool none = r.backup_standby() < 0;
    if (none && unbacked_.insert(r.shard()).second) {
      progress_->Event(absl::StrFormat(
          "[%6.1f s] shard %d has NO BACKUP (no standby free): losing its ps "
          "now loses the pushes since its last checkpoint",
          elapsed, r.shard()));
    } else if (!none && unbacked_.erase(r.shard()) > 0) {
      progress_->Event(
          absl::StrFormat("[%6.1f s] shard %d is backed up again by standby %d",
                          elapsed, r.shard(), r.backup_standby()));
    }
  }
  // The coordinator hears every report: when the mark is the job's target,
  // its record says when a worker first met it, however briefly (a poll
  // sees only the values of its moment), within a heartbeat.
  const JobTarget target = TargetOf(config_);
  if (status->target_reached_seconds() >= 0 &&
      target.metric == mark_.mark_metric && target.value == mark_.mark) {
    const double at =
        status->target_reached_seconds() + (elapsed - status->uptime_seconds());
    if (seconds_to_mark_ < 0) {
      progress_->Event(
          absl::StrFormat("[%6.1f s] worker %d reached test %s %.4f", at,
                          status->target_reached_by(), mark_.mark_metric,
                          status->target_reached_value()));
    }
    if (seconds_to_mark_ < 0 || at < seconds_to_mark_) seconds_to_mark_ = at;
  }
  for (const WorkerResult& w : latest_) {
    const auto it = w.metrics.find(mark_.mark_metric);
    const double value = it != w.metrics.end() ? it->second : NAN;
    if (seconds_to_mark_ < 0 &&
        ReachedTarget(mark_.mark_metric, value, mark_.mark)) {
      seconds_to_mark_ = elapsed;
      progress_->Event(
          absl::StrFormat("[%6.1f s] worker %d reached test %s %.4f", elapsed,
                          w.index, mark_.mark_metric, value));
    }
  }
  progress_->Show(elapsed, latest_, running);
}

absl::Status ClusterSupervisor::Watch() {
  absl::Time next_progress = clock_->Now() + options_.progress_period;
  while (true) {
    if (options_.interrupted()) {
      progress_->Event("launcher: interrupted; stopping the cluster in order");
      interrupted_ = true;
      return absl::OkStatus();
    }
    int running = 0;
    absl::Status alive = CheckDaemons(&running);
    if (!alive.ok() || diverged_) return alive;
    if (running == 0 || clock_->Now() >= next_progress) {
      PollCoordinator(running);
      next_progress = clock_->Now() + options_.progress_period;
    }
    if (running == 0) return absl::OkStatus();
    clock_->SleepFor(kPollPeriod);
  }
}

// A shard whose server died late in the job (or whose take-over had not
// finished when the workers did) has every acknowledged push only in its
// backup's replica until the backup takes over and writes the shard's
// checkpoint. Stopping the standbys before that loses them, and the summary
// would not know. So the ps are stopped once every shard has a live server
// and every take-over has settled (its new server reported as the shard's),
// within a bound.
bool ClusterSupervisor::AwaitShardsServed() {
  if (coordinator_address_.empty() || config_.cluster.ps.empty()) return false;
  RpcSection rpc;
  rpc.deadline_s = 1;
  membership::CoordinatorClient client(coordinator_address_, rpc, "launcher");
  // Counted in polls, not read off the clock (tests freeze theirs).
  const absl::Duration bound =
      absl::Seconds(3 * config_.heartbeat.timeout_s + 5);
  const int64_t polls = bound / kPollPeriod;
  std::string waiting;
  bool said = false;
  int unanswered = 0;
  for (int64_t poll = 0;; ++poll) {
    waiting.clear();
    absl::StatusOr<proto::ClusterStatusResponse> status =
        client.ClusterStatus();
    if (!status.ok()) {
      // A coordinator that is gone (its restart was cancelled) will not
      // answer: a few tries, not the whole bound.
      waiting = "the coordinator's answer";
      if (++unanswered >= kFinalStatusRetries) poll = polls;
    } else {
      for (int shard = 0; shard < static_cast<int>(config_.cluster.ps.size());
           ++shard) {
        bool served = false;
        for (const proto::MemberStatus& m : status->members()) {
          served =
              served || (m.role() == "ps" && m.index() == shard && m.alive());
        }
        if (!served)
          absl::StrAppend(&waiting, waiting.empty() ? "" : ", ",
                          "a live server of shard ", shard);
      }
      // Each shard's latest take-over: an earlier one whose server was
      // replaced in turn never settles, and waiting on it gains nothing.
      std::map<int, const proto::ShardRecovery*> latest;
      for (const proto::ShardRecovery& r : status->recoveries()) {
        latest[r.shard()] = &r;
      }
      for (const auto& [shard, r] : latest) {
        if (!r->settled()) {
          absl::StrAppend(&waiting, waiting.empty() ? "" : ", ", "shard ",
                          shard, "'s take-over by ", r->to_address());
        }
      }
    }
    if (waiting.empty()) return true;
    if (poll >= polls) break;
    if (!said) {
      progress_->Event(absl::StrFormat(
          "[%6.1f s] before stopping the ps: waiting for %s (at most %.0f s)",
          elapsed_seconds(), waiting, absl::ToDoubleSeconds(bound)));
      said = true;
    }
    clock_->SleepFor(kPollPeriod);
  }
  progress_->Event(absl::StrFormat(
      "[%6.1f s] stopping the ps without %s: acknowledged pushes held only by "
      "a backup's replica may be lost",
      elapsed_seconds(), waiting));
  return false;
}

void ClusterSupervisor::Stop(const std::function<void()>& before_coordinator) {
  progress_->Finish();
  // A restart still waiting out its backoff will not happen now.
  auto cancel_restart = [this](Slot& slot) {
    if (!slot.restart_pending) return;
    slot.restart_pending = false;
    slot.down = true;
    faults_[slot.restart_fault].action = "left down";
    faults_[slot.restart_fault].reason =
        "the job ended while its restart waited out its backoff";
  };
  for (auto* group : {&ps_, &standbys_, &workers_}) {
    for (Slot& slot : *group) cancel_restart(slot);
  }
  cancel_restart(coordinator_);
  auto stop = [](std::vector<Slot>& group, absl::Duration grace) {
    for (Slot& slot : group) {
      if (slot.process != nullptr) slot.process->Signal(SIGTERM);
    }
    for (Slot& slot : group) {
      if (slot.process != nullptr) slot.process->Stop(grace);
    }
  };
  stop(workers_, absl::Seconds(15));
  if (AwaitShardsServed()) {
    // A ps or standby that died as the job ended (its exit not seen while
    // the workers ran) is a fault the job survived when its shard has a
    // live server now: listed, not a failure.
    for (auto* group : {&ps_, &standbys_}) {
      for (Slot& slot : *group) {
        if (slot.process == nullptr || slot.down) continue;
        const std::optional<int> status = slot.process->Poll();
        if (!status.has_value() || *status == 0 || *status == kExitReplaced) {
          continue;
        }
        DaemonExit exit;
        exit.status = *status;
        exit.signal = slot.process->term_signal();
        FaultRecord fault = FaultOf(slot, exit, elapsed_seconds());
        fault.action = "left down";
        fault.reason = "the job was ending; every shard has a live server";
        progress_->Event(
            absl::StrFormat("[%6.1f s] %s %s as the job ended; "
                            "every shard has a live server",
                            fault.time_s, slot.name, fault.what));
        faults_.push_back(std::move(fault));
        slot.down = true;
      }
    }
  }
  // Standbys that took a shard over write its final checkpoint like a ps.
  stop(standbys_, absl::Seconds(15));
  stop(ps_, absl::Seconds(15));
  if (before_coordinator) before_coordinator();
  if (coordinator_.process != nullptr)
    coordinator_.process->Stop(absl::Seconds(5));
  std::error_code error;
  fs::remove(PidFilePath(options_.run_dir), error);
}

absl::Status ClusterSupervisor::PsExitStatus() {
  for (auto* group : {&ps_, &standbys_}) {
    for (Slot& slot : *group) {
      // Stop marked a restart still pending as down: its process is the one
      // that crashed, not one that was stopped.
      if (slot.process == nullptr || slot.down) continue;
      const int status = slot.process->Poll().value_or(0);
      // A ps that stood down because another daemon serves its shard (it
      // was replaced while stopped; restarted, it would rejoin as a spare)
      // ended in order: the shard's server wrote the final checkpoint. Seen
      // only here when it stood down as the job ended.
      if (status == kExitReplaced) continue;
      if (status != 0) return absl::AbortedError(Dead(slot, status));
    }
  }
  return absl::OkStatus();
}

}  // namespace downpour
