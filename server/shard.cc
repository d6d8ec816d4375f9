// Shard: request validation, pushes as admitted by PushAdmission, and
// checkpoints over BlockStore.
#include "server/shard.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/checksum.h"
#include "common/logging.h"
#include "common/sparse_keys.h"
#include "common/status_macros.h"
#include "common/wire_encoding.h"
#include "server/dense_push_check.h"

namespace downpour::server {
namespace {

spdlog::logger* L() { return Log(Logger::kServer); }

// A bsp round's mean is computed on the current parameters: staleness 0.
constexpr uint64_t kCurrentVersion = std::numeric_limits<uint64_t>::max();

// The proto value as it came (it may be none of WireEncoding's: BlockStore
// refuses those). proto::Encoding and WireEncoding share values
// (common/wire_encoding_test.cc).
WireEncoding EncodingOf(int proto_encoding) {
  return static_cast<WireEncoding>(proto_encoding);
}

PushAdmission::Options AdmissionOptions(const Config& config, int index,
                                        Counters* counters) {
  PushAdmission::Options options;
  options.num_workers = static_cast<int>(config.cluster.workers.size());
  options.shard_index = index;
  options.counters = counters;
  return options;
}

PushGuard::Options GuardOptions(const Config& config, int index,
                                int64_t num_blocks, Counters* counters) {
  PushGuard::Options options;
  options.num_workers = static_cast<int>(config.cluster.workers.size());
  options.num_blocks = num_blocks;
  options.shard_index = index;
  options.robustness = config.robustness;
  options.counters = counters;
  return options;
}

}  // namespace

// The optimizer of the dense blocks. A sparse_linear model's only dense block
// is its bias, which weight_decay leaves alone (an intercept is not
// regularized, as in scikit-learn; on a rare positive class a decayed bias
// cannot reach the base rate's log-odds: its gradient is the batch mean
// while a key's is the batch sum, so the same decay pulls it batch_size times
// harder).
// wide_deep's MLP may have a rate of its own (wide_deep.mlp_learning_rate).
OptimizerSection DenseOptimizer(const Config& config) {
  OptimizerSection o = config.optimizer;
  if (IsSparseModel(config.model.type)) o.weight_decay = 0;
  if (config.model.type == ModelType::kWideDeep &&
      config.model.wide_deep.mlp_learning_rate > 0) {
    o.learning_rate = config.model.wide_deep.mlp_learning_rate;
  }
  return o;
}

absl::StatusOr<std::unique_ptr<Shard>> Shard::Create(const Config& config,
                                                     int index,
                                                     Counters* counters) {
  ASSIGN_OR_RETURN(ModelSpec spec, ModelSpec::Create(config.model));
  ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer,
                   Optimizer::Create(DenseOptimizer(config)));
  ASSIGN_OR_RETURN(
      RestoredShard restored,
      RestoreShard(config, index, spec, optimizer->name(), counters));
  return CreateShard(config, index, counters, std::move(spec),
                     std::move(optimizer), std::move(restored));
}

absl::StatusOr<std::unique_ptr<Shard>> Shard::CreateFrom(const Config& config,
                                                         int index,
                                                         Counters* counters,
                                                         Checkpoint state) {
  ASSIGN_OR_RETURN(ModelSpec spec, ModelSpec::Create(config.model));
  ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer,
                   Optimizer::Create(DenseOptimizer(config)));
  ASSIGN_OR_RETURN(RestoredShard restored,
                   RestoreShardFrom(config, index, spec, optimizer->name(),
                                    std::move(state)));
  return CreateShard(config, index, counters, std::move(spec),
                     std::move(optimizer), std::move(restored));
}

absl::StatusOr<std::unique_ptr<Shard>> Shard::CreateShard(
    const Config& config, int index, Counters* counters, ModelSpec spec,
    std::unique_ptr<Optimizer> optimizer, RestoredShard restored) {
  BlockStore::Options store_options;
  store_options.num_workers = static_cast<int>(config.cluster.workers.size());
  store_options.counters = counters;
  store_options.compute_norms = config.robustness.norm_clip_factor > 0 ||
                                config.robustness.norm_refuse_factor > 0;
  auto store =
      std::make_unique<BlockStore>(std::move(optimizer), store_options);
  const std::optional<Checkpoint>& checkpoint = restored.checkpoint;
  ASSIGN_OR_RETURN(
      std::unique_ptr<SparseTables> sparse,
      SparseTables::Create(config, index, spec,
                           checkpoint.has_value() ? &*checkpoint : nullptr,
                           counters));
  // The restored applied-push windows go on, so pushes acknowledged before
  // the checkpoint are not applied again.
  std::map<int32_t, SequenceWindow> windows;
  if (checkpoint.has_value()) windows = checkpoint->sequences;
  return std::unique_ptr<Shard>(new Shard(
      config, index, std::move(spec), std::move(store), std::move(sparse),
      std::move(restored), std::move(windows), counters));
}

