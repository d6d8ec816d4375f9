// Shard: the order of a request's steps over the parts it owns, under its
// one lock.
#include "server/shard.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "server/bucket_transfer.h"

namespace downpour::server {
namespace {

spdlog::logger* L() { return Log(Logger::kServer); }

}  // namespace

absl::StatusOr<std::unique_ptr<Shard>> Shard::Build(
    const Config& config, int index, Counters* counters,
    std::optional<Checkpoint> state) {
  ASSIGN_OR_RETURN(ModelSpec spec, ModelSpec::Create(config.model));
  ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer,
                   Optimizer::Create(DenseOptimizer(config)));
  ASSIGN_OR_RETURN(
      RestoredShard restored,
      state.has_value()
          ? RestoreShardFrom(config, index, spec, optimizer->name(),
                             *std::move(state))
          : RestoreShard(config, index, spec, optimizer->name(), counters));
  // Norms are measured for the PushGuard's bounds.
  auto store = std::make_unique<BlockStore>(
      std::move(optimizer),
      BlockStore::Options{WorkerSlots(config.cluster), counters,
                          config.robustness.norm_clip_factor > 0 ||
                              config.robustness.norm_refuse_factor > 0});
  const std::optional<Checkpoint>& checkpoint = restored.checkpoint;
  ASSIGN_OR_RETURN(
      std::unique_ptr<SparseTables> sparse,
      SparseTables::Create(config, index, spec,
                           checkpoint.has_value() ? &*checkpoint : nullptr,
                           counters));
  return std::unique_ptr<Shard>(new Shard(config, index, std::move(spec),
                                          std::move(store), std::move(sparse),
                                          std::move(restored), counters));
}

Shard::Shard(const Config& config, int index, ModelSpec spec,
             std::unique_ptr<BlockStore> store,
             std::unique_ptr<SparseTables> sparse, RestoredShard restored,
             Counters* counters)
    : config_(config),
      index_(index),
      spec_(std::move(spec)),
      counters_(counters),
      may_hold_pushes_(config.training.consistency == ConsistencyMode::kSsp ||
                       config.training.consistency == ConsistencyMode::kBsp),
      pull_(&spec_, WorkerSlots(config.cluster)),
      store_(std::move(store)),
      sparse_(std::move(sparse)),
      replies_(sparse_->budget().reply_bytes()),
      epoch_(index),
      moved_(index),
      // The restored applied-push windows go on, so pushes acknowledged
      // before the checkpoint are not applied again.
      admission_({WorkerSlots(config.cluster), index, counters},
                 restored.checkpoint.has_value()
                     ? restored.checkpoint->sequences
                     : std::map<int32_t, SequenceWindow>()),
      chain_(config, index, sparse_->size(), std::move(restored)),
      guard_({WorkerSlots(config.cluster),
              static_cast<int64_t>(spec_.blocks().size()), index,
              config.robustness, counters}),
      gate_(config, index, counters),
      replica_log_(spec_.blocks().size(), store_->optimizer().state_slots()),
      updates_(
          index, counters,
          {store_.get(), sparse_.get(), &admission_, &guard_, &replica_log_}) {}

absl::Status Shard::Assign(uint64_t epoch, const std::vector<uint32_t>& ids) {
  absl::MutexLock lock(&mu_);
  std::vector<char> listed(spec_.blocks().size(), 0);
  for (uint32_t id : ids) {
    if (id < listed.size()) listed[id] = 1;
  }
  // Blocks a live move handed to another ps: kept for its last pass.
  int moved_away = 0;
  for (uint32_t id : store_->block_ids()) {
    if (id < listed.size() && listed[id] != 0) continue;
    moved_.Park(*store_->Remove(id));
    ++moved_away;
  }
  for (BlockStore::BlockSnapshot& b : chain_.TakeUnplaced(listed)) {
    moved_.Park(std::move(b));
    ++moved_away;
  }
  int from_checkpoint = 0, fresh = 0;
  for (uint32_t id : ids) {
    moved_.Returned(id);
    if (store_->Has(id)) continue;
    ASSIGN_OR_RETURN(
        const bool restored,
        chain_.AddBlock(id, spec_, config_.model.init_seed, store_.get()));
    replica_log_.Changed(id);
    ++(restored ? from_checkpoint : fresh);
  }
  epoch_.Set(epoch);
  SPDLOG_LOGGER_INFO(
      L(),
      "placement epoch {}: serving {} blocks ({} from "
      "checkpoint, {} initialised, {} kept{})",
      epoch, ids.size(), from_checkpoint, fresh,
      ids.size() - from_checkpoint - fresh,
      moved_away > 0 ? absl::StrCat("; ", moved_away, " moved to another ps")
                     : std::string());
  return absl::OkStatus();
}

