// On-disk checkpoints of one ps shard: blocks, optimizer state, sequences.
//
//   const std::string path = CheckpointPath(dir, 1);
//   RETURN_IF_ERROR(WriteCheckpoint(path, checkpoint));
//   absl::StatusOr<Checkpoint> restored = ReadCheckpoint(path);
//
// A checkpoint is written to a temporary file, synced and renamed over the old
// one, so a crash leaves either the old or the new checkpoint, never a mix.
//
// File layout (format 2; format 1 files are read too, without their push
// sequences, which counted from the wall clock). Integers are little-endian, floats IEEE float32 LE:
//
//   offset  size  field
//   0       8     magic "DPNCKPT\0"
//   8       4     u32 format version (2)
//   12      8     u64 file size in bytes, including the trailing checksum
//   20      4     i32 shard_index
//   24      8     u64 placement_epoch
//   32      4+k   u32 k, then k bytes: optimizer name (e.g. "momentum")
//   ...     4     u32 s, then s entries, ascending by worker id:
//                   i32 worker id, u64 window base, u64 window mask
//                   (server/sequence_window.h)
//   ...     4     u32 b, then b blocks (in the order given):
//                   u32 id, u64 version, u64 n (values), u64 m (state floats),
//                   n floats of values, m floats of state (slot-major)
//   end-4   4     u32 CRC-32C (common/checksum.h) of every byte before it
#ifndef DOWNPOUR_SERVER_CHECKPOINT_H_
#define DOWNPOUR_SERVER_CHECKPOINT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/block_store.h"
#include "server/sequence_window.h"

namespace downpour::server {

// The format this build writes; it also reads format 1.
inline constexpr uint32_t kCheckpointFormat = 2;

struct Checkpoint {
  // Which ps shard wrote it.
  int32_t shard_index = 0;
  // The placement map epoch the shard served under.
  uint64_t placement_epoch = 0;
  // The blocks with their optimizer state; written in the order given.
  std::vector<BlockStore::BlockSnapshot> blocks;
  // Per worker id: which push sequences were applied (exactly-once pushes).
  std::map<int32_t, SequenceWindow> sequences;
  // Optimizer::name() of the state in `blocks`.
  std::string optimizer;
};

// Writes `checkpoint` to `path` atomically: to `path` + ".tmp.<pid>", fsync,
// rename over `path`, fsync the directory. Creates missing parent directories.
// On error the temporary file is removed, an existing checkpoint at `path` is
// left as it was, and the status (code from errno) names the path and the
// errno text. Blocks on disk I/O: call it without holding locks. One writer
// per path at a time.
absl::Status WriteCheckpoint(const std::string& path,
                             const Checkpoint& checkpoint);

// Reads the checkpoint at `path`.
//   NotFound: no file at `path`.
//   DataLoss: the file is corrupt, truncated or not a checkpoint, e.g.
//     "checkpoint 'P' is corrupt (checksum mismatch: stored 0x1234abcd,
//     computed 0x5678ef01); move it away to start from fresh parameters, or
//     restore a good copy".
//   FailedPrecondition: another format version ("checkpoint 'P' was written
//     by format 7, this build reads formats 1-2; ...").
//   Other codes for I/O errors, with the errno text.
absl::StatusOr<Checkpoint> ReadCheckpoint(const std::string& path);

// Shard `shard_index`'s checkpoint file in `dir`: dir + "/ps-<index>.ckpt".
std::string CheckpointPath(const std::string& dir, int shard_index);

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_CHECKPOINT_H_
