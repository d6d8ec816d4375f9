// Whole-file reads, and atomic replacement: temp file + fsync + rename +
// fsync(dir).
#include "common/file_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"

namespace downpour {
namespace {

// `what` is a plain C string so that nothing allocates (and may touch errno)
// before errno is read.
absl::Status IoError(const char* what, const char* action,
                     const std::string& path) {
  const int error = errno;
  return absl::ErrnoToStatus(error,
                             absl::StrCat(what, ": ", action, " '", path, "'"));
}

// fsync on a directory makes a rename in it durable.
absl::Status SyncDirectory(const std::string& dir, const char* what) {
  ScopedFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return IoError(what, "cannot open directory", dir);
  if (::fsync(fd.get()) != 0) return IoError(what, "cannot sync", dir);
  return absl::OkStatus();
}

// Writes `tmp` completely and durably; the caller renames it.
absl::Status WriteTempFile(
    const std::string& tmp, const char* what,
    const std::function<absl::Status(int, const std::string&)>& write) {
  ScopedFd fd(
      ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) return IoError(what, "cannot create", tmp);
  absl::Status written = write(fd.get(), tmp);
  if (!written.ok()) return written;
  if (::fsync(fd.get()) != 0) return IoError(what, "cannot sync", tmp);
  if (fd.Close() != 0) return IoError(what, "cannot close", tmp);
  return absl::OkStatus();
}

}  // namespace

ScopedFd::~ScopedFd() {
  if (fd_ >= 0) ::close(fd_);
}

int ScopedFd::Close() {
  const int rc = ::close(fd_);
  fd_ = -1;
  return rc;
}

absl::Status WriteAll(int fd, const char* data, size_t n, const char* what,
                      const std::string& path) {
  while (n > 0) {
    const ssize_t written = ::write(fd, data, n);
    if (written < 0) {
      if (errno == EINTR) continue;
      return IoError(what, "cannot write", path);
    }
    data += written;
    n -= static_cast<size_t>(written);
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(
    const std::string& path, const char* what,
    const std::function<absl::Status(int fd, const std::string& tmp)>& write) {
  const std::filesystem::path parent =
      std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code error;
    std::filesystem::create_directories(parent, error);
    if (error) {
      return absl::ErrnoToStatus(
          error.value(), absl::StrCat(what, ": cannot create directory '",
                                      parent.string(), "'"));
    }
  }
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  absl::Status status = WriteTempFile(tmp, what, write);
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    status = absl::ErrnoToStatus(error, absl::StrCat(what, ": cannot rename '",
                                                     tmp, "' to '", path, "'"));
  }
  if (!status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }
  return SyncDirectory(parent.empty() ? "." : parent.string(), what);
}

absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& contents) {
  return WriteFileAtomically(
      path, "write", [&](int fd, const std::string& tmp) {
        return WriteAll(fd, contents.data(), contents.size(), "write", tmp);
      });
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  return ReadFile(path, std::numeric_limits<size_t>::max());
}

absl::StatusOr<std::string> ReadFile(const std::string& path,
                                     size_t max_bytes) {
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return IoError("read", "cannot open", path);
  std::string contents;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError("read", "cannot read", path);
    }
    contents.append(buffer, static_cast<size_t>(n));
    if (contents.size() > max_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("'", path, "' is larger than ", max_bytes, " bytes"));
    }
  }
  return contents;
}

}  // namespace downpour
