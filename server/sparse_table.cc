#include "server/sparse_table.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/sparse_keys.h"
#include "common/status_macros.h"

namespace downpour::server {
namespace {

// SplitMix64's output function (Steele, Lea and Flood 2014): the generator's
// step, then the finalizer common/sparse_keys.h's MixKey is.
uint64_t SplitMix64(uint64_t x) { return MixKey(x + 0x9e3779b97f4a7c15ULL); }

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
  if (o.admit_min_count < 1 ||
      !(o.admit_probability > 0 && o.admit_probability <= 1)) {
    return bad(absl::StrCat("admission.min_count ", o.admit_min_count,
                            " must be >= 1 and admission.probability ",
                            o.admit_probability, " in (0, 1]"));
  }
  if (o.admit_min_count > 1 && o.admit_probability < 1) {
    return bad("admission.min_count and admission.probability are two ways "
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
      stride_(options.dim * (1 + StateSlots(options.optimizer.type))) {}

SparseTable::~SparseTable() = default;

float SparseTable::InitialValue(uint64_t key, int i) const {
  if (options_.init == Init::kZeros || options_.init_scale == 0) return 0.0f;
  const uint64_t bits = SplitMix64(SplitMix64(options_.seed ^ SplitMix64(key)) +
                                   static_cast<uint64_t>(i));
  // 24 random bits -> [0, 1), then [-scale, scale).
  const double u = static_cast<double>(bits >> 40) / static_cast<double>(1 << 24);
  return static_cast<float>((2.0 * u - 1.0) * options_.init_scale);
}

absl::Status SparseTable::CheckPush(const uint64_t* keys, int64_t n,
                                    const float* grads, int64_t grad_floats,
                                    const uint32_t* counts, int dim,
                                    double max_abs) {
  // No keys is allowed: a bsp worker's part in a round of a shard it has
  // no keys for this step.
  if (n < 0 || n > kMaxKeysPerRequest) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sparse push: ", n, " keys; a request carries 0 to ",
        kMaxKeysPerRequest, " keys (split larger pushes)"));
  }
  if (grad_floats != n * dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sparse push: ", n, " keys of dim ", dim, " need ", n * dim,
        " gradient floats, got ", grad_floats));
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
          std::isfinite(g) ? absl::StrCat(", beyond optimizer.max_gradient_value ",
                                          max_abs)
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
      return absl::ResourceExhaustedError(absl::StrCat(
          "sparse push: the table holds ", rows(), " rows, its limit (max_rows ",
          options_.max_rows, "); this push would create more. Raise the limit "
          "or add ps shards"));
    }
  }
  return absl::OkStatus();
}

void SparseTable::Read(const uint64_t* keys, int64_t n, float* out,
                       uint32_t* versions) const {
  const int dim = options_.dim;
  for (int64_t i = 0; i < n; ++i) {
    float* dst = out + i * dim;
    auto it = index_.find(keys[i]);
    if (it == index_.end()) {
      for (int j = 0; j < dim; ++j) dst[j] = InitialValue(keys[i], j);
      if (versions != nullptr) versions[i] = 0;
    } else {
      std::memcpy(dst, RowData(it->second), dim * sizeof(float));
      if (versions != nullptr) versions[i] = RowVersion(it->second);
    }
  }
}

uint32_t SparseTable::NewRow(uint64_t key) {
  const uint32_t row = static_cast<uint32_t>(index_.size());
  if (row % kRowsPerChunk == 0 && row / kRowsPerChunk == chunks_.size()) {
    chunks_.push_back(std::make_unique<float[]>(kRowsPerChunk * stride_));
    versions_.push_back(std::make_unique<uint32_t[]>(kRowsPerChunk));
    if (options_.track_changes) {
      keys_.push_back(std::make_unique<uint64_t[]>(kRowsPerChunk));
    }
  }
  if (options_.track_changes) {
    keys_[row / kRowsPerChunk][row % kRowsPerChunk] = key;
  }
  float* data = RowData(row);
  const int dim = options_.dim;
  for (int j = 0; j < dim; ++j) {
    data[j] = InitialValue(key, j);
    if (data[j] != 0) ++nonzero_;
  }
  std::fill(data + dim, data + stride_, 0.0f);
  RowVersion(row) = 0;
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
      const double alpha = p.learning_rate;
      for (int j = 0; j < dim; ++j) {
        const double n_old = s1[j];
        const double n_new = n_old + static_cast<double>(g[j]) * g[j];
        const double sigma = (std::sqrt(n_new) - std::sqrt(n_old)) / alpha;
        const double z = s0[j] + g[j] - sigma * w[j];
        s0[j] = static_cast<float>(z);
        s1[j] = static_cast<float>(n_new);
        if (std::fabs(z) <= p.l1) {
          w[j] = 0.0f;
        } else {
          const double sign = z < 0 ? -1.0 : 1.0;
          w[j] = static_cast<float>(-(z - sign * p.l1) /
                                    ((p.beta + std::sqrt(n_new)) / alpha + p.l2));
        }
      }
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
      const uint64_t bits = SplitMix64(SplitMix64(options_.seed ^ 0xad317ULL ^
                                                  SplitMix64(key)) +
                                       seen + j);
      const double u =
          static_cast<double>(bits >> 11) / static_cast<double>(uint64_t{1} << 53);
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
  const int dim = options_.dim;
  const int64_t created_before = created_;
  for (int64_t i = 0; i < n; ++i) {
    auto it = index_.find(keys[i]);
    if (it == index_.end() &&
        !Admit(keys[i], counts != nullptr ? counts[i] : 1)) {
      continue;
    }
    const uint32_t row = it == index_.end() ? NewRow(keys[i]) : it->second;
    float* data = RowData(row);
    int64_t nonzero_before = 0;
    for (int j = 0; j < dim; ++j) nonzero_before += data[j] != 0;
    uint32_t& version = RowVersion(row);
    if (version < UINT32_MAX) {
      ++version;
      ++version_sum_;
    }
    NoteChanged(row);
    Update(data, version, grads + i * dim);
    int64_t nonzero_after = 0;
    for (int j = 0; j < dim; ++j) nonzero_after += data[j] != 0;
    nonzero_ += nonzero_after - nonzero_before;
    ++updates_;
  }
  return created_ - created_before;
}

