// BlockStore: blocks by id and the request checks; no locks (the owner's).
#include "server/block_store.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/base/config.h"
#include "absl/strings/str_cat.h"
#include "common/checksum.h"
#include "common/float_check.h"
#include "common/status_macros.h"

#ifndef ABSL_IS_LITTLE_ENDIAN
#error "BlockStore copies float32 bytes as they are: little-endian hosts only"
#endif

namespace downpour::server {

struct BlockStore::Block {
  Block(uint32_t i, std::vector<float> v, uint64_t ver, std::vector<float> s)
      : id(i),
        size(static_cast<int64_t>(v.size())),
        version(ver),
        values(std::move(v)),
        state(std::move(s)) {}

  const uint32_t id;
  const int64_t size;  // floats in `values`; constant while the block exists
  uint64_t version;
  std::vector<float> values;
  std::vector<float> state;  // optimizer state, slot-major
  // Exponential moving average of the staleness of pushes to this block
  // (Optimizer::kStalenessAverageWeight per update); in memory only.
  double mean_staleness = 0.0;
  // Upper bounds on |values| and |state| per slot: exact after AddBlock and
  // after a guarded Apply, grown by Optimizer::AfterApply otherwise.
  Magnitudes magnitudes;
};

namespace {

constexpr size_t kMaxRangesInMessages = 8;

// "blocks 0-5, 9", "block 4" or "no blocks"; long lists are cut short.
std::string DescribeIds(const std::vector<uint32_t>& sorted) {
  if (sorted.empty()) return "no blocks";
  if (sorted.size() == 1) return absl::StrCat("block ", sorted[0]);
  std::string text = "blocks ";
  size_t ranges = 0;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (++ranges > kMaxRangesInMessages) {
      absl::StrAppend(&text, ", ... (", sorted.size(), " blocks in all)");
      break;
    }
    absl::StrAppend(&text, ranges > 1 ? ", " : "", sorted[i]);
    if (j > i) absl::StrAppend(&text, "-", sorted[j]);
    i = j + 1;
  }
  return text;
}

float FromBits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

uint32_t ToBits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}

inline uint16_t Load16(const unsigned char* p) {
  uint16_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  return bits;
}

