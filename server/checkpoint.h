// On-disk checkpoints of one ps shard: blocks, optimizer state, sequences.
//
//   ShardCheckpoints files({dir, /*shard_index=*/1, spec.Fingerprint(), 3});
//   ASSIGN_OR_RETURN(ShardCheckpoints::Written w, files.Write(checkpoint));
//   absl::StatusOr<ShardCheckpoints::Loaded> restored = files.ReadNewest();
//
// Each shard keeps its last K checkpoints ("generations") in a folder of its
// own, `<dir>/ps-<index>/e<epoch>-g<generation>.ckpt`, both numbers 12 digits,
// so names sort by (placement epoch, generation). Each file is written to a
// temporary file, synced and renamed into place, so a crash leaves whole files
// only. A reader takes the newest good generation: a corrupt newest one is
// skipped (the caller says so), never silently replaced by fresh parameters.
// `<dir>/ps-<index>.ckpt`, the single file of earlier builds, is read when the
// folder holds no generation.
//
// Incremental checkpoints (checkpoint.incremental). A chain is a full cut
// (`e<epoch>-g<generation>.ckpt`) and the deltas written after it
// (`e<epoch>-g<generation>.delta`: the sparse rows changed since the file
// before it and the keys evicted meanwhile, with every dense block and
// push window whole), listed in order by the chain's manifest
// (`e<epoch>-g<generation>.manifest`, named after the newest file it lists,
// rewritten after each delta; the previous one is kept). Generations count
// every file of the folder, so a chain's files lie between its full cut and
// the next full cut. A reader restores the full cut, then the deltas the
// newest good manifest lists; a delta that is missing, corrupt or not the
// one listed ends the chain at the file before it, and a corrupt manifest
// falls back to the previous one (Loaded::chain_ended says so), rather
// than failing the restore. `keep` counts chains: a full cut goes with its
// deltas and manifests. A full cut without a manifest is a chain of one.
//
// File layout (format 5; formats 1-4 are read too: format 4 lacks the
// kind, the chain and the tables' clocks and tombstones, format 3 the sparse
// tables, formats 1-2 the model fingerprint and the generation, and format
// 1 the push sequences, which counted from the wall clock). Integers are
// little-endian, floats IEEE float32 LE:
//
//   offset  size  field
//   0       8     magic "DPNCKPT\0"
//   8       4     u32 format version (5)
//   12      8     u64 file size in bytes, including the trailing checksum
//   20      4     i32 shard_index
//   24      8     u64 placement_epoch
//   32      8     u64 model fingerprint (ModelSpec::Fingerprint)  [format 3]
//   40      8     u64 generation                                  [format 3]
//   48      4     u32 kind: 0 full cut, 1 delta                   [format 5]
//   52      8     u64 base generation: the chain's full cut       [format 5]
//   60      8     u64 parent generation: the file before a delta  [format 5]
//                 in its chain (0 for a full cut)
//   68      4+k   u32 k, then k bytes: optimizer name (e.g. "momentum")
//                 (at offset 48 before format 5)
//   ...     4     u32 s, then s entries, ascending by worker id:
//                   i32 worker id, u64 window base, u64 window mask
//                   (server/sequence_window.h; format 1: no mask)
//   ...     4     u32 b, then b blocks (in the order given):
//                   u32 id, u64 version, u64 n (values), u64 m (state floats),
//                   n floats of values, m floats of state (slot-major)
//   ...     4     u32 t, then t sparse tables                     [format 4]
//                   (server/sparse_table.h), each a consistent cut of whole
//                   rows: u32 id, u32 dim, u32 state slots, u32 optimizer
//                   (SparseOptimizerType), u64 r (rows), r u64 keys
//                   (ascending), r u32 versions, r * dim * (1 + slots)
//                   floats (per row: values, then state), then [format 5]
//                   u64 table clock, u64 evicted versions, u32 flags (bit 0:
//                   row clocks follow), r u64 row clocks (when bit 0), u64
//                   e, e u64 evicted keys (a delta's tombstones, ascending)
//   end-4   4     u32 CRC-32C (common/checksum.h) of every byte before it
//
// Manifest layout (its own format 1):
//
//   0       8     magic "DPNMANI\0"
//   8       4     u32 format version (1)
//   12      8     u64 file size in bytes, including the trailing checksum
//   20      4     i32 shard_index
//   24      8     u64 base generation (the chain's full cut)
//   32      4     u32 n, then n entries in chain order (the full cut first):
//                   u64 placement epoch, u64 generation, u64 file bytes,
//                   u32 the file's CRC-32C (its last 4 bytes)
//   end-4   4     u32 CRC-32C of every byte before it
#ifndef DOWNPOUR_SERVER_CHECKPOINT_H_
#define DOWNPOUR_SERVER_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/block_store.h"
#include "server/sequence_window.h"
#include "server/sparse_table.h"

