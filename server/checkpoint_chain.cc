// CheckpointChain and the restore helpers: which checkpoint a shard starts
// from, and whether its next write is a full cut or a delta.
#include "server/checkpoint_chain.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace downpour::server {
namespace {

spdlog::logger* L() { return Log(Logger::kServer); }

// Logs the stale temporaries RemoveStaleTemporaries removed (or why not).
void RemoveStaleTemporaries(const ShardCheckpoints& files) {
  absl::StatusOr<std::vector<std::string>> stale =
      files.RemoveStaleTemporaries();
  if (!stale.ok()) {
    SPDLOG_LOGGER_WARN(L(), "{}", std::string(stale.status().message()));
  } else if (!stale->empty()) {
    SPDLOG_LOGGER_INFO(L(),
                       "removed {} temporary file(s) of interrupted checkpoint "
                       "writes: {}",
                       stale->size(), absl::StrJoin(*stale, ", "));
  }
}

// Logs what was loaded: the deltas over the full cut, and whether newer
// generations were skipped.
void LogLoaded(const ShardCheckpoints::Loaded& loaded) {
  if (!loaded.deltas.empty()) {
    SPDLOG_LOGGER_INFO(L(),
                       "loaded checkpoint {} and {} delta(s) up to {}: {} "
                       "blocks",
                       loaded.path, loaded.deltas.size(), loaded.deltas.back(),
                       loaded.checkpoint.blocks.size());
  }
  if (loaded.skipped.empty()) {
    SPDLOG_LOGGER_INFO(L(), "loaded checkpoint {}: {} blocks", loaded.path,
                       loaded.checkpoint.blocks.size());
  } else {
    SPDLOG_LOGGER_WARN(L(),
                       "loaded checkpoint {} ({} blocks) after skipping {} "
                       "newer bad one(s): updates after it are lost",
                       loaded.path, loaded.checkpoint.blocks.size(),
                       loaded.skipped.size());
  }
}

}  // namespace

ShardCheckpoints ShardCheckpointFiles(const Config& config, int index,
                                      const ModelSpec& spec) {
  ShardCheckpoints::Options options;
  options.dir = config.checkpoint.dir;
  options.shard_index = index;
  options.model_fingerprint = spec.Fingerprint();
  options.keep = config.checkpoint.keep;
  options.incremental =
      config.checkpoint.incremental && !spec.sparse_tables().empty();
  return ShardCheckpoints(options);
}

absl::StatusOr<uint64_t> HighestEpochOnDisk(const ShardCheckpoints& files) {
  ASSIGN_OR_RETURN(const std::vector<ShardCheckpoints::Generation> on_disk,
                   files.List());
  return on_disk.empty() ? 0 : on_disk.front().placement_epoch;
}

absl::StatusOr<std::optional<Checkpoint>> LoadShardCheckpoint(
    const ShardCheckpoints& files, const std::string& optimizer,
    Counters* counters) {
  counters->stats().checkpoint_fallbacks.Increment(
      0);  // exported from the start
  RemoveStaleTemporaries(files);
  absl::StatusOr<ShardCheckpoints::Loaded> loaded = files.ReadNewest();
  if (absl::IsNotFound(loaded.status())) return std::nullopt;
  if (!loaded.ok()) return loaded.status();
  for (const absl::Status& skipped : loaded->skipped) {
    SPDLOG_LOGGER_WARN(L(),
                       "checkpoint skipped, falling back to an older one: {}",
                       std::string(skipped.message()));
  }
  for (const absl::Status& ended : loaded->chain_ended) {
    SPDLOG_LOGGER_WARN(L(), "checkpoint chain cut short: {}",
                       std::string(ended.message()));
  }
  counters->stats().checkpoint_fallbacks.Increment(
      static_cast<double>(loaded->skipped.size() + loaded->chain_ended.size()));
  // Deltas applied over the full cut read (incremental checkpoints).
  counters->stats().checkpoint_deltas_restored.Set(
      static_cast<double>(loaded->deltas.size()));
  if (loaded->checkpoint.optimizer != optimizer) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint '", loaded->path, "' was written with optimizer ",
        loaded->checkpoint.optimizer, " but the config says ", optimizer,
        "; move the checkpoint away or restore the optimizer setting"));
  }
  LogLoaded(*loaded);
  return std::move(loaded->checkpoint);
}

