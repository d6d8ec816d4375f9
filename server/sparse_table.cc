#include "server/sparse_table.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/sparse_keys.h"
#include "common/status_macros.h"
#include "server/ftrl_math.h"

namespace downpour::server {
namespace {

int StateSlots(SparseOptimizerType type) {
  switch (type) {
    case SparseOptimizerType::kSgd:
      return 0;
    case SparseOptimizerType::kAdagrad:
      return 1;
    case SparseOptimizerType::kAdam:
    case SparseOptimizerType::kFtrl:
      return 2;
  }
  return 0;
}

absl::Status CheckOptions(const SparseTable::Options& o) {
  auto bad = [](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("sparse table: ", what));
  };
  if (o.dim < 1 || o.dim > 4096) {
    return bad(absl::StrCat("dim ", o.dim, " is outside 1..4096"));
  }
  const SparseOptimizer& p = o.optimizer;
  if (!(p.learning_rate > 0) || !std::isfinite(p.learning_rate)) {
    return bad(absl::StrCat("optimizer.learning_rate ", p.learning_rate,
                            " must be > 0"));
  }
  if (!(p.weight_decay >= 0) || !std::isfinite(p.weight_decay)) {
    return bad(absl::StrCat("optimizer.weight_decay ", p.weight_decay,
                            " must be finite and >= 0"));
  }
  if (!(p.epsilon > 0)) {
    return bad(absl::StrCat("optimizer.epsilon ", p.epsilon, " must be > 0"));
  }
  if (!(p.beta1 >= 0 && p.beta1 < 1) || !(p.beta2 >= 0 && p.beta2 < 1)) {
    return bad("optimizer.beta1 and beta2 must be in [0, 1)");
  }
  if (!(p.beta >= 0) || !(p.l1 >= 0) || !(p.l2 >= 0) ||
      !std::isfinite(p.beta + p.l1 + p.l2)) {
    return bad(absl::StrCat("ftrl beta ", p.beta, ", l1 ", p.l1, " and l2 ",
                            p.l2, " must be finite and >= 0"));
  }
  if (!(o.init_scale >= 0) || !std::isfinite(o.init_scale)) {
    return bad(absl::StrCat("init_scale ", o.init_scale, " must be >= 0"));
  }
  if (o.max_rows < 1 || o.max_rows > (int64_t{1} << 31) - 1) {
    return bad(absl::StrCat("max_rows ", o.max_rows, " is outside 1..2^31-1"));
  }
  if (o.evict_ttl_updates < 0 || o.evict_max_rows < 0 ||
      o.evict_max_rows > (int64_t{1} << 31) - 1) {
    return bad(absl::StrCat("eviction.ttl_updates ", o.evict_ttl_updates,
                            " must be >= 0 and eviction.max_rows ",
                            o.evict_max_rows, " in 0..2^31-1"));
  }
  if (o.admit_min_count < 1 ||
      !(o.admit_probability > 0 && o.admit_probability <= 1)) {
    return bad(absl::StrCat("admission.min_count ", o.admit_min_count,
                            " must be >= 1 and admission.probability ",
                            o.admit_probability, " in (0, 1]"));
  }
  if (o.admit_min_count > 1 && o.admit_probability < 1) {
    return bad(
        "admission.min_count and admission.probability are two ways "
        "to admit keys: set one");
  }
  return absl::OkStatus();
}

}  // namespace

const char* SparseOptimizerName(SparseOptimizerType type) {
  switch (type) {
    case SparseOptimizerType::kSgd:
      return "sgd";
    case SparseOptimizerType::kAdagrad:
      return "adagrad";
    case SparseOptimizerType::kAdam:
      return "adam";
    case SparseOptimizerType::kFtrl:
      return "ftrl";
  }
  return "?";
}

absl::StatusOr<SparseOptimizerType> ParseSparseOptimizer(
    const std::string& name) {
  for (SparseOptimizerType type :
       {SparseOptimizerType::kSgd, SparseOptimizerType::kAdagrad,
        SparseOptimizerType::kAdam, SparseOptimizerType::kFtrl}) {
    if (name == SparseOptimizerName(type)) return type;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown sparse optimizer '", name,
                   "' (valid: sgd, adagrad, adam, ftrl)"));
}

absl::StatusOr<std::unique_ptr<SparseTable>> SparseTable::Create(
    const Options& options) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  return std::unique_ptr<SparseTable>(new SparseTable(options));
}

SparseTable::SparseTable(const Options& options)
    : options_(options),
      state_slots_(StateSlots(options.optimizer.type)),
      stride_(options.dim * (1 + StateSlots(options.optimizer.type))),
      track_clocks_(options.track_clocks || options.evict_ttl_updates > 0 ||
                    options.evict_max_rows > 0),
      row_keys_(options.track_changes) {}

SparseTable::~SparseTable() = default;