namespace downpour::server {

// The format this build writes; it also reads formats 1 to 4.
inline constexpr uint32_t kCheckpointFormat = 5;

// A whole shard, or the change since the file before it in its chain.
enum class CheckpointKind : uint32_t { kFull = 0, kDelta = 1 };

struct Checkpoint {
  // Which ps shard wrote it.
  int32_t shard_index = 0;
  // The placement map epoch the shard served under.
  uint64_t placement_epoch = 0;
  // ModelSpec::Fingerprint() of the model it holds; 0 when read from a format
  // 1-2 file (unknown).
  uint64_t model_fingerprint = 0;
  // The shard's write counter (the file name's g<generation>); 0 when read
  // from a format 1-2 file. ShardCheckpoints::Write sets it.
  uint64_t generation = 0;
  // The blocks with their optimizer state; written in the order given.
  std::vector<BlockStore::BlockSnapshot> blocks;
  // Per worker id: which push sequences were applied (exactly-once pushes).
  std::map<int32_t, SequenceWindow> sequences;
  // Optimizer::name() of the state in `blocks`.
  std::string optimizer;
  // The sparse tables' rows, by table id (format 4; none before): every row,
  // or in a delta the rows changed and the keys evicted (Rows::evicted_keys)
  // since the parent, with the table's figures (format 5).
  std::vector<std::pair<uint32_t, SparseTable::Rows>> sparse_tables;
  // The format the file was read from (kCheckpointFormat when written).
  uint32_t format = kCheckpointFormat;
  // kFull, or kDelta: blocks and sequences whole, sparse tables as changes
  // (format 5). What ShardCheckpoints::ReadNewest returns is always kFull:
  // a full cut with its chain's deltas applied.
  CheckpointKind kind = CheckpointKind::kFull;
  // The chain (format 5): its full cut's generation (a full cut's own), and
  // for a delta the generation of the file before it.
  uint64_t base_generation = 0;
  uint64_t parent_generation = 0;
};

// Writes `checkpoint` to `path` atomically: to `path` + ".tmp.<pid>", fsync,
// rename over `path`, fsync the directory. Creates missing parent directories.
// On error the temporary file is removed, an existing checkpoint at `path` is
// left as it was, and the status (code from errno) names the path, the errno
// text and, for a full disk or a folder not writable, the fix. Blocks on disk
// I/O: call it without holding locks. One writer per path at a time.
// `before_rename`, when given, runs after the data is written and before the
// fsync and rename; an error from it abandons the write (the file-level fence
// of ShardCheckpoints::Write).
absl::Status WriteCheckpoint(
    const std::string& path, const Checkpoint& checkpoint,
    const std::function<absl::Status()>& before_rename = nullptr);

// As WriteCheckpoint, in an older `format` (1 to 4), for tests of upgrades.
absl::Status WriteCheckpointInFormatForTest(const std::string& path,
                                            const Checkpoint& checkpoint,
                                            uint32_t format);

// Reads the checkpoint at `path`.
//   NotFound: no file at `path`.
//   DataLoss: the file is corrupt, truncated or not a checkpoint, e.g.
//     "checkpoint 'P' is corrupt (checksum mismatch: stored 0x1234abcd,
//     computed 0x5678ef01); move it away to start from fresh parameters, or
//     restore a good copy".
//   FailedPrecondition: another format version ("checkpoint 'P' was written
//     by format 7, this build reads formats 1-3; ...").
//   Other codes for I/O errors, with the errno text.
// It checks neither the shard index nor the model: ShardCheckpoints does.
absl::StatusOr<Checkpoint> ReadCheckpoint(const std::string& path);

// The single checkpoint file of earlier builds: dir + "/ps-<index>.ckpt". Read
// (by ShardCheckpoints) when the shard's folder holds no generation.
std::string CheckpointPath(const std::string& dir, int shard_index);

// The folder of shard `shard_index`'s generations: dir + "/ps-<index>".
std::string ShardCheckpointDir(const std::string& dir, int shard_index);

// "e000000000007-g000000000012.ckpt": the file name of a generation (a full
// cut); with ".delta" and ".manifest" the names of deltas and manifests.
std::string GenerationFileName(uint64_t placement_epoch, uint64_t generation);
std::string DeltaFileName(uint64_t placement_epoch, uint64_t generation);
std::string ManifestFileName(uint64_t placement_epoch, uint64_t generation);

class ShardCheckpoints;

// The checkpoint shard `shard_index` would start from (ShardCheckpoints::
// ReadNewest of any model: a full cut with its deltas applied): for tools
// (psctl export) and tests that look at what was written.
absl::StatusOr<Checkpoint> ReadNewestCheckpoint(const std::string& dir,
                                                int shard_index);

// The row updates `checkpoint`'s sparse tables hold: every row's version and
// each table's evicted versions, as SparseTable::version_sum() counts them.
// Summed over a job's shards it is the row updates the job kept, to set
// against those its workers had acknowledged.
uint64_t SparseRowUpdates(const Checkpoint& checkpoint);

// One shard's checkpoint generations (see the top of this file).
// Thread-compatible and stateless (every call looks at the folder): one writer
// per shard folder at a time; readers may run beside it.
class ShardCheckpoints {
 public:
  struct Options {
    // checkpoint.dir; must not be empty.
    std::string dir;
    int shard_index = 0;
    // ModelSpec::Fingerprint() of the model served; 0 = accept any model
    // (tools and tests that only look).
    uint64_t model_fingerprint = 0;
    // checkpoint.keep: chains (full cuts with their deltas) kept after each
    // full cut, >= 1.
    int keep = 3;
    // checkpoint.incremental: a full cut also writes its chain's first
    // manifest, so deltas can follow it.
    bool incremental = false;
  };