absl::Status Shard::CopyBlocks(const proto::CopyBlocksRequest& request,
                               proto::CopyBlocksResponse* response) const {
  absl::ReaderMutexLock lock(&mu_);
  if (!epoch_.placed() || epoch_.value() < request.at_epoch()) {
    return absl::UnavailableError(absl::StrCat(
        "copy blocks: ps ", index_, " serves placement epoch ", epoch_.value(),
        "; move ", request.move_id(), "'s last pass waits for epoch ",
        request.at_epoch(), " (retry)"));
  }
  RETURN_IF_ERROR(
      moved_.Copy({request.blocks().begin(), request.blocks().end()},
                  kMoveChunkBytes, response));
  response->set_placement_epoch(epoch_.value());
  return absl::OkStatus();
}

absl::Status Shard::ImportMovedBlocks(
    std::vector<BlockStore::BlockSnapshot> blocks) {
  absl::MutexLock lock(&mu_);
  for (BlockStore::BlockSnapshot& b : blocks) {
    if (b.id >= spec_.blocks().size() ||
        static_cast<int64_t>(b.values.size()) != spec_.blocks()[b.id].length) {
      return absl::InvalidArgumentError(absl::StrCat(
          "import moved blocks: block ", b.id, " with ", b.values.size(),
          " values is not a block of this model: does the source run this "
          "config?"));
    }
    const uint32_t id = b.id;
    RETURN_IF_ERROR(store_->AddBlock(id, std::move(b.values), b.version,
                                     std::move(b.state)));
    replica_log_.Changed(id);
  }
  return absl::OkStatus();
}

int Shard::ReleaseMovedBlocks(const std::set<uint32_t>& keep) {
  absl::MutexLock lock(&mu_);
  return moved_.Release(keep);
}

uint64_t Shard::epoch() const {
  absl::ReaderMutexLock lock(&mu_);
  return epoch_.value();
}

size_t Shard::num_blocks() const {
  absl::ReaderMutexLock lock(&mu_);
  return store_->num_blocks();
}

absl::Status Shard::VisitBlocks(
    const proto::PullRequest& request,
    const std::function<absl::Status(size_t, size_t)>& reserve,
    const std::function<char*(const PulledBlock&)>& room) const {
  // Checked, and the reply sized, before anything is allocated or locked.
  ASSIGN_OR_RETURN(const PullBlocks::Plan plan, pull_.Check(request));
  RETURN_IF_ERROR(reserve(request.block_ids_size(), plan.payload_bytes));
  {
    absl::ReaderMutexLock lock(&mu_);
    RETURN_IF_ERROR(epoch_.Check("pull", request.placement_epoch()));
    if (!moved_.empty()) {
      for (uint32_t id : request.block_ids()) {
        RETURN_IF_ERROR(moved_.Check("pull", id));
      }
    }
    RETURN_IF_ERROR(pull_.Visit(request, plan, *store_, room));
  }
  counters_->stats().pulls.Increment(1);
  counters_->stats().bytes_out.Increment(
      static_cast<double>(plan.payload_bytes));
  return absl::OkStatus();
}

absl::Status Shard::Pull(const proto::PullRequest& request,
                         proto::PullResponse* response) const {
  response->Clear();
  const PullBlocks::Sink sink = PullBlocks::Into(response);
  absl::Status visited = VisitBlocks(request, sink.reserve, sink.room);
  if (!visited.ok()) response->Clear();
  return visited;
}

absl::StatusOr<PushAdmission::Verdict> Shard::Admit(
    const wire::PushView& request, proto::PushResponse* response) const {
  // A forged id, key or sequence leaves no trace (nothing to checkpoint).
  absl::StatusOr<PushAdmission::Verdict> verdict =
      admission_.Admit(request.worker_id, request.sequence, request.push_key);
  if (verdict.ok() && *verdict == PushAdmission::Verdict::kNew &&
      request.blocks.empty() && request.sparse.empty() &&
      request.sequence > 0 &&
      !admission_.WithinWindow(request.worker_id, request.sequence)) {
    // It would change nothing but the window: an empty push moves none. (One
    // within the window only fills its slot: what is left of a request
    // whose blocks all moved to another ps. Sent again, it is a duplicate.)
    verdict = absl::InvalidArgumentError(
        absl::StrCat("push: worker ", request.worker_id,
                     " sent a push without blocks: refused, nothing recorded"));
  }
  if (!verdict.ok()) {
    counters_->stats().rejected_pushes.Increment(1);
  } else if (*verdict == PushAdmission::Verdict::kDuplicate) {
    counters_->stats().duplicate_pushes.Increment(1);
    refusals_.AnswerDuplicate(request.worker_id, request.sequence, response);
  }
  return verdict;
}

