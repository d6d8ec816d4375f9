// The byte formats of checkpoint files and chain manifests, shared by the two
// halves of the checkpoint library (checkpoint_format.cc encodes, verifies and
// decodes; checkpoint.cc names, lists, writes and restores). Not for callers:
// they use server/checkpoint.h.
#ifndef DOWNPOUR_SERVER_CHECKPOINT_FORMAT_H_
#define DOWNPOUR_SERVER_CHECKPOINT_FORMAT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/checkpoint.h"

namespace downpour::server::checkpoint_internal {

// A file's size and CRC-32C, as a manifest lists it.
struct Trailer {
  uint64_t bytes = 0;
  uint32_t crc = 0;
};

// Reads and verifies a checkpoint file; its size and CRC into *trailer (may be
// null). NotFound when the file does not exist.
absl::StatusOr<Checkpoint> ReadCheckpointFile(const std::string& path,
                                              Trailer* trailer);

// Writes `c` in `format` to `path` atomically; `before_rename` (may be empty)
// runs after the data is synced, before the rename. Size and CRC into *trailer.
absl::Status WriteInFormat(const std::string& path, const Checkpoint& c,
                           uint32_t format,
                           const std::function<absl::Status()>& before_rename,
                           Trailer* trailer = nullptr);

// A write error with what to do about it, for the errors an operator can fix.
absl::Status WithFix(const absl::Status& status);

// A chain's manifest: the full cut and the deltas after it, oldest first.
struct Manifest {
  int32_t shard_index = 0;
  uint64_t base_generation = 0;
  std::vector<ShardCheckpoints::ChainEntry> entries;
};

absl::Status EncodeManifest(const Manifest& m, int fd, const std::string& path);
absl::StatusOr<Manifest> ReadManifest(const std::string& path);
// The DataLoss error of a corrupt manifest at `path`.
absl::Status BadManifest(const std::string& path, const std::string& detail);

}  // namespace downpour::server::checkpoint_internal

#endif  // DOWNPOUR_SERVER_CHECKPOINT_FORMAT_H_
