// SparseTables: a shard's sparse tables, their buckets, and the checks,
// applies and reads of the rows pushed, pulled and looked up.
#include "server/sparse_tables.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/sparse_keys.h"
#include "common/status_macros.h"

namespace downpour::server {
namespace {

spdlog::logger* L() { return Log(Logger::kServer); }

// `bytes` bytes at `data` (any alignment) as n elements of T, copied into
// *out; false when bytes is not a whole number of them.
template <typename T>
bool CopyArray(const char* data, size_t bytes, std::vector<T>* out) {
  if (bytes % sizeof(T) != 0) return false;
  out->resize(bytes / sizeof(T));
  if (bytes > 0) std::memcpy(out->data(), data, bytes);
  return true;
}

// The sparse optimizer of config.optimizer's type: InvalidArgument for one
// that does not train sparse tables.
absl::StatusOr<SparseOptimizerType> SparseOptimizerOf(
    const OptimizerSection& o) {
  switch (o.type) {
    case OptimizerType::kFtrl:
      return SparseOptimizerType::kFtrl;
    case OptimizerType::kAdagrad:
      return SparseOptimizerType::kAdagrad;
    case OptimizerType::kAdam:
      return SparseOptimizerType::kAdam;
    case OptimizerType::kSgd:
      return SparseOptimizerType::kSgd;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "optimizer.type ", OptimizerTypeName(o.type),
          " does not train sparse tables: use ftrl, adagrad, adam or sgd"));
  }
}

// The options of a sparse table from the model and optimizer sections.
absl::StatusOr<SparseTable::Options> SparseTableOptions(
    const Config& config, const SparseTableSpec& table) {
  SparseTable::Options options;
  options.dim = table.dim;
  options.seed = SparseTableSeed(config.model.init_seed, table.id);
  options.max_rows = config.model.sparse_max_rows;
  // Eviction at checkpoint time; clocks for it and for delta checkpoints.
  options.evict_ttl_updates = config.eviction.ttl_updates;
  options.evict_max_rows = config.eviction.max_rows;
  // Clocks always: the memory budget evicts the least recently updated.
  options.track_clocks = true;
  // A replicated shard sends its backup the rows changed since each cut.
  options.track_changes = config.cluster.replication >= 2;
  options.admit_min_count =
      std::max(config.admission.min_count, table.min_count);
  options.admit_probability = config.admission.probability;
  if (table.init_scale > 0) {
    options.init = SparseTable::Init::kUniform;
    options.init_scale = table.init_scale;
  }
  const OptimizerSection& o = config.optimizer;
  ASSIGN_OR_RETURN(options.optimizer.type, SparseOptimizerOf(o));
  options.optimizer.learning_rate = o.learning_rate;
  options.optimizer.epsilon = o.epsilon;
  // sgd, adagrad and adam rows take weight_decay as the dense blocks do; ftrl
  // rows use l1 and l2 instead.
  options.optimizer.weight_decay = o.weight_decay;
  options.optimizer.beta1 = o.beta1;
  options.optimizer.beta2 = o.beta2;
  options.optimizer.beta = o.ftrl_beta;
  options.optimizer.l1 = o.l1;
  options.optimizer.l2 = o.l2;
  if (table.id == 1) {
    // The embeddings (fm, wide_deep): their own regularization and rate
    // (config fm.* or wide_deep.*).
    const FmSection& e = EmbeddingOptions(config.model);
    options.optimizer.l1 = e.l1;
    options.optimizer.l2 = e.l2;
    options.optimizer.weight_decay = e.l2;
    if (e.learning_rate > 0) options.optimizer.learning_rate = e.learning_rate;
  }
  return options;
}

