// The parameter blocks one ps shard holds, with versions and optimizer state.
//
//   BlockStore store(std::move(optimizer));
//   RETURN_IF_ERROR(store.AddBlock(3, initial_values));
//   ASSIGN_OR_RETURN(uint64_t version, store.Pull(3, &bytes, worker_id));
//   ASSIGN_OR_RETURN(BlockStore::PushResult result,
//                    store.Push(3, grad.data(), grad.size(), version,
//                               worker_id));
//
// Payloads are little-endian float32 bytes, exactly as they travel in ps.proto,
// and may be unaligned; with a WireEncoding of bf16 or fp16 they are 2 bytes a
// value (common/wire_encoding.h), decoded on push and encoded on pull while the
// store keeps float32 values and optimizer state. Every request is checked
// (unknown block, unknown encoding, wrong size, NaN/Inf) and a rejected request
// leaves the store unchanged.
//
// Each update gets its factors from Optimizer::Context: the lr schedule at the
// block's version (the global step), the staleness-aware lr, and momentum
// lowered by the block's mean staleness (an exponential moving average kept
// beside the block in memory only: not checkpointed, so it restarts at 0).
// With optimizer.delay_compensation > 0 the store remembers what it served
// each worker (ServedValues) and corrects a stale gradient by DC-ASGD.
//
// Not thread-safe (see "Thread safety" below): the owner serialises.
#ifndef DOWNPOUR_SERVER_BLOCK_STORE_H_
#define DOWNPOUR_SERVER_BLOCK_STORE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/counters.h"
#include "common/wire_encoding.h"
#include "server/optimizer.h"
#include "server/served_values.h"

namespace downpour::server {

// Thread safety
// -------------
// Thread-compatible, like leveldb's SkipList: the store takes no locks over
// its blocks. Const methods (Pull, ValidatePush, Snapshot, ...) may run
// concurrently with each other; every non-const call (AddBlock, Push, Apply)
// needs exclusive access, which the owner provides (Shard holds one
// reader/writer mutex around it). The one exception is what Pull records for
// delay compensation: concurrent pulls write it, so ServedValues locks itself.
class BlockStore {
 public:
  struct Options {
    // Workers 0 .. num_workers - 1 (WorkerSlots: cluster.workers and
    // cluster.max_workers) have their pulls remembered for delay compensation
    // when the optimizer's delay_compensation is > 0; that takes up to
    // num_workers * 2 * the store's floats more memory.
    int num_workers = 0;
    // Where the store exports "lr_scale" and "momentum_applied" (gauges of
    // the last update, when a schedule or staleness_lr / async momentum is
    // on) and "dc_misses" (stale pushes applied without compensation because
    // their base version's values were not held). Not owned; may be null.
    Counters* counters = nullptr;
    // ValidatePush measures every gradient's L2 norm (GradientStats::norm),
    // not only with optimizer.max_gradient_norm on: for the Shard's
    // PushGuard. Folded into the one pass; default false.
    bool compute_norms = false;
  };

  struct PushResult {
    // The block's version after this update.
    uint64_t version;
    // The version before it minus base_version (0 if base_version >= it).
    uint64_t staleness;
  };

  // One block, copied; the unit of checkpoints.
  struct BlockSnapshot {
    uint32_t id;
    uint64_t version;
    std::vector<float> values;
    // Optimizer state: state_slots() * values.size() floats, slot-major.
    std::vector<float> state;
  };

  // A block held here, as ValidatePush resolves it (defined in block_store.cc).
  // Valid until the next AddBlock of the same id.
  struct Block;

  // What ValidatePush learnt about a gradient in its one pass, for Apply.
  struct GradientStats {
    // A bound on |element|: optimizer.max_gradient_value when that is on,
    // else the largest |element|.
    float max_abs = 0.0f;
    // The L2 norm; < 0 when not computed (optimizer.max_gradient_norm 0 and
    // Options::compute_norms false).
    double norm = -1.0;
    // When > 0 (set by the caller between ValidatePush and Apply), Apply
    // scales the gradient down to this norm if it is larger, as it does to
    // optimizer.max_gradient_norm (the tighter of the two applies).
    double clip_norm = 0.0;
  };

  // REQUIRES: optimizer != nullptr.
  explicit BlockStore(std::unique_ptr<Optimizer> optimizer)
      : BlockStore(std::move(optimizer), Options()) {}
  BlockStore(std::unique_ptr<Optimizer> optimizer, Options options);
  BlockStore(const BlockStore&) = delete;
  BlockStore& operator=(const BlockStore&) = delete;
  ~BlockStore();

