#include "worker/sparse_loop.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "common/sparse_keys.h"
#include "common/status_macros.h"
#include "model/fm_math.h"
#include "model/metrics.h"
#include "worker/bucket_split.h"

namespace downpour::worker {
namespace {

auto L() { return Log(Logger::kWorker); }

// Floats per pull reply at most (4 MiB): keys per request = this / dim.
constexpr size_t kMaxFloatsPerPull = size_t{1} << 20;

// log(1 + exp(m)) without overflow.
double Softplus(double m) {
  return m > 0 ? m + std::log1p(std::exp(-m)) : std::log1p(std::exp(m));
}

}  // namespace

double EmbeddingStepScale(const data::SparseDataset& data, int64_t r) {
  double l1 = 0;
  for (int64_t i = data.offsets[r]; i < data.offsets[r + 1]; ++i) {
    l1 += std::fabs(static_cast<double>(data.values[i]));
  }
  return 1 / std::max(1.0, l1);
}

SparseLoop::SparseLoop(const ModelSpec& spec, SparsePs* ps,
                       std::unique_ptr<SparseBatches> train,
                       const SparseTestSet* test, Options options)
    : spec_(spec),
      ps_(ps),
      train_(std::move(train)),
      test_(test),
      options_(std::move(options)),
      buckets_(spec.sparse_tables().front().buckets),
      fm_dim_(spec.sparse_tables().size() > 1 ? spec.sparse_tables()[1].dim
                                              : 0),
      wide_deep_(options_.backend != nullptr),
      overlap_(options_.training.fetch != FetchMode::kAfterPush &&
               options_.training.consistency != ConsistencyMode::kBsp),
      reuse_push_values_(options_.training.consistency ==
                             ConsistencyMode::kAsync &&
                         !options_.no_communication) {}

namespace {

// training.steps batches, else training.epochs over `rows` rows.
int64_t InMemoryTotal(const TrainingSection& t, int64_t rows) {
  const int batch = std::max(1, t.batch_size);
  const int64_t per_epoch = rows == 0 ? 0 : (rows + batch - 1) / batch;
  return t.steps > 0 ? t.steps : per_epoch * t.epochs;
}

}  // namespace

SparseLoop::SparseLoop(const ModelSpec& spec, SparsePs* ps,
                       std::shared_ptr<const data::SparseDataset> train,
                       const data::SparseDataset* test, Options options)
    : SparseLoop(spec, ps,
                 std::make_unique<InMemoryBatches>(
                     train,
                     options.training.seed +
                         7919 * static_cast<uint64_t>(options.worker_index),
                     InMemoryTotal(options.training, train->rows())),
                 nullptr, options) {
  own_test_ = std::make_unique<InMemoryTestSet>(test);
  test_ = own_test_.get();
}

namespace {

// Sorts (key, position) pairs by key: one counting pass by the key's top 10
// bits into 1,024 buckets, then each bucket by itself (insertion sort when
// short, std::sort when not). Hashed keys spread evenly, so a bucket holds a
// handful; raw LIBSVM indices (small keys, one bucket) still sort in
// n log n. `scratch`: a buffer of the same type, swapped with *entries.
void SortByKey(std::vector<std::pair<uint64_t, uint32_t>>* entries,
               std::vector<std::pair<uint64_t, uint32_t>>* scratch) {
  constexpr int kBits = 10;
  constexpr size_t kBuckets = size_t{1} << kBits;
  const auto by_key = [](const std::pair<uint64_t, uint32_t>& a,
                         const std::pair<uint64_t, uint32_t>& b) {
    return a.first < b.first;
  };
  std::vector<std::pair<uint64_t, uint32_t>>& sorted = *scratch;
  thread_local std::vector<uint32_t> start;
  thread_local std::vector<uint32_t> next;
  start.assign(kBuckets + 1, 0);
  for (const auto& e : *entries) ++start[(e.first >> (64 - kBits)) + 1];
  for (size_t b = 0; b < kBuckets; ++b) start[b + 1] += start[b];
  sorted.resize(entries->size());
  next.assign(start.begin(), start.end() - 1);
  for (const auto& e : *entries) sorted[next[e.first >> (64 - kBits)]++] = e;
  for (size_t b = 0; b < kBuckets; ++b) {
    const auto first = sorted.begin() + start[b];
    const auto last = sorted.begin() + start[b + 1];
    if (last - first > 32) {
      std::sort(first, last, by_key);
      continue;
    }
    for (auto i = first; i < last; ++i) {
      const auto e = *i;
      auto j = i;
      for (; j > first && e.first < (j - 1)->first; --j) *j = *(j - 1);
      *j = e;
    }
  }
  entries->swap(sorted);
}

}  // namespace

void SparseLoop::UniqueKeys(const data::SparseDataset& data,
                            const std::vector<int64_t>& rows,
                            std::vector<uint64_t>* keys,
                            std::vector<uint32_t>* slot) {
  // Every entry as (key, its position among the batch's entries), sorted by
  // key once: the unique keys and each entry's slot come out of one pass
  // (no search per entry).
  // Kept for the next batch on this thread, unless an evaluation's whole
  // test set made them large (held for the rest of the run otherwise).
  constexpr size_t kKeptEntries = size_t{1} << 16;
  thread_local std::vector<std::pair<uint64_t, uint32_t>> entries, scratch;
  entries.clear();
  for (int64_t r : rows) {
    for (int64_t e = data.offsets[r]; e < data.offsets[r + 1]; ++e) {
      entries.emplace_back(data.keys[e], static_cast<uint32_t>(entries.size()));
    }
  }
  SortByKey(&entries, &scratch);
  keys->clear();
  slot->resize(entries.size());
  for (const auto& [key, position] : entries) {
    if (keys->empty() || keys->back() != key) keys->push_back(key);
    (*slot)[position] = static_cast<uint32_t>(keys->size() - 1);
  }
  if (entries.capacity() > kKeptEntries) {
    std::vector<std::pair<uint64_t, uint32_t>>().swap(entries);
    std::vector<std::pair<uint64_t, uint32_t>>().swap(scratch);
  }
}

absl::StatusOr<int> SparseLoop::ShardOf(uint64_t key,
                                        const std::vector<int>* owners) const {
  return OwnerOfKey(key, buckets_, owners, options_.num_shards);
}

int SparseLoop::ShardCount(
    const std::shared_ptr<const std::vector<int>>& owners) {
  if (owners == nullptr) return options_.num_shards;
  absl::MutexLock lock(&owners_mu_);
  if (owners != counted_owners_) {
    // Shards added while training (psctl add-ps) hold buckets past
    // cluster.ps.
    counted_shards_ = options_.num_shards;
    for (int s : *owners) counted_shards_ = std::max(counted_shards_, s + 1);
    counted_owners_ = owners;
  }
  return counted_shards_;
}

absl::Status SparseLoop::PullRows(const std::vector<uint64_t>& keys,
                                  std::vector<float>* weights,
                                  std::vector<float>* embeddings) {
  std::vector<SparsePs::TableRows> tables = {{0, 1}};
  if (fm_dim_ > 0) tables.push_back({1, fm_dim_});
  weights->assign(keys.size(), 0.0f);
  if (fm_dim_ > 0) embeddings->assign(keys.size() * fm_dim_, 0.0f);
  const size_t chunk =
      std::max<size_t>(1, kMaxFloatsPerPull / static_cast<size_t>(1 + fm_dim_));
  // Chunks of at most `chunk` keys (the evaluation's pull may hold
  // every test key).
  for (size_t from = 0; from < keys.size(); from += chunk) {
    const size_t to = std::min(keys.size(), from + chunk);
    const std::shared_ptr<const std::vector<int>> owners = ps_->BucketOwners();
    const int shards = ShardCount(owners);
    std::vector<std::vector<uint64_t>> by_shard(shards);
    std::vector<std::vector<uint32_t>> where(shards);
    for (size_t i = from; i < to; ++i) {
      ASSIGN_OR_RETURN(const int s, ShardOf(keys[i], owners.get()));
      by_shard[s].push_back(keys[i]);
      where[s].push_back(static_cast<uint32_t>(i));
    }
    std::vector<std::vector<std::vector<float>>> values;
    RETURN_IF_ERROR(ps_->PullTables(tables, by_shard, &values));
    for (int s = 0; s < shards; ++s) {
      for (size_t j = 0; j < where[s].size(); ++j) {
        (*weights)[where[s][j]] = values[0][s][j];
        if (fm_dim_ == 0) continue;
        std::copy_n(values[1][s].begin() + j * fm_dim_, fm_dim_,
                    embeddings->begin() + size_t{where[s][j]} * fm_dim_);
      }
    }
  }
  return absl::OkStatus();
}

float SparseLoop::WideDeepMargin(const data::SparseDataset& data, int64_t r,
                                 const uint32_t* slot,
                                 const std::vector<float>& params,
                                 const std::vector<float>& weights,
                                 const std::vector<float>& embeddings) {
  const int64_t begin = data.offsets[r];
  const size_t n = static_cast<size_t>(data.offsets[r + 1] - begin);
  const uint16_t* fields =
      data.fields.empty() ? nullptr : data.fields.data() + begin;
  const int num_fields = spec_.inputs() / fm_dim_;
  gathered_w_.resize(n);
  gathered_v_.resize(n);
  pool_weights_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    gathered_w_[i] = weights[slot[i]];
    gathered_v_[i] = embeddings.data() + size_t{slot[i]} * fm_dim_;
  }
  model::PoolingWeights(data.values.data() + begin, fields, n, num_fields,
                        options_.mean_pooling, pool_weights_.data(),
                        &wide_deep_scratch_);
  return model::WideDeepMargin(spec_.layers(), params.data(),
                               gathered_w_.data(), gathered_v_.data(),
                               data.values.data() + begin, pool_weights_.data(),
                               fields, n, fm_dim_, &wide_deep_scratch_);
}

