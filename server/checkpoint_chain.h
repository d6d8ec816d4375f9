// A shard's checkpoints over time: reading the newest good one at start
// (LoadShardCheckpoint), and the chain it writes (checkpoint.incremental: a
// full cut, then deltas of the sparse rows changed and the keys evicted since
// the previous write, with those keys kept as tombstones meanwhile).
//
//   CheckpointChain chain(config, index, tables.size());
//   CheckpointChain::Cut cut = chain.TakeCut(std::move(dense_part), tables);
//   ASSIGN_OR_RETURN(auto written, files.Write(std::move(cut.checkpoint)));
//   chain.Written(cut, *written);   // or chain.Failed()
//
// The file format and the folder are server/checkpoint.h's
// (ShardCheckpoints). Not thread-safe: the owner (Shard) calls it under its
// lock, shared for the const methods.
#ifndef DOWNPOUR_SERVER_CHECKPOINT_CHAIN_H_
#define DOWNPOUR_SERVER_CHECKPOINT_CHAIN_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config.h"
#include "common/counters.h"
#include "common/model_spec.h"
#include "server/block_store.h"
#include "server/checkpoint.h"
#include "server/sparse_tables.h"

namespace downpour::server {

// This shard's checkpoint generations in checkpoint.dir.
ShardCheckpoints ShardCheckpointFiles(const Config& config, int index,
                                      const ModelSpec& spec);
// The highest placement epoch among the generations on disk (0: none):
// this shard's checkpoints go on from there.
absl::StatusOr<uint64_t> HighestEpochOnDisk(const ShardCheckpoints& files);
// Cleans leftovers of interrupted writes, then reads the newest good
// checkpoint (nullopt when there is none). Generations skipped as corrupt
// are logged and counted ("checkpoint_fallbacks"). FailedPrecondition when
// it was written with another optimizer than `optimizer`; DataLoss and the
// others of ShardCheckpoints::ReadNewest.
absl::StatusOr<std::optional<Checkpoint>> LoadShardCheckpoint(
    const ShardCheckpoints& files, const std::string& optimizer,
    Counters* counters);

// What a shard starts from: a checkpoint (or a backup's replica) and the
// highest placement epoch on disk.
struct RestoredShard {
  std::optional<Checkpoint> checkpoint;
  uint64_t epoch_floor = 0;
};
// Shard::Create's: LoadShardCheckpoint and HighestEpochOnDisk of
// checkpoint.dir (nothing when it is unset), with their errors.
absl::StatusOr<RestoredShard> RestoreShard(const Config& config, int index,
                                           const ModelSpec& spec,
                                           const std::string& optimizer,
                                           Counters* counters);
// Shard::CreateFrom's: `state` with the epoch floor on disk;
// FailedPrecondition when `state` is of another shard or optimizer.
absl::StatusOr<RestoredShard> RestoreShardFrom(const Config& config, int index,
                                               const ModelSpec& spec,
                                               const std::string& optimizer,
                                               Checkpoint state);

class CheckpointChain {
 public:
  // A checkpoint copied at one moment: a full cut, or a delta of the
  // chain's last write, and what Written needs after the write.
  struct Cut {
    Checkpoint checkpoint;
    bool delta = false;
    std::vector<uint64_t> clocks;    // by table, at the cut
    std::vector<size_t> tombstones;  // by table, tombstones kept at the cut
    size_t blocks = 0;  // in checkpoint, which the write may move away
    size_t rows = 0;
    size_t evicted_keys = 0;
    uint64_t drops = 0;  // tombstone drops before the cut (Evicted)
  };
  // Most tombstones kept between two writes, over all tables (8 MiB): a
  // flood's evictions (server/memory_budget.h) must not pile up until the
  // next checkpoint. Beyond it they are dropped and the next cut is full.
  static constexpr size_t kMaxTombstones = size_t{1} << 20;

  // `num_tables`: the model's sparse tables; `restored`: what the shard
  // starts from.
  CheckpointChain(const Config& config, int index, size_t num_tables,
                  RestoredShard restored);
  CheckpointChain(const CheckpointChain&) = delete;
  CheckpointChain& operator=(const CheckpointChain&) = delete;