  // Adds block `id`, or replaces it (values, version and state) if present.
  // Optimizer state starts at zero unless `state` (state_slots() *
  // values.size() floats, slot-major) is given. InvalidArgument for empty
  // values or a state of the wrong size; the store is then unchanged.
  absl::Status AddBlock(uint32_t id, std::vector<float> values,
                        uint64_t version = 0, std::vector<float> state = {});

  // Takes block `id` out of the store (a live move handed it to another ps):
  // its values, state and version; nullopt when it is not here.
  std::optional<BlockSnapshot> Remove(uint32_t id);

  bool Has(uint32_t id) const { return Find(id) != nullptr; }
  size_t num_blocks() const { return blocks_.size(); }
  // The ids held, ascending.
  std::vector<uint32_t> block_ids() const;
  // Values (not state) in all blocks together.
  int64_t num_floats() const { return num_floats_; }
  // The sum of the blocks' versions: the updates the store holds.
  uint64_t version_sum() const;
  const Optimizer& optimizer() const { return *optimizer_; }

  // Copies block `id`'s values into *out as little-endian bytes in `encoding`
  // (resized to BytesPerElement(encoding) * length; a reused string of that
  // size is not reallocated) and returns the block's version. NotFound when
  // the block is not here, "pull: unknown block 17 (this ps holds blocks 0-5,
  // 9)"; InvalidArgument for an encoding not in WireEncoding ("pull: block 3
  // asked for in unknown encoding 7 (valid: 0 float32, 1 bf16, 2 fp16)"); *out
  // is then untouched. With delay compensation on, a copy of the float32
  // values is kept for `worker_id` (see Options::num_workers; -1 = a tool, not
  // remembered).
  absl::StatusOr<uint64_t> Pull(
      uint32_t id, std::string* out, int32_t worker_id = -1,
      WireEncoding encoding = WireEncoding::kFloat32) const;
  // Block `id`'s version; NotFound as Pull when it is not here.
  absl::StatusOr<uint64_t> Version(uint32_t id) const;
  // The same as Pull into `out`, which has room for
  // BytesPerElement(encoding) * length bytes (any alignment).
  absl::StatusOr<uint64_t> PullInto(
      uint32_t id, char* out, int32_t worker_id = -1,
      WireEncoding encoding = WireEncoding::kFloat32) const;

  // Checks a gradient of `bytes` bytes at `data` (any alignment) in `encoding`
  // for block `id` without applying it, in one pass, and returns the block for
  // Apply: NotFound for an unknown block; InvalidArgument for an encoding not
  // in WireEncoding ("push: block 3 has unknown encoding 7 (valid: 0 float32,
  // 1 bf16, 2 fp16)"), for a byte length other than BytesPerElement(encoding)
  // * length ("push: block 17 expects 65536 floats (262144 bytes), got 1000
  // bytes"; "push: block 17 expects 65536 bf16 values (131072 bytes), got ...")
  // for a NaN/Inf element ("push: block 3 gradient has NaN at index 12 (of
  // 65536); ...") or for an element beyond optimizer.max_gradient_value
  // ("push: block 3 gradient element 12 (of 65536) is 1e+38, beyond
  // optimizer.max_gradient_value 1e+06; ..."). The same pass finds the largest
  // |element| and, with optimizer.max_gradient_norm on or
  // Options::compute_norms, the L2 norm, into *stats when it is not null.
  // bf16/fp16 are checked on the encoded bits (a second, decoding pass only
  // for fp16 without max_gradient_value or with a norm wanted).
  absl::StatusOr<Block*> ValidatePush(
      uint32_t id, const void* data, size_t bytes,
      WireEncoding encoding = WireEncoding::kFloat32,
      GradientStats* stats = nullptr) const;

  // Applies the optimizer to `block` with the gradient at `data` (in
  // `encoding`: bf16/fp16 are first decoded into a scratch buffer the store
  // reuses) and bumps its version. `base_version` is the version the gradient
  // was computed from (as returned by Pull) and `worker_id` the worker that
  // pulled it (-1: none, as for a BSP round's mean gradient; such a push is
  // never compensated). A caller that checks a whole request before applying
  // any of it resolves each block once with ValidatePush, then applies.
  // `stats` is what that ValidatePush found (null: computed here, one more
  // pass over the gradient).
  //
  // A gradient whose norm exceeds optimizer.max_gradient_norm (> 0) or
  // stats->clip_norm (> 0) is scaled down to the tighter first (counter
  // "clipped_gradients"). Values and optimizer
  // state never become NaN/Inf: when the update could overflow float32 (a
  // bound from the block's magnitude, the gradient's and the optimizer's
  // factors, kept per block, says so: rare), the block is copied first, and
  // an update that did overflow is undone and refused with InvalidArgument
  // ("push: block 3 update would overflow the adam state ...", counter
  // "refused_overflows"); the block is then unchanged.
  // REQUIRES: ValidatePush(id, data, bytes, encoding) returned `block` and no
  // AddBlock came between.
  absl::StatusOr<PushResult> Apply(
      Block* block, const void* data, uint64_t base_version, int32_t worker_id,
      WireEncoding encoding = WireEncoding::kFloat32,
      const GradientStats* stats = nullptr);