absl::StatusOr<RestoredShard> RestoreShard(const Config& config, int index,
                                           const ModelSpec& spec,
                                           const std::string& optimizer,
                                           Counters* counters) {
  RestoredShard restored;
  if (config.checkpoint.dir.empty()) return restored;
  const ShardCheckpoints files = ShardCheckpointFiles(config, index, spec);
  ASSIGN_OR_RETURN(restored.checkpoint,
                   LoadShardCheckpoint(files, optimizer, counters));
  ASSIGN_OR_RETURN(restored.epoch_floor, HighestEpochOnDisk(files));
  return restored;
}

absl::StatusOr<RestoredShard> RestoreShardFrom(const Config& config, int index,
                                               const ModelSpec& spec,
                                               const std::string& optimizer,
                                               Checkpoint state) {
  if (state.shard_index != index || state.optimizer != optimizer) {
    return absl::FailedPreconditionError(
        absl::StrCat("the replica held is of shard ", state.shard_index,
                     " (optimizer ", state.optimizer, "), not of shard ", index,
                     " (optimizer ", optimizer, ")"));
  }
  RestoredShard restored;
  // Checkpoints go on from the highest epoch on disk, as for Create.
  if (!config.checkpoint.dir.empty()) {
    ASSIGN_OR_RETURN(
        restored.epoch_floor,
        HighestEpochOnDisk(ShardCheckpointFiles(config, index, spec)));
  }
  restored.checkpoint = std::move(state);
  return restored;
}

CheckpointChain::CheckpointChain(const Config& config, int index,
                                 size_t num_tables, RestoredShard restored)
    : index_(index),
      incremental_(config.checkpoint.incremental && num_tables > 0),
      keeps_tombstones_(config.checkpoint.incremental &&
                        !config.checkpoint.dir.empty()),
      full_every_(config.checkpoint.full_every),
      epoch_floor_(restored.epoch_floor),
      restored_(std::move(restored.checkpoint)),
      tombstones_(num_tables) {}

const BlockStore::BlockSnapshot* CheckpointChain::RestoredBlock(
    uint32_t id, int64_t length) const {
  const BlockStore::BlockSnapshot* saved = nullptr;
  if (restored_.has_value()) {
    for (const auto& b : restored_->blocks) {
      if (b.id == id && static_cast<int64_t>(b.values.size()) == length) {
        saved = &b;
      }
    }
  }
  return saved;
}

uint64_t CheckpointChain::UnplacedVersions(const BlockStore& store) const {
  uint64_t total = 0;
  if (restored_.has_value()) {
    for (const auto& b : restored_->blocks) {
      if (!store.Has(b.id)) total += b.version;
    }
  }
  return total;
}

std::vector<BlockStore::BlockSnapshot> CheckpointChain::TakeUnplaced(
    const std::vector<char>& listed) {
  std::vector<BlockStore::BlockSnapshot> taken;
  if (!restored_.has_value()) return taken;
  std::vector<BlockStore::BlockSnapshot> kept;
  for (BlockStore::BlockSnapshot& b : restored_->blocks) {
    const bool placed = b.id < listed.size() && listed[b.id] != 0;
    (placed ? kept : taken).push_back(std::move(b));
  }
  restored_->blocks = std::move(kept);
  return taken;
}

absl::StatusOr<bool> CheckpointChain::AddBlock(uint32_t id,
                                               const ModelSpec& spec,
                                               uint64_t init_seed,
                                               BlockStore* store) const {
  if (id >= spec.blocks().size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "placement assigns block ", id, " but the model has ",
        spec.blocks().size(), " blocks: do all daemons use the same config?"));
  }
  const BlockSpec& block = spec.blocks()[id];
  const BlockStore::BlockSnapshot* saved = RestoredBlock(id, block.length);
  if (saved != nullptr) {
    RETURN_IF_ERROR(
        store->AddBlock(id, saved->values, saved->version, saved->state));
    return true;
  }
  std::vector<float> values(block.length);
  spec.InitBlock(block, init_seed, values.data());
  RETURN_IF_ERROR(store->AddBlock(id, std::move(values)));
  return false;
}

bool CheckpointChain::Evict(SparseTables* tables) {
  const std::vector<std::vector<uint64_t>> evicted = tables->Evict();
  bool any = false;
  for (size_t t = 0; t < evicted.size(); ++t) {
    if (evicted[t].empty()) continue;
    any = true;
    Evicted(t, evicted[t]);
  }
  return any;
}

