// Starting, watching and stopping the daemons of one job.
#include "deploy/cluster_supervisor.h"

#include <signal.h>

#include <cmath>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"
#include "coordinator/coordinator_client.h"

namespace downpour {
namespace {

namespace fs = std::filesystem;

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

}  // namespace

// The live progress line and its events (a worker finished).
class ClusterSupervisor::Progress {
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
      if (std::isfinite(w.staleness_p99) &&
          !(w.staleness_p99 <= f.staleness_p99)) {
        f.staleness_p99 = w.staleness_p99;
      }
      if (w.finished && finished_.insert(w.index).second) {
        line_.Event(absl::StrFormat(
            "[%6.1f s] worker %d finished after %d steps: test accuracy %s, "
            "staleness p50/p99/max %s",
            elapsed, w.index, w.step, Num(w.accuracy, 4),
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

ClusterSupervisor::ClusterSupervisor(const Config& config, const LaunchOptions& options)
    : config_(config),
      options_(options),
      clock_(options.clock != nullptr ? options.clock : Clock::Real()),
      start_(clock_->Now()),
      progress_(std::make_unique<Progress>(options, PlannedSteps(config))) {}

ClusterSupervisor::~ClusterSupervisor() = default;

double ClusterSupervisor::elapsed_seconds() const {
  return absl::ToDoubleSeconds(clock_->Now() - start_);
}

void ClusterSupervisor::Event(const std::string& text) { progress_->Event(text); }

std::string ClusterSupervisor::Dead(DaemonProcess& process, int status) const {
  // started() is the process's real start time, so this one figure is real time.
  return absl::StrFormat(
      "%s exited with status %d after %.1f s; the end of its log (%s):\n%s",
      process.name(), status,
      absl::ToDoubleSeconds(absl::Now() - process.started()), process.log_path(),
      process.LogTail(kLogTailLines));
}

// Starts `binary` for the daemon that serves at `address` (its host, in SSH
// mode) with the shared flags and `args`.
absl::StatusOr<std::unique_ptr<DaemonProcess>> ClusterSupervisor::Launch(
    const std::string& name, const std::string& binary, const std::string& address,
    std::vector<std::string> args) {
  const bool remote = options_.remote.has_value();
  std::vector<std::string> flags = {
      "--config", remote ? options_.remote->config_path : options_.config_path};
  if (!options_.overrides.empty()) {
    flags.push_back("--set=" + absl::StrJoin(options_.overrides, ","));
  }
  for (std::string& a : args) flags.push_back(std::move(a));
  const std::string log = fs::path(options_.run_dir) / "logs" /
                          (absl::StrReplaceAll(name, {{" ", "-"}}) + ".log");
  if (remote) {
    return DaemonProcess::StartRemote(name, *options_.remote, HostOf(address), binary,
                                      flags, log);
  }
  std::vector<std::string> argv = {fs::path(options_.bin_dir) / binary};
  for (std::string& f : flags) argv.push_back(std::move(f));
  return DaemonProcess::StartLocal(name, argv, log);
}

// SSH mode: the coordinator listens where the config says (a fixed port); wait
// until it answers.
absl::Status ClusterSupervisor::WaitForRemoteCoordinator() {
  RpcSection rpc;
  rpc.deadline_s = 1;
  coordinator::CoordinatorClient client(config_.cluster.coordinator, rpc, "launcher");
  const absl::Time deadline = clock_->Now() + options_.startup_timeout;
  while (clock_->Now() < deadline) {
    if (auto status = coordinator_->Poll()) {
      return absl::AbortedError(Dead(*coordinator_, *status));
    }
    if (client.ClusterStatus().ok()) {
      coordinator_address_ = config_.cluster.coordinator;
      return absl::OkStatus();
    }
    clock_->SleepFor(kRemoteProbePeriod);
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "the coordinator did not answer at ", config_.cluster.coordinator, " within ",
      absl::FormatDuration(options_.startup_timeout), "; see ",
      coordinator_->log_path()));
}

// Starts the coordinator and learns the address the others should use (the
// bound port, which matters when the config asks for port 0).
absl::Status ClusterSupervisor::StartCoordinator() {
  const std::string port_file = fs::path(options_.run_dir) / "coordinator.port";
  fs::remove(port_file);
  std::vector<std::string> args;
  if (!options_.remote.has_value()) args = {"--port_file", port_file};
  auto process = Launch("coordinator", "coordinator/coordinator",
                        config_.cluster.coordinator, std::move(args));
  if (!process.ok()) return process.status();
  coordinator_ = *std::move(process);
  if (options_.remote.has_value()) return WaitForRemoteCoordinator();
  const absl::Time deadline = clock_->Now() + options_.startup_timeout;
  while (clock_->Now() < deadline) {
    if (auto status = coordinator_->Poll()) {
      return absl::AbortedError(Dead(*coordinator_, *status));
    }
    absl::StatusOr<std::string> text = ReadFile(port_file);
    int port = 0;
    if (text.ok() && absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &port)) {
      const std::string& configured = config_.cluster.coordinator;
      coordinator_address_ =
          absl::StrCat(configured.substr(0, configured.rfind(':')), ":", port);
      return absl::OkStatus();
    }
    clock_->SleepFor(kPortFilePeriod);
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "the coordinator did not start listening within ",
      absl::FormatDuration(options_.startup_timeout), "; see ",
      coordinator_->log_path()));
}

absl::Status ClusterSupervisor::Start() {
  absl::Status coordinator = StartCoordinator();
  if (!coordinator.ok()) return coordinator;
  for (size_t i = 0; i < config_.cluster.ps.size(); ++i) {
    auto p = Launch(absl::StrCat("ps ", i), "server/ps_server", config_.cluster.ps[i],
                    {"--index", absl::StrCat(i), "--coordinator", coordinator_address_});
    if (!p.ok()) return p.status();
    ps_.push_back(*std::move(p));
  }
  for (size_t i = 0; i < config_.cluster.workers.size(); ++i) {
    auto w = Launch(absl::StrCat("worker ", i), "worker/ps_worker",
                    config_.cluster.workers[i],
                    {"--index", absl::StrCat(i), "--coordinator", coordinator_address_});
    if (!w.ok()) return w.status();
    workers_.push_back(*std::move(w));
  }
  if (options_.out != nullptr) {
    absl::FPrintF(options_.out,
                  "launcher: coordinator at %s, %d ps, %d workers; logs in %s\n",
                  coordinator_address_, ps_.size(), workers_.size(),
                  (fs::path(options_.run_dir) / "logs").string());
  }
  return absl::OkStatus();
}

absl::Status ClusterSupervisor::CheckDaemons(int* running) {
  *running = 0;
  for (size_t i = 0; i < workers_.size(); ++i) {
    std::optional<int> status = workers_[i]->Poll();
    if (!status.has_value()) {
      ++*running;
    } else if (*status != 0) {
      // Its last heartbeat came before it exited: a divergence is a training
      // result for the summary, not a crash.
      PollCoordinator(1);
      for (const WorkerResult& w : latest_) {
        if (w.index == static_cast<int>(i) && !w.diverged.empty()) {
          progress_->Event(absl::StrCat("launcher: ", w.diverged));
          diverged_ = true;
          return absl::OkStatus();
        }
      }
      return absl::AbortedError(Dead(*workers_[i], *status));
    }
  }
  for (auto& p : ps_) {
    if (auto status = p->Poll()) return absl::AbortedError(Dead(*p, *status));
  }
  if (auto status = coordinator_->Poll()) {
    return absl::AbortedError(Dead(*coordinator_, *status));
  }
  return absl::OkStatus();
}

void ClusterSupervisor::PollCoordinator(int running) {
  RpcSection rpc;
  rpc.deadline_s = 1;
  coordinator::CoordinatorClient client(coordinator_address_, rpc, "launcher");
  const double elapsed = elapsed_seconds();
  absl::StatusOr<proto::ClusterStatusResponse> status = client.ClusterStatus();
  for (int retry = 0; running == 0 && !status.ok() && retry < kFinalStatusRetries;
       ++retry) {
    clock_->SleepFor(kFinalStatusPeriod);
    status = client.ClusterStatus();
  }
  if (!status.ok()) return;
  latest_ = WorkerResults(*status);
  stop_reason_ = status->stop_reason();
  for (const WorkerResult& w : latest_) {
    if (seconds_to_mark_ < 0 && w.accuracy >= options_.accuracy_mark) {
      seconds_to_mark_ = elapsed;
      progress_->Event(absl::StrFormat("[%6.1f s] worker %d reached test accuracy %.4f",
                                       elapsed, w.index, w.accuracy));
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

void ClusterSupervisor::Stop(const std::function<void()>& before_coordinator) {
  progress_->Finish();
  for (auto& w : workers_) w->Signal(SIGTERM);
  for (auto& w : workers_) w->Stop(absl::Seconds(15));
  for (auto& p : ps_) p->Signal(SIGTERM);
  for (auto& p : ps_) p->Stop(absl::Seconds(15));
  if (before_coordinator) before_coordinator();
  if (coordinator_) coordinator_->Stop(absl::Seconds(5));
}

absl::Status ClusterSupervisor::PsExitStatus() {
  for (auto& p : ps_) {
    const int status = p->Poll().value_or(0);
    if (status != 0) return absl::AbortedError(Dead(*p, status));
  }
  return absl::OkStatus();
}

}  // namespace downpour