absl::StatusOr<double> SparseLoop::WideDeepGradients(
    const std::vector<int64_t>& rows) {
  const data::SparseDataset& data = step_.batch;
  const int num_fields = spec_.inputs() / fm_dim_;
  const int batch = static_cast<int>(rows.size());
  batch_offsets_.assign(1, 0);
  batch_fields_.clear();
  pool_weights_.resize(step_.slot.size());
  wide_.resize(batch);
  targets_.resize(batch);
  out_grad_.resize(batch);
  size_t e = 0;
  for (int k = 0; k < batch; ++k) {
    const int64_t r = rows[k];
    const int64_t begin = data.offsets[r];
    const size_t n = static_cast<size_t>(data.offsets[r + 1] - begin);
    const uint16_t* fields =
        data.fields.empty() ? nullptr : data.fields.data() + begin;
    for (size_t i = 0; i < n; ++i) {
      batch_fields_.push_back(fields == nullptr ? 0 : fields[i]);
    }
    model::PoolingWeights(data.values.data() + begin, fields, n, num_fields,
                          options_.mean_pooling, pool_weights_.data() + e,
                          &wide_deep_scratch_);
    gathered_w_.resize(n);
    for (size_t i = 0; i < n; ++i)
      gathered_w_[i] = step_.weights[step_.slot[e + i]];
    wide_[k] = static_cast<float>(
        model::WideSum(gathered_w_.data(), data.values.data() + begin, n));
    targets_[k] = data.y[r];
    e += n;
    batch_offsets_.push_back(static_cast<int64_t>(e));
  }
  PooledBatch pooled;
  pooled.offsets = batch_offsets_.data();
  pooled.slot = step_.slot.data();
  pooled.value = pool_weights_.data();
  pooled.field = batch_fields_.data();
  pooled.embeddings = step_.embeddings.data();
  pooled.embedding_rows = static_cast<int64_t>(step_.keys.size());
  pooled.fields = num_fields;
  pooled.dim = fm_dim_;
  ASSIGN_OR_RETURN(
      const float mean_loss,
      options_.backend->PooledLossAndGradient(
          step_.dense.data(), pooled, wide_.data(), targets_.data(), batch,
          dense_grad_.data(), embedding_grads_.data(), out_grad_.data()));
  if (!std::isfinite(mean_loss)) {
    return absl::InternalError(absl::StrCat(
        "training diverged: the batch's loss is ", mean_loss,
        "; lower optimizer.learning_rate or wide_deep.learning_rate"));
  }
  // The weights' gradient: d loss / d output times the entry's value.
  e = 0;
  for (int k = 0; k < batch; ++k) {
    const int64_t r = rows[k];
    for (int64_t i = data.offsets[r]; i < data.offsets[r + 1]; ++i, ++e) {
      grads_[step_.slot[e]] += out_grad_[k] * data.values[i];
    }
  }
  return static_cast<double>(mean_loss) * batch;
}

