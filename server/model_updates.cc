// ModelUpdates: applying pushes and bsp rounds to a shard's blocks and sparse
// rows, each noted for the replica.
#include "server/model_updates.h"

#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace downpour::server {
namespace {

spdlog::logger* L() { return Log(Logger::kServer); }

// A bsp round's mean is computed on the current parameters: staleness 0.
constexpr uint64_t kCurrentVersion = std::numeric_limits<uint64_t>::max();

}  // namespace

absl::StatusOr<BlockStore::PushResult> ModelUpdates::Apply(
    BlockStore::Block* block, const void* data, uint64_t base_version,
    int32_t worker, WireEncoding encoding,
    const BlockStore::GradientStats* stats) {
  BlockStore& store = *parts_.store;
  const uint32_t id = store.IdOf(block);
  const bool log = parts_.log->Keeps(id);
  const double mean_staleness = log ? store.MeanStaleness(id) : 0.0;
  absl::StatusOr<BlockStore::PushResult> result =
      store.Apply(block, data, base_version, worker, encoding, stats);
  if (!result.ok()) return result;
  if (log) {
    BlockStore::Replayed update;
    update.id = id;
    update.version = result->version - 1;
    update.base_version = base_version;
    update.worker_id = worker;
    update.encoding = encoding;
    update.clip_norm = stats != nullptr ? stats->clip_norm : 0.0;
    update.mean_staleness = mean_staleness;
    parts_.log->Log(update, BlockStore::LengthOf(block), data);
  } else {
    parts_.log->Changed(id);
  }
  return result;
}

absl::StatusOr<int64_t> ModelUpdates::ApplyBlocks(
    const wire::PushView& request, const CheckedBlocks& checked,
    proto::PushResponse* response) {
  const int32_t worker = request.worker_id;
  int64_t bytes = 0;
  for (size_t i = 0; i < request.blocks.size(); ++i) {
    const wire::BlockRef& block = request.blocks[i];
    // The proto value as it came (it may be none of WireEncoding's: the store
    // refuses those); proto::Encoding and WireEncoding share values.
    absl::StatusOr<BlockStore::PushResult> result =
        Apply(checked.blocks[i], block.data, block.version, worker,
              static_cast<WireEncoding>(block.encoding), &checked.stats[i]);
    if (!result.ok()) {
      // The update would have overflowed this block (rare: the gradient
      // passed max_gradient_value).
      counters_->stats().rejected_pushes.Increment(1);
      MarkPushed(worker, request.sequence);
      return absl::Status(
          result.status().code(),
          absl::StrCat(result.status().message(), " (worker ", worker, ", ", i,
                       " of ", request.blocks.size(),
                       " blocks applied before it)"));
    }
    response->add_versions(result->version);
    counters_->RecordStaleness(result->staleness);
    bytes += block.size;
    parts_.guard->RecordNorm(block.id, worker, checked.stats[i].norm);
  }
  return bytes;
}

int64_t ModelUpdates::ApplyRows(
    const std::vector<SparseTables::DecodedRows>& rows) {
  const int64_t keys = parts_.tables->Apply(rows);
  if (!rows.empty()) parts_.log->Count();
  return keys;
}

void ModelUpdates::MarkPushed(int32_t worker, uint64_t sequence) {
  if (sequence == 0) return;
  parts_.admission->MarkApplied(worker, sequence);
  parts_.log->Changed(-1);
}

void ModelUpdates::ApplyCompleteRounds(ConsistencyGate* gate) {
  for (uint32_t id : gate->CompleteRounds()) {
    const Done done = ConsistencyGate::IsSparseRound(id)
                          ? ApplySparseRound(gate, id)
                          : ApplyDenseRound(gate, id);
    for (const auto& [worker, sequence] : done) {
      if (parts_.admission->IsNew(worker, sequence)) {
        MarkPushed(worker, sequence);
      }
    }
    gate->Bump();
  }
}

ModelUpdates::Done ModelUpdates::ApplyDenseRound(ConsistencyGate* gate,
                                                 uint32_t id) {
  std::vector<float> mean;
  Done done = gate->TakeRound(id, &mean);
  BlockStore::GradientStats stats;
  absl::StatusOr<BlockStore::Block*> block =
      parts_.store->ValidatePush(id, mean.data(), mean.size() * sizeof(float),
                                 WireEncoding::kFloat32, &stats);
  absl::StatusOr<BlockStore::PushResult> result =
      block.ok() ? Apply(*block, mean.data(), kCurrentVersion,
                         /*worker=*/-1, WireEncoding::kFloat32, &stats)
                 : absl::StatusOr<BlockStore::PushResult>(block.status());
  if (result.ok()) {
    gate->SetRoundVersion(id, result->version);
    counters_->RecordStaleness(result->staleness);
    counters_->stats().bsp_rounds.Increment(1);
    counters_->stats().applied_updates.Increment(1);
  } else if (block.ok()) {
    // The mean of validated gradients would overflow the block: the round
    // is dropped and the block kept as it was.
    SPDLOG_LOGGER_WARN(L(), "ps {}: bsp round of block {} refused: {}", index_,
                       id, std::string(result.status().message()));
  } else {
    // Every contribution was validated, so only a block placed elsewhere
    // meanwhile gets here; its pushers re-read the placement.
    SPDLOG_LOGGER_WARN(L(), "ps {}: bsp round of block {} dropped: {}", index_,
                       id, std::string(block.status().message()));
  }
  return done;
}

ModelUpdates::Done ModelUpdates::ApplySparseRound(ConsistencyGate* gate,
                                                  uint32_t id) {
  ConsistencyGate::SparseRound round;
  Done done = gate->TakeSparseRound(id, *parts_.tables, &round);
  const int64_t count = static_cast<int64_t>(round.keys.size());
  if (count == 0 || !parts_.tables->ApplyRound(round.table, round.keys,
                                               round.mean, round.counts)) {
    return done;
  }
  parts_.log->Count();
  counters_->stats().sparse_push_keys.Increment(static_cast<double>(count));
  counters_->stats().bsp_rounds.Increment(1);
  return done;
}

}  // namespace downpour::server
