// launcher: starts a local Downpour cluster from one YAML file, supervises it,
// shows progress, stops it cleanly and writes summary.json.
//
//   bazel-bin/deploy/launcher --config deploy/configs/mnist_local.yaml
//   --run_dir run
//
// Daemons start in order (coordinator, ps, standbys, workers), each with its
// log in <run_dir>/logs. A daemon that dies is restarted (launcher.restart,
// launcher.max_restarts); one it gives up on ends the run with a message and
// the tail of its log. Ctrl-C stops the cluster in order (workers flush their
// last gradient, ps write a final checkpoint). summary.json is written
// whatever happens; exit statuses are in docs/OPERATIONS.md.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/config.h"
#include "common/parse_flags.h"
#include "common/subprocess.h"
#include "deploy/launcher_lib.h"
#include "membership/coordinator_client.h"
#include "rpc/security.h"

ABSL_FLAG(std::string, config, "deploy/configs/mnist_local.yaml",
          "cluster YAML file");
ABSL_FLAG(std::string, run_dir, "run", "folder for logs/ and summary.json");
ABSL_FLAG(
    std::string, bin_dir, "",
    "folder holding server/ps_server, worker/ps_worker and "
    "coordinator/coordinator (default: next to this binary, i.e. bazel-bin)");
ABSL_FLAG(std::vector<std::string>, set, {},
          "config overrides passed to every daemon, section.key=value[,...]");
ABSL_FLAG(bool, resume, false,
          "continue the previous job: keep its ps checkpoints and coordinator "
          "state (default: delete them and start fresh)");
ABSL_FLAG(double, progress_s, 2.0, "seconds between progress lines");
ABSL_FLAG(bool, fail_on_loss, false,
          "exit with status 4 when a shard's failover or restart lost "
          "acknowledged pushes (the outcome then reads 'succeeded with loss: "
          "N acknowledged pushes of shard S'); for scripts that must not "
          "accept a model missing acknowledged updates");
ABSL_FLAG(double, accuracy_mark, std::numeric_limits<double>::quiet_NaN(),
          "report when a worker's test accuracy first reaches this, in [0, 1] "
          "(default: the config's training.target_metric and target_value)");
ABSL_FLAG(
    bool, ssh, false,
    "start each daemon on the host of its address in the config, over SSH "
    "(fixed ports; the same YAML and binaries on every host); logs still "
    "come to --run_dir");
ABSL_FLAG(std::string, ssh_command, "ssh -o BatchMode=yes",
          "--ssh: the command that runs `<command> HOST SHELL-COMMAND`");
ABSL_FLAG(std::string, remote_bin_dir, "",
          "--ssh: folder holding the daemons on the remote hosts (default: "
          "--bin_dir)");
ABSL_FLAG(
    std::string, remote_config, "",
    "--ssh: the cluster YAML's path on the remote hosts (default: --config's "
    "absolute path)");
ABSL_FLAG(
    std::string, remote_dir, "",
    "--ssh: folder to run the daemons in on the remote hosts, against which "
    "relative paths in the config resolve (default: the login folder)");