// The checkpoint's rows of table `made`, whole (values and state of one
// moment, with the push windows of the same moment).
absl::Status RestoreRows(const Checkpoint& restored, uint32_t table_id,
                         SparseTable* made) {
  for (const auto& [id, rows] : restored.sparse_tables) {
    if (id != table_id) continue;
    absl::Status loaded = made->Restore(rows);
    if (!loaded.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the checkpoint's sparse table ", id,
                       " does not fit the config: ", loaded.message(),
                       "; move the checkpoint away or restore the "
                       "config it was written with"));
    }
    SPDLOG_LOGGER_INFO(L(), "sparse table {}: {} rows from the checkpoint", id,
                       rows.keys.size());
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SparseTables>> SparseTables::Create(
    const Config& config, int index, const ModelSpec& spec,
    const Checkpoint* restored, Counters* counters) {
  std::vector<std::unique_ptr<SparseTable>> tables;
  for (const SparseTableSpec& table : spec.sparse_tables()) {
    ASSIGN_OR_RETURN(SparseTable::Options options,
                     SparseTableOptions(config, table));
    ASSIGN_OR_RETURN(std::unique_ptr<SparseTable> made,
                     SparseTable::Create(options));
    if (restored != nullptr) {
      RETURN_IF_ERROR(RestoreRows(*restored, table.id, made.get()));
    }
    tables.push_back(std::move(made));
  }
  return std::unique_ptr<SparseTables>(
      new SparseTables(config, index, spec, std::move(tables), counters));
}

SparseTables::SparseTables(const Config& config, int index,
                           const ModelSpec& spec,
                           std::vector<std::unique_ptr<SparseTable>> tables,
                           Counters* counters)
    : index_(index),
      num_shards_(static_cast<int>(config.cluster.ps.size())),
      max_gradient_value_(config.optimizer.max_gradient_value),
      specs_(spec.sparse_tables()),
      tables_(std::move(tables)),
      counters_(counters),
      budget_(MemoryBudget::ForPs(config, index)) {
  if (tables_.empty()) return;
  auto& stats = counters_->stats();
  stats.sparse_evicted_rows.Increment(0);
  stats.sparse_budget_evicted_rows.Increment(0);
  stats.sparse_refused_keys.Increment(0);
  SPDLOG_LOGGER_INFO(L(),
                     "ps {}: memory budget {} MiB ({}); sparse tables hold at "
                     "most {} MiB, replies in flight {} MiB",
                     index_, budget_.budget_bytes() >> 20, budget_.origin(),
                     budget_.table_bytes() >> 20, budget_.reply_bytes() >> 20);
}

bool SparseTables::FitsAllNew(const std::vector<DecodedRows>& rows) const {
  std::vector<MemoryBudget::Need> needs;
  for (const std::unique_ptr<SparseTable>& table : tables_) {
    needs.push_back({table.get(), 0, 0});
  }
  for (const DecodedRows& r : rows) {
    needs[IdOf(r.table)].fresh_keys = static_cast<int64_t>(r.keys.size());
  }
  absl::StatusOr<MemoryBudget::Plan> plan = budget_.PlanFor(needs);
  return plan.ok() && !plan->evict;
}

absl::Status SparseTables::MakeRoom(
    const std::vector<DecodedRows>& rows, int32_t worker,
    std::vector<std::vector<uint64_t>>* evicted) {
  evicted->assign(tables_.size(), {});
  if (rows.empty() || FitsAllNew(rows)) return absl::OkStatus();
  std::vector<MemoryBudget::Need> needs;
  int64_t fresh = 0;
  for (const std::unique_ptr<SparseTable>& table : tables_) {
    needs.push_back({table.get(), 0, 0});
  }
  for (const DecodedRows& r : rows) {
    const int64_t n = static_cast<int64_t>(r.keys.size());
    MemoryBudget::Need& need = needs[IdOf(r.table)];
    need.fresh_keys = r.table->CountFresh(r.keys.data(), n);
    need.held_keys = n - need.fresh_keys;
    fresh += need.fresh_keys;
  }
  if (fresh == 0) return absl::OkStatus();
  absl::StatusOr<MemoryBudget::Plan> plan = budget_.PlanFor(needs);
  if (!plan.ok()) {
    counters_->stats().sparse_refused_keys.Increment(
        static_cast<double>(fresh));
    return RefuseForBudget(rows, worker, plan.status());
  }
  if (plan->evict) EvictForRoom(rows, *plan, evicted);
  return absl::OkStatus();
}

