// Replica: a backup's copy of one shard.
#include "server/replication/replica.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/wire_encoding.h"
#include "server/optimizer.h"
#include "server/sparse_rows_proto.h"

namespace downpour::server {
namespace {

// Apply's decoding, before the lock: InvalidArgument when the request's
// blocks or rows are not whole finite values.
absl::Status DecodeBlocks(const proto::ReplicateRequest& request,
                          std::vector<BlockStore::BlockSnapshot>* blocks) {
  blocks->resize(request.blocks_size());
  for (int i = 0; i < request.blocks_size(); ++i) {
    RETURN_IF_ERROR(ToBlock(request.blocks(i), "replicate", &(*blocks)[i]));
  }
  return absl::OkStatus();
}

absl::Status DecodeRows(const proto::ReplicateRequest& request,
                        std::vector<SparseTable::Rows>* rows) {
  rows->resize(request.sparse_size());
  for (int i = 0; i < request.sparse_size(); ++i) {
    absl::Status ok = ToRows(request.sparse(i), "replicate", &(*rows)[i]);
    if (!ok.ok()) return ok;
  }
  return absl::OkStatus();
}

}  // namespace

Replica::Replica(OptimizerSection dense, std::string expected_settings)
    : dense_(std::move(dense)),
      expected_settings_(expected_settings.empty()
                             ? OptimizerSettingsText(dense_)
                             : std::move(expected_settings)) {}

absl::Status Replica::Replay(const proto::ReplicateRequest& request) {
  for (const proto::ReplicaUpdate& u : request.updates()) {
    absl::StatusOr<uint64_t> held = store_->Version(u.block());
    if (!held.ok() || *held < u.version()) {
      return absl::DataLossError(absl::StrCat(
          "replicate: an update of block ", u.block(), " at version ",
          u.version(), " came to a standby that holds ",
          held.ok() ? absl::StrCat("version ", *held) : "no such block",
          ": a cut was lost"));
    }
    if (*held > u.version()) continue;  // the block came whole, with it
    BlockStore::Replayed replayed;
    replayed.id = u.block();
    replayed.version = u.version();
    replayed.base_version = u.base_version();
    replayed.worker_id = u.worker();
    replayed.encoding = static_cast<WireEncoding>(u.encoding());
    replayed.clip_norm = u.clip_norm();
    replayed.mean_staleness = u.mean_staleness();
    replayed.data = u.gradient().data();
    replayed.bytes = u.gradient().size();
    absl::StatusOr<BlockStore::PushResult> applied = store_->Replay(replayed);
    if (!applied.ok()) {
      return absl::Status(
          applied.status().code(),
          absl::StrCat("replicate: ", applied.status().message()));
    }
  }
  for (const proto::ReplicaCheck& check : request.checks()) {
    uint64_t version = 0;
    const uint32_t crc = store_->BlockCrc32c(check.block(), &version);
    if (version != check.version() || crc != check.crc32c()) {
      return absl::DataLossError(absl::StrCat(
          "replicate: block ", check.block(), " differs from the primary's (",
          "version ", version, " vs ", check.version(), ", checksum ", crc,
          " vs ", check.crc32c(), ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> Replica::Apply(
    const proto::ReplicateRequest& request) {
  // Decoded before the lock: the copies are the bulk of the work.
  std::vector<BlockStore::BlockSnapshot> blocks;
  absl::Status ok = DecodeBlocks(request, &blocks);
  std::vector<SparseTable::Rows> rows;
  if (ok.ok()) ok = DecodeRows(request, &rows);
  if (!ok.ok()) return ok;
  absl::MutexLock lock(&mu_);
  ok = CheckNotFenced(request);
  if (ok.ok()) ok = request.full() ? StartCopy(request) : CheckHeld(request);
  // Every table's rows checked before anything is applied.
  if (ok.ok()) ok = CheckRows(request, rows);
  if (!ok.ok()) return ok;
  for (int i = 0; i < request.sparse_size(); ++i) {
    tables_[request.sparse(i).table()]->MergeChecked(rows[i]);
  }
  ok = AddBlocks(&blocks);
  if (!ok.ok()) return ok;
  // Updates apply after the blocks of the same request (a cut sends them
  // in that order).
  absl::Status replayed = Replay(request);
  if (!replayed.ok()) {
    // Neither taken over nor added to in this state: only a full cut (which
    // the primary sends next) is accepted now.
    held_ = false;
    store_.reset();
    return replayed;
  }
  EndRequest(request);
  return generation_;
}

absl::Status Replica::CheckNotFenced(const proto::ReplicateRequest& request) {
  if (fenced_ && fenced_shard_ != request.shard_index()) {
    return absl::FailedPreconditionError(
        absl::StrCat("replicate: this standby serves shard ", fenced_shard_,
                     " now and backs up no other"));
  }
  if (fenced_) {
    return absl::AbortedError(
        absl::StrCat("replicate: this standby serves shard ", fenced_shard_,
                     " itself now; the primary at ", request.primary(),
                     " was replaced and must stop"));
  }
  return absl::OkStatus();
}

absl::Status Replica::StartCopy(const proto::ReplicateRequest& request) {
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer =
      Optimizer::Create(dense_);
  if (!optimizer.ok()) return optimizer.status();
  if ((*optimizer)->name() != request.optimizer()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "replicate: the primary's optimizer is ", request.optimizer(),
        ", this standby's ", (*optimizer)->name(),
        ": both must read the same optimizer section (one config file)"));
  }
  // The same type with another learning rate (or any other number) would
  // replay every update differently: caught here, not by the checksums a
  // second later, with a full copy each second after.
  const std::string differs =
      request.optimizer_settings().empty()
          ? ""  // an older primary: the type was compared above
          : FirstOptimizerDifference(request.optimizer_settings(),
                                     "on the primary", expected_settings_,
                                     "on this standby");
  if (!differs.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "replicate: ", differs,
        ": both must read the same optimizer section (one config file)"));
  }
  held_ = false;
  BlockStore::Options options;
  // Every norm the primary may have clipped with.
  options.compute_norms = true;
  store_ = std::make_unique<BlockStore>(*std::move(optimizer), options);
  tables_.clear();
  state_ = Checkpoint();
  state_.shard_index = request.shard_index();
  generation_ = 0;
  return absl::OkStatus();
}

absl::Status Replica::CheckHeld(const proto::ReplicateRequest& request) {
  if (state_.shard_index != request.shard_index() || store_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("replicate: this standby holds no full copy of shard ",
                     request.shard_index(), ": send a full cut"));
  }
  return absl::OkStatus();
}

absl::Status Replica::CheckRows(const proto::ReplicateRequest& request,
                                const std::vector<SparseTable::Rows>& rows) {
  for (int i = 0; i < request.sparse_size(); ++i) {
    const uint32_t id = request.sparse(i).table();
    std::unique_ptr<SparseTable>& table = tables_[id];
    if (table == nullptr) {
      SparseTable::Options options;
      options.dim = rows[i].dim;
      options.optimizer.type = rows[i].optimizer;
      options.track_clocks = !rows[i].clocks.empty();
      absl::StatusOr<std::unique_ptr<SparseTable>> made =
          SparseTable::Create(options);
      if (!made.ok()) {
        tables_.erase(id);
        return absl::InvalidArgumentError(absl::StrCat(
            "replicate: sparse table ", id, ": ", made.status().message()));
      }
      table = *std::move(made);
    }
    // The primary keeps clocks (eviction, incremental checkpoints): so does
    // the copy, for the day it takes over.
    if (!rows[i].clocks.empty()) table->TrackClocks();
    absl::Status fits = table->CheckMerge(rows[i]);
    if (!fits.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("replicate: sparse table ", id, ": ", fits.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status Replica::AddBlocks(
    std::vector<BlockStore::BlockSnapshot>* blocks) {
  for (BlockStore::BlockSnapshot& b : *blocks) {
    absl::StatusOr<uint64_t> held = store_->Version(b.id);
    if (!held.ok() || *held <= b.version) {
      absl::Status added = store_->AddBlock(b.id, std::move(b.values),
                                            b.version, std::move(b.state));
      if (!added.ok()) {
        held_ = false;
        store_.reset();  // only a full cut is accepted now
        return absl::InvalidArgumentError(
            absl::StrCat("replicate: block ", b.id, ": ", added.message()));
      }
    }
  }
  return absl::OkStatus();
}

void Replica::EndRequest(const proto::ReplicateRequest& request) {
  state_.placement_epoch = request.placement_epoch();
  state_.optimizer = request.optimizer();
  if (request.generation() > 0) {
    // The last request of a cut: the windows and the generation of that
    // moment.
    state_.sequences.clear();
    for (const proto::ReplicaSequence& s : request.sequences()) {
      state_.sequences[s.worker_id()] = SequenceWindow(s.base(), s.mask());
    }
    generation_ = request.generation();
    held_ = true;
  }
}

std::optional<Checkpoint> Replica::Take(int shard) {
  absl::MutexLock lock(&mu_);
  if (fenced_ || !held_ || store_ == nullptr || state_.shard_index != shard) {
    return std::nullopt;
  }
  fenced_ = true;
  fenced_shard_ = shard;
  Checkpoint out = std::move(state_);
  out.blocks = store_->Snapshot();
  store_.reset();
  out.sparse_tables.clear();
  for (auto& [id, table] : tables_) {
    out.sparse_tables.emplace_back(id, table->Snapshot());
  }
  tables_.clear();
  held_ = false;
  return out;
}

void Replica::Fence(int shard) {
  absl::MutexLock lock(&mu_);
  fenced_ = true;
  fenced_shard_ = shard;
  held_ = false;
  store_.reset();
  tables_.clear();
  state_ = Checkpoint();
}

void Replica::Drop() {
  absl::MutexLock lock(&mu_);
  if (fenced_) return;
  held_ = false;
  store_.reset();
  tables_.clear();
  state_ = Checkpoint();
  state_.shard_index = -1;
  generation_ = 0;
}

Replica::Info Replica::info() const {
  absl::MutexLock lock(&mu_);
  Info info;
  info.held = held_;
  info.shard = held_ ? state_.shard_index : -1;
  info.generation = generation_;
  if (store_ != nullptr) {
    info.applied_total += store_->version_sum();
    info.bytes += static_cast<uint64_t>(store_->num_floats()) *
                  (1 + store_->optimizer().state_slots()) * sizeof(float);
  }
  for (const auto& [id, table] : tables_) {
    info.applied_total += table->version_sum();
    info.bytes += static_cast<uint64_t>(table->bytes());
    info.sparse_rows += table->rows();
  }
  return info;
}

}  // namespace downpour::server