  // A file of the folder, from its name.
  enum class FileKind { kFull, kDelta, kManifest };
  struct Generation {
    uint64_t placement_epoch = 0;
    uint64_t generation = 0;
    std::string path;
    FileKind kind = FileKind::kFull;
  };

  struct Loaded {
    Checkpoint checkpoint;
    // The file it came from (the chain's full cut).
    std::string path;
    // The deltas applied over it, in order.
    std::vector<std::string> deltas;
    // Newer generations skipped because they are corrupt or unreadable, newest
    // first, each naming its file and the reason. The caller says so loudly.
    std::vector<absl::Status> skipped;
    // Why the chain ends before its newest listed delta (a corrupt or
    // missing delta, a corrupt manifest), naming the file and where the
    // restored state ends. The caller says so loudly.
    std::vector<absl::Status> chain_ended;
  };

  // One file of a chain as its manifest lists it.
  struct ChainEntry {
    uint64_t placement_epoch = 0;
    uint64_t generation = 0;
    uint64_t bytes = 0;  // the file's size
    uint32_t crc = 0;    // the file's CRC-32C (its last 4 bytes)
  };

  struct Written {
    std::string path;
    uint64_t generation = 0;
    // The file's size and CRC-32C.
    uint64_t bytes = 0;
    uint32_t crc = 0;
    // Generations deleted because they were beyond the newest `keep`.
    std::vector<std::string> removed;
    // OK, or why an old generation could not be deleted (the write itself
    // succeeded).
    absl::Status prune_status;
  };

  explicit ShardCheckpoints(Options options);

  // Full cuts, deltas and manifests in the folder, newest first (highest
  // epoch, then generation). Other files are ignored. OK and empty when the
  // folder does not exist.
  absl::StatusOr<std::vector<Generation>> List() const;

