// Child processes for the launcher and the integration tests: start a daemon
// with its output in a log file, poll it, signal it, read the tail of its log.
#ifndef DOWNPOUR_COMMON_SUBPROCESS_H_
#define DOWNPOUR_COMMON_SUBPROCESS_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace downpour {

// `program` as a path Subprocess::Start can run (it does not search $PATH):
// a name without '/' is looked up in $PATH (/usr/bin:/bin when unset), as a
// shell does. `program` itself when it has a '/' or no entry holds an
// executable of that name.
std::string FindProgram(const std::string& program);

// Not thread-safe. The destructor kills (SIGKILL) and reaps a child still
// running (its whole process group when it has its own).
class Subprocess {
 public:
  struct Options {
    // The child leads a process group of its own: a terminal's Ctrl-C reaches
    // only the parent (which can then stop its children in order), and the
    // destructor kills the group, grandchildren included.
    bool own_process_group = false;
    // Non-zero: the signal the child gets when the parent dies
    // (PR_SET_PDEATHSIG), so that no child outlives a parent killed with
    // SIGKILL. Linux sends it when the *thread* that forked ends, so fork
    // from a thread that lives as long as the child should.
    int parent_death_signal = 0;
    // The child's stdin is a pipe whose writing end only this process holds
    // (close-on-exec, so no other child inherits it): it reads EOF when
    // this process dies or closes it. Default: the child inherits stdin.
    bool stdin_pipe = false;
  };

  // Starts argv[0] with argv, stdout and stderr appended to `log_path`.
  // `name` is how messages refer to it ("ps 1").
  static absl::StatusOr<std::unique_ptr<Subprocess>> Start(
      std::string name, const std::vector<std::string>& argv,
      const std::string& log_path);
  static absl::StatusOr<std::unique_ptr<Subprocess>> Start(
      std::string name, const std::vector<std::string>& argv,
      const std::string& log_path, const Options& options);
  ~Subprocess();

  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  const std::string& name() const { return name_; }
  const std::string& log_path() const { return log_path_; }
  pid_t pid() const { return pid_; }
  absl::Time started() const { return started_; }

  // The exit status once it has ended (128 + signal when killed by one), else
  // none.
  std::optional<int> Poll();
  // Once it has ended: the signal that killed it, or 0 when it exited.
  int term_signal() const { return term_signal_; }
  // Waits up to `timeout` for it to end.
  std::optional<int> Wait(absl::Duration timeout);
  void Signal(int signal);
  // SIGTERM, wait up to `grace`, then SIGKILL. Returns the exit status.
  int Stop(absl::Duration grace);

  // The last `lines` lines of its log.
  std::string LogTail(int lines) const;

 private:
  Subprocess(std::string name, pid_t pid, std::string log_path, bool own_group);

  const std::string name_;
  const pid_t pid_;
  const std::string log_path_;
  const absl::Time started_;
  const bool own_group_;
  int stdin_fd_ = -1;  // Options::stdin_pipe: the writing end
  std::optional<int> exit_status_;
  int term_signal_ = 0;
};

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_SUBPROCESS_H_