float SparseTable::InitialValue(uint64_t key, int i) const {
  if (options_.init == Init::kZeros) return 0.0f;
  return SparseInitialValue(options_.seed, options_.init_scale, key, i);
}

absl::Status SparseTable::CheckPush(const uint64_t* keys, int64_t n,
                                    const float* grads, int64_t grad_floats,
                                    const uint32_t* counts, int dim,
                                    double max_abs) {
  // No keys is allowed: a bsp worker's part in a round of a shard it has
  // no keys for this step.
  if (n < 0 || n > kMaxKeysPerRequest) {
    return absl::InvalidArgumentError(
        absl::StrCat("sparse push: ", n, " keys; a request carries 0 to ",
                     kMaxKeysPerRequest, " keys (split larger pushes)"));
  }
  if (grad_floats != n * dim) {
    return absl::InvalidArgumentError(
        absl::StrCat("sparse push: ", n, " keys of dim ", dim, " need ",
                     n * dim, " gradient floats, got ", grad_floats));
  }
  for (int64_t i = 1; i < n; ++i) {
    if (keys[i] <= keys[i - 1]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sparse push: key ", keys[i], " at position ", i,
          keys[i] == keys[i - 1] ? " is repeated" : " is out of order",
          "; keys must be sorted ascending and unique (sum the gradients of "
          "a key seen twice)"));
    }
  }
  const float bound = max_abs > 0 ? static_cast<float>(max_abs)
                                  : std::numeric_limits<float>::max();
  for (int64_t i = 0; i < grad_floats; ++i) {
    const float g = grads[i];
    if (!(std::fabs(g) <= bound)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sparse push: gradient of key ", keys[i / dim], " (value ", i % dim,
          ") is ", g,
          std::isfinite(g)
              ? absl::StrCat(", beyond optimizer.max_gradient_value ", max_abs)
              : std::string(" (not finite)"),
          "; nothing of the push was applied"));
    }
  }
  if (counts != nullptr) {
    for (int64_t i = 0; i < n; ++i) {
      if (counts[i] == 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sparse push: key ", keys[i], " has occurrence count 0 (>= 1)"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status SparseTable::CheckCapacity(const uint64_t* keys, int64_t n) const {
  const int64_t room = options_.max_rows - rows();
  if (n <= room) return absl::OkStatus();
  int64_t fresh = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!index_.contains(keys[i]) && ++fresh > room) {
      return absl::ResourceExhaustedError(
          absl::StrCat("sparse push: the table holds ", rows(),
                       " rows, its limit (max_rows ", options_.max_rows,
                       "); this push would create more. Raise the limit "
                       "or add ps shards"));
    }
  }
  return absl::OkStatus();
}

namespace {

// How many keys ahead FindRows prefetches the index, and Read and Apply the
// rows: enough misses in flight to cover a DRAM access at a few ns a key.
constexpr int64_t kPrefetchAhead = 16;

}  // namespace

void SparseTable::FindRows(const uint64_t* keys, int64_t n, uint32_t* rows,
                           int prefetch_floats) const {
  for (int64_t i = 0; i < std::min(n, kPrefetchAhead); ++i) {
    index_.prefetch(keys[i]);
  }
  for (int64_t i = 0; i < n; ++i) {
    if (i + kPrefetchAhead < n) index_.prefetch(keys[i + kPrefetchAhead]);
    auto it = index_.find(keys[i]);
    rows[i] = it == index_.end() ? kNoRow : it->second;
    // The row is fetched while the next keys are looked up: by the time the
    // caller walks the block, its rows are in cache.
    PrefetchRow(rows[i], prefetch_floats);
  }
}

void SparseTable::PrefetchRow(uint32_t row, int floats) const {
  if (row == kNoRow || floats == 0) return;
  const char* data = reinterpret_cast<const char*>(RowData(row));
  const size_t bytes = static_cast<size_t>(floats) * sizeof(float);
  for (size_t at = 0; at < bytes; at += 64) __builtin_prefetch(data + at);
  __builtin_prefetch(data + bytes - 1);
  __builtin_prefetch(&RowVersion(row));
}

void SparseTable::Read(const uint64_t* keys, int64_t n, float* out,
                       uint32_t* versions) const {
  const int dim = options_.dim;
  uint32_t rows[kFindBlock];
  for (int64_t from = 0; from < n; from += kFindBlock) {
    const int64_t m = std::min(kFindBlock, n - from);
    FindRows(keys + from, m, rows, dim);
    for (int64_t i = 0; i < m; ++i) {
      float* dst = out + (from + i) * dim;
      const uint32_t row = rows[i];
      if (row == kNoRow) {
        for (int j = 0; j < dim; ++j) dst[j] = InitialValue(keys[from + i], j);
        if (versions != nullptr) versions[from + i] = 0;
      } else {
        std::memcpy(dst, RowData(row), dim * sizeof(float));
        if (versions != nullptr) versions[from + i] = RowVersion(row);
      }
    }
  }
}