absl::Status SparseTables::RefuseForBudget(const std::vector<DecodedRows>& rows,
                                           int32_t worker,
                                           const absl::Status& why) const {
  uint64_t first = 0;
  size_t table = 0;
  int64_t fresh = 0;
  for (const DecodedRows& r : rows) {
    for (uint64_t key : r.keys) {
      if (r.table->Contains(key)) continue;
      if (fresh++ == 0) {
        first = key;
        table = IdOf(r.table);
      }
    }
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "sparse push: ", fresh, " new keys (the first: key ", first, " of table ",
      table, ") do not fit the ps memory budget: ", why.message(),
      "; nothing of the push was applied. Raise eviction.memory_budget_mb, "
      "add ps shards, or push fewer new keys per request (worker ",
      worker, ")"));
}

void SparseTables::EvictForRoom(const std::vector<DecodedRows>& rows,
                                const MemoryBudget::Plan& plan,
                                std::vector<std::vector<uint64_t>>* evicted) {
  int64_t total = 0;
  for (size_t t = 0; t < tables_.size(); ++t) {
    const uint64_t* keys = nullptr;
    int64_t n = 0;
    for (const DecodedRows& r : rows) {
      if (r.table != tables_[t].get()) continue;
      keys = r.keys.data();
      n = static_cast<int64_t>(r.keys.size());
    }
    std::vector<uint64_t> gone =
        tables_[t]->EvictForRoom(plan.keep_rows[t], keys, n);
    total += static_cast<int64_t>(gone.size());
    (*evicted)[t] = std::move(gone);
  }
  auto& stats = counters_->stats();
  stats.sparse_evicted_rows.Increment(static_cast<double>(total));
  stats.sparse_budget_evicted_rows.Increment(static_cast<double>(total));
  SPDLOG_LOGGER_DEBUG(L(),
                      "ps {}: memory budget: {} sparse rows evicted, tables "
                      "now within {} bytes",
                      index_, total, plan.bytes_after);
}

size_t SparseTables::IdOf(const SparseTable* table) const {
  for (size_t t = 0; t < tables_.size(); ++t) {
    if (tables_[t].get() == table) return t;
  }
  return 0;
}

absl::StatusOr<std::vector<char>> SparseTables::BucketFlags(
    const std::vector<uint32_t>& buckets) const {
  const uint32_t total = specs_[0].buckets;
  std::vector<char> own(total, 0);
  for (uint32_t b : buckets) {
    if (b >= total) {
      return absl::InvalidArgumentError(
          absl::StrCat("placement: bucket ", b, " for ps ", index_,
                       " is beyond model.sparse_buckets ", total,
                       ": the coordinator runs another config"));
    }
    own[b] = 1;
  }
  return own;
}

absl::Status SparseTables::Import(uint32_t t, const SparseTable::Rows& rows) {
  if (t >= tables_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("copy buckets: sparse table ", t, " is not in the model (",
                     tables_.size(), " tables)"));
  }
  return tables_[t]->Import(rows);
}

std::vector<std::vector<uint64_t>> SparseTables::UnheldKeys(
    const std::vector<char>& keep) {
  std::vector<std::vector<uint64_t>> keys(tables_.size());
  if (own_buckets_.empty()) return keys;
  std::vector<char> unheld(own_buckets_.size(), 0);
  bool any = false;
  for (size_t b = 0; b < unheld.size(); ++b) {
    unheld[b] = own_buckets_[b] == 0 && (b >= keep.size() || keep[b] == 0);
    any |= unheld[b] != 0;
  }
  if (!any) return keys;
  for (size_t t = 0; t < tables_.size(); ++t) {
    keys[t] = tables_[t]->KeysInBuckets(unheld, buckets());
    if (!keys[t].empty()) tables_[t]->KeepRowKeys(true);
  }
  return keys;
}

std::vector<uint64_t> SparseTables::DropMovedKeys(uint32_t t,
                                                  const uint64_t* keys,
                                                  int64_t n) {
  return tables_[t]->DropMovedKeys(keys, n);
}

void SparseTables::ForgetRowKeys() {
  for (auto& table : tables_) table->KeepRowKeys(false);
}