double SparseLoop::Margin(const data::SparseDataset& data, int64_t r,
                          const uint32_t* slot, double bias,
                          const std::vector<float>& weights,
                          const std::vector<float>& embeddings) {
  const int64_t begin = data.offsets[r];
  const size_t n = static_cast<size_t>(data.offsets[r + 1] - begin);
  if (fm_dim_ == 0) {
    double margin = bias;
    for (size_t i = 0; i < n; ++i) {
      margin += static_cast<double>(weights[slot[i]]) * data.values[begin + i];
    }
    return margin;
  }
  gathered_w_.resize(n);
  gathered_v_.resize(n);
  fm_s_.resize(fm_dim_);
  for (size_t i = 0; i < n; ++i) {
    gathered_w_[i] = weights[slot[i]];
    gathered_v_[i] = embeddings.data() + size_t{slot[i]} * fm_dim_;
  }
  return model::FmMargin(bias, gathered_w_.data(), gathered_v_.data(),
                         data.values.data() + begin, n, fm_dim_, fm_s_.data());
}

absl::StatusOr<bool> SparseLoop::PrepareStep(int batch, SparseStepInput* in) {
  ASSIGN_OR_RETURN(const bool more,
                   train_->Next(batch, &in->batch, &in->epochs));
  if (!more) return false;
  const absl::Time t0 = absl::Now();
  prepare_rows_.resize(static_cast<size_t>(in->batch.rows()));
  std::iota(prepare_rows_.begin(), prepare_rows_.end(), 0);
  UniqueKeys(in->batch, prepare_rows_, &in->keys, &in->slot);
  const absl::Time t1 = absl::Now();
  in->dense.resize(spec_.num_params());
  if (options_.no_communication) {
    in->versions.assign(spec_.blocks().size(), 0);
    in->weights.assign(in->keys.size(), 0.0f);
    in->embeddings.assign(in->keys.size() * fm_dim_, 0.0f);
  } else {
    RETURN_IF_ERROR(DenseFor(in));
    RETURN_IF_ERROR(PullRows(in->keys, &in->weights, &in->embeddings));
  }
  in->sort_time = t1 - t0;
  in->pull_time = absl::Now() - t1;
  return true;
}