uint32_t SparseTable::NewRow(uint64_t key) {
  const uint32_t row = static_cast<uint32_t>(index_.size());
  if (row % kRowsPerChunk == 0 && row / kRowsPerChunk == chunks_.size()) {
    // Not zeroed (new T[], not make_unique): every row is written whole
    // below before it is read, so zeroing would touch each chunk twice.
    chunks_.emplace_back(new float[kRowsPerChunk * stride_]);
    versions_.emplace_back(new uint32_t[kRowsPerChunk]);
    if (row_keys_) keys_.emplace_back(new uint64_t[kRowsPerChunk]);
    if (track_clocks_) clocks_.emplace_back(new uint64_t[kRowsPerChunk]);
  }
  if (row_keys_) RowKey(row) = key;
  float* data = RowData(row);
  const int dim = options_.dim;
  for (int j = 0; j < dim; ++j) {
    data[j] = InitialValue(key, j);
    if (data[j] != 0) ++nonzero_;
  }
  std::fill(data + dim, data + stride_, 0.0f);
  RowVersion(row) = 0;
  if (track_clocks_) RowClock(row) = clock_;
  index_.emplace(key, row);
  ++created_;
  return row;
}

void SparseTable::Update(float* row, uint32_t t, const float* g) {
  const int dim = options_.dim;
  const SparseOptimizer& p = options_.optimizer;
  float* w = row;
  float* s0 = row + dim;
  float* s1 = row + 2 * dim;
  // sgd, adagrad, adam: the gradient with weight decay (L2) added.
  const float wd = static_cast<float>(p.weight_decay);
  auto grad = [&](int j) { return wd == 0.0f ? g[j] : g[j] + wd * w[j]; };
  switch (p.type) {
    case SparseOptimizerType::kSgd: {
      const float lr = static_cast<float>(p.learning_rate);
      for (int j = 0; j < dim; ++j) w[j] -= lr * grad(j);
      break;
    }
    case SparseOptimizerType::kAdagrad: {
      const float lr = static_cast<float>(p.learning_rate);
      const float eps = static_cast<float>(p.epsilon);
      for (int j = 0; j < dim; ++j) {
        const float gj = grad(j);
        s0[j] += gj * gj;
        w[j] -= lr * gj / (std::sqrt(s0[j]) + eps);
      }
      break;
    }
    case SparseOptimizerType::kAdam: {
      const float b1 = static_cast<float>(p.beta1);
      const float b2 = static_cast<float>(p.beta2);
      const double c1 = 1.0 - std::pow(p.beta1, static_cast<double>(t));
      const double c2 = 1.0 - std::pow(p.beta2, static_cast<double>(t));
      const float step = static_cast<float>(p.learning_rate / c1);
      const float inv_c2 = static_cast<float>(1.0 / c2);
      const float eps = static_cast<float>(p.epsilon);
      for (int j = 0; j < dim; ++j) {
        const float gj = grad(j);
        s0[j] = b1 * s0[j] + (1 - b1) * gj;
        s1[j] = b2 * s1[j] + (1 - b2) * gj * gj;
        w[j] -= step * s0[j] / (std::sqrt(s1[j] * inv_c2) + eps);
      }
      break;
    }
    case SparseOptimizerType::kFtrl: {
      int j = 0;
#ifdef __SSE2__
      for (; j + 2 <= dim; j += 2) FtrlPair(p, w + j, s0 + j, s1 + j, g + j);
#endif
      for (; j < dim; ++j) FtrlOne(p, w + j, s0 + j, s1 + j, g[j]);
      break;
    }
  }
}

bool SparseTable::Admit(uint64_t key, uint32_t count) {
  const bool by_count = options_.admit_min_count > 1;
  const bool by_draw = options_.admit_probability < 1.0;
  if (!by_count && !by_draw) return true;
  auto it = pending_.find(key);
  const uint32_t seen = it == pending_.end() ? 0 : it->second;
  bool admitted;
  if (by_count) {
    admitted = static_cast<int64_t>(seen) + count >=
               static_cast<int64_t>(options_.admit_min_count);
  } else {
    // One seeded draw per occurrence, numbered from the key's first: the
    // same occurrences admit the same keys in every run.
    admitted = false;
    for (uint32_t j = 0; j < count && !admitted; ++j) {
      const uint64_t bits = SplitMix64(
          SplitMix64(options_.seed ^ 0xad317ULL ^ SplitMix64(key)) + seen + j);
      const double u = static_cast<double>(bits >> 11) /
                       static_cast<double>(uint64_t{1} << 53);
      admitted = u < options_.admit_probability;
    }
  }
  if (admitted) {
    if (it != pending_.end()) pending_.erase(it);
    return true;
  }
  const uint64_t total = static_cast<uint64_t>(seen) + count;
  pending_[key] = static_cast<uint32_t>(std::min<uint64_t>(total, UINT32_MAX));
  ++filtered_;
  return false;
}