// The largest fp16 |x| bits whose value is within the float32 |x| bits
// `limit_bits` (0x7BFF, fp16's largest finite, when the limit is above it).
uint32_t Fp16LimitBits(uint32_t limit_bits) {
  const float limit = FromBits(limit_bits);
  uint32_t lo = 0, hi = 0x7BFF;  // Fp16ToFloat(0) = 0 <= limit
  while (lo < hi) {
    const uint32_t mid = (lo + hi + 1) / 2;
    if (Fp16ToFloat(static_cast<uint16_t>(mid)) <= limit) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// optimizer.max_gradient_value as |x| bits; FLT_MAX's (NaN/Inf only) when off.
uint32_t LimitBits(double max_value) {
  if (!(max_value > 0) || max_value >= std::numeric_limits<float>::max()) {
    return ToBits(std::numeric_limits<float>::max());
  }
  return ToBits(static_cast<float>(max_value));
}

// InvalidArgument "<op>: block <id> <what> unknown encoding 7 (valid: ...)"
// unless `encoding` is one of WireEncoding's.
absl::Status CheckEncoding(const char* op, uint32_t id, const char* what,
                           WireEncoding encoding) {
  if (IsKnownWireEncoding(encoding)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      op, ": block ", id, " ", what, " unknown encoding ",
      static_cast<int32_t>(encoding), " (valid: 0 float32, 1 bf16, 2 fp16)"));
}

// InvalidArgument for element `index` (bits `bits`) of block `id`'s
// gradient: NaN/Inf, or beyond optimizer.max_gradient_value.
absl::Status BadElement(uint32_t id, int64_t index, int64_t size, float value,
                        double max_value) {
  if (!std::isfinite(value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "push: block ", id, " gradient has ", std::isnan(value) ? "NaN" : "Inf",
        " at index ", index, " (of ", size,
        "); the worker's gradient diverged, lower optimizer.learning_rate"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "push: block ", id, " gradient element ", index, " (of ", size, ") is ",
      value, ", beyond optimizer.max_gradient_value ", max_value,
      "; nothing was applied. The worker's gradient diverged: lower "
      "optimizer.learning_rate, or raise max_gradient_value if such values are "
      "expected (0 = no bound)"));
}

// Checks a gradient's length and elements in one pass; fills *stats.
absl::Status CheckGradient(uint32_t id, int64_t size, WireEncoding encoding,
                           const void* data, size_t bytes, uint32_t limit_bits,
                           double max_value, bool want_norm,
                           BlockStore::GradientStats* stats) {
  const size_t expected = static_cast<size_t>(size) * BytesPerElement(encoding);
  if (bytes != expected) {
    if (encoding == WireEncoding::kFloat32) {
      return absl::InvalidArgumentError(
          absl::StrCat("push: block ", id, " expects ", size, " floats (",
                       expected, " bytes), got ", bytes, " bytes"));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "push: block ", id, " expects ", size, " ", WireEncodingName(encoding),
        " values (", expected, " bytes), got ", bytes, " bytes"));
  }
  const auto* p = static_cast<const unsigned char*>(data);
  // With a bound on elements, that bound is the gradient's magnitude for
  // Apply's overflow analysis, and the scan need not find the largest.
  const bool bounded = limit_bits < ToBits(std::numeric_limits<float>::max());
  GradientScan scan;
  if (encoding == WireEncoding::kFloat32) {
    auto load = [p](int64_t i) { return LoadFloatBits(p + 4 * i); };
    scan = ScanFloatBits(size, limit_bits, !bounded, want_norm, load);
  } else if (encoding == WireEncoding::kBf16) {
    // bf16 is float32's top half: checked (and measured) on the encoded bits,
    // in one pass.
    auto load = [p](int64_t i) { return uint32_t{Load16(p + 2 * i)} << 16; };
    scan = ScanFloatBits(size, limit_bits, !bounded, want_norm, load);
  } else if (bounded && !want_norm) {
    // fp16 checked on the encoded bits, in one pass: its |x| bits order as its
    // values do, and NaN/Inf lie above its largest finite value, so its bound
    // is the largest fp16 within the limit.
    auto load = [p](int64_t i) {
      return uint32_t{Load16(p + 2 * i)} & 0x7FFFu;
    };
    scan = ScanFloatBits(size, Fp16LimitBits(limit_bits), false, false, load);
  } else {
    // fp16 without a bound or with a norm wanted: decoded into a per-thread
    // buffer first (a second pass).
    thread_local std::vector<float> decoded;
    if (decoded.size() < static_cast<size_t>(size)) decoded.resize(size);
    DecodeFloats(static_cast<const char*>(data), size, encoding,
                 decoded.data());
    const float* f = decoded.data();
    auto load = [f](int64_t i) { return ToBits(f[i]); };
    scan = ScanFloatBits(size, limit_bits, !bounded, want_norm, load);
  }
  if (scan.first_bad < size) {
    float value;
    if (encoding == WireEncoding::kFloat32) {
      value = FromBits(LoadFloatBits(p + 4 * scan.first_bad));
    } else {
      DecodeFloats(static_cast<const char*>(data) +
                       BytesPerElement(encoding) * scan.first_bad,
                   1, encoding, &value);
    }
    return BadElement(id, scan.first_bad, size, value, max_value);
  }
  if (stats != nullptr) {
    stats->max_abs = FromBits(bounded ? limit_bits : scan.max_abs_bits);
    stats->norm = want_norm ? std::sqrt(scan.norm_sq) : -1.0;
  }
  return absl::OkStatus();
}

// Exact magnitudes of a block; +inf when a float is NaN/Inf or the
// optimizer's sum-of-squares slot holds a negative one (then every update
// takes the guarded path).
// max |p[i]| over n floats; +inf when one is NaN/Inf.
double MaxAbs(const float* p, int64_t n) {
  uint32_t m = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t a = AbsBits(ToBits(p[i]));
    m = a > m ? a : m;
  }
  const float max = FromBits(m);
  return std::isfinite(max) ? max : std::numeric_limits<double>::infinity();
}

Magnitudes Measure(const float* values, const float* state, int64_t n,
                   const Optimizer& optimizer) {
  Magnitudes out;
  out.w = MaxAbs(values, n);
  for (int slot = 0; slot < optimizer.state_slots() && slot < 2; ++slot) {
    const float* p = state + slot * n;
    out.state[slot] = MaxAbs(p, n);
    if (slot == optimizer.second_moment_slot() &&
        std::any_of(p, p + n, [](float x) { return !(x >= 0.0f); })) {
      out.state[slot] = std::numeric_limits<double>::infinity();
    }
  }
  out.ratio = optimizer.MeasureRatio(state, n);
  return out;
}

// A guard-free update must keep every float this far below FLT_MAX (3.4e38):
// the bounds are in double and float rounding adds at most a relative 1e-6.
constexpr double kSafeMagnitude = 1e36;