absl::Status SparseLoop::Step(StepPusher* pushes, absl::Duration waited) {
  const std::vector<int64_t>& rows = batch_rows_;
  const absl::Time t0 = absl::Now();
  ASSIGN_OR_RETURN(SparseStepPush* const push, pushes->Acquire());
  grads_.assign(step_.keys.size(), 0.0f);
  if (fm_dim_ > 0) embedding_grads_.assign(step_.keys.size() * fm_dim_, 0.0f);
  double loss = 0;
  if (wide_deep_) {
    ASSIGN_OR_RETURN(loss, WideDeepGradients(rows));
  } else {
    ASSIGN_OR_RETURN(loss, LinearGradients(rows));
  }
  RETURN_IF_ERROR(RowsByShard(push));
  push->examples = static_cast<int64_t>(rows.size());
  push->row_updates = static_cast<int64_t>(step_.keys.size()) *
                      static_cast<int64_t>(spec_.sparse_tables().size());
  push->epochs = step_.epochs;
  // Prefetched: the keys were sorted and the rows pulled on the prefetch
  // thread while the previous step computed; the compute thread waited
  // `waited` for them. Else this thread did both, in `waited`.
  const bool prefetched = overlap_;
  const absl::Duration sorted =
      prefetched ? absl::ZeroDuration() : step_.sort_time;
  const absl::Duration computed = sorted + (absl::Now() - t0);
  if (computed < options_.simulated_compute) {
    absl::SleepFor(options_.simulated_compute - computed);
  }
  const absl::Time t1 = absl::Now();
  absl::Duration pushed;
  RETURN_IF_ERROR(pushes->Start(push, &pushed));
  absl::MutexLock lock(&mu_);
  loss_sum_ += loss * (1.0 / static_cast<double>(rows.size()));
  ++loss_steps_;
  compute_ += sorted + (t1 - t0);
  wait_pull_ += prefetched ? waited : step_.pull_time;
  wait_push_ += pushed;
  return absl::OkStatus();
}