int64_t SparseTable::Apply(const uint64_t* keys, int64_t n, const float* grads,
                           const uint32_t* counts) {
  const int64_t created_before = created_;
  uint32_t rows[kFindBlock];
  for (int64_t from = 0; from < n; from += kFindBlock) {
    const int64_t m = std::min(kFindBlock, n - from);
    FindRows(keys + from, m, rows, stride_);
    ApplyBlock(keys + from, m, grads + from * options_.dim,
               counts != nullptr ? counts + from : nullptr, rows);
  }
  return created_ - created_before;
}

void SparseTable::ApplyBlock(const uint64_t* keys, int64_t n,
                             const float* grads, const uint32_t* counts,
                             uint32_t* rows) {
  const int dim = options_.dim;
  for (int64_t i = 0; i < n; ++i) {
    // Keys are unique (CheckPush), so a row created here is never looked up
    // again in this push: rows[] stays right.
    uint32_t row = rows[i];
    if (row == kNoRow) {
      if (!Admit(keys[i], counts != nullptr ? counts[i] : 1)) continue;
      row = NewRow(keys[i]);
    }
    float* data = RowData(row);
    int64_t nonzero_before = 0;
    for (int j = 0; j < dim; ++j) nonzero_before += data[j] != 0;
    uint32_t& version = RowVersion(row);
    if (version < UINT32_MAX) {
      ++version;
      ++version_sum_;
    }
    ++clock_;
    if (track_clocks_) RowClock(row) = clock_;
    NoteChanged(row);
    Update(data, version, grads + i * dim);
    int64_t nonzero_after = 0;
    for (int j = 0; j < dim; ++j) nonzero_after += data[j] != 0;
    nonzero_ += nonzero_after - nonzero_before;
    ++updates_;
  }
}

namespace {

// Bytes of one slot of the index (absl::flat_hash_map: the pair and a
// control byte).
constexpr int64_t kIndexSlotBytes =
    sizeof(std::pair<const uint64_t, uint32_t>) + 1;

// The index's capacity once it holds `rows` keys: absl's flat_hash_map
// grows to 2^k - 1 slots when a table fills to 7/8.
int64_t IndexCapacityFor(int64_t rows) {
  int64_t capacity = 1;
  while (capacity - capacity / 8 < rows) capacity = capacity * 2 + 1;
  return capacity;
}

}  // namespace

int64_t SparseTable::row_bytes() const {
  return stride_ * static_cast<int64_t>(sizeof(float)) + sizeof(uint32_t) +
         (track_clocks_ ? sizeof(uint64_t) : 0) +
         (row_keys_ ? sizeof(uint64_t) : 0);
}

int64_t SparseTable::ArenaBytes(int64_t rows) const {
  const int64_t chunks = (rows + kRowsPerChunk - 1) / kRowsPerChunk;
  return chunks * kRowsPerChunk * row_bytes();
}

int64_t SparseTable::bytes() const {
  const int64_t index_bytes =
      static_cast<int64_t>(index_.capacity()) * kIndexSlotBytes;
  const int64_t change_bytes =
      static_cast<int64_t>(pending_.capacity()) * kIndexSlotBytes +
      static_cast<int64_t>(changed_.capacity()) * sizeof(uint32_t) +
      static_cast<int64_t>(changed_bits_.capacity()) * sizeof(uint64_t) +
      static_cast<int64_t>(evicted_keys_.capacity()) * sizeof(uint64_t);
  return index_bytes +
         ArenaBytes(static_cast<int64_t>(chunks_.size()) * kRowsPerChunk) +
         change_bytes;
}

int64_t SparseTable::pending_bytes() const {
  return static_cast<int64_t>(pending_.capacity()) * kIndexSlotBytes;
}

int64_t SparseTable::CountFresh(const uint64_t* keys, int64_t n) const {
  int64_t fresh = 0;
  uint32_t rows[kFindBlock];
  for (int64_t from = 0; from < n; from += kFindBlock) {
    const int64_t m = std::min(kFindBlock, n - from);
    FindRows(keys + from, m, rows, 0);
    for (int64_t i = 0; i < m; ++i) fresh += rows[i] == kNoRow;
  }
  return fresh;
}

int64_t SparseTable::BytesAt(int64_t rows) const {
  // The index keeps its slots when rows go (DropRows gives them back only
  // far below), so it is the larger of now and what `rows` needs; a growth
  // holds the old slots and the new ones at once.
  const int64_t now = static_cast<int64_t>(index_.capacity());
  const int64_t needed = IndexCapacityFor(rows);
  const int64_t index_bytes =
      (needed > now ? needed + now : now) * kIndexSlotBytes;
  // Changes recorded for the next replica cut: up to a row changed each.
  const int64_t change_bytes =
      options_.track_changes
          ? rows * static_cast<int64_t>(sizeof(uint32_t) + sizeof(uint64_t))
          : 0;
  return index_bytes + ArenaBytes(rows) + change_bytes;
}

