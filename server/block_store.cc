// BlockStore: per-block locks under a reader/writer lock on the block map.
#include "server/block_store.h"

#include <algorithm>
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
  Block(std::vector<float> v, uint64_t ver, std::vector<float> s)
      : size(static_cast<int64_t>(v.size())),
        version(ver),
        values(std::move(v)),
        state(std::move(s)) {}

  const int64_t size;  // floats in `values`; constant while the block exists
  absl::Mutex mu;
  uint64_t version ABSL_GUARDED_BY(mu);
  std::vector<float> values ABSL_GUARDED_BY(mu);
  std::vector<float> state ABSL_GUARDED_BY(mu);  // optimizer state, slot-major
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

BlockStore::BlockStore(std::unique_ptr<Optimizer> optimizer)
    : optimizer_(std::move(optimizer)) {}

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
  // Build the block before taking the map lock; only the swap happens under it.
  auto block =
      std::make_unique<Block>(std::move(values), version, std::move(state));
  absl::MutexLock lock(&map_mu_);
  std::unique_ptr<Block>& slot = blocks_[id];
  if (slot != nullptr) num_floats_ -= slot->size;
  num_floats_ += block->size;
  slot = std::move(block);
  return absl::OkStatus();
}

bool BlockStore::Has(uint32_t id) const {
  absl::ReaderMutexLock lock(&map_mu_);
  return Find(id) != nullptr;
}

size_t BlockStore::num_blocks() const {
  absl::ReaderMutexLock lock(&map_mu_);
  return blocks_.size();
}

std::vector<uint32_t> BlockStore::block_ids() const {
  absl::ReaderMutexLock lock(&map_mu_);
  return SortedIds();
}

int64_t BlockStore::num_floats() const {
  absl::ReaderMutexLock lock(&map_mu_);
  return num_floats_;
}

absl::StatusOr<uint64_t> BlockStore::Pull(uint32_t id, std::string* out) const {
  absl::ReaderMutexLock map_lock(&map_mu_);
  Block* block = Find(id);
  if (block == nullptr) return UnknownBlock("pull", id);
  const size_t bytes = static_cast<size_t>(block->size) * sizeof(float);
  // Allocate before locking the block; a reused string keeps its buffer.
  if (out->size() != bytes) out->resize(bytes);
  absl::ReaderMutexLock lock(&block->mu);
  std::memcpy(out->data(), block->values.data(), bytes);
  return block->version;
}

absl::Status BlockStore::ValidatePush(uint32_t id, const void* data,
                                      size_t bytes) const {
  absl::ReaderMutexLock map_lock(&map_mu_);
  Block* block = Find(id);
  if (block == nullptr) return UnknownBlock("push", id);
  return CheckGradient(id, block->size, data, bytes);
}

absl::StatusOr<BlockStore::PushResult> BlockStore::Push(uint32_t id,
                                                        const void* data,
                                                        size_t bytes,
                                                        uint64_t base_version) {
  return Apply(id, data, bytes, base_version, /*check=*/true);
}

absl::StatusOr<BlockStore::PushResult> BlockStore::PushChecked(
    uint32_t id, const void* data, size_t bytes, uint64_t base_version) {
  return Apply(id, data, bytes, base_version, /*check=*/false);
}

absl::StatusOr<BlockStore::PushResult> BlockStore::Apply(uint32_t id,
                                                         const void* data,
                                                         size_t bytes,
                                                         uint64_t base_version,
                                                         bool check) {
  absl::ReaderMutexLock map_lock(&map_mu_);
  Block* block = Find(id);
  if (block == nullptr) return UnknownBlock("push", id);
  // Checking and copying read only the request: do them before the block lock.
  if (check) {
    RETURN_IF_ERROR(CheckGradient(id, block->size, data, bytes));
  } else if (bytes != static_cast<size_t>(block->size) * sizeof(float)) {
    return absl::InternalError(absl::StrCat("push: block ", id, " changed size"));
  }
  const float* gradient = AsFloats(data, block->size);
  absl::MutexLock lock(&block->mu);
  const uint64_t before = block->version;
  optimizer_->Apply(block->values.data(), gradient, block->state.data(),
                    block->size, before + 1);
  block->version = before + 1;
  return PushResult{before + 1,
                    base_version < before ? before - base_version : 0};
}

std::vector<BlockStore::BlockSnapshot> BlockStore::Snapshot() const {
  absl::ReaderMutexLock map_lock(&map_mu_);
  std::vector<BlockSnapshot> snapshots;
  snapshots.reserve(blocks_.size());
  for (uint32_t id : SortedIds()) {
    Block* block = Find(id);
    BlockSnapshot& s = snapshots.emplace_back();
    s.id = id;
    s.values.resize(block->size);  // allocate outside the block lock
    s.state.resize(static_cast<size_t>(optimizer_->state_slots()) *
                   block->size);
    absl::ReaderMutexLock lock(&block->mu);
    s.version = block->version;
    std::copy(block->values.begin(), block->values.end(), s.values.begin());
    std::copy(block->state.begin(), block->state.end(), s.state.begin());
  }
  return snapshots;
}

uint32_t BlockStore::BlockCrc32c(uint32_t id, uint64_t* version) const {
  absl::ReaderMutexLock map_lock(&map_mu_);
  *version = 0;
  Block* block = Find(id);
  if (block == nullptr) return 0;
  absl::ReaderMutexLock lock(&block->mu);
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
                                          DescribeIds(SortedIds()), ")"));
}

std::vector<uint32_t> BlockStore::SortedIds() const {
  std::vector<uint32_t> ids;
  ids.reserve(blocks_.size());
  for (const auto& [id, block] : blocks_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace downpour::server
