// What a primary shard's next replica cut must carry: the changes counted so
// far (the generation), the blocks changed since the last cut, and, with
// replication by gradient, the dense updates kept for the cut instead of
// their blocks. Also the cut itself (ReplicaCut), which Shard::CutForReplica
// fills and server/replication/replicator.h sends.
//
//   ReplicaLog log(/*num_blocks=*/8, /*state_slots=*/0);
//   log.SetLogging(true);
//   if (log.Keeps(id)) log.Log(update, length, data); else log.Changed(id);
//   cut.blocks = store.Snapshot(log.SortedDirty());
//   cut.updates = log.TakeUpdates(/*full=*/false);
//   log.ClearDirty();
//
// Not thread-safe: the owner (Shard) calls it under its exclusive lock but
// for the const methods (shared lock).
#ifndef DOWNPOUR_SERVER_REPLICATION_REPLICA_LOG_H_
#define DOWNPOUR_SERVER_REPLICATION_REPLICA_LOG_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "server/block_store.h"
#include "server/sequence_window.h"
#include "server/sparse_table.h"

namespace downpour::server {

// A dense update as applied, for a backup to replay
// (BlockStore::Replay): update.data and update.bytes are left unset.
struct ReplicaUpdate {
  BlockStore::Replayed update;
  std::string gradient;  // as pushed
};

// What a primary streams to its backup (server/replication/replicator.h):
// the blocks changed since the last cut (every block when `full`), or,
// with replication by gradient on, the updates applied to them since, when
// those are fewer bytes; and every worker's applied-push window, copied at
// one moment, with the generation (updates and sequences recorded so far)
// they amount to.
struct ReplicaCut {
  uint64_t generation = 0;
  uint64_t epoch = 0;
  std::string optimizer;
  std::string optimizer_settings;  // OptimizerSettingsText
  std::vector<BlockStore::BlockSnapshot> blocks;
  // In the order applied; none of a block in `blocks`.
  std::vector<ReplicaUpdate> updates;
  std::map<int32_t, SequenceWindow> sequences;
  // By table id: the rows changed since the last cut (every row when
  // `full`), each whole.
  std::vector<std::pair<uint32_t, SparseTable::Rows>> sparse;
  // With `checks`: every block's id, version and values' CRC32C.
  struct Check {
    uint32_t id;
    uint64_t version;
    uint32_t crc32c;
  };
  std::vector<Check> checks;
};

// Every block of `store`: its id, version and values' CRC32C.
std::vector<ReplicaCut::Check> ChecksOf(const BlockStore& store);

class ReplicaLog {
 public:
  // `num_blocks`: the model's blocks (ids 0 .. num_blocks - 1);
  // `state_slots`: the dense optimizer's state floats per value.
  ReplicaLog(size_t num_blocks, int state_slots);
  ReplicaLog(const ReplicaLog&) = delete;
  ReplicaLog& operator=(const ReplicaLog&) = delete;

  // Counts every change noted: a cut of this generation holds everything
  // acknowledged so far. Starts at 1.
  uint64_t generation() const { return generation_; }

  // Replication by gradient on or off (off: the updates kept go, their
  // blocks whole instead).
  void SetLogging(bool on);
  // True when an update of block `id` is to be kept (Log): logging is on
  // and the block has not changed whole since the last cut.
  bool Keeps(uint32_t id) const {
    return logging_ && id < is_dirty_.size() && !is_dirty_[id];
  }
  // Counts an update applied to block `update.id` (`length` floats) and
  // keeps it, its gradient copied from `data`, for the next cut, until the
  // updates kept are as many bytes as their blocks' values and state: then
  // the blocks go whole instead. REQUIRES: Keeps(update.id).
  void Log(const BlockStore::Replayed& update, int64_t length,
           const void* data);
  // Notes a change: `block` (an id of the model, or -1 for none) goes whole
  // in the next cut, and the generation is counted.
  void Changed(int64_t block);
  // Counts a change that no block carries (sparse rows, a push window).
  void Count() { ++generation_; }

  // The blocks changed since the last cut, ascending.
  const std::vector<uint32_t>& SortedDirty();
  // The updates kept that go in the cut (none when `full`: every block
  // goes whole), in the order applied; the log is emptied.
  std::vector<ReplicaUpdate> TakeUpdates(bool full);
  // After a cut: no block is changed any more.
  void ClearDirty();

 private:
  // The updates kept go: their blocks are marked changed instead.
  void DropLog();
  // The updates kept go (taken by a cut, or dropped).
  void ClearLog();
  // `block` (an id of the model) goes whole in the next cut.
  void MarkDirty(uint32_t block);

  const int state_slots_;
  uint64_t generation_ = 1;
  std::vector<uint32_t> dirty_;
  std::vector<char> is_dirty_;  // by block id
  // The updates kept for the next cut, their gradients' bytes, and the
  // values and state bytes of the blocks they are of (is_logged_, by id).
  bool logging_ = false;
  std::vector<ReplicaUpdate> log_;
  int64_t log_bytes_ = 0;
  int64_t logged_block_bytes_ = 0;
  std::vector<char> is_logged_;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_REPLICATION_REPLICA_LOG_H_
