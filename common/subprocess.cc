// fork/exec with the child's output redirected to a log file.
#include "common/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"

namespace downpour {

std::string FindProgram(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(
           path != nullptr ? path : "/usr/bin:/bin", ':', absl::SkipEmpty())) {
    const std::string candidate = absl::StrCat(dir, "/", program);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return program;
}

absl::StatusOr<std::unique_ptr<Subprocess>> Subprocess::Start(
    std::string name, const std::vector<std::string>& argv,
    const std::string& log_path) {
  return Start(std::move(name), argv, log_path, Options());
}

absl::StatusOr<std::unique_ptr<Subprocess>> Subprocess::Start(
    std::string name, const std::vector<std::string>& argv,
    const std::string& log_path, const Options& options) {
  const int log =
      ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot open log file '", log_path, "': ", std::strerror(errno)));
  }
  if (::access(argv[0].c_str(), X_OK) != 0) {
    ::close(log);
    return absl::NotFoundError(absl::StrCat(
        "cannot run ", name, ": '", argv[0], "' is not an executable (",
        std::strerror(errno), "); build it first (bazel build //...)"));
  }
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int in[2] = {-1, -1};
  if (options.stdin_pipe && ::pipe2(in, O_CLOEXEC) != 0) {
    ::close(log);
    return absl::ResourceExhaustedError(
        absl::StrCat("pipe: ", std::strerror(errno)));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    if (in[0] >= 0) {
      ::close(in[0]);
      ::close(in[1]);
    }
    ::close(log);
    return absl::ResourceExhaustedError(
        absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    if (options.own_process_group) ::setpgid(0, 0);
    if (options.parent_death_signal != 0) {
      ::prctl(PR_SET_PDEATHSIG, options.parent_death_signal);
      // The parent may have died before prctl: then nobody would send it.
      if (::getppid() != parent) ::_exit(128 + options.parent_death_signal);
    }
    if (in[0] >= 0) ::dup2(in[0], STDIN_FILENO);
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    // The parent may block signals for sigwait; children start clean.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execv(args[0], args.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  // Also in the parent, so that the group exists before anyone signals it.
  if (options.own_process_group) ::setpgid(pid, pid);
  ::close(log);
  if (in[0] >= 0) ::close(in[0]);
  std::unique_ptr<Subprocess> process(new Subprocess(
      std::move(name), pid, log_path, options.own_process_group));
  process->stdin_fd_ = in[1];
  return process;
}

Subprocess::Subprocess(std::string name, pid_t pid, std::string log_path,
                       bool own_group)
    : name_(std::move(name)),
      pid_(pid),
      log_path_(std::move(log_path)),
      started_(absl::Now()),
      own_group_(own_group) {}

Subprocess::~Subprocess() {
  if (stdin_fd_ >= 0) ::close(stdin_fd_);
  if (!Poll().has_value()) {
    // What the child started (e.g. ssh's helpers) goes with it. Only while it
    // runs: once reaped, its pid may name someone else's group.
    ::kill(own_group_ ? -pid_ : pid_, SIGKILL);
    Wait(absl::Seconds(5));
  }
}

std::optional<int> Subprocess::Poll() {
  if (exit_status_.has_value()) return exit_status_;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_status_ =
        WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    term_signal_ = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  }
  return exit_status_;
}

std::optional<int> Subprocess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!Poll().has_value() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  return exit_status_;
}

void Subprocess::Signal(int signal) {
  if (!Poll().has_value()) ::kill(pid_, signal);
}

int Subprocess::Stop(absl::Duration grace) {
  Signal(SIGTERM);
  if (!Wait(grace).has_value()) {
    Signal(SIGKILL);
    Wait(absl::Seconds(5));
  }
  return exit_status_.value_or(-1);
}

std::string Subprocess::LogTail(int lines) const {
  absl::StatusOr<std::string> text = ReadFile(log_path_);
  if (!text.ok()) return "";
  std::vector<std::string> all = absl::StrSplit(*text, '\n');
  while (!all.empty() && all.back().empty()) all.pop_back();
  const size_t from =
      all.size() > static_cast<size_t>(lines) ? all.size() - lines : 0;
  return absl::StrJoin(all.begin() + from, all.end(), "\n");
}

}  // namespace downpour