absl::StatusOr<double> SparseLoop::LinearGradients(
    const std::vector<int64_t>& rows) {
  // Forward and backward: one margin per example, the loss's derivative in
  // it, spread over the example's keys. A key's gradient is the sum over the
  // examples that hold it (what per-example FTRL would apply: a mean over the
  // batch would shrink a rare key's step 32-fold at batch 32); the bias's is
  // the batch mean.
  const data::SparseDataset& data = step_.batch;
  const bool binary = spec_.task() == Task::kBinary;
  const double scale = 1.0 / static_cast<double>(rows.size());
  double bias_grad = 0, loss = 0;
  size_t e = 0;
  for (int64_t r : rows) {
    const double margin = Margin(data, r, step_.slot.data() + e, step_.dense[0],
                                 step_.weights, step_.embeddings);
    const double y = data.y[r];
    double d;
    if (binary) {
      loss += Softplus(margin) - y * margin;
      d = 1.0 / (1.0 + std::exp(-margin)) - y;
    } else {
      loss += (margin - y) * (margin - y);
      d = margin - y;
    }
    if (!std::isfinite(margin) || !std::isfinite(d)) {
      return absl::InternalError(absl::StrCat(
          "training diverged: the margin of an example is ", margin,
          "; lower optimizer.learning_rate or raise optimizer.l2"));
    }
    bias_grad += d * scale;
    // fm.scale_step: the embeddings' step of this example divided by the
    // sum of its |x_i| (the pairwise term's gradient in v_i, x_i s_f, grows
    // with it).
    const double emb = options_.fm_scale_step ? EmbeddingStepScale(data, r) : 1;
    for (int64_t i = data.offsets[r]; i < data.offsets[r + 1]; ++i, ++e) {
      const double x = data.values[i];
      grads_[step_.slot[e]] += static_cast<float>(d * x);
      if (fm_dim_ == 0) continue;
      // d/dv_if of the pairwise term: x_i (s_f - v_if x_i).
      const float* v =
          step_.embeddings.data() + size_t{step_.slot[e]} * fm_dim_;
      float* g = embedding_grads_.data() + size_t{step_.slot[e]} * fm_dim_;
      for (int f = 0; f < fm_dim_; ++f) {
        g[f] += static_cast<float>(emb * d * x * (fm_s_[f] - v[f] * x));
      }
    }
  }
  dense_grad_[0] = static_cast<float>(bias_grad);
  return loss;
}

absl::Status SparseLoop::RowsByShard(SparseStepPush* push) {
  // Rows by shard, keys still ascending within each; as many shards as the
  // placement names.
  const std::shared_ptr<const std::vector<int>> owners = ps_->BucketOwners();
  const int shards = ShardCount(owners);
  // Cleared, not freed: a push's buffers are reused for a later one.
  const auto reset = [shards](auto* by_shard) {
    by_shard->resize(shards);
    for (auto& v : *by_shard) v.clear();
  };
  reset(&push->shard_keys);
  reset(&push->shard_grads);
  reset(&push->shard_counts);
  reset(&push->shard_embedding_grads);
  reset(&push->refs);
  push->dense_grad = dense_grad_;
  push->versions = step_.versions;
  // Occurrence counts (a key once per time the batch holds it), for the
  // ps's admission; sent only when admission is on.
  const bool with_counts = options_.send_counts;
  if (with_counts) {
    counts_.assign(step_.keys.size(), 0);
    for (uint32_t slot : step_.slot) ++counts_[slot];
  }
  for (size_t i = 0; i < step_.keys.size(); ++i) {
    ASSIGN_OR_RETURN(const int s, ShardOf(step_.keys[i], owners.get()));
    push->shard_keys[s].push_back(step_.keys[i]);
    push->shard_grads[s].push_back(grads_[i]);
    if (with_counts) push->shard_counts[s].push_back(counts_[i]);
    if (fm_dim_ > 0) {
      push->shard_embedding_grads[s].insert(
          push->shard_embedding_grads[s].end(),
          embedding_grads_.begin() + i * fm_dim_,
          embedding_grads_.begin() + (i + 1) * fm_dim_);
    }
  }
  AddRefs(push, with_counts);
  return absl::OkStatus();
}