  // The newest good full cut with the deltas of its chain applied (see the
  // top of this file), or the legacy file when there is no generation.
  // Corrupt or unreadable full cuts are skipped (Loaded::skipped) as long as
  // an older good one exists; a bad delta or manifest ends the chain
  // (Loaded::chain_ended). The one reader of checkpoints: the ps at start
  // and the tools (ReadNewestCheckpoint) see the same state.
  //   NotFound: neither a generation nor a legacy file.
  //   DataLoss: every generation is corrupt; the message is the newest one's
  //     and says how many more were tried.
  //   FailedPrecondition: the newest file readable as a checkpoint belongs to
  //     another shard index or another model, or was written by another format
  //     version. Such a file is not skipped: it means a misplaced file or a
  //     changed config, which an operator has to look at, e.g. "checkpoint 'P'
  //     holds shard 2, but this is ps 0: a checkpoint of another shard was put
  //     in its folder; move it back to <dir>/ps-2/, or move it away".
  absl::StatusOr<Loaded> ReadNewest() const;

  // Writes `checkpoint` as the next generation (one past the highest in the
  // folder) at checkpoint.placement_epoch, with this shard's index and model
  // fingerprint. A full cut (checkpoint.kind) starts a chain (with its
  // manifest when Options::incremental), then the chains beyond the newest
  // `keep` are deleted. A delta needs checkpoint.base_generation and
  // parent_generation (the chain's full cut and the last file of it this
  // writer wrote): it is written, then the chain's manifest with it added
  // (a crash between the two leaves the chain as it was); manifests of the
  // chain older than the previous one are deleted.
  //   FailedPrecondition for a delta whose chain's newest good manifest does
  //     not end at its parent (a write of the chain failed or was lost):
  //     write a full cut.
  //   FailedPrecondition: the folder holds a generation of a higher placement
  //     epoch (checked before writing and again before the rename): "shard 1
  //     was taken over at placement epoch 5 by another daemon; this ps (epoch
  //     4) must not write". Nothing is written or deleted.
  //   InvalidArgument: an epoch above 999999999999 (12 digits).
  //   Others as WriteCheckpoint, and the error of `may_write`.
  // `may_write`, when given, is asked just before the rename too (with the
  // epoch check): the writer's own view of whether it still owns the shard.
  absl::StatusOr<Written> Write(
      Checkpoint checkpoint,
      const std::function<absl::Status()>& may_write = nullptr) const;

  // Deletes leftover temporary files (`*.tmp.*`) of interrupted writes in the
  // shard's folder and of the legacy file; returns their paths. Call it before
  // this shard's first write, while no other process writes the shard.
  absl::StatusOr<std::vector<std::string>> RemoveStaleTemporaries() const;

  const std::string& folder() const { return folder_; }

 private:
  // FailedPrecondition when the folder holds a generation of an epoch above
  // `epoch`.
  absl::Status CheckNotTakenOver(uint64_t epoch) const;
  // FailedPrecondition when `loaded` is of another shard or model.
  absl::Status CheckBelongs(const std::string& path,
                            const Checkpoint& loaded) const;
  // The entries of the newest good manifest of the chain of full cut
  // `base` among `files` (empty when it has none); each bad newer one adds
  // a reason to *bad.
  std::vector<ChainEntry> ChainOf(const std::vector<Generation>& files,
                                  uint64_t base,
                                  std::vector<absl::Status>* bad) const;
  // Applies the deltas of the chain of `full` (its file's CRC `crc`) over
  // loaded->checkpoint.
  void ApplyChain(const std::vector<Generation>& files, const Generation& full,
                  uint32_t crc, Loaded* loaded) const;
  // The delta at `path`, listed as `entry` in the manifest of full cut
  // `base`; DataLoss unless it is that entry, follows generation `parent`,
  // and holds `optimizer` (the full cut's).
  absl::StatusOr<Checkpoint> ReadDelta(const std::string& path,
                                       const ChainEntry& entry, uint64_t base,
                                       uint64_t parent,
                                       const std::string& optimizer) const;
  // Writes the manifest of chain `base` listing `entries`.
  absl::Status WriteManifest(uint64_t base,
                             const std::vector<ChainEntry>& entries,
                             const std::function<absl::Status()>& fence) const;
  // Deletes what falls out after a write (see Write); the first error.
  absl::Status Prune(const Checkpoint& written,
                     std::vector<std::string>* removed) const;

  const Options options_;
  const std::string folder_;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_CHECKPOINT_H_