absl::Status Shard::ValidatePush(const wire::PushView& request,
                                 CheckedPush* checked) {
  checked->rows.clear();
  // A block moved away: FailedPrecondition, the sequence not used up.
  if (!moved_.empty()) {
    for (const wire::BlockRef& block : request.blocks) {
      RETURN_IF_ERROR(moved_.Check("push", block.id));
    }
  }
  absl::Status valid = ValidateDensePush(request, *store_, &guard_, checked);
  if (valid.ok()) valid = sparse_->DecodePush(request, &checked->rows);
  if (valid.ok()) valid = MakeRoom(request, checked->rows);
  if (valid.ok()) return valid;
  checked->rows.clear();
  counters_->stats().rejected_pushes.Increment(1);
  // Not retried (an outlier is answered PushResponse.refused): the sequence
  // is used up, so it cannot hold the window back.
  if (absl::IsInvalidArgument(valid) || absl::IsNotFound(valid) ||
      absl::IsAborted(valid)) {
    updates_.MarkPushed(request.worker_id, request.sequence);
  }
  return valid;
}

absl::Status Shard::MakeRoom(
    const wire::PushView& request,
    const std::vector<SparseTables::DecodedRows>& rows) {
  std::vector<std::vector<uint64_t>> evicted;
  RETURN_IF_ERROR(sparse_->MakeRoom(rows, request.worker_id, &evicted));
  bool any = false;
  for (size_t t = 0; t < evicted.size(); ++t) {
    if (evicted[t].empty()) continue;
    chain_.Evicted(t, evicted[t]);
    any = true;
  }
  if (any) NoteRowsChanged();
  return absl::OkStatus();
}

void Shard::NoteRowsChanged() {
  if (backup_named_) {
    replica_log_.Changed(-1);
  } else {
    sparse_->ClearChanges();
  }
}

absl::Status Shard::CopyBuckets(const proto::CopyBucketsRequest& request,
                                proto::CopyBucketsResponse* response) const {
  if (sparse_->empty()) {
    return absl::FailedPreconditionError(
        "copy buckets: this model has no sparse tables");
  }
  absl::ReaderMutexLock lock(&mu_);
  if (!epoch_.placed() || epoch_.value() < request.at_epoch()) {
    return absl::UnavailableError(
        absl::StrCat("copy buckets: ps ", index_, " serves placement epoch ",
                     epoch_.value(), "; the move's last pass waits for epoch ",
                     request.at_epoch(), " (retry)"));
  }
  RETURN_IF_ERROR(ExportBucketChunk(*sparse_, request, response));
  response->set_placement_epoch(epoch_.value());
  return absl::OkStatus();
}

absl::Status Shard::ImportMoved(
    const std::vector<std::pair<uint32_t, SparseTable::Rows>>& rows) {
  absl::MutexLock lock(&mu_);
  for (const auto& [table, in] : rows) {
    RETURN_IF_ERROR(sparse_->Import(table, in));
  }
  NoteRowsChanged();
  return absl::OkStatus();
}

int64_t Shard::DropUnheldRows(const std::vector<char>& keep) {
  if (sparse_->empty()) return 0;
  // The keys to drop are listed once; then they go in batches, the lock
  // released between them: pushes to the buckets this shard holds wait for
  // one batch at most, not for the whole drop.
  std::vector<std::vector<uint64_t>> unheld;
  {
    absl::MutexLock lock(&mu_);
    unheld = sparse_->UnheldKeys(keep);
    // Without a backup the changes recorded are moot, and each batch would
    // re-key them all (SparseTable::DropRows).
    if (!backup_named_) sparse_->ClearChanges();
  }
  std::vector<size_t> next(unheld.size(), 0);
  int64_t n = 0;
  for (;;) {
    bool more = false;
    {
      absl::MutexLock lock(&mu_);
      int64_t batch = 0;
      for (size_t t = 0; t < unheld.size(); ++t) {
        const size_t take =
            std::min<size_t>(unheld[t].size() - next[t], kDropBatchRows);
        if (take == 0) continue;
        const std::vector<uint64_t> dropped = sparse_->DropMovedKeys(
            static_cast<uint32_t>(t), unheld[t].data() + next[t],
            static_cast<int64_t>(take));
        next[t] += take;
        more |= next[t] < unheld[t].size();
        if (dropped.empty()) continue;
        chain_.Evicted(t, dropped);
        batch += static_cast<int64_t>(dropped.size());
      }
      if (batch > 0) NoteRowsChanged();
      n += batch;
      if (!more) sparse_->ForgetRowKeys();
    }
    if (!more) return n;
    // The pushes that waited for this batch go first.
    absl::SleepFor(kDropPause);
  }
}