absl::Status SparseTables::CheckOwnKeys(const char* op, const uint64_t* keys,
                                        int64_t n, uint32_t buckets) const {
  const int shards = num_shards_;
  if (own_buckets_.empty() && shards <= 1) return absl::OkStatus();
  // BucketOf divides by the bucket count per key; a power of two (the
  // usual count) is a mask, the same bucket for a fraction of the time.
  const bool power_of_two = buckets != 0 && (buckets & (buckets - 1)) == 0;
  const uint64_t mask = static_cast<uint64_t>(buckets) - 1;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bucket = power_of_two
                                ? static_cast<uint32_t>(MixKey(keys[i]) & mask)
                                : BucketOf(keys[i], buckets);
    const bool own =
        own_buckets_.empty()
            ? static_cast<int>(bucket % static_cast<uint32_t>(shards)) == index_
            : bucket < own_buckets_.size() && own_buckets_[bucket] != 0;
    if (!own && !own_buckets_.empty()) {
      // The placement gives the bucket to another ps: the sender split its
      // keys by an older placement (a retry across a move or a take-over).
      return absl::FailedPreconditionError(absl::StrCat(
          kBucketMovedMessage, ": ", op, ": key ", keys[i], " is in bucket ",
          bucket, ", which the placement gives another ps than ps ", index_,
          " now; re-read the placement and send it there"));
    }
    if (!own) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": key ", keys[i], " is in bucket ", bucket, ", which ps ",
          index_,
          " does not hold (bucket = MixKey(key) % model.sparse_buckets;"
          " the placement map gives each ps its buckets): does the sender use "
          "this config and the current placement?"));
    }
  }
  return absl::OkStatus();
}

absl::Status SparseTables::Decode(const wire::SparseRef& rows,
                                  DecodedRows* out) const {
  if (rows.table >= tables_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("push: unknown sparse table ", rows.table,
                     " (the model has ", tables_.size(), ")"));
  }
  SparseTable& table = *tables_[rows.table];
  out->table = &table;
  if (!CopyArray(rows.keys, rows.keys_size, &out->keys)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "push: sparse table ", rows.table, " keys are ", rows.keys_size,
        " bytes, not a whole number of uint64 keys"));
  }
  if (!CopyArray(rows.values, rows.values_size, &out->grads)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "push: sparse table ", rows.table, " gradients are ", rows.values_size,
        " bytes, not a whole number of float32 values"));
  }
  std::vector<uint32_t>& counts = out->counts;
  if (!CopyArray(rows.counts, rows.counts_size, &counts) ||
      (!counts.empty() && counts.size() != out->keys.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "push: sparse table ", rows.table, " has ", out->keys.size(),
        " keys but ", rows.counts_size, " bytes of counts (4 a key, or none)"));
  }
  const int64_t n = static_cast<int64_t>(out->keys.size());
  RETURN_IF_ERROR(
      SparseTable::CheckPush(out->keys.data(), n, out->grads.data(),
                             static_cast<int64_t>(out->grads.size()),
                             counts.empty() ? nullptr : counts.data(),
                             table.dim(), max_gradient_value_));
  return CheckOwnKeys("push", out->keys.data(), n, specs_[rows.table].buckets);
}

absl::Status SparseTables::DecodePush(const wire::PushView& request,
                                      std::vector<DecodedRows>* rows) const {
  absl::Status valid;
  rows->resize(request.sparse.size());
  for (size_t i = 0; valid.ok() && i < request.sparse.size(); ++i) {
    valid = Decode(request.sparse[i], &(*rows)[i]);
    for (size_t j = 0; valid.ok() && j < i; ++j) {
      if ((*rows)[j].table == (*rows)[i].table) {
        valid = absl::InvalidArgumentError(
            absl::StrCat("push: sparse table ", request.sparse[i].table,
                         " appears twice in one push: send its rows once"));
      }
    }
    if (valid.ok()) {
      const DecodedRows& r = (*rows)[i];
      valid = r.table->CheckCapacity(r.keys.data(),
                                     static_cast<int64_t>(r.keys.size()));
    }
    if (!valid.ok()) {
      valid = absl::Status(
          valid.code(),
          absl::StrCat(valid.message(), " (worker ", request.worker_id, ")"));
    }
  }
  if (!valid.ok()) rows->clear();
  return valid;
}