Shard::Shard(const Config& config, int index, ModelSpec spec,
             std::unique_ptr<BlockStore> store,
             std::unique_ptr<SparseTables> sparse, RestoredShard restored,
             std::map<int32_t, SequenceWindow> windows, Counters* counters)
    : config_(config),
      index_(index),
      spec_(std::move(spec)),
      counters_(counters),
      may_hold_pushes_(config.training.consistency == ConsistencyMode::kSsp ||
                       config.training.consistency == ConsistencyMode::kBsp),
      pull_(&spec_, config.cluster.workers.size()),
      store_(std::move(store)),
      sparse_(std::move(sparse)),
      admission_(AdmissionOptions(config, index, counters), std::move(windows)),
      chain_(config, index, sparse_->size(), std::move(restored)),
      guard_(GuardOptions(config, index,
                          static_cast<int64_t>(spec_.blocks().size()),
                          counters)),
      gate_(config, index, counters),
      replica_log_(spec_.blocks().size(), store_->optimizer().state_slots()) {}

absl::Status Shard::Assign(uint64_t epoch, const std::vector<uint32_t>& ids) {
  absl::MutexLock lock(&mu_);
  int from_checkpoint = 0, fresh = 0;
  for (uint32_t id : ids) {
    if (id >= spec_.blocks().size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("placement assigns block ", id, " but the model has ",
                       spec_.blocks().size(),
                       " blocks: do all daemons use the same config?"));
    }
    if (store_->Has(id)) continue;
    const BlockSpec& block = spec_.blocks()[id];
    const BlockStore::BlockSnapshot* saved =
        chain_.RestoredBlock(id, block.length);
    if (saved != nullptr) {
      RETURN_IF_ERROR(
          store_->AddBlock(id, saved->values, saved->version, saved->state));
      replica_log_.Changed(id);
      ++from_checkpoint;
    } else {
      std::vector<float> values(block.length);
      spec_.InitBlock(block, config_.model.init_seed, values.data());
      RETURN_IF_ERROR(store_->AddBlock(id, std::move(values)));
      replica_log_.Changed(id);
      ++fresh;
    }
  }
  epoch_ = epoch;
  SPDLOG_LOGGER_INFO(L(),
                     "placement epoch {}: serving {} blocks ({} from "
                     "checkpoint, {} initialised, {} kept)",
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

absl::Status Shard::VisitBlocks(
    const proto::PullRequest& request,
    const std::function<absl::Status(size_t, size_t)>& reserve,
    const std::function<char*(const PulledBlock&)>& room) const {
  // Checked, and the reply sized, before anything is allocated or locked.
  ASSIGN_OR_RETURN(const PullBlocks::Plan plan, pull_.Check(request));
  RETURN_IF_ERROR(reserve(request.block_ids_size(), plan.payload_bytes));
  {
    absl::ReaderMutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckEpoch("pull", request.placement_epoch()));
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
  absl::Status visited = VisitBlocks(
      request,
      [response](size_t num_blocks, size_t) {
        response->mutable_blocks()->Reserve(static_cast<int>(num_blocks));
        return absl::OkStatus();
      },
      [response](const PulledBlock& block) {
        proto::BlockData* data = response->add_blocks();
        data->set_block_id(block.id);
        data->set_version(block.version);
        data->set_encoding(static_cast<proto::Encoding>(block.encoding));
        std::string* bytes = data->mutable_data();
        bytes->resize(block.bytes);
        return bytes->data();
      });
  if (!visited.ok()) response->Clear();
  return visited;
}

absl::StatusOr<PushAdmission::Verdict> Shard::Admit(
    const wire::PushView& request, proto::PushResponse* response) const {
  // Before the window is consulted or moved: a forged id, key or sequence
  // leaves no trace (nothing to checkpoint or replicate).
  absl::StatusOr<PushAdmission::Verdict> verdict =
      admission_.Admit(request.worker_id, request.sequence, request.push_key);
  if (verdict.ok() && request.blocks.empty() && request.sparse.empty() &&
      request.sequence > 0) {
    // It would change nothing but the window: an empty push moves none.
    verdict = absl::InvalidArgumentError(
        absl::StrCat("push: worker ", request.worker_id,
                     " sent a push without blocks: refused, nothing recorded"));
  }
  if (!verdict.ok()) {
    counters_->stats().rejected_pushes.Increment(1);
  } else if (*verdict == PushAdmission::Verdict::kDuplicate) {
    counters_->stats().duplicate_pushes.Increment(1);
    if (const std::string* why =
            refusals_.Of(request.worker_id, request.sequence)) {
      response->set_refused(*why);  // a retry of a refused push
    } else {
      response->set_duplicate(true);
    }
  }
  return verdict;
}

absl::Status Shard::ValidatePush(const wire::PushView& request,
                                 CheckedPush* checked) {
  checked->rows.clear();
  absl::Status valid = ValidateDensePush(request, *store_, &guard_, checked);
  if (valid.ok()) valid = sparse_->DecodePush(request, &checked->rows);
  if (valid.ok()) return valid;
  checked->rows.clear();
  counters_->stats().rejected_pushes.Increment(1);
  // Refused for good (the client does not retry this), or an outlier the
  // guard refused (Aborted, which Push answers as PushResponse.refused: an
  // honest worker drops this one gradient and goes on): the sequence is
  // used up, so it cannot hold the window back.
  if (request.sequence > 0 &&
      (absl::IsInvalidArgument(valid) || absl::IsNotFound(valid) ||
       absl::IsAborted(valid))) {
    MarkPushed(request.worker_id, request.sequence);
  }
  return valid;
}

absl::StatusOr<BlockStore::PushResult> Shard::ApplyUpdate(
    BlockStore::Block* block, const void* data, uint64_t base_version,
    int32_t worker, WireEncoding encoding,
    const BlockStore::GradientStats* stats) {
  const uint32_t id = store_->IdOf(block);
  const bool log = replica_log_.Keeps(id);
  const double mean_staleness = log ? store_->MeanStaleness(id) : 0.0;
  absl::StatusOr<BlockStore::PushResult> result =
      store_->Apply(block, data, base_version, worker, encoding, stats);
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
    replica_log_.Log(update, BlockStore::LengthOf(block), data);
  } else {
    replica_log_.Changed(id);
  }
  return result;
}