int64_t SparseTable::bytes() const {
  using Slot = std::pair<const uint64_t, uint32_t>;
  const int64_t index_bytes =
      static_cast<int64_t>(index_.capacity()) * (sizeof(Slot) + 1);
  const int64_t chunk_bytes = static_cast<int64_t>(chunks_.size()) *
                              kRowsPerChunk *
                              (stride_ * sizeof(float) + sizeof(uint32_t));
  const int64_t change_bytes =
      static_cast<int64_t>(pending_.capacity()) * (sizeof(Slot) + 1) +
      static_cast<int64_t>(keys_.size()) * kRowsPerChunk * sizeof(uint64_t) +
      static_cast<int64_t>(changed_.capacity()) * sizeof(uint32_t) +
      static_cast<int64_t>(changed_bits_.capacity()) * sizeof(uint64_t);
  return index_bytes + chunk_bytes + change_bytes;
}

SparseTable::Rows SparseTable::RowsOf(
    const std::vector<std::pair<uint64_t, uint32_t>>& order) const {
  Rows rows;
  rows.dim = options_.dim;
  rows.state_slots = state_slots_;
  rows.optimizer = options_.optimizer.type;
  rows.keys.reserve(order.size());
  rows.data.resize(order.size() * stride_);
  rows.versions.reserve(order.size());
  float* dst = rows.data.data();
  for (const auto& [key, row] : order) {
    rows.keys.push_back(key);
    std::memcpy(dst, RowData(row), stride_ * sizeof(float));
    dst += stride_;
    rows.versions.push_back(RowVersion(row));
  }
  return rows;
}

SparseTable::Rows SparseTable::Snapshot() const {
  std::vector<std::pair<uint64_t, uint32_t>> order(index_.begin(), index_.end());
  std::sort(order.begin(), order.end());
  return RowsOf(order);
}

SparseTable::Rows SparseTable::TakeChanges() {
  std::vector<std::pair<uint64_t, uint32_t>> order;
  order.reserve(changed_.size());
  for (uint32_t row : changed_) {
    order.emplace_back(keys_[row / kRowsPerChunk][row % kRowsPerChunk], row);
  }
  std::sort(order.begin(), order.end());
  ClearChanges();
  return RowsOf(order);
}

void SparseTable::ClearChanges() {
  for (uint32_t row : changed_) {
    changed_bits_[row / 64] &= ~(uint64_t{1} << (row % 64));
  }
  changed_.clear();
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
  if (rows.data.size() != n * stride_ || rows.versions.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sparse table ", what, ": ", n, " keys but ", rows.data.size(),
        " floats and ", rows.versions.size(), " versions"));
  }
  if (static_cast<int64_t>(n) > options_.max_rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sparse table ", what, ": ", n, " rows exceed max_rows ",
        options_.max_rows));
  }
  for (size_t i = 1; i < n; ++i) {
    if (rows.keys[i] <= rows.keys[i - 1]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sparse table ", what, ": key ", rows.keys[i], " at position ", i,
          " is not ascending"));
    }
  }
  if (finite) {
    for (size_t i = 0; i < rows.data.size(); ++i) {
      if (!std::isfinite(rows.data[i])) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sparse table ", what, ": key ", rows.keys[i / stride_],
            " holds ", std::isnan(rows.data[i]) ? "NaN" : "Inf",
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
  keys_.clear();
  changed_.clear();
  changed_bits_.clear();
  pending_.clear();
  nonzero_ = 0;
  version_sum_ = 0;
  index_.reserve(rows.keys.size());
  MergeChecked(rows);
  return absl::OkStatus();
}

absl::Status SparseTable::Merge(const Rows& rows) {
  RETURN_IF_ERROR(CheckMerge(rows));
  MergeChecked(rows);
  return absl::OkStatus();
}

absl::Status SparseTable::CheckMerge(const Rows& rows) const {
  RETURN_IF_ERROR(CheckRows(rows, "merge", /*finite=*/true));
  int64_t fresh = 0;
  for (uint64_t key : rows.keys) fresh += !index_.contains(key);
  if (static_cast<int64_t>(index_.size()) + fresh > options_.max_rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sparse table merge: ", fresh, " new rows exceed max_rows ",
        options_.max_rows, " (", index_.size(), " held)"));
  }
  return absl::OkStatus();
}

void SparseTable::MergeChecked(const Rows& rows) {
  const size_t n = rows.keys.size();
  const int dim = options_.dim;
  const int64_t created_before = created_;
  for (size_t i = 0; i < n; ++i) {
    auto it = index_.find(rows.keys[i]);
    const uint32_t row = it == index_.end() ? NewRow(rows.keys[i]) : it->second;
    float* data = RowData(row);
    for (int j = 0; j < dim; ++j) nonzero_ -= data[j] != 0;
    std::memcpy(data, rows.data.data() + i * stride_, stride_ * sizeof(float));
    for (int j = 0; j < dim; ++j) nonzero_ += data[j] != 0;
    version_sum_ += rows.versions[i];
    version_sum_ -= RowVersion(row);
    RowVersion(row) = rows.versions[i];
  }
  created_ = created_before;  // rows held, not created by training
}

}  // namespace downpour::server
