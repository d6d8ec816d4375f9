// The run folder's lock and pid file.
#include "deploy/run_dir_guard.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/file_util.h"

namespace downpour {
namespace {

namespace fs = std::filesystem;

constexpr absl::Duration kExitPoll = absl::Milliseconds(20);

std::string LockPath(const std::string& run_dir) {
  return (fs::path(run_dir) / "launcher.lock").string();
}

// The process named by `entry` still runs (same pid, same start time).
bool StillRuns(const PidEntry& entry) {
  absl::StatusOr<unsigned long long> start = ProcessStartTime(entry.pid);
  return start.ok() && *start == entry.start_time;
}

// Waits until none of `entries` runs or `deadline` passes.
bool AllGone(const std::vector<PidEntry>& entries, absl::Time deadline) {
  while (true) {
    bool any = false;
    for (const PidEntry& e : entries) any = any || StillRuns(e);
    if (!any) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(kExitPoll);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<RunDirLock>> RunDirLock::Acquire(
    const std::string& run_dir) {
  std::error_code error;
  fs::create_directories(run_dir, error);
  const std::string path = LockPath(run_dir);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot create ", path, ": ", std::strerror(errno),
                     "; check that --run_dir is a folder you can write"));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int flock_errno = errno;
    ::close(fd);
    if (flock_errno != EWOULDBLOCK) {
      return absl::UnavailableError(
          absl::StrCat("cannot lock ", path, ": ", std::strerror(flock_errno)));
    }
    std::string holder = "another launcher";
    for (const PidEntry& e : ReadPidFile(run_dir)) {
      if (e.name == "launcher")
        holder = absl::StrCat("another launcher (pid ", e.pid, ")");
    }
    return absl::FailedPreconditionError(
        absl::StrCat(holder, " is running on ", run_dir, " (it holds ", path,
                     "): stop it first, or give this one another --run_dir"));
  }
  return std::unique_ptr<RunDirLock>(new RunDirLock(fd));
}

RunDirLock::~RunDirLock() { ::close(fd_); }

absl::StatusOr<unsigned long long> ProcessStartTime(pid_t pid) {
  absl::StatusOr<std::string> stat =
      ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat.ok()) return absl::NotFoundError(absl::StrCat("no process ", pid));
  // "PID (COMM) STATE ..."; COMM may hold spaces and parentheses, so fields
  // are counted from the last ')'. After it: state is field 3, starttime 22.
  const size_t close = stat->rfind(')');
  if (close == std::string::npos) return absl::NotFoundError("bad stat");
  std::vector<absl::string_view> fields = absl::StrSplit(
      absl::string_view(*stat).substr(close + 1), ' ', absl::SkipEmpty());
  unsigned long long start = 0;
  if (fields.size() < 20 || !absl::SimpleAtoi(fields[19], &start)) {
    return absl::NotFoundError(
        absl::StrCat("cannot parse /proc/", pid, "/stat"));
  }
  if (fields[0] == "Z" || fields[0] == "X") {
    return absl::NotFoundError(absl::StrCat("process ", pid, " has exited"));
  }
  return start;
}

std::string PidFilePath(const std::string& run_dir) {
  return (fs::path(run_dir) / "launcher.pids").string();
}

absl::Status WritePidFile(const std::string& run_dir,
                          const std::vector<PidEntry>& entries) {
  std::string text;
  for (const PidEntry& e : entries) {
    absl::StrAppend(&text, e.pid, " ", e.start_time, " ", e.name, "\n");
  }
  return WriteFileAtomically(PidFilePath(run_dir), text);
}

std::vector<PidEntry> ReadPidFile(const std::string& run_dir) {
  std::vector<PidEntry> entries;
  absl::StatusOr<std::string> text = ReadFile(PidFilePath(run_dir));
  if (!text.ok()) return entries;
  for (absl::string_view line :
       absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    std::vector<std::string> parts =
        absl::StrSplit(line, absl::MaxSplits(' ', 2));
    PidEntry e;
    if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &e.pid) ||
        !absl::SimpleAtoi(parts[1], &e.start_time) || e.pid <= 1) {
      continue;
    }
    e.name = parts[2];
    entries.push_back(e);
  }
  return entries;
}

std::vector<PidEntry> StopLeftoverDaemons(const std::string& run_dir,
                                          absl::Duration grace) {
  std::vector<PidEntry> alive;
  for (const PidEntry& e : ReadPidFile(run_dir)) {
    if (e.name != "launcher" && e.pid != ::getpid() && StillRuns(e))
      alive.push_back(e);
  }
  for (const PidEntry& e : alive) {
    ::kill(e.pid, SIGTERM);
    ::kill(e.pid, SIGCONT);
  }
  if (!AllGone(alive, absl::Now() + grace)) {
    for (const PidEntry& e : alive) {
      if (StillRuns(e)) ::kill(e.pid, SIGKILL);
    }
    AllGone(alive, absl::Now() + absl::Seconds(5));
  }
  std::error_code error;
  fs::remove(PidFilePath(run_dir), error);
  return alive;
}

}  // namespace downpour