void SparseLoop::AddRefs(SparseStepPush* push, bool with_counts) const {
  // Under bsp every shard hears from every worker each step (no keys is a
  // part too), so that its round of the table completes.
  const bool every_shard =
      options_.training.consistency == ConsistencyMode::kBsp;
  for (size_t s = 0; s < push->shard_keys.size(); ++s) {
    if (push->shard_keys[s].empty() && !every_shard) continue;
    wire::SparseRef ref;
    ref.table = 0;
    ref.keys = reinterpret_cast<const char*>(push->shard_keys[s].data());
    ref.keys_size = push->shard_keys[s].size() * sizeof(uint64_t);
    ref.values = reinterpret_cast<const char*>(push->shard_grads[s].data());
    ref.values_size = push->shard_grads[s].size() * sizeof(float);
    if (with_counts) {
      ref.counts = reinterpret_cast<const char*>(push->shard_counts[s].data());
      ref.counts_size = push->shard_counts[s].size() * sizeof(uint32_t);
    }
    push->refs[s].push_back(ref);
    if (fm_dim_ > 0) {
      // The same keys in the embeddings' table (same buckets, same ps).
      ref.table = 1;
      ref.values =
          reinterpret_cast<const char*>(push->shard_embedding_grads[s].data());
      ref.values_size = push->shard_embedding_grads[s].size() * sizeof(float);
      push->refs[s].push_back(ref);
    }
  }
}

absl::Status SparseLoop::SendStep(SparseStepPush* push, PushReport* report) {
  if (options_.no_communication) return absl::OkStatus();
  if (!reuse_push_values_) {
    return ps_->PushWithRows(push->dense_grad.data(), push->versions,
                             push->refs, report);
  }
  push->fresh_dense.resize(spec_.num_params());
  push->fresh_versions.assign(spec_.blocks().size(), 0);
  RETURN_IF_ERROR(ps_->PushWithRowsAndPull(
      push->dense_grad.data(), push->versions, push->refs, report,
      push->fresh_dense.data(), &push->fresh_versions));
  if (report->refused > 0) {
    // Refused: the next step pulls, as it would have.
    absl::MutexLock lock(&dense_mu_);
    have_dense_ = false;
    return absl::OkStatus();
  }
  PublishDense(*push);
  return absl::OkStatus();
}

void SparseLoop::PublishDense(const SparseStepPush& push) {
  absl::MutexLock lock(&dense_mu_);
  if (!have_dense_) {
    latest_dense_ = push.fresh_dense;
    latest_versions_ = push.fresh_versions;
    have_dense_ = true;
    return;
  }
  const std::vector<BlockSpec>& blocks = spec_.blocks();
  for (size_t b = 0; b < blocks.size(); ++b) {
    if (push.fresh_versions[b] <= latest_versions_[b]) continue;
    latest_versions_[b] = push.fresh_versions[b];
    std::copy_n(push.fresh_dense.begin() + blocks[b].offset, blocks[b].length,
                latest_dense_.begin() + blocks[b].offset);
  }
}

absl::Status SparseLoop::DenseFor(SparseStepInput* in) {
  {
    absl::MutexLock lock(&dense_mu_);
    if (have_dense_) {
      in->dense = latest_dense_;
      in->versions = latest_versions_;
      return absl::OkStatus();
    }
  }
  return ps_->Pull(in->dense.data(), &in->versions);
}

void SparseLoop::CountStep(const PushReport& report,
                           const SparseStepPush& push) {
  absl::MutexLock lock(&mu_);
  ++stats_.step;
  stats_.pulls += 1;
  staleness_.Merge(report.staleness);
  if (report.refused > 0) {
    // A ps's push guard refused it (its dense part): not counted as applied.
    ++stats_.refused_steps;
    for (const std::string& line : refusal_log_.Record(
             "refused",
             absl::StrCat("step ", stats_.step, ": push refused and dropped: ",
                          report.refused_why))) {
      SPDLOG_LOGGER_WARN(L(), "{}", line);
    }
    return;
  }
  ++stats_.pushes;
  ++stats_.pushed_steps;
  stats_.row_updates += push.row_updates;
  stats_.examples += push.examples;
  for (const int32_t epoch : push.epochs) {
    if (epoch >= static_cast<int32_t>(stats_.epoch_examples.size())) {
      stats_.epoch_examples.resize(epoch + 1, 0);
    }
    ++stats_.epoch_examples[epoch];
  }
}