  // The highest epoch among the checkpoint generations at start: a cut is
  // written at no lower epoch (a coordinator that lost its state counts
  // epochs from 1 again).
  uint64_t epoch_floor() const { return epoch_floor_; }
  // The restored checkpoint's block `id` when it has `length` floats, else
  // nullptr: it serves the Assigns that place the block here.
  const BlockStore::BlockSnapshot* RestoredBlock(uint32_t id,
                                                 int64_t length) const;
  // The versions of the restored blocks `store` does not hold (not placed
  // here, or not yet).
  uint64_t UnplacedVersions(const BlockStore& store) const;
  // The restored blocks the placement does not give this shard (a live move
  // handed them to another ps before this process started), taken out of
  // the restored checkpoint: no cut carries them and UnplacedVersions no
  // longer counts them. `listed`: entry id set for the blocks placed here.
  std::vector<BlockStore::BlockSnapshot> TakeUnplaced(
      const std::vector<char>& listed);
  // Adds block `id` of `spec` to `store` (an Assign's new block): the
  // restored checkpoint's when it has it (RestoredBlock; true), else its
  // initial values from `init_seed` (model.init_seed; false). InvalidArgument
  // for an id beyond the model (a placement made with another config); the
  // errors of BlockStore::AddBlock.
  absl::StatusOr<bool> AddBlock(uint32_t id, const ModelSpec& spec,
                                uint64_t init_seed, BlockStore* store) const;

  // Keys evicted from table `table`: kept as the next delta's tombstones
  // (with checkpoint.incremental and checkpoint.dir only); beyond
  // kMaxTombstones all are dropped and the next cut is a full one.
  void Evicted(size_t table, const std::vector<uint64_t>& keys);
  // SparseTables::Evict (config eviction.*, counted) with the keys Evicted;
  // true when any row went.
  bool Evict(SparseTables* tables);

  // `dense` (the blocks of `store`, windows, epoch: the caller's) completed
  // with the restored blocks `store` does not hold (so a checkpoint written
  // before re-placement does not drop them) and the sparse tables' rows: a
  // delta of the rows updated since the last write and the tombstones kept,
  // when the chain is incremental, has a full cut and fewer than
  // checkpoint.full_every deltas since; else a full cut.
  Cut TakeCut(Checkpoint dense, const BlockStore& store,
              const SparseTables& tables) const;
  // TakeCut of every block of `store` and the applied-push windows
  // `sequences`, at placement `epoch` or epoch_floor(), the higher.
  Cut TakeCut(uint64_t epoch, std::map<int32_t, SequenceWindow> sequences,
              const BlockStore& store, const SparseTables& tables) const;
  // `cut` is on disk as `written`: the chain goes on from it, the tombstones
  // it held are dropped, and the write is logged.
  void Written(const Cut& cut, const ShardCheckpoints::Written& written);
  // A write failed: the next one is a full cut.
  void Failed() { chain_ = Chain(); }

 private:
  // The generations of the full cut and of the last file (0: the next
  // write is a full cut), the deltas written since the full cut, and each
  // table's clock at the last write (a delta holds the rows updated after
  // it).
  struct Chain {
    uint64_t base = 0;
    uint64_t last = 0;
    int deltas = 0;
    std::vector<uint64_t> clocks;
  };

  // Constant after construction.
  const int index_;
  const bool incremental_;       // checkpoint.incremental
  const bool keeps_tombstones_;  // incremental with a checkpoint.dir
  const int full_every_;         // checkpoint.full_every

  const uint64_t epoch_floor_;
  // The checkpoint read at start (or the replica taken over), less what
  // TakeUnplaced took.
  std::optional<Checkpoint> restored_;
  Chain chain_;
  // By table: keys evicted since the last checkpoint written.
  std::vector<std::vector<uint64_t>> tombstones_;
  uint64_t drops_ = 0;  // times the tombstones were dropped (Evicted)
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_CHECKPOINT_CHAIN_H_
