// What keeps launchers on one run folder from stepping on each other: a lock
// (<run_dir>/launcher.lock, flock) held while a launcher runs, and a pid file
// (<run_dir>/launcher.pids) naming the daemons it started, so that the next
// launcher can stop those an earlier one left running when it was killed.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<RunDirLock> lock,
//   RunDirLock::Acquire(run_dir)); std::vector<PidEntry> stopped =
//   StopLeftoverDaemons(run_dir, absl::Seconds(10)); WritePidFile(run_dir,
//   entries);  // after every start and restart
#ifndef DOWNPOUR_DEPLOY_RUN_DIR_GUARD_H_
#define DOWNPOUR_DEPLOY_RUN_DIR_GUARD_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace downpour {

// An exclusive flock on <run_dir>/launcher.lock, released by the destructor
// (or by the kernel when the process dies, however it dies). Not thread-safe.
class RunDirLock {
 public:
  // FailedPrecondition when another process holds it: "another launcher (pid
  // N) is running on RUN_DIR: stop it first, or give this one another
  // --run_dir". Unavailable when the file cannot be created.
  static absl::StatusOr<std::unique_ptr<RunDirLock>> Acquire(
      const std::string& run_dir);
  ~RunDirLock();

  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;

 private:
  explicit RunDirLock(int fd) : fd_(fd) {}
  const int fd_;
};

// One process the pid file names. start_time is field 22 of /proc/PID/stat
// (clock ticks since boot), which tells the process from a later one that got
// the same pid.
struct PidEntry {
  pid_t pid = 0;
  unsigned long long start_time = 0;
  std::string name;  // "launcher", "coordinator", "ps 0", ...
};

// `pid`'s start time, or NotFound when no such process lives (a zombie counts
// as gone).
absl::StatusOr<unsigned long long> ProcessStartTime(pid_t pid);

// <run_dir>/launcher.pids.
std::string PidFilePath(const std::string& run_dir);

// Writes the entries, one "PID START_TIME NAME" line each, atomically.
absl::Status WritePidFile(const std::string& run_dir,
                          const std::vector<PidEntry>& entries);

// The entries of the pid file; none when it is absent. Lines that do not parse
// are skipped.
std::vector<PidEntry> ReadPidFile(const std::string& run_dir);

// Stops the processes of an earlier launcher's pid file that still run with
// the start time recorded (a pid reused by another program is left alone):
// SIGTERM (and SIGCONT, for one left stopped), then SIGKILL for those still
// there after `grace`. The "launcher" entry is never signalled; the caller
// holds the lock, so that launcher is gone. Returns the daemons it stopped and
// removes the file.
std::vector<PidEntry> StopLeftoverDaemons(const std::string& run_dir,
                                          absl::Duration grace);

}  // namespace downpour

#endif  // DOWNPOUR_DEPLOY_RUN_DIR_GUARD_H_