bool Safe(const Magnitudes& m) {
  return m.peak < kSafeMagnitude && m.w < kSafeMagnitude &&
         m.state[0] < kSafeMagnitude && m.state[1] < kSafeMagnitude;
}

// The gradient as floats. gRPC hands us bytes at any address: an aligned buffer
// is used in place (it comes from malloc'd slice memory), an unaligned one is
// copied into a per-thread scratch buffer first.
const float* AsFloats(const void* data, int64_t n) {
  if (reinterpret_cast<uintptr_t>(data) % alignof(float) == 0) {
    return static_cast<const float*>(data);
  }
  thread_local std::vector<float> scratch;
  if (scratch.size() < static_cast<size_t>(n)) scratch.resize(n);
  std::memcpy(scratch.data(), data, n * sizeof(float));
  return scratch.data();
}

}  // namespace

BlockStore::BlockStore(std::unique_ptr<Optimizer> optimizer, Options options)
    : optimizer_(std::move(optimizer)),
      counters_(options.counters),
      max_abs_bits_(LimitBits(optimizer_->section().max_gradient_value)),
      max_norm_(optimizer_->section().max_gradient_norm),
      want_norms_(max_norm_ > 0 || options.compute_norms),
      dc_lambda_(static_cast<float>(optimizer_->section().delay_compensation)),
      lr_scaled_(optimizer_->section().schedule != LrScheduleType::kConstant ||
                 optimizer_->section().warmup_updates > 0 ||
                 optimizer_->section().staleness_lr),
      served_(dc_lambda_ > 0 ? options.num_workers : 0) {}

BlockStore::~BlockStore() = default;

absl::Status BlockStore::AddBlock(uint32_t id, std::vector<float> values,
                                  uint64_t version, std::vector<float> state) {
  if (values.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("add block ", id, ": a block needs at least one value"));
  }
  const size_t state_size = optimizer_->state_slots() * values.size();
  if (state.empty()) {
    state.assign(state_size, 0.0f);
  } else if (state.size() != state_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("add block ", id, ": optimizer ", optimizer_->name(),
                     " needs ", optimizer_->state_slots(), " x ", values.size(),
                     " = ", state_size, " state floats, got ", state.size()));
  }
  std::unique_ptr<Block>& slot = blocks_[id];
  if (slot != nullptr) {
    num_floats_ -= slot->size;
    served_.Forget(id);  // copies of the values replaced
  }
  slot =
      std::make_unique<Block>(id, std::move(values), version, std::move(state));
  slot->magnitudes =
      Measure(slot->values.data(), slot->state.data(), slot->size, *optimizer_);
  num_floats_ += slot->size;
  return absl::OkStatus();
}

std::optional<BlockStore::BlockSnapshot> BlockStore::Remove(uint32_t id) {
  auto it = blocks_.find(id);
  if (it == blocks_.end()) return std::nullopt;
  Block& block = *it->second;
  BlockSnapshot out{id, block.version, std::move(block.values),
                    std::move(block.state)};
  num_floats_ -= block.size;
  served_.Forget(id);
  blocks_.erase(it);
  return out;
}

uint64_t BlockStore::version_sum() const {
  uint64_t sum = 0;
  for (const auto& [id, block] : blocks_) sum += block->version;
  return sum;
}