void Shard::SetReplicaLog(bool on) {
  absl::MutexLock lock(&mu_);
  const bool can = DenseOptimizer(config_).delay_compensation <= 0;
  replica_log_.SetLogging(on && can);
}

Shard::ReplicaCut Shard::CutForReplica(bool full, bool checks) {
  ReplicaCut cut;
  // Exclusive: the dirty set is cleared with the copy, and no push may land
  // between the blocks and the windows copied.
  absl::MutexLock lock(&mu_);
  cut.generation = replica_log_.generation();
  cut.epoch = epoch_;
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
  ApplyCompleteRounds();
  gate_.Bump();
}

void Shard::ReleaseHeldPushes() {
  absl::MutexLock lock(&mu_);
  gate_.ReleaseHolds();
}

void Shard::ApplyCompleteRounds() {
  for (uint32_t id : gate_.CompleteRounds()) {
    const std::vector<std::pair<int, uint64_t>> done =
        ConsistencyGate::IsSparseRound(id) ? ApplySparseRound(id)
                                           : ApplyDenseRound(id);
    for (const auto& [worker, sequence] : done) {
      if (admission_.IsNew(worker, sequence)) MarkPushed(worker, sequence);
    }
    gate_.Bump();
  }
}

std::vector<std::pair<int, uint64_t>> Shard::ApplyDenseRound(uint32_t id) {
  std::vector<float> mean;
  std::vector<std::pair<int, uint64_t>> done = gate_.TakeRound(id, &mean);
  BlockStore::GradientStats stats;
  absl::StatusOr<BlockStore::Block*> block =
      store_->ValidatePush(id, mean.data(), mean.size() * sizeof(float),
                           WireEncoding::kFloat32, &stats);
  absl::StatusOr<BlockStore::PushResult> result =
      block.ok() ? ApplyUpdate(*block, mean.data(), kCurrentVersion,
                               /*worker=*/-1, WireEncoding::kFloat32, &stats)
                 : absl::StatusOr<BlockStore::PushResult>(block.status());
  if (result.ok()) {
    gate_.SetRoundVersion(id, result->version);
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

std::vector<std::pair<int, uint64_t>> Shard::ApplySparseRound(uint32_t id) {
  ConsistencyGate::SparseRound round;
  std::vector<std::pair<int, uint64_t>> done =
      gate_.TakeSparseRound(id, *sparse_, &round);
  const int64_t count = static_cast<int64_t>(round.keys.size());
  if (count == 0 ||
      !sparse_->ApplyRound(round.table, round.keys, round.mean, round.counts)) {
    return done;
  }
  replica_log_.Count();
  counters_->stats().sparse_push_keys.Increment(static_cast<double>(count));
  counters_->stats().bsp_rounds.Increment(1);
  return done;
}

bool Shard::AwaitGateChange(absl::Time until) {
  if (gate_.released()) return false;
  struct Args {
    const ConsistencyGate* gate;
    uint64_t seen;
  } args{&gate_, gate_.generation()};
  const absl::Condition changed(
      +[](Args* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return a->gate->generation() != a->seen;
      },
      &args);
  return mu_.AwaitWithDeadline(changed, until) && !gate_.released();
}

void Shard::LearnWorkerIncarnations(
    const std::vector<IssuedIncarnation>& incarnations) {
  absl::MutexLock lock(&mu_);
  admission_.LearnWorkerIncarnations(incarnations);
}

void Shard::MarkPushed(int32_t worker, uint64_t sequence) {
  admission_.MarkApplied(worker, sequence);
  replica_log_.Changed(-1);
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
    ASSIGN_OR_RETURN(
        bytes, ApplyBlocks(request, checked.blocks, checked.stats, response));
    keys = sparse_->Apply(checked.rows);
    if (!checked.rows.empty()) replica_log_.Count();
    if (request.sequence > 0) MarkPushed(request.worker_id, request.sequence);
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
  const bool tracked = request.sequence > 0;
  RETURN_IF_ERROR(CheckEpoch("push", request.placement_epoch));
  ASSIGN_OR_RETURN(const PushAdmission::Verdict verdict,
                   Admit(request, response));
  if (verdict == PushAdmission::Verdict::kDuplicate) return Turn::kAnswered;
  absl::Status valid = ValidatePush(request, checked);
  if (absl::IsAborted(valid)) {
    // An outlier the guard refused: a verdict, not a failure to retry.
    // Nothing was applied and its sequence is used up (ValidatePush).
    if (tracked) {
      refusals_.Remember(worker, request.sequence,
                         std::string(valid.message()));
    }
    response->set_refused(std::string(valid.message()));
    return Turn::kAnswered;
  }
  RETURN_IF_ERROR(valid);
  switch (gate_.RouteOf(worker, tracked)) {
    case ConsistencyGate::Route::kAwaitCounting:
      if (!checked->waited) counters_->stats().bsp_waits.Increment(1);
      checked->waited = true;
      if (AwaitGateChange(until)) return Turn::kAgain;
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
  ASSIGN_OR_RETURN(const bool check_again,
                   AwaitSspTurn(request, ids, until, &checked->waited));
  return check_again ? Turn::kAgain : Turn::kApply;
}

absl::StatusOr<bool> Shard::AwaitSspTurn(const wire::PushView& request,
                                         const std::vector<uint32_t>& ids,
                                         absl::Time until, bool* waited) {
  const int32_t worker = request.worker_id;
  const std::optional<Consistency::Wait> wait =
      gate_.SspWaitFor(worker, ids, request.clock);
  if (!wait.has_value()) return false;
  if (!*waited) counters_->stats().ssp_waits.Increment(1);
  *waited = true;
  if (AwaitGateChange(until)) return true;
  return gate_.SspHoldError(worker, *wait);
}

absl::StatusOr<int64_t> Shard::ApplyBlocks(
    const wire::PushView& request,
    const std::vector<BlockStore::Block*>& blocks,
    const std::vector<BlockStore::GradientStats>& stats,
    proto::PushResponse* response) {
  const int32_t worker = request.worker_id;
  int64_t bytes = 0;
  for (size_t i = 0; i < request.blocks.size(); ++i) {
    const wire::BlockRef& block = request.blocks[i];
    absl::StatusOr<BlockStore::PushResult> result =
        ApplyUpdate(blocks[i], block.data, block.version, worker,
                    EncodingOf(block.encoding), &stats[i]);
    if (!result.ok()) {
      // The update would have overflowed this block (rare: the gradient
      // passed max_gradient_value). The blocks before it in this push are
      // applied, so the sequence is used up: a retry must not apply them
      // twice.
      counters_->stats().rejected_pushes.Increment(1);
      if (request.sequence > 0) MarkPushed(worker, request.sequence);
      return absl::Status(
          result.status().code(),
          absl::StrCat(result.status().message(), " (worker ", worker, ", ", i,
                       " of ", request.blocks.size(),
                       " blocks applied before it)"));
    }
    response->add_versions(result->version);
    counters_->RecordStaleness(result->staleness);
    bytes += block.size;
    guard_.RecordNorm(block.id, worker, stats[i].norm);
  }
  return bytes;
}

absl::Status Shard::PushBsp(const wire::PushView& request,
                            std::vector<DecodedRows> rows,
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
      ApplyCompleteRounds();
      if (admission_.Applied(worker, sequence)) break;
    }
    if (!waited) counters_->stats().bsp_waits.Increment(1);
    waited = true;
    if (!AwaitGateChange(until)) {
      return gate_.BspHoldError(worker, gradients, contribution);
    }
    // Placement may have moved on while waiting.
    RETURN_IF_ERROR(CheckEpoch("push", request.placement_epoch));
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
  // Keys are decoded and checked before the lock.
  int64_t total = 0;
  ASSIGN_OR_RETURN(const std::vector<std::vector<uint64_t>> keys,
                   sparse_->DecodePull(request, &total));
  {
    absl::ReaderMutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckEpoch("pull", request.placement_epoch()));
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
  ASSIGN_OR_RETURN(const std::vector<uint64_t> keys,
                   sparse_->DecodeLookup(request, response));
  absl::ReaderMutexLock lock(&mu_);
  if (epoch_ == 0) {
    return absl::UnavailableError(
        "lookup: this ps has no placement yet; retry");
  }
  return sparse_->ReadLookup(request, keys, response);
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

void Shard::EvictRows() {
  std::vector<std::vector<uint64_t>> evicted = sparse_->Evict();
  bool any = false;
  for (size_t t = 0; t < evicted.size(); ++t) {
    if (evicted[t].empty()) continue;
    any = true;
    chain_.Evicted(t, evicted[t]);
  }
  if (any) replica_log_.Changed(-1);  // the backup drops them with the next cut
}

CheckpointChain::Cut Shard::CutCheckpoint() const {
  Checkpoint checkpoint;
  checkpoint.shard_index = index_;
  checkpoint.placement_epoch = std::max(epoch_, chain_.epoch_floor());
  checkpoint.optimizer = store_->optimizer().name();
  checkpoint.blocks = store_->Snapshot();
  checkpoint.sequences = admission_.windows();
  return chain_.TakeCut(std::move(checkpoint), *store_, *sparse_);
}

absl::Status Shard::WriteCheckpoint(
    const std::function<absl::Status()>& may_write) {
  absl::MutexLock serial(&checkpoint_mu_);
  const bool evicting =
      config_.eviction.ttl_updates > 0 || config_.eviction.max_rows > 0;
  if (config_.checkpoint.dir.empty()) {
    if (evicting) {
      absl::MutexLock lock(&mu_);
      EvictRows();
    }
    return absl::OkStatus();
  }
  CheckpointChain::Cut cut;
  if (evicting) {
    // Exclusive: the cut holds the table as eviction left it, within
    // eviction.max_rows.
    absl::MutexLock lock(&mu_);
    EvictRows();
    cut = CutCheckpoint();
  } else {
    // Shared with pulls, exclusive of pushes: the blocks and the applied
    // sequences copied here agree. The disk write below runs without the lock.
    absl::ReaderMutexLock lock(&mu_);
    cut = CutCheckpoint();
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