void SparseTables::ApplyToTable(SparseTable* table, const uint64_t* keys,
                                int64_t n, const float* grads,
                                const uint32_t* counts) {
  const int64_t filtered = table->updates_filtered();
  const int64_t created = table->Apply(keys, n, grads, counts);
  if (created > 0) {
    counters_->stats().sparse_rows_created.Increment(
        static_cast<double>(created));
  }
  if (table->updates_filtered() > filtered) {
    counters_->stats().sparse_filtered_updates.Increment(
        static_cast<double>(table->updates_filtered() - filtered));
  }
}

int64_t SparseTables::Apply(const std::vector<DecodedRows>& rows) {
  int64_t keys = 0;
  for (const DecodedRows& r : rows) {
    const int64_t n = static_cast<int64_t>(r.keys.size());
    ApplyToTable(r.table, r.keys.data(), n, r.grads.data(),
                 r.counts.empty() ? nullptr : r.counts.data());
    keys += n;
  }
  return keys;
}

bool SparseTables::ApplyRound(uint32_t table, const std::vector<uint64_t>& keys,
                              const std::vector<float>& mean,
                              const std::vector<uint32_t>& counts) {
  SparseTable& t = *tables_[table];
  const int64_t count = static_cast<int64_t>(keys.size());
  // Each contribution fit alone; together they may not.
  absl::Status room = t.CheckCapacity(keys.data(), count);
  if (!room.ok()) {
    SPDLOG_LOGGER_WARN(L(), "ps {}: bsp round of sparse table {} dropped: {}",
                       index_, table, std::string(room.message()));
    return false;
  }
  ApplyToTable(&t, keys.data(), count, mean.data(), counts.data());
  return true;
}

int SparseTables::dim(uint32_t table) const {
  return table < tables_.size() ? tables_[table]->dim() : 0;
}

absl::StatusOr<std::vector<std::vector<uint64_t>>> SparseTables::DecodePull(
    const proto::PullRequest& request, int64_t* total) const {
  std::vector<std::vector<uint64_t>> keys(request.sparse_size());
  *total = 0;
  for (int i = 0; i < request.sparse_size(); ++i) {
    const proto::SparseRows& rows = request.sparse(i);
    if (rows.table() >= tables_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("pull: unknown sparse table ", rows.table(),
                       " (the model has ", tables_.size(), ")"));
    }
    if (!CopyArray(rows.keys().data(), rows.keys().size(), &keys[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pull: sparse table ", rows.table(), " keys are ", rows.keys().size(),
          " bytes, not a whole number of uint64 keys"));
    }
    const std::vector<uint64_t>& k = keys[i];
    *total += static_cast<int64_t>(k.size());
    if (*total > SparseTable::kMaxKeysPerRequest) {
      return absl::InvalidArgumentError(
          absl::StrCat("pull: more than ", SparseTable::kMaxKeysPerRequest,
                       " keys in one request; split it"));
    }
    for (size_t j = 1; j < k.size(); ++j) {
      if (k[j] <= k[j - 1]) {
        return absl::InvalidArgumentError(
            absl::StrCat("pull: key ", k[j], " at position ", j,
                         k[j] == k[j - 1] ? " is repeated" : " is out of order",
                         "; keys must be sorted ascending and unique"));
      }
    }
  }
  return keys;
}

absl::Status SparseTables::ReadPull(
    const proto::PullRequest& request,
    const std::vector<std::vector<uint64_t>>& keys,
    proto::PullResponse* response) const {
  for (int i = 0; i < request.sparse_size(); ++i) {
    RETURN_IF_ERROR(CheckOwnKeys("pull", keys[i].data(),
                                 static_cast<int64_t>(keys[i].size()),
                                 specs_[request.sparse(i).table()].buckets));
  }
  for (int i = 0; i < request.sparse_size(); ++i) {
    const SparseTable& table = *tables_[request.sparse(i).table()];
    const std::vector<uint64_t>& k = keys[i];
    const int64_t n = static_cast<int64_t>(k.size());
    proto::SparseRows* out = response->add_sparse();
    out->set_table(request.sparse(i).table());  // keys: the request's
    // The rows straight into the reply's bytes (std::string's heap storage
    // is aligned for floats), without a staging copy.
    std::string* values = out->mutable_values();
    values->resize(n * table.dim() * sizeof(float));
    std::string* versions = out->mutable_versions();
    versions->resize(n * sizeof(uint32_t));
    table.Read(k.data(), n, reinterpret_cast<float*>(values->data()),
               reinterpret_cast<uint32_t*>(versions->data()));
  }
  return absl::OkStatus();
}