SparseTable::Rows SparseTable::RowsOf(
    const std::vector<std::pair<uint64_t, uint32_t>>& order) const {
  Rows rows;
  rows.dim = options_.dim;
  rows.state_slots = state_slots_;
  rows.optimizer = options_.optimizer.type;
  rows.clock = clock_;
  rows.evicted_versions = evicted_versions_;
  rows.keys.reserve(order.size());
  rows.data.resize(order.size() * stride_);
  rows.versions.reserve(order.size());
  if (track_clocks_) rows.clocks.reserve(order.size());
  float* dst = rows.data.data();
  for (const auto& [key, row] : order) {
    rows.keys.push_back(key);
    std::memcpy(dst, RowData(row), stride_ * sizeof(float));
    dst += stride_;
    rows.versions.push_back(RowVersion(row));
    if (track_clocks_) rows.clocks.push_back(RowClock(row));
  }
  return rows;
}

SparseTable::Rows SparseTable::Snapshot() const {
  std::vector<std::pair<uint64_t, uint32_t>> order(index_.begin(),
                                                   index_.end());
  std::sort(order.begin(), order.end());
  return RowsOf(order);
}

SparseTable::Rows SparseTable::TakeChanges() {
  std::vector<std::pair<uint64_t, uint32_t>> order;
  order.reserve(changed_.size());
  for (uint32_t row : changed_) {
    order.emplace_back(RowKey(row), row);
  }
  std::sort(order.begin(), order.end());
  std::vector<uint64_t> evicted = std::move(evicted_keys_);
  ClearChanges();
  Rows rows = RowsOf(order);
  std::sort(evicted.begin(), evicted.end());
  evicted.erase(std::unique(evicted.begin(), evicted.end()), evicted.end());
  rows.evicted_keys = std::move(evicted);
  return rows;
}

void SparseTable::ClearChanges() {
  for (uint32_t row : changed_) {
    changed_bits_[row / 64] &= ~(uint64_t{1} << (row % 64));
  }
  changed_.clear();
  evicted_keys_ = std::vector<uint64_t>();  // its memory too
}

void SparseTable::TrackClocks() {
  if (track_clocks_) return;
  track_clocks_ = true;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    clocks_.push_back(std::make_unique<uint64_t[]>(kRowsPerChunk));
    std::fill(clocks_[c].get(), clocks_[c].get() + kRowsPerChunk, clock_);
  }
}

SparseTable::Rows SparseTable::ChangedSince(uint64_t clock) const {
  std::vector<std::pair<uint64_t, uint32_t>> order;
  if (track_clocks_) {
    for (const auto& [key, row] : index_) {
      if (RowClock(row) > clock) order.emplace_back(key, row);
    }
  }
  std::sort(order.begin(), order.end());
  return RowsOf(order);
}

std::vector<uint64_t> SparseTable::Evict() {
  const int64_t ttl = options_.evict_ttl_updates;
  const int64_t max_rows = options_.evict_max_rows;
  const int64_t n = rows();
  if ((ttl <= 0 && max_rows <= 0) || n == 0) return {};
  std::vector<uint64_t> victims((n + 63) / 64, 0);
  int64_t count = 0;
  // Untouched by the last `ttl` updates: last updated at clock_ - ttl or
  // before.
  if (ttl > 0 && clock_ >= static_cast<uint64_t>(ttl)) {
    const uint64_t last_stale = clock_ - static_cast<uint64_t>(ttl);
    for (int64_t r = 0; r < n; ++r) {
      if (RowClock(static_cast<uint32_t>(r)) <= last_stale) {
        Mark(&victims, r);
        ++count;
      }
    }
  }
  // Beyond max_rows: the least recently updated of the rest.
  if (max_rows > 0) {
    count += MarkLeast(n - count - max_rows, /*probation_first=*/false, nullptr,
                       &victims);
  }
  return DropVictims(victims, count);
}

std::vector<uint64_t> SparseTable::EvictForRoom(int64_t keep_rows,
                                                const uint64_t* keep_keys,
                                                int64_t n) {
  // Admission's counts are a hint, not state: under pressure they go first.
  if (!pending_.empty()) pending_ = absl::flat_hash_map<uint64_t, uint32_t>();
  const int64_t held = rows();
  if (keep_rows >= held) return {};
  TrackClocks();  // a no-op where kept (SparseTables always keeps them)
  std::vector<uint64_t> kept;
  const int64_t protected_rows = MarkKeys(keep_keys, n, &kept);
  std::vector<uint64_t> victims((held + 63) / 64, 0);
  const int64_t excess = std::min(held - keep_rows, held - protected_rows);
  const int64_t count =
      MarkLeast(excess, /*probation_first=*/true, &kept, &victims);
  std::vector<uint64_t> keys = DropVictims(victims, count);
  // The erased keys' slots stay tombstones, which would make the index grow
  // as it refills: a rehash to the rows held clears them.
  index_.rehash(0);
  changed_.shrink_to_fit();  // its capacity followed the larger table
  return keys;
}