absl::Status SparseLoop::Score(const data::SparseDataset& test,
                               std::vector<float>* outputs) {
  std::vector<int64_t> all(test.rows());
  std::iota(all.begin(), all.end(), 0);
  std::vector<uint64_t> keys;
  std::vector<uint32_t> slot;
  UniqueKeys(test, all, &keys, &slot);
  std::vector<float> weights, embeddings;
  std::vector<float> bias(step_.dense.size());
  std::vector<uint64_t> versions;
  RETURN_IF_ERROR(ps_->Pull(bias.data(), &versions));
  RETURN_IF_ERROR(PullRows(keys, &weights, &embeddings));
  for (int64_t r = 0; r < test.rows(); ++r) {
    const uint32_t* s = slot.data() + test.offsets[r];
    outputs->push_back(
        wide_deep_ ? WideDeepMargin(test, r, s, bias, weights, embeddings)
                   : static_cast<float>(
                         Margin(test, r, s, bias[0], weights, embeddings)));
  }
  return absl::OkStatus();
}

absl::Status SparseLoop::Evaluate(bool all) {
  if (test_ == nullptr) return absl::OkStatus();
  std::vector<float> outputs;
  std::vector<float> labels;
  const auto score = [&](const data::SparseDataset& chunk) {
    labels.insert(labels.end(), chunk.y.begin(), chunk.y.end());
    return Score(chunk, &outputs);
  };
  if (all) {
    RETURN_IF_ERROR(test_->ForEachChunk(score));
  } else {
    RETURN_IF_ERROR(score(test_->sample()));
  }
  if (outputs.empty()) return absl::OkStatus();
  const model::Metrics m =
      model::ComputeMetrics(spec_.task(), outputs.data(), labels.data(),
                            static_cast<int64_t>(outputs.size()), 1);
  absl::MutexLock lock(&mu_);
  stats_.accuracy = m.accuracy;
  stats_.test_loss = m.loss;
  stats_.metrics = m.Reported(spec_.task());
  saturated_ = m.saturated;
  ++stats_.evaluations;
  return absl::OkStatus();
}

absl::Status SparseLoop::Run() {
  const TrainingSection& t = options_.training;
  const int batch = std::max(1, t.batch_size);
  step_.dense.assign(spec_.num_params(), 0.0f);
  dense_grad_.assign(spec_.num_params(), 0.0f);
  {
    absl::MutexLock lock(&mu_);
    start_ = absl::Now();
    const int64_t total = train_->total_batches();
    stats_.planned_steps = total < 0     ? 0
                           : t.steps > 0 ? std::min<int64_t>(total, t.steps)
                                         : total;
  }
  LogStart(batch);
  // overlap, layerwise: step t+1 is drawn and its rows pulled while step t
  // computes, and pushes go out while later steps compute
  // (worker/sparse_step_pipeline.h). The pusher is declared last so that it
  // drains first.
  StepPrefetcher prefetch(overlap_, [this, batch](SparseStepInput* in) {
    return PrepareStep(batch, in);
  });
  StepPusher pushes(
      overlap_, std::max(1, t.max_pushes_in_flight),
      [this](SparseStepPush* p, PushReport* report) {
        return SendStep(p, report);
      },
      [this](const SparseStepPush& p, const PushReport& report) {
        CountStep(report, p);
      });
  // Finished: every batch trained (the data ran out, or training.steps);
  // not when Stop() came first.
  bool ran_out = true;
  absl::Status status = TrainSteps(batch, &prefetch, &pushes, &ran_out);
  // Every push in flight acknowledged (or failed) before the final
  // evaluation and the counts.
  const absl::Status drained = pushes.Drain();
  if (status.ok()) status = drained;
  train_->Stop();
  if (status.ok()) status = Evaluate(/*all=*/true);
  UpdateRates();
  return Finish(status, ran_out);
}

