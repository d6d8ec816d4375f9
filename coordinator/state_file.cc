// The coordinator's state on disk: one CoordinatorState proto, format 1.
#include "coordinator/state_file.h"

#include <sys/stat.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"

namespace downpour::coordinator {
namespace {

constexpr uint32_t kStateFormat = 1;

}  // namespace

std::string StateFilePath(const std::string& state_dir) {
  if (state_dir.empty()) return "";
  return (std::filesystem::path(state_dir) / "coordinator.state").string();
}

absl::StatusOr<proto::CoordinatorState> StateFile::Read() const {
  absl::StatusOr<std::string> bytes = ReadFile(path_);
  if (absl::IsNotFound(bytes.status())) return bytes.status();
  if (!bytes.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "coordinator state '", path_, "' exists but cannot be read (",
        bytes.status().message(),
        "); fix its permissions, or move it away to start with an empty "
        "cluster"));
  }
  proto::CoordinatorState state;
  if (!state.ParseFromString(*bytes) || state.format() != kStateFormat) {
    return absl::DataLossError(absl::StrCat(
        "coordinator state '", path_,
        "' is unreadable or of another format; move it away to start with an "
        "empty cluster"));
  }
  return state;
}

absl::Status StateFile::Write(uint64_t sequence,
                              proto::CoordinatorState state) {
  state.set_format(kStateFormat);
  const std::string bytes = state.SerializeAsString();
  absl::MutexLock lock(&mu_);
  // Two writers may reach this point out of order; the later snapshot wins.
  if (sequence <= written_) return absl::OkStatus();
  // Owner-only: the file holds the members' keys.
  absl::Status written = WriteFileAtomically(
      path_, "coordinator state", [&](int fd, const std::string& tmp) {
        if (::fchmod(fd, 0600) != 0) {
          return absl::PermissionDeniedError(absl::StrCat(
              "coordinator state: cannot make '", tmp, "' owner-only"));
        }
        return WriteAll(fd, bytes.data(), bytes.size(), "coordinator state",
                        tmp);
      });
  if (written.ok()) written_ = sequence;
  return written;
}

}  // namespace downpour::coordinator