int64_t SparseTable::MarkLeast(int64_t excess, bool probation_first,
                               const std::vector<uint64_t>* skip,
                               std::vector<uint64_t>* victims) const {
  if (excess <= 0) return 0;
  const int64_t n = rows();
  // A row's rank: its clock, unique unless it came without one (restored
  // from an older checkpoint, or merged from a replica's cut): ties go by
  // row. With probation_first, rows updated once rank below every row
  // updated more often (the top bit), so a flood of keys touched once
  // evicts its own rows before the rows training keeps touching.
  auto rank = [&](int64_t r) {
    const uint32_t row = static_cast<uint32_t>(r);
    const uint64_t established =
        probation_first && RowVersion(row) >= 2 ? uint64_t{1} << 63 : 0;
    return established | RowClock(row);
  };
  auto candidate = [&](int64_t r) {
    return !Marked(*victims, r) && (skip == nullptr || !Marked(*skip, r));
  };
  std::vector<uint64_t> ranks;
  for (int64_t r = 0; r < n; ++r) {
    if (candidate(r)) ranks.push_back(rank(r));
  }
  excess = std::min<int64_t>(excess, static_cast<int64_t>(ranks.size()));
  if (excess <= 0) return 0;
  std::nth_element(ranks.begin(), ranks.begin() + (excess - 1), ranks.end());
  const uint64_t threshold = ranks[excess - 1];
  ranks = std::vector<uint64_t>();
  int64_t taken = 0;
  for (int64_t r = 0; r < n; ++r) {
    if (candidate(r) && rank(r) < threshold) {
      Mark(victims, r);
      ++taken;
    }
  }
  for (int64_t r = 0; r < n && taken < excess; ++r) {
    if (candidate(r) && rank(r) == threshold) {
      Mark(victims, r);
      ++taken;
    }
  }
  return taken;
}

std::vector<uint64_t> SparseTable::DropVictims(
    const std::vector<uint64_t>& victims, int64_t count) {
  if (count == 0) return {};
  std::vector<uint64_t> keys = DropRows(victims, count);
  evicted_rows_ += count;
  if (options_.track_changes) {
    evicted_keys_.insert(evicted_keys_.end(), keys.begin(), keys.end());
  }
  return keys;
}

int64_t SparseTable::MarkKeys(const uint64_t* keys, int64_t n,
                              std::vector<uint64_t>* victims) const {
  victims->assign((rows() + 63) / 64, 0);
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    auto it = index_.find(keys[i]);
    if (it == index_.end() || Marked(*victims, it->second)) continue;
    Mark(victims, it->second);
    ++count;
  }
  return count;
}

std::vector<uint64_t> SparseTable::DropRows(
    const std::vector<uint64_t>& victims, int64_t count) {
  const int64_t n = rows();
  const int64_t first_tail = n - count;
  // The victims' keys, and the keys of the last `count` rows: those that
  // move into the holes.
  std::vector<uint64_t> keys;
  keys.reserve(count);
  std::vector<uint64_t> tail_keys(count);
  if (row_keys_) {
    for (int64_t r = 0; r < n; ++r) {
      if (victims[r / 64] == 0) {
        r |= 63;  // a word without victims
      } else if (Marked(victims, r)) {
        keys.push_back(RowKey(static_cast<uint32_t>(r)));
      }
    }
    for (int64_t r = first_tail; r < n; ++r) {
      tail_keys[r - first_tail] = RowKey(static_cast<uint32_t>(r));
    }
  } else {
    for (const auto& [key, row] : index_) {
      if (Marked(victims, row)) keys.push_back(key);
      if (row >= first_tail) tail_keys[row - first_tail] = key;
    }
  }
  // The replication record by key while rows move.
  std::vector<uint64_t> changed_keys;
  if (options_.track_changes) {
    for (uint32_t row : changed_) {
      if (!Marked(victims, row)) {
        changed_keys.push_back(RowKey(row));
      }
      changed_bits_[row / 64] &= ~(uint64_t{1} << (row % 64));
    }
    changed_.clear();  // noted again below, at the rows' new places
  }
  for (uint64_t key : keys) index_.erase(key);
  // Holes from the top: every row above the hole being filled is live, so
  // the last row (always one of the last `count`) moves into it.
  const int dim = options_.dim;
  int64_t size = n;
  for (int64_t v = n - 1; v >= 0 && size > first_tail; --v) {
    if (!Marked(victims, v)) continue;
    const uint32_t hole = static_cast<uint32_t>(v);
    const float* gone = RowData(hole);
    for (int j = 0; j < dim; ++j) nonzero_ -= gone[j] != 0;
    evicted_versions_ += RowVersion(hole);  // version_sum_ keeps it
    const uint32_t last = static_cast<uint32_t>(size - 1);
    if (hole != last) {
      const uint64_t key = tail_keys[last - first_tail];
      std::memcpy(RowData(hole), RowData(last), stride_ * sizeof(float));
      RowVersion(hole) = RowVersion(last);
      if (track_clocks_) RowClock(hole) = RowClock(last);
      if (row_keys_) RowKey(hole) = key;
      index_.find(key)->second = hole;
      if (hole >= first_tail) tail_keys[hole - first_tail] = key;
    }
    --size;
  }
  // Chunks wholly past the end are freed; the last one is kept for reuse.
  const size_t chunks =
      static_cast<size_t>((size + kRowsPerChunk - 1) / kRowsPerChunk);
  chunks_.resize(chunks);
  versions_.resize(chunks);
  if (track_clocks_) clocks_.resize(chunks);
  if (row_keys_) keys_.resize(chunks);
  changed_bits_.resize(
      std::min(changed_bits_.size(), static_cast<size_t>((size + 63) / 64)));
  changed_bits_.shrink_to_fit();
  for (uint64_t key : changed_keys) NoteChanged(index_.find(key)->second);
  // A table that shrank far below its index's slots gives them back.
  if (index_.capacity() > 4 * (index_.size() + 64)) index_.rehash(0);
  std::sort(keys.begin(), keys.end());
  return keys;
}

