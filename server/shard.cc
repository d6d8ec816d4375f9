// Shard: request validation, exactly-once pushes and checkpoints over BlockStore.
#include "server/shard.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/checksum.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace downpour::server {
namespace {

spdlog::logger* L() { return Log(Logger::kServer); }

}  // namespace

absl::StatusOr<std::unique_ptr<Shard>> Shard::Create(const Config& config,
                                                     int index,
                                                     Counters* counters) {
  ASSIGN_OR_RETURN(ModelSpec spec, ModelSpec::Create(config.model));
  ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer,
                   Optimizer::Create(config.optimizer));
  std::optional<Checkpoint> restored;
  if (!config.checkpoint.dir.empty()) {
    const std::string path = CheckpointPath(config.checkpoint.dir, index);
    absl::StatusOr<Checkpoint> checkpoint = ReadCheckpoint(path);
    if (checkpoint.ok()) {
      if (checkpoint->optimizer != optimizer->name()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "checkpoint '", path, "' was written with optimizer ",
            checkpoint->optimizer, " but the config says ", optimizer->name(),
            "; move the checkpoint away or restore the optimizer setting"));
      }
      SPDLOG_LOGGER_INFO(L(), "loaded checkpoint {}: {} blocks", path,
                         checkpoint->blocks.size());
      restored = *std::move(checkpoint);
    } else if (!absl::IsNotFound(checkpoint.status())) {
      return checkpoint.status();
    }
  }
  BlockStore::Options store_options;
  store_options.num_workers = static_cast<int>(config.cluster.workers.size());
  store_options.counters = counters;
  auto store =
      std::make_unique<BlockStore>(std::move(optimizer), store_options);
  return std::unique_ptr<Shard>(new Shard(config, index, std::move(spec),
                                          std::move(store), std::move(restored),
                                          counters));
}

Shard::Shard(const Config& config, int index, ModelSpec spec,
             std::unique_ptr<BlockStore> store, std::optional<Checkpoint> restored,
             Counters* counters)
    : config_(config),
      index_(index),
      spec_(std::move(spec)),
      counters_(counters),
      store_(std::move(store)),
      restored_(std::move(restored)) {
  absl::MutexLock lock(&mu_);
  if (restored_.has_value()) last_sequence_ = restored_->last_sequence;
}

absl::Status Shard::Assign(uint64_t epoch, const std::vector<uint32_t>& ids) {
  absl::MutexLock lock(&mu_);
  int from_checkpoint = 0, fresh = 0;
  for (uint32_t id : ids) {
    if (id >= spec_.blocks().size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "placement assigns block ", id, " but the model has ",
          spec_.blocks().size(), " blocks: do all daemons use the same config?"));
    }
    if (store_->Has(id)) continue;
    const BlockSpec& block = spec_.blocks()[id];
    const BlockStore::BlockSnapshot* saved = nullptr;
    if (restored_.has_value()) {
      for (const auto& b : restored_->blocks) {
        if (b.id == id && static_cast<int64_t>(b.values.size()) == block.length) {
          saved = &b;
        }
      }
    }
    if (saved != nullptr) {
      RETURN_IF_ERROR(store_->AddBlock(id, saved->values, saved->version, saved->state));
      ++from_checkpoint;
    } else {
      std::vector<float> values(block.length);
      spec_.InitBlock(block, config_.model.init_seed, values.data());
      RETURN_IF_ERROR(store_->AddBlock(id, std::move(values)));
      ++fresh;
    }
  }
  epoch_ = epoch;
  SPDLOG_LOGGER_INFO(L(), "placement epoch {}: serving {} blocks ({} from checkpoint, {} initialised, {} kept)",
                     epoch, ids.size(), from_checkpoint, fresh,
                     ids.size() - from_checkpoint - fresh);
  return absl::OkStatus();
}

uint64_t Shard::epoch() const {
  absl::ReaderMutexLock lock(&mu_);
  return epoch_;
}

size_t Shard::num_blocks() const {
  absl::ReaderMutexLock lock(&mu_);
  return store_->num_blocks();
}

absl::Status Shard::CheckEpoch(const char* op, uint64_t request_epoch) const {
  if (epoch_ == 0) {
    return absl::UnavailableError(absl::StrCat(
        op, ": ps ", index_,
        " holds no blocks yet (waiting for the coordinator's placement)"));
  }
  if (request_epoch < epoch_) {
    return absl::FailedPreconditionError(absl::StrCat(
        op, ": stale placement epoch ", request_epoch, "; ps ", index_,
        " serves epoch ", epoch_, ": re-read the placement"));
  }
  if (request_epoch > epoch_) {
    return absl::UnavailableError(absl::StrCat(
        op, ": ps ", index_, " is at placement epoch ", epoch_,
        ", behind the request's ", request_epoch, "; retry shortly"));
  }
  return absl::OkStatus();
}