namespace {

// A reply of `keys` keys, `per_key` bytes each: ResourceExhausted past
// SparseTables::kMaxReplyBytes.
absl::Status CheckReplySize(const char* op, int64_t keys, int64_t per_key) {
  const int64_t bytes = keys * per_key;
  if (bytes <= SparseTables::kMaxReplyBytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      op, ": a reply of ", keys, " sparse keys would be ", bytes,
      " bytes, over the ", SparseTables::kMaxReplyBytes,
      "-byte message limit: ask for at most ",
      SparseTables::kMaxReplyBytes / per_key, " keys per request"));
}

// The keys of `keys` (any order) each once: InvalidArgument naming the
// first repeated one. Sorts a copy unless they are ascending.
absl::Status CheckUnique(const char* op, const std::vector<uint64_t>& keys) {
  if (std::is_sorted(keys.begin(), keys.end()) &&
      std::adjacent_find(keys.begin(), keys.end()) == keys.end()) {
    return absl::OkStatus();
  }
  std::vector<uint64_t> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  auto twice = std::adjacent_find(sorted.begin(), sorted.end());
  if (twice == sorted.end()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": key ", *twice,
                   " is asked for more than once; ask for each key once"));
}

}  // namespace

absl::StatusOr<int64_t> SparseTables::PullBytes(
    const proto::PullRequest& request) const {
  int64_t keys = 0, reply = 0, values = 0;
  for (const proto::SparseRows& rows : request.sparse()) {
    if (rows.table() >= tables_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("pull: unknown sparse table ", rows.table(),
                       " (the model has ", tables_.size(), ")"));
    }
    const int64_t n = static_cast<int64_t>(rows.keys().size() / 8);
    const int64_t dim = tables_[rows.table()]->dim();
    keys += n;
    values += n * dim * static_cast<int64_t>(sizeof(float));
    reply += n * (dim * static_cast<int64_t>(sizeof(float)) + 4);
  }
  if (keys > SparseTable::kMaxKeysPerRequest) {
    return absl::InvalidArgumentError(
        absl::StrCat("pull: more than ", SparseTable::kMaxKeysPerRequest,
                     " keys in one request; split it"));
  }
  if (keys > 0) RETURN_IF_ERROR(CheckReplySize("pull", keys, reply / keys));
  // Keys copied, values read, the reply, and gRPC's serialized copy.
  return keys * 8 + values + 2 * reply;
}

absl::StatusOr<int64_t> SparseTables::LookupBytes(
    const proto::LookupRequest& request) const {
  if (request.table() >= tables_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("lookup: unknown sparse table ", request.table(),
                     " (the model has ", tables_.size(), ")"));
  }
  const int64_t n = static_cast<int64_t>(request.keys().size() / 8);
  if (n > SparseTable::kMaxKeysPerRequest) {
    return absl::InvalidArgumentError(
        absl::StrCat("lookup: ", n, " keys; at most ",
                     SparseTable::kMaxKeysPerRequest, " a request"));
  }
  const int64_t values =
      n * tables_[request.table()]->dim() * static_cast<int64_t>(sizeof(float));
  // The reply: values and a missing byte per key.
  if (n > 0) RETURN_IF_ERROR(CheckReplySize("lookup", n, values / n + 1));
  // Keys copied (and a sorted copy), values read, the reply, and gRPC's
  // serialized copy.
  return n * 16 + values + 2 * (values + n);
}

absl::StatusOr<std::vector<uint64_t>> SparseTables::DecodeLookup(
    const proto::LookupRequest& request,
    proto::LookupResponse* response) const {
  if (request.table() >= tables_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("lookup: unknown sparse table ", request.table(),
                     " (the model has ", tables_.size(), ")"));
  }
  std::vector<uint64_t> keys;
  if (!CopyArray(request.keys().data(), request.keys().size(), &keys)) {
    return absl::InvalidArgumentError(
        absl::StrCat("lookup: ", request.keys().size(),
                     " key bytes are not a whole number of uint64 keys"));
  }
  if (static_cast<int64_t>(keys.size()) > SparseTable::kMaxKeysPerRequest) {
    return absl::InvalidArgumentError(
        absl::StrCat("lookup: ", keys.size(), " keys; at most ",
                     SparseTable::kMaxKeysPerRequest, " a request"));
  }
  RETURN_IF_ERROR(CheckUnique("lookup", keys));
  const int dim = tables_[request.table()]->dim();
  response->mutable_values()->resize(keys.size() * dim * sizeof(float));
  response->mutable_missing()->resize(keys.size());
  return keys;
}

