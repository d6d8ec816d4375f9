// A daemon the launcher runs: a child process on this machine, or one started
// on another host over SSH (the launcher's --ssh mode) whose output still lands
// in a local log file.
//
// Remote daemons run as `ssh HOST 'cd DIR && echo downpour-pid $$ && exec BIN
// ARGS'`: the SSH session lives exactly as long as the daemon, its exit status
// is the daemon's, and the pid on the log's first line lets the launcher signal
// the daemon itself (`ssh HOST kill -TERM PID`) so it shuts down in order,
// which killing the local ssh client would not do.
#ifndef DOWNPOUR_DEPLOY_DAEMON_PROCESS_H_
#define DOWNPOUR_DEPLOY_DAEMON_PROCESS_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/subprocess.h"

namespace downpour {

// How the launcher reaches other hosts.
struct RemoteOptions {
  // The command that runs `<ssh...> HOST COMMAND`; any argv prefix with ssh's
  // calling convention works (tests use `ip netns exec` behind a small script).
  std::vector<std::string> ssh = {"ssh", "-o", "BatchMode=yes"};
  // On the remote hosts: the folder holding coordinator/coordinator,
  // server/ps_server and worker/ps_worker, the cluster YAML, and the folder to
  // run in ("" = the login folder).
  std::string bin_dir;
  std::string config_path;
  std::string work_dir;
};

// One word for a POSIX shell: 'it'\''s' style quoting (bare when safe).
std::string ShellQuote(const std::string& word);

// The local argv that runs `bin_dir/binary args` on `host` through remote.ssh.
std::vector<std::string> RemoteArgv(const RemoteOptions& remote,
                                    const std::string& host,
                                    const std::string& binary,
                                    const std::vector<std::string>& args);

// Not thread-safe. The destructor kills (SIGKILL) a daemon still running.
// Local children (and the ssh clients of remote ones) lead a process group of
// their own and get SIGTERM when the launcher dies (Subprocess::Options), so
// that no daemon outlives a launcher killed with SIGKILL on this machine.
class DaemonProcess {
 public:
  // A child process; see Subprocess::Start.
  static absl::StatusOr<std::unique_ptr<DaemonProcess>> StartLocal(
      std::string name, const std::vector<std::string>& argv,
      const std::string& log_path);
  // `bin_dir/binary args` on `host` over SSH; output appended to `log_path`
  // here.
  static absl::StatusOr<std::unique_ptr<DaemonProcess>> StartRemote(
      std::string name, const RemoteOptions& remote, const std::string& host,
      const std::string& binary, const std::vector<std::string>& args,
      const std::string& log_path);
  ~DaemonProcess();

  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  const std::string& name() const { return process_->name(); }
  const std::string& log_path() const { return process_->log_path(); }
  absl::Time started() const { return process_->started(); }
  bool remote() const { return remote_.has_value(); }
  // The local process: the daemon, or the ssh client of a remote one.
  pid_t pid() const { return process_->pid(); }
  // Once it has ended: the signal that killed it (remote: ssh's), else 0.
  int term_signal() const { return process_->term_signal(); }

  // The exit status once it has ended (for a remote daemon: ssh's, which is
  // the daemon's, or 255 when ssh itself failed), else none.
  std::optional<int> Poll() { return process_->Poll(); }
  std::optional<int> Wait(absl::Duration timeout) {
    return process_->Wait(timeout);
  }
  // Sends `signal` to the daemon (remote: through `ssh HOST kill`).
  void Signal(int signal);
  // SIGTERM, wait up to `grace`, then SIGKILL. Returns the exit status.
  int Stop(absl::Duration grace);
  // The last `lines` lines of its (local) log.
  std::string LogTail(int lines) const { return process_->LogTail(lines); }

 private:
  DaemonProcess(std::unique_ptr<Subprocess> process,
                std::optional<RemoteOptions> remote, std::string host);
  // The remote pid from the log's first line, once it is there.
  std::optional<long> RemotePid();

  const std::unique_ptr<Subprocess> process_;
  const std::optional<RemoteOptions> remote_;
  const std::string host_;
  std::optional<long> remote_pid_;
};

}  // namespace downpour

#endif  // DOWNPOUR_DEPLOY_DAEMON_PROCESS_H_