absl::Status Shard::Pull(const proto::PullRequest& request,
                         proto::PullResponse* response) const {
  int64_t bytes = 0;
  {
    absl::ReaderMutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckEpoch("pull", request.placement_epoch()));
    for (uint32_t id : request.block_ids()) {
      proto::BlockData* block = response->add_blocks();
      block->set_block_id(id);
      ASSIGN_OR_RETURN(uint64_t version, store_->Pull(id, block->mutable_data(),
                                                      request.worker_id()));
      block->set_version(version);
      bytes += block->data().size();
    }
  }
  counters_->Add("pulls", 1);
  counters_->Add("bytes_out", bytes);
  return absl::OkStatus();
}

absl::Status Shard::ValidatePush(const proto::PushRequest& request,
                                 std::vector<BlockStore::Block*>* blocks) const {
  blocks->reserve(request.blocks_size());
  for (const proto::BlockData& block : request.blocks()) {
    absl::StatusOr<BlockStore::Block*> resolved = store_->ValidatePush(
        block.block_id(), block.data().data(), block.data().size());
    if (!resolved.ok()) {
      counters_->Add("rejected_pushes", 1);
      return absl::Status(resolved.status().code(),
                          absl::StrCat(resolved.status().message(), " (worker ",
                                       request.worker_id(), ")"));
    }
    blocks->push_back(*resolved);
  }
  return absl::OkStatus();
}

absl::Status Shard::Push(const proto::PushRequest& request,
                         proto::PushResponse* response) {
  std::vector<BlockStore::Block*> blocks;
  int64_t bytes = 0;
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckEpoch("push", request.placement_epoch()));
    RETURN_IF_ERROR(ValidatePush(request, &blocks));
    const bool tracked = request.sequence() > 0;
    if (tracked) {
      auto it = last_sequence_.find(request.worker_id());
      if (it != last_sequence_.end() && request.sequence() <= it->second) {
        counters_->Add("duplicate_pushes", 1);
        response->set_duplicate(true);
        return absl::OkStatus();
      }
    }
    for (int i = 0; i < request.blocks_size(); ++i) {
      const proto::BlockData& block = request.blocks(i);
      const BlockStore::PushResult result = store_->Apply(
          blocks[i], block.data().data(), block.version(), request.worker_id());
      response->add_versions(result.version);
      counters_->RecordStaleness(result.staleness);
      bytes += block.data().size();
    }
    if (tracked) last_sequence_[request.worker_id()] = request.sequence();
  }
  counters_->Add("pushes", 1);
  counters_->Add("applied_updates", request.blocks_size());
  counters_->Add("bytes_in", bytes);
  return absl::OkStatus();
}

proto::ChecksumResponse Shard::Checksums() const {
  proto::ChecksumResponse response;
  absl::ReaderMutexLock lock(&mu_);
  for (uint32_t id : store_->block_ids()) {
    proto::BlockChecksum* sum = response.add_blocks();
    uint64_t version = 0;
    sum->set_block_id(id);
    sum->set_crc32c(store_->BlockCrc32c(id, &version));
    sum->set_version(version);
  }
  return response;
}

absl::Status Shard::WriteCheckpoint() {
  if (config_.checkpoint.dir.empty()) return absl::OkStatus();
  Checkpoint checkpoint;
  checkpoint.shard_index = index_;
  {
    // Shared with pulls, exclusive of pushes: the blocks and the applied
    // sequences copied here agree. The disk write below runs without the lock.
    absl::ReaderMutexLock lock(&mu_);
    checkpoint.placement_epoch = epoch_;
    checkpoint.optimizer = store_->optimizer().name();
    checkpoint.blocks = store_->Snapshot();
    checkpoint.last_sequence = last_sequence_;
    // Blocks restored but not (yet) placed here are kept, so a checkpoint written
    // before re-placement does not drop them.
    if (restored_.has_value()) {
      for (const auto& b : restored_->blocks) {
        if (!store_->Has(b.id)) checkpoint.blocks.push_back(b);
      }
    }
  }
  const std::string path = CheckpointPath(config_.checkpoint.dir, index_);
  RETURN_IF_ERROR(server::WriteCheckpoint(path, checkpoint));
  counters_->Add("checkpoints", 1);
  SPDLOG_LOGGER_INFO(L(), "checkpoint written: {} ({} blocks)", path,
                     checkpoint.blocks.size());
  return absl::OkStatus();
}

}  // namespace downpour::server