int64_t Shard::sparse_rows_evicted() const {
  absl::ReaderMutexLock lock(&mu_);
  int64_t n = 0;
  for (const SparseTables::Stats& t : sparse_->stats()) n += t.evicted;
  return n;
}

void Shard::SetReplicaLog(bool on) {
  absl::MutexLock lock(&mu_);
  backup_named_ = on;
  replica_log_.SetLogging(on &&
                          DenseOptimizer(config_).delay_compensation <= 0);
}

Shard::ReplicaCut Shard::CutForReplica(bool full, bool checks) {
  ReplicaCut cut;
  // Exclusive: the dirty set is cleared with the copy, and no push may land
  // between the blocks and the windows copied.
  absl::MutexLock lock(&mu_);
  cut.generation = replica_log_.generation();
  cut.epoch = epoch_.value();
  cut.optimizer = store_->optimizer().name();
  if (full) {
    cut.optimizer_settings =
        OptimizerSettingsText(store_->optimizer().section());
  }
  cut.sequences = admission_.windows();
  cut.blocks =
      full ? store_->Snapshot() : store_->Snapshot(replica_log_.SortedDirty());
  cut.updates = replica_log_.TakeUpdates(full);
  if (checks) cut.checks = ChecksOf(*store_);
  cut.sparse = sparse_->CutForReplica(full);
  replica_log_.ClearDirty();
  return cut;
}

uint64_t Shard::generation() const {
  absl::ReaderMutexLock lock(&mu_);
  return replica_log_.generation();
}

uint64_t Shard::push_holes() const {
  absl::ReaderMutexLock lock(&mu_);
  return admission_.Holes();
}

std::vector<IssuedIncarnation> Shard::applied_from() const {
  absl::ReaderMutexLock lock(&mu_);
  return admission_.AppliedFrom();
}

uint64_t Shard::applied_total() const {
  absl::ReaderMutexLock lock(&mu_);
  uint64_t total = store_->version_sum();
  // Row updates count as block updates do: one per row per push.
  total += sparse_->version_sum();
  total += chain_.UnplacedVersions(*store_);
  return total;
}

void Shard::SetActiveWorkers(const std::vector<int>& workers) {
  absl::MutexLock lock(&mu_);
  if (!gate_.SetActiveWorkers(workers)) return;
  updates_.ApplyCompleteRounds(&gate_);
  gate_.Bump();
}

void Shard::ReleaseHeldPushes() {
  absl::MutexLock lock(&mu_);
  gate_.ReleaseHolds();
}

void Shard::LearnWorkerIncarnations(
    const std::vector<IssuedIncarnation>& incarnations) {
  absl::MutexLock lock(&mu_);
  admission_.LearnWorkerIncarnations(incarnations);
}

absl::Status Shard::Push(const wire::PushView& request,
                         proto::PushResponse* response, absl::Time deadline) {
  const absl::Time until =
      std::min(deadline - kHoldMargin, absl::Now() + kMaxHold);
  // The block ids only matter to the ssp/bsp gate; async pushes skip them.
  const std::vector<uint32_t> ids =
      may_hold_pushes_ ? BlockIds(request) : std::vector<uint32_t>();
  CheckedPush checked;
  int64_t bytes = 0;
  int64_t keys = 0;
  {
    absl::MutexLock lock(&mu_);
    // Every step again after a wait: the placement may have moved on, and a
    // retry of this push may have been applied meanwhile.
    for (;;) {
      ASSIGN_OR_RETURN(const Turn turn,
                       TakeTurn(request, ids, until, response, &checked));
      if (turn == Turn::kAnswered) return absl::OkStatus();
      if (turn == Turn::kApply) break;
    }
    ASSIGN_OR_RETURN(bytes, updates_.ApplyBlocks(request, checked, response));
    keys = updates_.ApplyRows(checked.rows);
    updates_.MarkPushed(request.worker_id, request.sequence);
    gate_.Applied(request.worker_id, ids, request.clock);
  }
  if (keys > 0)
    counters_->stats().sparse_push_keys.Increment(static_cast<double>(keys));
  counters_->stats().pushes.Increment(1);
  counters_->stats().applied_updates.Increment(
      static_cast<double>(request.blocks.size()));
  counters_->stats().bytes_in.Increment(bytes);
  return absl::OkStatus();
}