absl::Status SparseLoop::TrainSteps(int batch, StepPrefetcher* prefetch,
                                    StepPusher* pushes, bool* ran_out) {
  const TrainingSection& t = options_.training;
  for (int64_t step = 0; t.steps <= 0 || step < t.steps; ++step) {
    if (stop_.load()) {
      *ran_out = false;
      return absl::OkStatus();
    }
    absl::Duration waited;
    absl::StatusOr<bool> next = prefetch->Take(&step_, &waited);
    if (!next.ok() || !*next) {
      *ran_out = !stop_.load();
      return next.status();
    }
    batch_rows_.resize(static_cast<size_t>(step_.batch.rows()));
    std::iota(batch_rows_.begin(), batch_rows_.end(), 0);
    RETURN_IF_ERROR(Step(pushes, waited));
    if (t.eval_every_steps > 0 && (step + 1) % t.eval_every_steps == 0) {
      RETURN_IF_ERROR(Evaluate(/*all=*/false));
    }
    UpdateRates();
  }
  return absl::OkStatus();
}

void SparseLoop::LogStart(int batch) const {
  const int64_t total = train_->total_batches();
  const int64_t rows = train_->rows_per_epoch();
  SPDLOG_LOGGER_INFO(
      L(),
      "training {} of {} examples on {} ({} train / {} test examples, {} ps)",
      total >= 0 ? absl::StrCat(total, " steps")
                 : absl::StrCat(options_.training.epochs, " epoch(s) of steps"),
      batch,
      wide_deep_    ? absl::StrCat("wide_deep (k=", fm_dim_, ", MLP on ",
                                   options_.backend->device(), ")")
      : fm_dim_ > 0 ? absl::StrCat("fm (k=", fm_dim_, ")")
                    : std::string("sparse_linear"),
      rows >= 0 ? absl::StrCat(rows) : std::string("streamed"),
      test_ == nullptr ? 0 : test_->sample().rows(), options_.num_shards);
  if (overlap_) {
    SPDLOG_LOGGER_INFO(
        L(),
        "training.fetch {}: the next step's rows are pulled while this one "
        "computes, up to {} push(es) in flight",
        FetchModeName(options_.training.fetch),
        std::max(1, options_.training.max_pushes_in_flight));
  }
}

absl::Status SparseLoop::Finish(absl::Status status, bool ran_out) {
  absl::MutexLock lock(&mu_);
  stats_.finished = status.ok() && ran_out;
  if (absl::StartsWith(status.message(), "training diverged")) {
    stats_.diverged = std::string(status.message());
  }
  SPDLOG_LOGGER_INFO(L(), "finished after {} steps: {}", stats_.step,
                     model::FormatMetrics(stats_.metrics));
  const std::string saturation = model::SaturationWarning(
      saturated_, wide_deep_    ? ModelType::kWideDeep
                  : fm_dim_ > 0 ? ModelType::kFm
                                : ModelType::kSparseLinear);
  if (!saturation.empty()) SPDLOG_LOGGER_WARN(L(), "{}", saturation);
  return status;
}

void SparseLoop::UpdateRates() {
  absl::MutexLock lock(&mu_);
  if (loss_steps_ > 0) {
    stats_.loss = loss_sum_ / loss_steps_;
    loss_sum_ = 0;
    loss_steps_ = 0;
  }
  const double wall = absl::ToDoubleSeconds(absl::Now() - start_);
  stats_.examples_per_sec = wall > 0 ? stats_.examples / wall : 0;
  stats_.share_compute = wall > 0 ? absl::ToDoubleSeconds(compute_) / wall : 0;
  stats_.share_wait_pull =
      wall > 0 ? absl::ToDoubleSeconds(wait_pull_) / wall : 0;
  stats_.share_wait_push =
      wall > 0 ? absl::ToDoubleSeconds(wait_push_) / wall : 0;
  stats_.share_wait_data = wall > 0 ? train_->wait_seconds() / wall : 0;
  const StalenessSummary s = staleness_.Summary();
  stats_.mean_staleness = s.mean;
  stats_.staleness_p50 = s.p50;
  stats_.staleness_p99 = s.p99;
  stats_.staleness_max = s.max;
}

WorkerStats SparseLoop::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

StalenessHistogram SparseLoop::staleness() const {
  absl::MutexLock lock(&mu_);
  return staleness_;
}

}  // namespace downpour::worker
