// The parameter blocks one ps shard holds, with versions and optimizer state.
//
//   BlockStore store(std::move(optimizer));
//   RETURN_IF_ERROR(store.AddBlock(3, initial_values));
//   ASSIGN_OR_RETURN(uint64_t version, store.Pull(3, &bytes));
//   ASSIGN_OR_RETURN(BlockStore::PushResult result,
//                    store.Push(3, grad.data(), grad.size(), version));
//
// Payloads are little-endian float32 bytes, exactly as they travel in ps.proto,
// and may be unaligned. Every request is checked (unknown block, wrong size,
// NaN/Inf) and a rejected request leaves the store unchanged.
#ifndef DOWNPOUR_SERVER_BLOCK_STORE_H_
#define DOWNPOUR_SERVER_BLOCK_STORE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/optimizer.h"

namespace downpour::server {

// Thread-safe. Each block has its own mutex, so pushes and pulls of different
// blocks run in parallel, and pulls of one block share its lock. The block map
// has a separate reader/writer mutex: every operation holds it shared while it
// runs, and AddBlock holds it exclusively, so adding or replacing a block while
// serving is safe (it waits for in-flight operations) but is meant for setup
// and re-placement, not the hot path. Lock order: map_mu_, then a block's mu.
class BlockStore {
 public:
  struct PushResult {
    // The block's version after this update.
    uint64_t version;
    // The version before it minus base_version (0 if base_version >= it).
    uint64_t staleness;
  };

  // One block, copied consistently (under its lock); the unit of checkpoints.
  struct BlockSnapshot {
    uint32_t id;
    uint64_t version;
    std::vector<float> values;
    // Optimizer state: state_slots() * values.size() floats, slot-major.
    std::vector<float> state;
  };

  // REQUIRES: optimizer != nullptr.
  explicit BlockStore(std::unique_ptr<Optimizer> optimizer);
  BlockStore(const BlockStore&) = delete;
  BlockStore& operator=(const BlockStore&) = delete;
  ~BlockStore();

  // Adds block `id`, or replaces it (values, version and state) if present.
  // Optimizer state starts at zero unless `state` (state_slots() *
  // values.size() floats, slot-major) is given. InvalidArgument for empty
  // values or a state of the wrong size; the store is then unchanged.
  absl::Status AddBlock(uint32_t id, std::vector<float> values,
                        uint64_t version = 0, std::vector<float> state = {})
      ABSL_LOCKS_EXCLUDED(map_mu_);

  bool Has(uint32_t id) const ABSL_LOCKS_EXCLUDED(map_mu_);
  size_t num_blocks() const ABSL_LOCKS_EXCLUDED(map_mu_);
  // The ids held, ascending.
  std::vector<uint32_t> block_ids() const ABSL_LOCKS_EXCLUDED(map_mu_);
  // Values (not state) in all blocks together.
  int64_t num_floats() const ABSL_LOCKS_EXCLUDED(map_mu_);
  const Optimizer& optimizer() const { return *optimizer_; }

  // Copies block `id`'s values into *out as little-endian float32 bytes
  // (resized to 4 * length; a reused string of that size is not reallocated)
  // and returns the block's version. NotFound when the block is not here,
  // "pull: unknown block 17 (this ps holds blocks 0-5, 9)"; *out is then
  // untouched.
  absl::StatusOr<uint64_t> Pull(uint32_t id, std::string* out) const
      ABSL_LOCKS_EXCLUDED(map_mu_);

  // Checks a gradient of `bytes` bytes at `data` (any alignment) for block `id`
  // without applying it, in one pass: NotFound for an unknown block;
  // InvalidArgument for a byte length other than 4 * length ("push: block 17
  // expects 65536 floats (262144 bytes), got 1000 bytes") or for a NaN/Inf
  // element ("push: block 3 gradient has NaN at index 12 (of 65536); ...").
  absl::Status ValidatePush(uint32_t id, const void* data, size_t bytes) const
      ABSL_LOCKS_EXCLUDED(map_mu_);

  // ValidatePush, then applies the optimizer to the block under its lock and
  // bumps its version. `base_version` is the version the gradient was computed
  // from (as returned by Pull). On error the block is unchanged.
  absl::StatusOr<PushResult> Push(uint32_t id, const void* data, size_t bytes,
                                  uint64_t base_version)
      ABSL_LOCKS_EXCLUDED(map_mu_);

  // Push without the NaN/Inf scan, for a caller that has just had ValidatePush
  // accept these same bytes (Shard checks a whole request before applying any of
  // it; scanning again cost ~30% of the shard's work per push in bench/ps_bench).
  // REQUIRES: ValidatePush(id, data, bytes) returned OK.
  absl::StatusOr<PushResult> PushChecked(uint32_t id, const void* data, size_t bytes,
                                         uint64_t base_version)
      ABSL_LOCKS_EXCLUDED(map_mu_);

  // Every block, ascending by id. Each is consistent, but blocks are taken one
  // after another, so pushes may land between them (fine for async SGD).
  std::vector<BlockSnapshot> Snapshot() const ABSL_LOCKS_EXCLUDED(map_mu_);

  // CRC-32C of block `id`'s values bytes, with its version in *version (for
  // tools and tests).
  // REQUIRES: Has(id); otherwise returns 0 and sets *version to 0.
  uint32_t BlockCrc32c(uint32_t id, uint64_t* version) const
      ABSL_LOCKS_EXCLUDED(map_mu_);

 private:
  struct Block;  // defined in block_store.cc

  Block* Find(uint32_t id) const ABSL_SHARED_LOCKS_REQUIRED(map_mu_);
  absl::StatusOr<PushResult> Apply(uint32_t id, const void* data, size_t bytes,
                                   uint64_t base_version, bool check)
      ABSL_LOCKS_EXCLUDED(map_mu_);
  // NotFound "<op>: unknown block <id> (this ps holds ...)".
  absl::Status UnknownBlock(const char* op, uint32_t id) const
      ABSL_SHARED_LOCKS_REQUIRED(map_mu_);
  std::vector<uint32_t> SortedIds() const ABSL_SHARED_LOCKS_REQUIRED(map_mu_);

  // Constant after construction.
  const std::unique_ptr<Optimizer> optimizer_;

  // State below is protected by map_mu_; each block's contents by its own mu.
  mutable absl::Mutex map_mu_;
  absl::flat_hash_map<uint32_t, std::unique_ptr<Block>> blocks_
      ABSL_GUARDED_BY(map_mu_);
  int64_t num_floats_ ABSL_GUARDED_BY(map_mu_) = 0;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_BLOCK_STORE_H_