absl::StatusOr<Shard::Turn> Shard::TakeTurn(const wire::PushView& request,
                                            const std::vector<uint32_t>& ids,
                                            absl::Time until,
                                            proto::PushResponse* response,
                                            CheckedPush* checked) {
  const int32_t worker = request.worker_id;
  RETURN_IF_ERROR(epoch_.Check("push", request.placement_epoch));
  ASSIGN_OR_RETURN(const PushAdmission::Verdict verdict,
                   Admit(request, response));
  if (verdict == PushAdmission::Verdict::kDuplicate) return Turn::kAnswered;
  absl::Status valid = ValidatePush(request, checked);
  if (absl::IsAborted(valid)) {  // an outlier: a verdict, not a failure
    refusals_.Refuse(worker, request.sequence, std::string(valid.message()),
                     response);
    return Turn::kAnswered;
  }
  RETURN_IF_ERROR(valid);
  switch (gate_.RouteOf(worker, request.sequence > 0)) {
    case ConsistencyGate::Route::kAwaitCounting:
      if (gate_.Hold(&mu_, until, &checked->waited)) return Turn::kAgain;
      return gate_.NotCountedError(worker);
    case ConsistencyGate::Route::kRound:
      // A bsp round averages the raw gradients: the guard's clip bound
      // does not reach it, its refusals and rate bound do.
      RETURN_IF_ERROR(
          PushBsp(request, std::move(checked->rows), response, until));
      for (size_t i = 0; i < checked->stats.size(); ++i) {
        guard_.RecordNorm(request.blocks[i].id, worker, checked->stats[i].norm);
      }
      return Turn::kAnswered;
    case ConsistencyGate::Route::kDirect:
      break;
  }
  const std::optional<Consistency::Wait> wait =
      gate_.SspWaitFor(worker, ids, request.clock);
  if (!wait.has_value()) return Turn::kApply;
  if (gate_.Hold(&mu_, until, &checked->waited)) return Turn::kAgain;
  return gate_.SspHoldError(worker, *wait);
}

absl::Status Shard::PushBsp(const wire::PushView& request,
                            std::vector<SparseTables::DecodedRows> rows,
                            proto::PushResponse* response, absl::Time until) {
  const int32_t worker = request.worker_id;
  const uint64_t sequence = request.sequence;
  int64_t bytes = 0;
  const std::vector<Consistency::BlockGradient> gradients =
      ConsistencyGate::BspGradients(request, &bytes);
  bool waited = false;
  for (;;) {
    const Consistency::Contribution contribution =
        gate_.Contribute(request, gradients, &rows);
    if (contribution != Consistency::Contribution::kBusy) {
      // Wakes the others only when a round was applied: a retry that adds
      // nothing must not set the waiters spinning.
      updates_.ApplyCompleteRounds(&gate_);
      if (admission_.Applied(worker, sequence)) break;
    }
    if (!gate_.Hold(&mu_, until, &waited)) {
      return gate_.BspHoldError(worker, gradients, contribution);
    }
    // Placement may have moved on while waiting.
    RETURN_IF_ERROR(epoch_.Check("push", request.placement_epoch));
    if (admission_.Applied(worker, sequence)) break;
  }
  for (const wire::BlockRef& block : request.blocks) {
    response->add_versions(gate_.RoundVersion(block.id));
  }
  counters_->stats().pushes.Increment(1);
  counters_->stats().bytes_in.Increment(bytes);
  return absl::OkStatus();
}

absl::Status Shard::AssignBuckets(const std::vector<uint32_t>& buckets) {
  if (sparse_->empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::vector<char> own, sparse_->BucketFlags(buckets));
  absl::MutexLock lock(&mu_);
  sparse_->SetBuckets(std::move(own));
  return absl::OkStatus();
}

