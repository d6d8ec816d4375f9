// Local and SSH-started daemons behind one interface for the launcher.
#include "deploy/daemon_process.h"

#include <signal.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/file_util.h"

namespace downpour {
namespace {

constexpr char kPidTag[] = "downpour-pid ";

Subprocess::Options ChildOptions() {
  Subprocess::Options options;
  options.own_process_group = true;
  options.parent_death_signal = SIGTERM;
  return options;
}

}  // namespace

std::string ShellQuote(const std::string& word) {
  const bool safe = !word.empty() &&
                    word.find_first_not_of(
                        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                        "0123456789_-./:=,@+%") == std::string::npos;
  if (safe) return word;
  return absl::StrCat("'", absl::StrReplaceAll(word, {{"'", "'\\''"}}), "'");
}

std::vector<std::string> RemoteArgv(const RemoteOptions& remote,
                                    const std::string& host,
                                    const std::string& binary,
                                    const std::vector<std::string>& args) {
  std::vector<std::string> words = {ShellQuote(remote.bin_dir + "/" + binary)};
  for (const std::string& a : args) words.push_back(ShellQuote(a));
  std::string command;
  if (!remote.work_dir.empty())
    command = absl::StrCat("cd ", ShellQuote(remote.work_dir), " && ");
  // exec keeps the shell's pid, so the pid echoed is the daemon's. A
  // watcher, off the session's output, reads the session's stdin (kept open
  // by the launcher: Subprocess::Options::stdin_pipe) and stops the daemon
  // at its end: when the launcher dies its ssh session ends, and without a
  // terminal nothing else would tell the remote daemon.
  absl::StrAppend(&command, "echo ", kPidTag,
                  "$$ && exec 3<&0 && { (cat <&3 >/dev/null 2>&1; kill -TERM "
                  "$$ 2>/dev/null) >/dev/null 2>&1 & } && exec ",
                  absl::StrJoin(words, " "), " 3<&-");
  std::vector<std::string> argv = remote.ssh;
  argv.push_back(host);
  argv.push_back(command);
  return argv;
}

DaemonProcess::DaemonProcess(std::unique_ptr<Subprocess> process,
                             std::optional<RemoteOptions> remote,
                             std::string host)
    : process_(std::move(process)),
      remote_(std::move(remote)),
      host_(std::move(host)) {}

DaemonProcess::~DaemonProcess() {
  if (remote_.has_value() && !process_->Poll().has_value()) Signal(SIGKILL);
}

absl::StatusOr<std::unique_ptr<DaemonProcess>> DaemonProcess::StartLocal(
    std::string name, const std::vector<std::string>& argv,
    const std::string& log_path) {
  auto process =
      Subprocess::Start(std::move(name), argv, log_path, ChildOptions());
  if (!process.ok()) return process.status();
  return std::unique_ptr<DaemonProcess>(
      new DaemonProcess(*std::move(process), std::nullopt, ""));
}

absl::StatusOr<std::unique_ptr<DaemonProcess>> DaemonProcess::StartRemote(
    std::string name, const RemoteOptions& remote, const std::string& host,
    const std::string& binary, const std::vector<std::string>& args,
    const std::string& log_path) {
  Subprocess::Options options = ChildOptions();
  options.stdin_pipe = true;  // its end stops the remote daemon (RemoteArgv)
  auto process =
      Subprocess::Start(std::move(name), RemoteArgv(remote, host, binary, args),
                        log_path, options);
  if (!process.ok()) return process.status();
  return std::unique_ptr<DaemonProcess>(
      new DaemonProcess(*std::move(process), remote, host));
}

std::optional<long> DaemonProcess::RemotePid() {
  if (remote_pid_.has_value()) return remote_pid_;
  absl::StatusOr<std::string> log = ReadFile(process_->log_path());
  if (!log.ok()) return std::nullopt;
  for (absl::string_view line : absl::StrSplit(*log, '\n')) {
    long pid = 0;
    if (absl::ConsumePrefix(&line, kPidTag) &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &pid)) {
      remote_pid_ = pid;
      break;
    }
  }
  return remote_pid_;
}

void DaemonProcess::Signal(int signal) {
  if (!remote_.has_value()) {
    process_->Signal(signal);
    return;
  }
  if (process_->Poll().has_value()) return;
  std::optional<long> pid = RemotePid();
  if (!pid.has_value()) {
    // Not started remotely yet (or ssh failed): ending the session is all we
    // can do.
    process_->Signal(signal == SIGKILL ? SIGKILL : SIGTERM);
    return;
  }
  std::vector<std::string> argv = remote_->ssh;
  argv.push_back(host_);
  argv.push_back(absl::StrCat("kill -", signal, " ", *pid));
  auto kill =
      Subprocess::Start(absl::StrCat("kill ", name()), argv, "/dev/null");
  if (kill.ok()) (*kill)->Wait(absl::Seconds(10));
}

int DaemonProcess::Stop(absl::Duration grace) {
  Signal(SIGTERM);
  if (std::optional<int> status = process_->Wait(grace)) return *status;
  Signal(SIGKILL);
  return process_->Stop(absl::Seconds(5));
}

}  // namespace downpour
