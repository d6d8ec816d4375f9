// BlockStore: blocks by id and the request checks; no locks (the owner's).
#include "server/block_store.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/base/config.h"
#include "absl/strings/str_cat.h"
#include "common/checksum.h"
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

// Unaligned-safe; compiles to a plain load.
inline uint32_t LoadBits(const unsigned char* p) {
  uint32_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  return bits;
}

// An IEEE float is NaN or Inf exactly when its exponent bits are all ones.
inline bool NonFiniteBits(uint32_t bits) { return (~bits & 0x7F800000u) == 0; }

// Bit 31 is set exactly for NaN/Inf: only an all-ones exponent carries into it.
// Branch- and compare-free: OR-ing it over a chunk vectorises to and/add/or.
inline uint32_t NonFiniteFlag(uint32_t bits) {
  return (bits & 0x7F800000u) + 0x00800000u;
}

// Index of the first NaN/Inf among the n floats at p, or n. The inner loop has
// no early exit so that it vectorises; only a bad chunk is searched again.
int64_t FirstNonFinite(const unsigned char* p, int64_t n) {
  constexpr int64_t kChunk = 1024;
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t end = std::min(n, start + kChunk);
    uint32_t flags = 0;
    for (int64_t i = start; i < end; ++i) {
      flags |= NonFiniteFlag(LoadBits(p + 4 * i));
    }
    if ((flags & 0x80000000u) == 0) continue;
    for (int64_t i = start; i < end; ++i) {
      if (NonFiniteBits(LoadBits(p + 4 * i))) return i;
    }
  }
  return n;
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

// CheckGradient for a gradient in bf16 or fp16.
absl::Status CheckEncodedGradient(uint32_t id, int64_t size,
                                  WireEncoding encoding, const void* data,
                                  size_t bytes) {
  const size_t expected = static_cast<size_t>(size) * BytesPerElement(encoding);
  if (bytes != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "push: block ", id, " expects ", size, " ", WireEncodingName(encoding),
        " values (", expected, " bytes), got ", bytes, " bytes"));
  }
  const char* p = static_cast<const char*>(data);
  const int64_t bad = FindNonFinite(p, size, encoding);
  if (bad == size) return absl::OkStatus();
  float value;
  DecodeFloats(p + BytesPerElement(encoding) * bad, 1, encoding, &value);
  return absl::InvalidArgumentError(absl::StrCat(
      "push: block ", id, " gradient has ", std::isnan(value) ? "NaN" : "Inf",
      " at index ", bad, " (of ", size,
      "); the worker's gradient diverged, lower optimizer.learning_rate"));
}

absl::Status CheckGradient(uint32_t id, int64_t size, const void* data,
                           size_t bytes) {
  const size_t expected = static_cast<size_t>(size) * sizeof(float);
  if (bytes != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("push: block ", id, " expects ", size, " floats (",
                     expected, " bytes), got ", bytes, " bytes"));
  }
  const auto* p = static_cast<const unsigned char*>(data);
  const int64_t bad = FirstNonFinite(p, size);
  if (bad == size) return absl::OkStatus();
  const bool is_nan = (LoadBits(p + 4 * bad) & 0x007FFFFFu) != 0;
  return absl::InvalidArgumentError(absl::StrCat(
      "push: block ", id, " gradient has ", is_nan ? "NaN" : "Inf",
      " at index ", bad, " (of ", size,
      "); the worker's gradient diverged, lower optimizer.learning_rate"));
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
      dc_lambda_(static_cast<float>(optimizer_->section().delay_compensation)),
      lr_scaled_(optimizer_->section().schedule != "constant" ||
                 optimizer_->section().warmup_updates > 0 ||
                 optimizer_->section().staleness_lr),
      backups_(dc_lambda_ > 0 ? options.num_workers : 0) {}

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
    backups_.Forget(id);  // copies of the values replaced
  }
  slot =
      std::make_unique<Block>(id, std::move(values), version, std::move(state));
  num_floats_ += slot->size;
  return absl::OkStatus();
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
  backups_.Record(worker_id, id, block->version, block->values.data(),
                  block->size);
  return block->version;
}

absl::StatusOr<BlockStore::Block*> BlockStore::ValidatePush(
    uint32_t id, const void* data, size_t bytes, WireEncoding encoding) const {
  Block* block = Find(id);
  if (block == nullptr) return UnknownBlock("push", id);
  if (encoding == WireEncoding::kFloat32) {
    RETURN_IF_ERROR(CheckGradient(id, block->size, data, bytes));
  } else {
    RETURN_IF_ERROR(CheckEncoding("push", id, "has", encoding));
    RETURN_IF_ERROR(
        CheckEncodedGradient(id, block->size, encoding, data, bytes));
  }
  return block;
}

BlockStore::PushResult BlockStore::Apply(Block* block, const void* data,
                                         uint64_t base_version,
                                         int32_t worker_id,
                                         WireEncoding encoding) {
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
  const uint64_t before = block->version;
  const uint64_t staleness = base_version < before ? before - base_version : 0;
  constexpr double kWeight = Optimizer::kStalenessAverageWeight;
  block->mean_staleness = (1.0 - kWeight) * block->mean_staleness +
                          kWeight * static_cast<double>(staleness);
  const ApplyContext context =
      optimizer_->Context(before, staleness, block->mean_staleness);
  thread_local std::vector<float> compensated;
  if (dc_lambda_ > 0 && staleness > 0) {
    gradient =
        Compensate(*block, gradient, base_version, worker_id, &compensated);
  }
  optimizer_->Apply(block->values.data(), gradient, block->state.data(),
                    block->size, context);
  block->version = before + 1;
  if (counters_ != nullptr) {
    if (lr_scaled_) counters_->Set("lr_scale", context.lr_scale);
    if (context.momentum >= 0) {
      counters_->Set("momentum_applied", context.momentum);
    }
  }
  return PushResult{before + 1, staleness};
}

const float* BlockStore::Compensate(const Block& block, const float* g,
                                    uint64_t base_version, int32_t worker_id,
                                    std::vector<float>* scratch) {
  if (scratch->size() < static_cast<size_t>(block.size)) {
    scratch->resize(block.size);
  }
  float* out = scratch->data();
  const bool held = backups_.Visit(worker_id, block.id, base_version,
                                   block.size, [&](const float* w_backup) {
                                     Optimizer::CompensateDelay(
                                         g, block.values.data(), w_backup,
                                         dc_lambda_, block.size, out);
                                   });
  if (held) return out;
  if (counters_ != nullptr) counters_->Add("dc_misses", 1);
  return g;
}

absl::StatusOr<BlockStore::PushResult> BlockStore::Push(
    uint32_t id, const void* data, size_t bytes, uint64_t base_version,
    int32_t worker_id, WireEncoding encoding) {
  ASSIGN_OR_RETURN(Block* block, ValidatePush(id, data, bytes, encoding));
  return Apply(block, data, base_version, worker_id, encoding);
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
