// Daemon start-up and shutdown plumbing shared by ps_server, ps_worker and
// coordinator.
#include "rpc/daemon.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/fd_limit.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/parse_flags.h"
#include "rpc/security.h"

ABSL_FLAG(std::string, config, "",
          "cluster YAML file (required); see docs/CONFIG.md");
ABSL_FLAG(int, index, -1,
          "which ps / worker of the config this daemon is (0-based)");
ABSL_FLAG(std::vector<std::string>, set, {},
          "override config keys, comma-separated section.key=value pairs, "
          "e.g. --set training.steps=100,checkpoint.interval_s=5 (the flag may "
          "be repeated)");
ABSL_FLAG(std::string, coordinator, "",
          "coordinator host:port (overrides cluster.coordinator)");
ABSL_FLAG(
    std::string, advertise, "",
    "host:port to register with the coordinator when it differs from "
    "the listen address (NAT, containers); port 0 = the bound port. "
    "Default: the listen address, with a wildcard host (0.0.0.0) replaced "
    "by this machine's host name");
ABSL_FLAG(
    std::string, log_level, "",
    "log level: trace, debug, info, warn, error (overrides logging.level)");
ABSL_FLAG(std::string, port_file, "",
          "write the bound port to this file once serving (for launchers and "
          "tests that listen on port 0)");
ABSL_FLAG(
    std::string, exit_reason_file, "",
    "when this daemon gives up with a non-zero exit status (a corrupt "
    "checkpoint, a bad config, an unreachable coordinator), first write "
    "why to this file, atomically: the message it prints to stderr, "
    "without the leading \"<role> <index>: \". For supervisors that report "
    "the reason (deploy/launcher passes <run_dir>/logs/<name>.reason). No "
    "file after a crash or a signal, nor for a command line that fails to "
    "parse");