absl::Status SparseTable::CheckRows(const Rows& rows, const char* what,
                                    bool finite) const {
  if (rows.dim != options_.dim || rows.optimizer != options_.optimizer.type ||
      rows.state_slots != state_slots_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sparse table ", what, ": rows of dim ", rows.dim, " trained with ",
        SparseOptimizerName(rows.optimizer), "; this table has dim ",
        options_.dim, " and ", SparseOptimizerName(options_.optimizer.type)));
  }
  const size_t n = rows.keys.size();
  if (rows.data.size() != n * stride_ || rows.versions.size() != n ||
      (!rows.clocks.empty() && rows.clocks.size() != n)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sparse table ", what, ": ", n, " keys but ",
                     rows.data.size(), " floats, ", rows.versions.size(),
                     " versions and ", rows.clocks.size(), " clocks"));
  }
  if (static_cast<int64_t>(n) > options_.max_rows) {
    return absl::InvalidArgumentError(absl::StrCat("sparse table ", what, ": ",
                                                   n, " rows exceed max_rows ",
                                                   options_.max_rows));
  }
  for (size_t i = 1; i < n; ++i) {
    if (rows.keys[i] <= rows.keys[i - 1]) {
      return absl::InvalidArgumentError(
          absl::StrCat("sparse table ", what, ": key ", rows.keys[i],
                       " at position ", i, " is not ascending"));
    }
  }
  if (finite) {
    for (size_t i = 0; i < rows.data.size(); ++i) {
      if (!std::isfinite(rows.data[i])) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sparse table ", what, ": key ", rows.keys[i / stride_], " holds ",
            std::isnan(rows.data[i]) ? "NaN" : "Inf",
            ": a primary holds finite values only"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status SparseTable::Restore(const Rows& rows) {
  RETURN_IF_ERROR(CheckRows(rows, "restore", /*finite=*/true));
  index_.clear();
  chunks_.clear();
  versions_.clear();
  clocks_.clear();
  keys_.clear();
  changed_.clear();
  changed_bits_.clear();
  evicted_keys_.clear();
  pending_.clear();
  nonzero_ = 0;
  version_sum_ = 0;
  evicted_versions_ = 0;
  clock_ = 0;
  index_.reserve(rows.keys.size());
  Rows without_tombstones;  // nothing to drop from an empty table
  if (!rows.evicted_keys.empty()) {
    without_tombstones = rows;
    without_tombstones.evicted_keys.clear();
  }
  MergeChecked(rows.evicted_keys.empty() ? rows : without_tombstones);
  return absl::OkStatus();
}

absl::Status SparseTable::Merge(const Rows& rows) {
  RETURN_IF_ERROR(CheckMerge(rows));
  MergeChecked(rows);
  return absl::OkStatus();
}

absl::Status SparseTable::CheckMerge(const Rows& rows) const {
  RETURN_IF_ERROR(CheckRows(rows, "merge", /*finite=*/true));
  // Held after the tombstones, and new ones.
  std::vector<uint64_t> dropped;
  const int64_t gone =
      MarkKeys(rows.evicted_keys.data(),
               static_cast<int64_t>(rows.evicted_keys.size()), &dropped);
  int64_t fresh = 0;
  for (uint64_t key : rows.keys) {
    auto it = index_.find(key);
    fresh += it == index_.end() || Marked(dropped, it->second);
  }
  if (static_cast<int64_t>(index_.size()) - gone + fresh > options_.max_rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sparse table merge: ", fresh, " new rows exceed max_rows ",
        options_.max_rows, " (", index_.size() - gone, " held)"));
  }
  return absl::OkStatus();
}