  // An update another store applied (a primary's, replicated by gradient):
  // what Apply needs to do the same to a block that holds the same floats.
  struct Replayed {
    uint32_t id = 0;
    uint64_t version = 0;  // the block's version before the update
    uint64_t base_version = 0;
    int32_t worker_id = -1;
    WireEncoding encoding = WireEncoding::kFloat32;
    double clip_norm = 0;       // GradientStats::clip_norm as applied
    double mean_staleness = 0;  // the block's, before the update
    const void* data = nullptr;
    size_t bytes = 0;
  };
  // Applies `update` as the other store did: checked as ValidatePush checks a
  // push (its errors; nothing applied), then Apply with the block's mean
  // staleness set to the other store's first, so that a block that held the
  // same floats holds the same floats after (same optimizer section, same
  // Options::compute_norms or a norm computed anyway). FailedPrecondition,
  // nothing applied, when the block is at another version than
  // update.version. Delay compensation is not replayed: a store with it on
  // must not be replicated by gradient.
  absl::StatusOr<PushResult> Replay(const Replayed& update);

  // ValidatePush, then Apply. On error the block is unchanged.
  absl::StatusOr<PushResult> Push(
      uint32_t id, const void* data, size_t bytes, uint64_t base_version,
      int32_t worker_id = -1, WireEncoding encoding = WireEncoding::kFloat32);

  // Pushes that took the guarded (copy, apply, check) path: for tests and
  // benchmarks.
  int64_t guarded_applies_for_test() const { return guarded_applies_; }

  // The block's mean staleness (the average async momentum uses); 0 for a
  // block not held.
  double MeanStaleness(uint32_t id) const;

  // Floats held for delay compensation.
  int64_t num_served_floats() const { return served_.num_floats(); }

  // Every block, ascending by id.
  std::vector<BlockSnapshot> Snapshot() const;
  // Blocks `ids` (those held), in that order.
  std::vector<BlockSnapshot> Snapshot(const std::vector<uint32_t>& ids) const;
  // The id of a block ValidatePush returned.
  static uint32_t IdOf(const Block* block);
  // The number of floats in `block`.
  static int64_t LengthOf(const Block* block);

  // CRC-32C of block `id`'s values bytes, with its version in *version (for
  // tools and tests).
  // REQUIRES: Has(id); otherwise returns 0 and sets *version to 0.
  uint32_t BlockCrc32c(uint32_t id, uint64_t* version) const;

 private:
  Block* Find(uint32_t id) const;
  // NotFound "<op>: unknown block <id> (this ps holds ...)".
  absl::Status UnknownBlock(const char* op, uint32_t id) const;

  // g with delay compensation into *scratch when a copy of w at
  // base_version is held for the worker; g itself otherwise.
  const float* Compensate(const Block& block, const float* g,
                          uint64_t base_version, int32_t worker_id,
                          std::vector<float>* scratch);

  // The guarded path of Apply: copies the block, applies, and restores it
  // when a value or state float came out NaN/Inf.
  absl::Status ApplyGuarded(Block* block, const float* gradient, double max_g,
                            const ApplyContext& context);

  const std::unique_ptr<Optimizer> optimizer_;
  Counters* const counters_;
  // optimizer.max_gradient_value as float32 bits of |x| (FLT_MAX's when off):
  // for non-negative floats the bit patterns order as the values do.
  const uint32_t max_abs_bits_;
  const double max_norm_;  // optimizer.max_gradient_norm; 0: no clipping
  const bool want_norms_;  // ValidatePush measures norms
  int64_t guarded_applies_ = 0;
  const float dc_lambda_;  // 0: delay compensation off
  // The optimizer section scales lr per update (schedule, warmup or
  // staleness_lr): Apply exports the scale as the gauge "lr_scale".
  const bool lr_scaled_;
  // What Pull served each worker; written by concurrent (const) pulls, hence
  // mutable and self-locking.
  mutable ServedValues served_;
  absl::flat_hash_map<uint32_t, std::unique_ptr<Block>> blocks_;
  int64_t num_floats_ = 0;
  // Apply's bf16/fp16 gradient, decoded; grows to the largest block pushed
  // encoded and is reused (Apply has exclusive access).
  std::vector<float> decoded_;
  // Apply's clipped gradient and the guarded path's copy of a block; reused.
  std::vector<float> clipped_;
  std::vector<float> saved_;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_BLOCK_STORE_H_
