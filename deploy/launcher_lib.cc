// Local cluster supervision.
#include "deploy/launcher_lib.h"

#include <signal.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/subprocess.h"
#include "coordinator/coordinator_client.h"

namespace downpour {
namespace {

namespace fs = std::filesystem;

constexpr int kLogTailLines = 20;

struct Cluster {
  std::unique_ptr<Subprocess> coordinator;
  std::vector<std::unique_ptr<Subprocess>> ps;
  std::vector<std::unique_ptr<Subprocess>> workers;
};

std::string Dead(Subprocess& process, int status) {
  return absl::StrFormat(
      "%s exited with status %d after %.1f s; the end of its log (%s):\n%s",
      process.name(), status,
      absl::ToDoubleSeconds(absl::Now() - process.started()), process.log_path(),
      process.LogTail(kLogTailLines));
}

// Stops workers first (they push what they owe), then ps (final checkpoint), then
// the coordinator.
void StopInOrder(Cluster& cluster) {
  for (auto& w : cluster.workers) w->Signal(SIGTERM);
  for (auto& w : cluster.workers) w->Stop(absl::Seconds(15));
  for (auto& p : cluster.ps) p->Signal(SIGTERM);
  for (auto& p : cluster.ps) p->Stop(absl::Seconds(15));
  if (cluster.coordinator) cluster.coordinator->Stop(absl::Seconds(5));
}

absl::StatusOr<std::unique_ptr<Subprocess>> Launch(
    const LaunchOptions& options, const std::string& name, const std::string& binary,
    std::vector<std::string> args) {
  std::vector<std::string> argv = {fs::path(options.bin_dir) / binary, "--config",
                                   options.config_path};
  if (!options.overrides.empty()) {
    argv.push_back("--set=" + absl::StrJoin(options.overrides, ","));
  }
  for (std::string& a : args) argv.push_back(std::move(a));
  const std::string log = fs::path(options.run_dir) / "logs" /
                          (absl::StrReplaceAll(name, {{" ", "-"}}) + ".log");
  return Subprocess::Start(name, argv, log);
}

// Starts the coordinator and returns the address the others should use (the
// bound port, which matters when the config asks for port 0).
absl::StatusOr<std::string> StartCoordinator(const Config& config,
                                             const LaunchOptions& options,
                                             Cluster& cluster) {
  const std::string port_file = fs::path(options.run_dir) / "coordinator.port";
  fs::remove(port_file);
  auto process = Launch(options, "coordinator", "coordinator/coordinator",
                        {"--port_file", port_file});
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

void PrintProgress(std::FILE* out, double elapsed,
                   const std::vector<WorkerResult>& workers, int alive) {
  if (out == nullptr) return;
  double rate = 0, best = NAN;
  int64_t steps = 0;
  for (const WorkerResult& w : workers) {
    absl::FPrintF(out, "[%6.1f s] worker %d: step %6d | %7.0f ex/s | loss %s | test acc %s\n",
                  elapsed, w.index, w.step, w.examples_per_sec, Num(w.loss, 4),
                  Num(w.accuracy, 4));
    rate += w.examples_per_sec;
    steps += w.step;
    if (!std::isnan(w.accuracy) && !(w.accuracy <= best)) best = w.accuracy;
  }
  absl::FPrintF(out, "[%6.1f s] cluster : step %6d | %7.0f ex/s | best test acc %s | %d/%d workers running\n",
                elapsed, steps, rate, Num(best, 4), alive, workers.size());
  std::fflush(out);
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

void WriteSummary(const LaunchSummary& summary) {
  std::ofstream out(summary.summary_path);
  out << SummaryJson(summary);
}

}  // namespace

absl::StatusOr<LaunchSummary> RunCluster(const Config& config,
                                         const LaunchOptions& options) {
  std::error_code error;
  if (!options.resume) ForgetPreviousRun(config);
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
  summary.checkpoint_dir = config.checkpoint.dir.empty()
                               ? "(checkpoints off)"
                               : fs::absolute(config.checkpoint.dir).string();
  summary.summary_path = (fs::path(options.run_dir) / "summary.json").string();

  Cluster cluster;
  auto fail = [&](absl::Status status) {
    StopInOrder(cluster);
    return status;
  };
  absl::StatusOr<std::string> coordinator = StartCoordinator(config, options, cluster);
  if (!coordinator.ok()) return fail(coordinator.status());
  for (size_t i = 0; i < config.cluster.ps.size(); ++i) {
    auto p = Launch(options, absl::StrCat("ps ", i), "server/ps_server",
                    {"--index", absl::StrCat(i), "--coordinator", *coordinator});
    if (!p.ok()) return fail(p.status());
    cluster.ps.push_back(*std::move(p));
  }
  for (size_t i = 0; i < config.cluster.workers.size(); ++i) {
    auto w = Launch(options, absl::StrCat("worker ", i), "worker/ps_worker",
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
      if (options.out != nullptr) {
        absl::FPrintF(options.out, "launcher: interrupted; stopping the cluster in order\n");
      }
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
      if (status.ok()) {
        latest = Workers(*status);
        summary.stop_reason = status->stop_reason();
        for (const WorkerResult& w : latest) {
          if (summary.seconds_to_mark < 0 && w.accuracy >= options.accuracy_mark) {
            summary.seconds_to_mark = elapsed;
          }
        }
        if (running > 0) PrintProgress(options.out, elapsed, latest, running);
      }
      next_progress = absl::Now() + options.progress_period;
    }
    if (running == 0) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  StopInOrder(cluster);
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
      ",\n  \"workers\": [\n", absl::StrJoin(workers, ",\n"), "\n  ]\n}\n");
}

}  // namespace downpour