uint32_t SparseTable::PutRow(const Rows& rows, size_t i) {
  auto it = index_.find(rows.keys[i]);
  const uint32_t row = it == index_.end() ? NewRow(rows.keys[i]) : it->second;
  float* data = RowData(row);
  const int dim = options_.dim;
  for (int j = 0; j < dim; ++j) nonzero_ -= data[j] != 0;
  std::memcpy(data, rows.data.data() + i * stride_, stride_ * sizeof(float));
  for (int j = 0; j < dim; ++j) nonzero_ += data[j] != 0;
  version_sum_ += rows.versions[i];
  version_sum_ -= RowVersion(row);
  RowVersion(row) = rows.versions[i];
  return row;
}

void SparseTable::MergeChecked(const Rows& rows) {
  if (!rows.evicted_keys.empty()) {
    std::vector<uint64_t> victims;
    const int64_t count =
        MarkKeys(rows.evicted_keys.data(),
                 static_cast<int64_t>(rows.evicted_keys.size()), &victims);
    if (count > 0) DropRows(victims, count);
  }
  const size_t n = rows.keys.size();
  const int64_t created_before = created_;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t row = PutRow(rows, i);
    if (track_clocks_) {
      RowClock(row) = rows.clocks.empty() ? rows.clock : rows.clocks[i];
    }
  }
  created_ = created_before;  // rows held, not created by training
  // The cut's figures: the versions it evicted stay counted.
  version_sum_ += rows.evicted_versions;
  version_sum_ -= evicted_versions_;
  evicted_versions_ = rows.evicted_versions;
  clock_ = rows.clock;
}

absl::StatusOr<SparseTable::Rows> SparseTable::Overlay(const Rows& under,
                                                       const Rows& over) {
  if (under.dim != over.dim || under.state_slots != over.state_slots ||
      under.optimizer != over.optimizer) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sparse rows of dim ", over.dim, " trained with ",
        SparseOptimizerName(over.optimizer), " do not apply to rows of dim ",
        under.dim, " trained with ", SparseOptimizerName(under.optimizer)));
  }
  const size_t stride = static_cast<size_t>(over.dim) *
                        (1 + static_cast<size_t>(over.state_slots));
  for (const Rows* r : {&under, &over}) {
    const size_t n = r->keys.size();
    if (r->data.size() != n * stride || r->versions.size() != n ||
        (!r->clocks.empty() && r->clocks.size() != n)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sparse rows: ", n, " keys but ", r->data.size(), " floats, ",
          r->versions.size(), " versions and ", r->clocks.size(), " clocks"));
    }
  }
  std::vector<uint64_t> tombstones = over.evicted_keys;
  std::sort(tombstones.begin(), tombstones.end());
  Rows out;
  out.dim = over.dim;
  out.state_slots = over.state_slots;
  out.optimizer = over.optimizer;
  out.clock = over.clock;
  out.evicted_versions = over.evicted_versions;
  const bool clocks = !under.clocks.empty() || !over.clocks.empty();
  const size_t total = under.keys.size() + over.keys.size();
  out.keys.reserve(total);
  out.versions.reserve(total);
  out.data.reserve(total * stride);
  if (clocks) out.clocks.reserve(total);
  auto take = [&](const Rows& from, size_t i) {
    out.keys.push_back(from.keys[i]);
    out.versions.push_back(from.versions[i]);
    out.data.insert(out.data.end(), from.data.begin() + i * stride,
                    from.data.begin() + (i + 1) * stride);
    if (clocks) {
      out.clocks.push_back(from.clocks.empty() ? from.clock : from.clocks[i]);
    }
  };
  size_t i = 0, j = 0, t = 0;
  while (i < under.keys.size() || j < over.keys.size()) {
    const bool from_over =
        j < over.keys.size() &&
        (i == under.keys.size() || over.keys[j] <= under.keys[i]);
    if (from_over) {
      if (i < under.keys.size() && under.keys[i] == over.keys[j]) ++i;
      take(over, j++);
      continue;
    }
    const uint64_t key = under.keys[i];
    while (t < tombstones.size() && tombstones[t] < key) ++t;
    if (t == tombstones.size() || tombstones[t] != key) take(under, i);
    ++i;
  }
  out.evicted_keys = under.evicted_keys;
  out.evicted_keys.insert(out.evicted_keys.end(), tombstones.begin(),
                          tombstones.end());
  std::sort(out.evicted_keys.begin(), out.evicted_keys.end());
  out.evicted_keys.erase(
      std::unique(out.evicted_keys.begin(), out.evicted_keys.end()),
      out.evicted_keys.end());
  return out;
}

}  // namespace downpour::server