namespace downpour {
namespace {

// "<role> <index>" once InitDaemon has parsed the flags; names this daemon in
// messages from functions that are not given its role (WritePortFile).
std::string& DaemonName() {
  static std::string* name = new std::string("daemon");
  return *name;
}

sigset_t ShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

void BlockShutdownSignals() {
  const sigset_t set = ShutdownSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

// Between InitDaemon and WaitForShutdownSignal a daemon starts: it may wait
// for the coordinator for rpc.connect_timeout_s, or load a checkpoint, with
// SIGTERM/SIGINT blocked. This thread takes those signals meanwhile: nothing
// is served or owed yet, so the daemon says so and exits 0 at once.
struct StartupWatch {
  std::atomic<bool> stop{false};
  std::thread thread;
};

StartupWatch& Startup() {
  static StartupWatch* watch = new StartupWatch;
  return *watch;
}

void StartStartupWatch() {
  Startup().thread = std::thread([] {
    const sigset_t set = ShutdownSignals();
    while (!Startup().stop.load()) {
      timespec poll = {0, 50 * 1000 * 1000};
      const int signal = sigtimedwait(&set, nullptr, &poll);
      if (signal > 0 && !Startup().stop.load()) {
        Die(DaemonName(),
            absl::StrCat("signal ", signal, " (", strsignal(signal),
                         ") while starting: stopping before serving "
                         "(nothing to flush)"),
            0);
      }
      // A signal taken just as WaitForShutdownSignal took over is raised
      // again for it (it stays blocked, so it waits as pending).
      if (signal > 0) ::kill(::getpid(), signal);
    }
  });
}

void StopStartupWatch() {
  if (!Startup().thread.joinable()) return;
  Startup().stop.store(true);
  Startup().thread.join();
}

// Sets --help to list our flags only, parses the flags and returns the
// daemon's role; dies on a stray argument.
std::string ParseDaemonFlags(
    int argc, char** argv, const std::function<std::string()>& role_after_flags,
    const std::string& usage) {
  SetUsage(usage);
  std::vector<char*> rest = ParseFlags(argc, argv);
  const std::string role = role_after_flags();
  if (rest.size() > 1) {
    Die(role, absl::StrCat("unexpected argument '", rest[1], "'; see --help"),
        2);
  }
  return role;
}

// --index, which must be given exactly when the role has one; dies if not.
int CheckedIndex(const std::string& role, bool has_index) {
  const int index = absl::GetFlag(FLAGS_index);
  if (has_index && index < -1) {
    Die(role,
        absl::StrCat("--index must be 0 or more (which ", role,
                     " of the config), got ", index),
        2);
  }
  if (has_index && index < 0) {
    Die(role, "--index N is required (which " + role + " of the config)", 2);
  }
  if (!has_index && index != -1) {
    Die(role,
        absl::StrCat("--index does not apply to the ", role,
                     " (there is one); remove it"),
        2);
  }
  return index;
}

// The config overrides: --set, the daemon's own, then --coordinator and
// --log_level.
std::vector<std::string> ConfigOverrides(
    std::vector<std::string> (*extra_overrides)()) {
  std::vector<std::string> overrides =
      MergeOverrideFragments(absl::GetFlag(FLAGS_set));
  if (extra_overrides != nullptr) {
    for (std::string& o : extra_overrides()) overrides.push_back(std::move(o));
  }
  if (!absl::GetFlag(FLAGS_coordinator).empty()) {
    overrides.push_back("cluster.coordinator=" +
                        absl::GetFlag(FLAGS_coordinator));
  }
  if (!absl::GetFlag(FLAGS_log_level).empty()) {
    overrides.push_back("logging.level=" + absl::GetFlag(FLAGS_log_level));
  }
  return overrides;
}

// Dies unless the config at `path` lists member `index` of the role.
void CheckIndexListed(const std::string& role, const std::string& path,
                      const Config& config, int index) {
  const std::string key = role == "ps"        ? "ps"
                          : role == "standby" ? "standby_ps"
                                              : "workers";
  const auto& members = role == "ps"        ? config.cluster.ps
                        : role == "standby" ? config.cluster.standby_ps
                                            : config.cluster.workers;
  // A worker that joined (--join) restarts with the index it was given: a
  // slot of cluster.max_workers beyond the listed ones. A ps that joined
  // does too: a shard beyond cluster.ps, which the coordinator knows (it
  // refuses an index it does not).
  if (role == "ps") return;
  const int slots = role == "worker" ? WorkerSlots(config.cluster)
                                     : static_cast<int>(members.size());
  if (index >= slots) {
    Die(role,
        absl::StrCat(
            "--index ", index, " but ", path, " lists ", members.size(), " ",
            role == "worker" ? "workers" : role, " in cluster.", key,
            role == "worker" && slots > static_cast<int>(members.size())
                ? absl::StrCat(" (", slots, " slots with cluster.max_workers)")
                : ""),
        2);
  }
}

// Installs the daemon's certificate and tokens; dies when they fail to load.
void InstallDaemonSecurity(const std::string& role, bool has_index,
                           const DaemonSetup& setup) {
  // The certificate is "{name}" in security.cert_file: ps-0, standby-1,
  // worker-2, coordinator. A ps and a standby call as ps, a worker as worker;
  // the coordinator reads members' Status (which process holds a place) as
  // reader, or admin when the config names no reader token.
  const std::string name =
      has_index ? absl::StrCat(role, "-", setup.index) : role;
  const CallerRole security_role =
      role == "ps" || role == "standby"                  ? CallerRole::kPs
      : role == "worker"                                 ? CallerRole::kWorker
      : !setup.config.security.reader_token_file.empty() ? CallerRole::kReader
      : !setup.config.security.admin_token_file.empty()  ? CallerRole::kAdmin
                                                         : CallerRole::kNone;
  absl::Status security =
      InstallSecurity(setup.config.security, name, security_role);
  if (!security.ok()) Die(role, std::string(security.message()), 2);
}

}  // namespace

void Die(const std::string& role, const std::string& message, int code) {
  std::fprintf(stderr, "%s: %s\n", role.c_str(), message.c_str());
  std::fflush(stderr);
  if (code != 0) {
    const std::string path = absl::GetFlag(FLAGS_exit_reason_file);
    const absl::Status written = WriteExitReasonTo(path, message);
    if (!written.ok()) {
      // The exit status and stderr still say it; the supervisor falls back
      // to the log.
      std::fprintf(stderr, "%s: --exit_reason_file %s: %s\n", role.c_str(),
                   path.c_str(), std::string(written.message()).c_str());
      std::fflush(stderr);
    }
  }
  std::_Exit(code);
}

DaemonSetup InitDaemon(int argc, char** argv, const std::string& role,
                       const std::string& usage, bool has_index,
                       std::vector<std::string> (*extra_overrides)()) {
  return InitDaemon(
      argc, argv, [&role] { return role; }, usage, has_index, extra_overrides);
}

DaemonSetup InitDaemon(int argc, char** argv,
                       const std::function<std::string()>& role_after_flags,
                       const std::string& usage, bool has_index,
                       std::vector<std::string> (*extra_overrides)()) {
  const std::string role =
      ParseDaemonFlags(argc, argv, role_after_flags, usage);
  BlockShutdownSignals();
  // glibc malloc is tuned for bulk transfer by the first gRPC server or
  // channel (TuneMallocForBulkTransfer in rpc/server_util.h). The 64 MiB
  // mmap threshold set here before was above glibc's maximum (32 MiB) and
  // silently refused.
  const std::string path = absl::GetFlag(FLAGS_config);
  if (path.empty()) Die(role, "--config FILE is required; see --help", 2);
  DaemonSetup setup;
  setup.index = CheckedIndex(role, has_index);
  absl::StatusOr<Config> config =
      LoadConfig(path, ConfigOverrides(extra_overrides));
  if (!config.ok()) Die(role, std::string(config.status().message()), 2);
  setup.config = *std::move(config);
  if (has_index) CheckIndexListed(role, path, setup.config, setup.index);
  setup.advertise = absl::GetFlag(FLAGS_advertise);
  const std::string prefix =
      has_index ? absl::StrCat(role, " ", setup.index) : role;
  DaemonName() = prefix;
  absl::Status logging =
      InitLogging(prefix, LogLevelName(setup.config.logging.level));
  if (!logging.ok()) Die(role, std::string(logging.message()), 2);
  InstallDaemonSecurity(role, has_index, setup);
  // Every connection holds a descriptor: a low soft limit would let idle
  // clients lock a daemon out of accepting more.
  SPDLOG_LOGGER_INFO(Log(Logger::kRpc), "{}", RaiseFdLimit());
  StartStartupWatch();
  return setup;
}

std::string AdvertisedAddress(const std::string& bound, std::string advertise) {
  const size_t colon = bound.rfind(':');
  const std::string port =
      colon == std::string::npos ? "" : bound.substr(colon + 1);
  if (!advertise.empty()) {
    if (absl::EndsWith(advertise, ":0")) {
      advertise = absl::StrCat(advertise.substr(0, advertise.size() - 1), port);
    }
    return advertise;
  }
  const std::string host = bound.substr(0, colon);
  if (host == "0.0.0.0" || host == "[::]" || host == "::" || host.empty()) {
    char name[256] = {};
    if (::gethostname(name, sizeof(name) - 1) == 0 && name[0] != '\0') {
      return absl::StrCat(name, ":", port);
    }
  }
  return bound;
}

absl::Status WritePortFileTo(const std::string& path, int port) {
  if (path.empty()) return absl::OkStatus();
  const std::string text = absl::StrCat(port, "\n");
  return WriteFileAtomically(
      path, "write port file", [&](int fd, const std::string& tmp) {
        return WriteAll(fd, text.data(), text.size(), "write port file", tmp);
      });
}

absl::Status WriteExitReasonTo(const std::string& path,
                               const std::string& message) {
  if (path.empty()) return absl::OkStatus();
  const std::string text = absl::StrCat(message, "\n");
  return WriteFileAtomically(path, "write exit reason file",
                             [&](int fd, const std::string& tmp) {
                               return WriteAll(fd, text.data(), text.size(),
                                               "write exit reason file", tmp);
                             });
}

bool BoolFlagInArgv(int argc, char** argv,
                    std::initializer_list<const char*> names) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    for (const char* flag : names) {
      if (arg == absl::StrCat("--", flag) ||
          arg == absl::StrCat("--", flag, "=true") ||
          arg == absl::StrCat("-", flag)) {
        return true;
      }
    }
  }
  return false;
}

void WritePortFile(int port) {
  absl::Status written = WritePortFileTo(absl::GetFlag(FLAGS_port_file), port);
  if (!written.ok()) {
    // Whoever asked for the port file waits on it; without it they would wait
    // out their timeout and blame the wrong thing.
    Die(DaemonName(),
        absl::StrCat("--port_file ", absl::GetFlag(FLAGS_port_file), ": ",
                     written.message()),
        1);
  }
}

int WaitForShutdownSignal(absl::Notification* done) {
  StopStartupWatch();
  const sigset_t set = ShutdownSignals();
  while (done == nullptr || !done->HasBeenNotified()) {
    timespec poll = {0, 100 * 1000 * 1000};
    const int signal = sigtimedwait(&set, nullptr, &poll);
    if (signal > 0) return signal;
  }
  return 0;
}

}  // namespace downpour
