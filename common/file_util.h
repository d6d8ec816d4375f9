// The project's one home for reading and writing whole files: ReadFile, and
// replacing a file atomically (after a crash the file holds either the old or
// the new contents, never a mix), used for ps checkpoints, the coordinator's
// state, port files and the launcher's summary.
#ifndef DOWNPOUR_COMMON_FILE_UTIL_H_
#define DOWNPOUR_COMMON_FILE_UTIL_H_

#include <cstddef>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace downpour {

// Reads a whole file. NotFound when it does not exist ("cannot read 'x': No
// such file or directory"); another code from errno (PermissionDenied, ...)
// when it exists but cannot be read, so callers can tell "absent" from
// "unreadable".
absl::StatusOr<std::string> ReadFile(const std::string& path);
// The same, reading at most max_bytes: ResourceExhausted ("'x' is larger than
// 1048576 bytes") as soon as the file proves longer (a device such as
// /dev/zero is not read forever).
absl::StatusOr<std::string> ReadFile(const std::string& path, size_t max_bytes);

// Closes a file descriptor when it goes out of scope.
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd();
  int get() const { return fd_; }
  // Closes now, returning what close() returns (it can report a failed
  // write-back, e.g. on NFS).
  int Close();

 private:
  int fd_;
};

// Writes all n bytes to fd, retrying short writes and EINTR. Errors read
// "<what>: cannot write '<path>': <errno text>".
absl::Status WriteAll(int fd, const char* data, size_t n, const char* what,
                      const std::string& path);

// Creates path + ".tmp.<pid>", lets `write` fill it (through the fd; `tmp` is
// its name for messages), fsyncs and closes it, renames it over `path` and
// fsyncs the directory. Creates missing parent folders. On error the temporary
// file is removed and an existing file at `path` is left as it was; messages
// start with `what` ("write checkpoint") and name the path and the errno text.
absl::Status WriteFileAtomically(
    const std::string& path, const char* what,
    const std::function<absl::Status(int fd, const std::string& tmp)>& write);

// The same for contents already in memory.
absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& contents);

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_FILE_UTIL_H_