absl::Status SparseTables::ReadLookup(const proto::LookupRequest& request,
                                      const std::vector<uint64_t>& keys,
                                      proto::LookupResponse* response) const {
  RETURN_IF_ERROR(CheckOwnKeys("lookup", keys.data(),
                               static_cast<int64_t>(keys.size()),
                               specs_[request.table()].buckets));
  const SparseTable& table = *tables_[request.table()];
  const int dim = table.dim();
  std::string* values = response->mutable_values();
  std::string* missing = response->mutable_missing();
  std::vector<float> out(keys.size() * dim);
  table.Read(keys.data(), static_cast<int64_t>(keys.size()), out.data());
  if (!out.empty()) std::memcpy(values->data(), out.data(), values->size());
  for (size_t i = 0; i < keys.size(); ++i) {
    (*missing)[i] = table.Contains(keys[i]) ? 0 : 1;
  }
  response->set_dim(static_cast<uint32_t>(dim));
  return absl::OkStatus();
}

std::vector<SparseTables::Stats> SparseTables::stats() const {
  std::vector<Stats> stats;
  for (size_t i = 0; i < tables_.size(); ++i) {
    const SparseTable& t = *tables_[i];
    stats.push_back({static_cast<uint32_t>(i), t.rows(), t.bytes(),
                     t.nonzero_values(), t.rows_created(), t.version_sum(),
                     t.pending_keys(), t.rows_evicted()});
  }
  return stats;
}

SparseTables::Stats SparseTables::SumOf(const std::vector<Stats>& tables) {
  Stats sum;
  for (const Stats& t : tables) {
    sum.rows += t.rows;
    sum.bytes += t.bytes;
    sum.nonzero += t.nonzero;
    sum.created += t.created;
    sum.updates += t.updates;
    sum.pending += t.pending;
    sum.evicted += t.evicted;
  }
  return sum;
}

uint64_t SparseTables::version_sum() const {
  uint64_t total = 0;
  for (const auto& table : tables_) total += table->version_sum();
  return total;
}

std::vector<std::vector<uint64_t>> SparseTables::Evict() {
  std::vector<std::vector<uint64_t>> evicted(tables_.size());
  int64_t total = 0;
  for (size_t t = 0; t < tables_.size(); ++t) {
    std::vector<uint64_t> keys = tables_[t]->Evict();
    if (keys.empty()) continue;
    total += static_cast<int64_t>(keys.size());
    SPDLOG_LOGGER_INFO(L(), "ps {}: sparse table {}: {} rows evicted, {} held",
                       index_, t, keys.size(), tables_[t]->rows());
    evicted[t] = std::move(keys);
  }
  if (total > 0) {
    counters_->stats().sparse_evicted_rows.Increment(
        static_cast<double>(total));
  }
  return evicted;
}

void SparseTables::ClearChanges() {
  for (const std::unique_ptr<SparseTable>& table : tables_) {
    table->ClearChanges();
  }
}

std::vector<std::pair<uint32_t, SparseTable::Rows>> SparseTables::CutForReplica(
    bool full) {
  std::vector<std::pair<uint32_t, SparseTable::Rows>> cut;
  // Rows of the same moment: whole rows, values and state together.
  for (size_t t = 0; t < tables_.size(); ++t) {
    SparseTable& table = *tables_[t];
    SparseTable::Rows rows;
    if (full) {
      rows = table.Snapshot();
      table.ClearChanges();
    } else {
      rows = table.TakeChanges();
    }
    // Evicted keys travel as tombstones: the backup drops the same rows.
    if (full || !rows.keys.empty() || !rows.evicted_keys.empty()) {
      cut.emplace_back(static_cast<uint32_t>(t), std::move(rows));
    }
  }
  return cut;
}

}  // namespace downpour::server