std::vector<uint32_t> BlockStore::block_ids() const {
  std::vector<uint32_t> ids;
  ids.reserve(blocks_.size());
  for (const auto& [id, block] : blocks_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

absl::StatusOr<uint64_t> BlockStore::Pull(uint32_t id, std::string* out,
                                          int32_t worker_id,
                                          WireEncoding encoding) const {
  const Block* block = Find(id);
  if (block == nullptr) return UnknownBlock("pull", id);
  RETURN_IF_ERROR(CheckEncoding("pull", id, "asked for in", encoding));
  const size_t bytes =
      static_cast<size_t>(block->size) * BytesPerElement(encoding);
  // A reused string of the right size keeps its buffer.
  if (out->size() != bytes) out->resize(bytes);
  return PullInto(id, out->data(), worker_id, encoding);
}

absl::StatusOr<uint64_t> BlockStore::Version(uint32_t id) const {
  const Block* block = Find(id);
  if (block == nullptr) return UnknownBlock("pull", id);
  return block->version;
}

absl::StatusOr<uint64_t> BlockStore::PullInto(uint32_t id, char* out,
                                              int32_t worker_id,
                                              WireEncoding encoding) const {
  const Block* block = Find(id);
  if (block == nullptr) return UnknownBlock("pull", id);
  RETURN_IF_ERROR(CheckEncoding("pull", id, "asked for in", encoding));
  EncodeFloats(block->values.data(), block->size, encoding, out);
  served_.Record(worker_id, id, block->version, block->values.data(),
                 block->size);
  return block->version;
}

absl::StatusOr<BlockStore::Block*> BlockStore::ValidatePush(
    uint32_t id, const void* data, size_t bytes, WireEncoding encoding,
    GradientStats* stats) const {
  Block* block = Find(id);
  if (block == nullptr) return UnknownBlock("push", id);
  RETURN_IF_ERROR(CheckEncoding("push", id, "has", encoding));
  RETURN_IF_ERROR(CheckGradient(
      id, block->size, encoding, data, bytes, max_abs_bits_,
      optimizer_->section().max_gradient_value, want_norms_, stats));
  return block;
}

absl::StatusOr<BlockStore::PushResult> BlockStore::Apply(
    Block* block, const void* data, uint64_t base_version, int32_t worker_id,
    WireEncoding encoding, const GradientStats* stats) {
  GradientStats computed;
  if (stats == nullptr) {
    RETURN_IF_ERROR(CheckGradient(
        block->id, block->size, encoding, data,
        static_cast<size_t>(block->size) * BytesPerElement(encoding),
        max_abs_bits_, optimizer_->section().max_gradient_value, want_norms_,
        &computed));
    stats = &computed;
  }
  const float* gradient = nullptr;
  if (encoding == WireEncoding::kFloat32) {
    gradient = AsFloats(data, block->size);
  } else {
    if (decoded_.size() < static_cast<size_t>(block->size)) {
      decoded_.resize(block->size);
    }
    DecodeFloats(static_cast<const char*>(data), block->size, encoding,
                 decoded_.data());
    gradient = decoded_.data();
  }
  double max_g = stats->max_abs;
  // The tighter of optimizer.max_gradient_norm and the caller's bound.
  double clip_to = max_norm_;
  if (stats->clip_norm > 0 && (clip_to <= 0 || stats->clip_norm < clip_to)) {
    clip_to = stats->clip_norm;
  }
  if (clip_to > 0 && stats->norm > clip_to) {
    const float scale = static_cast<float>(clip_to / stats->norm);
    if (clipped_.size() < static_cast<size_t>(block->size)) {
      clipped_.resize(block->size);
    }
    for (int64_t i = 0; i < block->size; ++i) {
      clipped_[i] = gradient[i] * scale;
    }
    gradient = clipped_.data();
    max_g *= scale;
    if (counters_ != nullptr) counters_->stats().clipped_gradients.Increment();
  }
  const uint64_t before = block->version;
  const uint64_t staleness = base_version < before ? before - base_version : 0;
  constexpr double kWeight = Optimizer::kStalenessAverageWeight;
  const double mean_staleness = (1.0 - kWeight) * block->mean_staleness +
                                kWeight * static_cast<double>(staleness);
  const ApplyContext context =
      optimizer_->Context(before, staleness, mean_staleness);
  thread_local std::vector<float> compensated;
  if (dc_lambda_ > 0 && staleness > 0) {
    const float* g =
        Compensate(*block, gradient, base_version, worker_id, &compensated);
    if (g != gradient) {
      // The compensated gradient has no bound from the push: measure it.
      max_g = MaxAbs(g, block->size);
      gradient = g;
    }
  }
  const Magnitudes after =
      optimizer_->AfterApply(block->magnitudes, max_g, context);
  if (Safe(after)) {
    optimizer_->Apply(block->values.data(), gradient, block->state.data(),
                      block->size, context);
    block->magnitudes = after;
  } else {
    RETURN_IF_ERROR(ApplyGuarded(block, gradient, max_g, context));
  }
  block->mean_staleness = mean_staleness;
  block->version = before + 1;
  if (counters_ != nullptr) {
    if (lr_scaled_) counters_->stats().lr_scale.Set(context.lr_scale);
    if (context.momentum >= 0) {
      counters_->stats().momentum_applied.Set(context.momentum);
    }
  }
  return PushResult{before + 1, staleness};
}

absl::Status BlockStore::ApplyGuarded(Block* block, const float* gradient,
                                      double max_g,
                                      const ApplyContext& context) {
  ++guarded_applies_;
  const size_t n = static_cast<size_t>(block->size);
  saved_.resize(n + block->state.size());
  std::copy(block->values.begin(), block->values.end(), saved_.begin());
  std::copy(block->state.begin(), block->state.end(), saved_.begin() + n);
  optimizer_->Apply(block->values.data(), gradient, block->state.data(),
                    block->size, context);
  const Magnitudes exact = Measure(block->values.data(), block->state.data(),
                                   block->size, *optimizer_);
  const bool finite = std::isfinite(exact.w) && std::isfinite(exact.state[0]) &&
                      std::isfinite(exact.state[1]);
  if (finite) {
    block->magnitudes = exact;
    return absl::OkStatus();
  }
  std::copy(saved_.begin(), saved_.begin() + n, block->values.begin());
  std::copy(saved_.begin() + n, saved_.end(), block->state.begin());
  if (counters_ != nullptr) counters_->stats().refused_overflows.Increment();
  return absl::InvalidArgumentError(absl::StrCat(
      "push: block ", block->id, " update would overflow the ",
      optimizer_->name(),
      " values or state to Inf/NaN (largest gradient element ", max_g,
      "); refused, the block is unchanged. "
      "Lower optimizer.learning_rate or set optimizer.max_gradient_value / "
      "max_gradient_norm"));
}

const float* BlockStore::Compensate(const Block& block, const float* g,
                                    uint64_t base_version, int32_t worker_id,
                                    std::vector<float>* scratch) {
  if (scratch->size() < static_cast<size_t>(block.size)) {
    scratch->resize(block.size);
  }
  float* out = scratch->data();
  const bool held = served_.Visit(worker_id, block.id, base_version, block.size,
                                  [&](const float* w_served) {
                                    Optimizer::CompensateDelay(
                                        g, block.values.data(), w_served,
                                        dc_lambda_, block.size, out);
                                  });
  if (held) return out;
  if (counters_ != nullptr) counters_->stats().dc_misses.Increment();
  return g;
}

absl::StatusOr<BlockStore::PushResult> BlockStore::Push(
    uint32_t id, const void* data, size_t bytes, uint64_t base_version,
    int32_t worker_id, WireEncoding encoding) {
  GradientStats stats;
  ASSIGN_OR_RETURN(Block * block,
                   ValidatePush(id, data, bytes, encoding, &stats));
  return Apply(block, data, base_version, worker_id, encoding, &stats);
}

absl::StatusOr<BlockStore::PushResult> BlockStore::Replay(
    const Replayed& update) {
  GradientStats stats;
  ASSIGN_OR_RETURN(Block * block,
                   ValidatePush(update.id, update.data, update.bytes,
                                update.encoding, &stats));
  if (block->version != update.version) {
    return absl::FailedPreconditionError(absl::StrCat(
        "replay: block ", update.id, " is at version ", block->version,
        ", the update was applied at version ", update.version));
  }
  block->mean_staleness = update.mean_staleness;
  stats.clip_norm = update.clip_norm;
  return Apply(block, update.data, update.base_version, update.worker_id,
               update.encoding, &stats);
}

double BlockStore::MeanStaleness(uint32_t id) const {
  const Block* block = Find(id);
  return block == nullptr ? 0.0 : block->mean_staleness;
}

std::vector<BlockStore::BlockSnapshot> BlockStore::Snapshot() const {
  std::vector<BlockSnapshot> snapshots;
  snapshots.reserve(blocks_.size());
  for (uint32_t id : block_ids()) {
    const Block* block = Find(id);
    snapshots.push_back({id, block->version, block->values, block->state});
  }
  return snapshots;
}

uint32_t BlockStore::IdOf(const Block* block) { return block->id; }
int64_t BlockStore::LengthOf(const Block* block) { return block->size; }

std::vector<BlockStore::BlockSnapshot> BlockStore::Snapshot(
    const std::vector<uint32_t>& ids) const {
  std::vector<BlockSnapshot> snapshots;
  snapshots.reserve(ids.size());
  for (uint32_t id : ids) {
    const Block* block = Find(id);
    if (block != nullptr) {
      snapshots.push_back({id, block->version, block->values, block->state});
    }
  }
  return snapshots;
}

uint32_t BlockStore::BlockCrc32c(uint32_t id, uint64_t* version) const {
  *version = 0;
  const Block* block = Find(id);
  if (block == nullptr) return 0;
  *version = block->version;
  return Crc32c(block->values.data(), block->values.size() * sizeof(float));
}

BlockStore::Block* BlockStore::Find(uint32_t id) const {
  auto it = blocks_.find(id);
  return it == blocks_.end() ? nullptr : it->second.get();
}

absl::Status BlockStore::UnknownBlock(const char* op, uint32_t id) const {
  return absl::NotFoundError(absl::StrCat(op, ": unknown block ", id,
                                          " (this ps holds ",
                                          DescribeIds(block_ids()), ")"));
}

}  // namespace downpour::server