namespace {

using namespace downpour;

// The run ended but training failed: a worker diverged, or the final accuracy
// is at chance level (LaunchSummary::failure). Documented in
// docs/OPERATIONS.md.
constexpr int kTrainingFailedExitCode = 3;
// The job succeeded but a failover lost acknowledged pushes, and
// --fail_on_loss was given.
constexpr int kLossExitCode = 4;

std::atomic<int> g_signal{0};

extern "C" void OnSignal(int signal) { g_signal.store(signal); }

[[noreturn]] void Fail(const std::string& message, int code) {
  std::fprintf(stderr, "launcher: %s\n", message.c_str());
  std::exit(code);
}

std::string DefaultBinDir() {
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? "bazel-bin" : self.parent_path().parent_path().string();
}

// The launcher's options from its flags; exits 2 naming the flag when one is
// out of range.
LaunchOptions OptionsFromFlags() {
  if (!(absl::GetFlag(FLAGS_progress_s) > 0 &&
        absl::GetFlag(FLAGS_progress_s) <= 3600)) {
    Fail(absl::StrCat("--progress_s must be in (0, 3600] seconds, got ",
                      absl::GetFlag(FLAGS_progress_s)),
         2);
  }
  const double mark = absl::GetFlag(FLAGS_accuracy_mark);
  if (!std::isnan(mark) && !(mark >= 0 && mark <= 1)) {
    Fail(absl::StrCat("--accuracy_mark must be in [0, 1], got ",
                      absl::GetFlag(FLAGS_accuracy_mark)),
         2);
  }
  LaunchOptions options;
  options.config_path =
      std::filesystem::absolute(absl::GetFlag(FLAGS_config)).string();
  options.overrides = MergeOverrideFragments(absl::GetFlag(FLAGS_set));
  options.run_dir =
      std::filesystem::absolute(absl::GetFlag(FLAGS_run_dir)).string();
  options.bin_dir = absl::GetFlag(FLAGS_bin_dir).empty()
                        ? DefaultBinDir()
                        : absl::GetFlag(FLAGS_bin_dir);
  options.resume = absl::GetFlag(FLAGS_resume);
  options.progress_period = absl::Seconds(absl::GetFlag(FLAGS_progress_s));
  options.accuracy_mark = absl::GetFlag(FLAGS_accuracy_mark);
  options.interrupted = [] { return g_signal.load() != 0; };
  options.out = stdout;
  options.tty = isatty(STDOUT_FILENO);
  if (absl::GetFlag(FLAGS_ssh)) {
    RemoteOptions remote;
    remote.ssh = absl::StrSplit(absl::GetFlag(FLAGS_ssh_command), ' ',
                                absl::SkipEmpty());
    if (remote.ssh.empty()) Fail("--ssh_command is empty", 2);
    remote.bin_dir = absl::GetFlag(FLAGS_remote_bin_dir).empty()
                         ? options.bin_dir
                         : absl::GetFlag(FLAGS_remote_bin_dir);
    remote.config_path = absl::GetFlag(FLAGS_remote_config).empty()
                             ? options.config_path
                             : absl::GetFlag(FLAGS_remote_config);
    remote.work_dir = absl::GetFlag(FLAGS_remote_dir);
    options.remote = remote;
  }
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  SetUsage(
      "launcher [--config FILE] [--run_dir DIR]: starts a local cluster "
      "(coordinator, ps shards, workers) from one YAML file, shows progress "
      "and "
      "writes DIR/summary.json");
  const std::vector<char*> args = ParseFlags(argc, argv);
  if (args.size() > 1) {
    Fail(absl::StrCat("unexpected argument '", args[1], "'; see --help"), 2);
  }
  const LaunchOptions options = OptionsFromFlags();

  absl::StatusOr<Config> config =
      LoadConfig(options.config_path, options.overrides);
  if (!config.ok()) Fail(std::string(config.status().message()), 2);
  // The launcher watches the job as a client: admin (or reader) token.
  if (absl::Status security = InstallSecurity(config->security, "client",
                                              ClientRole(config->security));
      !security.ok()) {
    Fail(std::string(security.message()), 2);
  }

  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  absl::StatusOr<LaunchSummary> summary = RunCluster(*config, options);
  if (!summary.ok()) {
    std::string message(summary.status().message());
    const std::string json =
        (std::filesystem::path(options.run_dir) / "summary.json").string();
    if (summary.status().code() != absl::StatusCode::kFailedPrecondition &&
        std::filesystem::exists(json)) {
      absl::StrAppend(&message, "\nlauncher: summary (outcome failed) in ",
                      json);
    }
    // Ctrl-C during a failing start still reads as interrupted.
    if (g_signal.load() != 0) Fail(message, 130);
    Fail(message,
         summary.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1);
  }
  std::fputs(FormatSummary(*summary).c_str(), stdout);
  if (!summary->failure.empty()) return kTrainingFailedExitCode;
  if (summary->interrupted) return 130;
  if (absl::GetFlag(FLAGS_fail_on_loss) && !LossNote(*summary).empty()) {
    std::fprintf(stderr,
                 "launcher: --fail_on_loss: the job lost %s; exit status %d\n",
                 LossNote(*summary).c_str(), kLossExitCode);
    return kLossExitCode;
  }
  return 0;
}