CheckpointChain::Cut CheckpointChain::TakeCut(
    uint64_t epoch, std::map<int32_t, SequenceWindow> sequences,
    const BlockStore& store, const SparseTables& tables) const {
  Checkpoint checkpoint;
  checkpoint.shard_index = index_;
  checkpoint.placement_epoch = std::max(epoch, epoch_floor_);
  checkpoint.optimizer = store.optimizer().name();
  checkpoint.blocks = store.Snapshot();
  checkpoint.sequences = std::move(sequences);
  return TakeCut(std::move(checkpoint), store, tables);
}

void CheckpointChain::Evicted(size_t table, const std::vector<uint64_t>& keys) {
  if (!keeps_tombstones_) return;
  std::vector<uint64_t>& pending = tombstones_[table];
  pending.insert(pending.end(), keys.begin(), keys.end());
  size_t total = 0;
  for (const std::vector<uint64_t>& t : tombstones_) total += t.size();
  if (total <= kMaxTombstones) return;
  // A full cut needs none: cheaper than holding a flood's keys.
  for (std::vector<uint64_t>& t : tombstones_) t = std::vector<uint64_t>();
  chain_.base = 0;
  ++drops_;
  SPDLOG_LOGGER_INFO(L(),
                     "ps {}: {} keys evicted since the last checkpoint: the "
                     "next one is a full cut",
                     index_, total);
}

CheckpointChain::Cut CheckpointChain::TakeCut(
    Checkpoint dense, const BlockStore& store,
    const SparseTables& tables) const {
  Cut cut;
  cut.drops = drops_;
  cut.delta = incremental_ && chain_.base != 0 && chain_.deltas < full_every_;
  cut.checkpoint = std::move(dense);
  if (restored_.has_value()) {
    for (const auto& b : restored_->blocks) {
      if (!store.Has(b.id)) cut.checkpoint.blocks.push_back(b);
    }
  }
  cut.blocks = cut.checkpoint.blocks.size();
  cut.clocks.resize(tables.size());
  cut.tombstones.resize(tables.size());
  for (size_t t = 0; t < tables.size(); ++t) {
    const SparseTable& table = tables.table(t);
    SparseTable::Rows rows;
    if (cut.delta) {
      // The rows updated since the last write, and the keys evicted since
      // (a key evicted and created again is in both: tombstones apply
      // first).
      rows = table.ChangedSince(chain_.clocks[t]);
      rows.evicted_keys = tombstones_[t];
      std::sort(rows.evicted_keys.begin(), rows.evicted_keys.end());
      rows.evicted_keys.erase(
          std::unique(rows.evicted_keys.begin(), rows.evicted_keys.end()),
          rows.evicted_keys.end());
    } else {
      rows = table.Snapshot();
    }
    cut.clocks[t] = table.clock();
    cut.tombstones[t] = tombstones_[t].size();
    cut.rows += rows.keys.size();
    cut.evicted_keys += rows.evicted_keys.size();
    cut.checkpoint.sparse_tables.emplace_back(static_cast<uint32_t>(t),
                                              std::move(rows));
  }
  if (cut.delta) {
    cut.checkpoint.kind = CheckpointKind::kDelta;
    cut.checkpoint.base_generation = chain_.base;
    cut.checkpoint.parent_generation = chain_.last;
  }
  return cut;
}

void CheckpointChain::Written(const Cut& cut,
                              const ShardCheckpoints::Written& written) {
  // Those tombstones are on disk (a full cut needs none); after a drop
  // (Evicted) the next cut is full and needs none either.
  const bool dropped = cut.drops != drops_;
  for (size_t t = 0; t < tombstones_.size(); ++t) {
    std::vector<uint64_t>& pending = tombstones_[t];
    pending.erase(
        pending.begin(),
        pending.begin() + std::min(pending.size(), cut.tombstones[t]));
  }
  if (cut.delta) {
    ++chain_.deltas;
  } else {
    chain_.base = dropped ? 0 : written.generation;
    chain_.deltas = 0;
  }
  chain_.last = written.generation;
  chain_.clocks = cut.clocks;
  SPDLOG_LOGGER_INFO(
      L(),
      "checkpoint written: {} ({}, {} blocks, {} rows, {} evicted "
      "keys, {} bytes, {} old files removed)",
      written.path, cut.delta ? "delta" : "full cut", cut.blocks, cut.rows,
      cut.evicted_keys, written.bytes, written.removed.size());
  if (!written.prune_status.ok()) {
    SPDLOG_LOGGER_WARN(L(), "ps {}: {}", index_,
                       std::string(written.prune_status.message()));
  }
}

}  // namespace downpour::server
