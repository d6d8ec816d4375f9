// The file where the coordinator keeps its state (coordinator.state_dir), so a
// restarted coordinator knows the cluster it was running. Writes are atomic
// (common/file_util.h) and ordered by a sequence number, so callers can take a
// snapshot under their own lock and write it after releasing it.
//
//   StateFile file(StateFilePath(config.coordinator.state_dir));
//   absl::StatusOr<proto::CoordinatorState> saved = file.Read();
//   if (absl::IsNotFound(saved.status())) { ... first start ... }
//   file.Write(++sequence, snapshot);  // outside the caller's lock
#ifndef DOWNPOUR_COORDINATOR_STATE_FILE_H_
#define DOWNPOUR_COORDINATOR_STATE_FILE_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "proto/coordinator_state.pb.h"

namespace downpour::coordinator {

// The coordinator's state file in `state_dir`: "<state_dir>/coordinator.state";
// "" when state_dir is "" (no state kept). The launcher removes it to start a
// new job.
std::string StateFilePath(const std::string& state_dir);

// Thread-safe: writes are serialized by an internal mutex.
class StateFile {
 public:
  explicit StateFile(std::string path) : path_(std::move(path)) {}

  StateFile(const StateFile&) = delete;
  StateFile& operator=(const StateFile&) = delete;

  const std::string& path() const { return path_; }

  // The saved state. NotFound when there is no file (a first start);
  // FailedPrecondition when it exists but cannot be read, DataLoss when it
  // cannot be parsed or has another format. Both of those name the file and say
  // how to start with an empty cluster.
  absl::StatusOr<proto::CoordinatorState> Read() const;

  // Replaces the file by `state` (its format field is set here), which the
  // caller numbered `sequence` when it took it (rising, from 1). A state older
  // than one already written is dropped (OK): the newer one holds its changes.
  // Errors are those of WriteFileAtomically.
  absl::Status Write(uint64_t sequence, proto::CoordinatorState state)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const std::string path_;

  absl::Mutex mu_;  // held across the write: it orders writers
  uint64_t written_ ABSL_GUARDED_BY(mu_) = 0;  // sequence of the file's state
};

}  // namespace downpour::coordinator

#endif  // DOWNPOUR_COORDINATOR_STATE_FILE_H_