absl::Status Shard::PullSparse(const proto::PullRequest& request,
                               proto::PullResponse* response) const {
  response->Clear();
  if (request.block_ids_size() > 0) {
    return absl::InvalidArgumentError(
        "pull: a request asks for blocks or for sparse rows, not both");
  }
  RETURN_IF_ERROR(pull_.CheckReader(request.worker_id()));
  // The reply's bytes are bounded before anything is allocated.
  ASSIGN_OR_RETURN(const int64_t bytes, sparse_->PullBytes(request));
  ASSIGN_OR_RETURN(const ReplyBytes::Hold hold,
                   replies_.Take(bytes, "pull", absl::Now() + kReplyWait));
  // Keys are decoded and checked before the lock.
  int64_t total = 0;
  ASSIGN_OR_RETURN(const std::vector<std::vector<uint64_t>> keys,
                   sparse_->DecodePull(request, &total));
  {
    absl::ReaderMutexLock lock(&mu_);
    RETURN_IF_ERROR(epoch_.Check("pull", request.placement_epoch()));
    RETURN_IF_ERROR(sparse_->ReadPull(request, keys, response));
  }
  counters_->stats().pulls.Increment(1);
  counters_->stats().sparse_pull_keys.Increment(static_cast<double>(total));
  return absl::OkStatus();
}

std::vector<Shard::SparseTableStats> Shard::sparse_stats() const {
  absl::ReaderMutexLock lock(&mu_);
  return sparse_->stats();
}

absl::Status Shard::Lookup(const proto::LookupRequest& request,
                           proto::LookupResponse* response) const {
  response->Clear();
  ASSIGN_OR_RETURN(const int64_t bytes, sparse_->LookupBytes(request));
  ASSIGN_OR_RETURN(const ReplyBytes::Hold hold, replies_.Take(bytes, "lookup"));
  ASSIGN_OR_RETURN(const std::vector<uint64_t> keys,
                   sparse_->DecodeLookup(request, response));
  absl::ReaderMutexLock lock(&mu_);
  if (!epoch_.placed()) {
    return absl::UnavailableError(
        "lookup: this ps has no placement yet; retry");
  }
  return sparse_->ReadLookup(request, keys, response);
}

absl::Status Shard::CheckReadSize(const char* op, size_t request_bytes) const {
  const int64_t keys = static_cast<int64_t>(request_bytes / sizeof(uint64_t));
  // The parsed request, then LookupBytes at dim 1: 30 bytes a key.
  const int64_t least = static_cast<int64_t>(request_bytes) + keys * 30;
  if (least <= replies_.limit()) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      op, ": a request of ", request_bytes, " bytes (", keys,
      " keys) needs at least ", least, " bytes to answer, over the ",
      replies_.limit(),
      " bytes this ps builds replies in at once (a quarter of "
      "eviction.memory_budget_mb): ask for fewer keys per request"));
}

proto::ChecksumResponse Shard::Checksums() const {
  absl::ReaderMutexLock lock(&mu_);
  return PullBlocks::Checksums(*store_);
}

absl::Status Shard::WriteCheckpoint(
    const std::function<absl::Status()>& may_write) {
  absl::MutexLock serial(&checkpoint_mu_);
  const bool evicting =
      config_.eviction.ttl_updates > 0 || config_.eviction.max_rows > 0;
  const bool writing = !config_.checkpoint.dir.empty();
  if (!evicting && !writing) return absl::OkStatus();
  CheckpointChain::Cut cut;
  if (evicting) {
    // Exclusive: the cut holds the table as eviction left it, within
    // eviction.max_rows. The backup drops the keys with its next cut.
    absl::MutexLock lock(&mu_);
    if (chain_.Evict(sparse_.get())) replica_log_.Changed(-1);
    if (!writing) return absl::OkStatus();
    cut =
        chain_.TakeCut(epoch_.value(), admission_.windows(), *store_, *sparse_);
  } else {
    // Shared with pulls, exclusive of pushes: the blocks and the applied
    // sequences copied here agree. The disk write below runs without the lock.
    absl::ReaderMutexLock lock(&mu_);
    cut =
        chain_.TakeCut(epoch_.value(), admission_.windows(), *store_, *sparse_);
  }
  absl::StatusOr<ShardCheckpoints::Written> written =
      ShardCheckpointFiles(config_, index_, spec_)
          .Write(std::move(cut.checkpoint), may_write);
  absl::MutexLock lock(&mu_);
  if (!written.ok()) {
    chain_.Failed();  // the next write starts a chain again
    return written.status();
  }
  chain_.Written(cut, *written);
  return absl::OkStatus();
}

}  // namespace downpour::server
