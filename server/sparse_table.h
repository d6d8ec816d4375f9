// A sparse table: uint64 keys (hashed features) mapped to rows of `dim`
// floats plus the row's optimizer state, created on the first training touch.
//
//   SparseTable::Options options;
//   options.dim = 1;
//   options.optimizer.type = SparseOptimizerType::kFtrl;
//   ASSIGN_OR_RETURN(std::unique_ptr<SparseTable> table,
//                    SparseTable::Create(options));
//   table->Read(keys, n, values);            // creates nothing
//   RETURN_IF_ERROR(SparseTable::CheckPush(keys, n, grads, counts, dim));
//   table->Apply(keys, n, grads);            // creates missing rows
//
// Storage. Rows live in an arena of fixed-size chunks (kRowsPerChunk rows
// each, allocated as the table grows, never moved), row r at chunk r /
// kRowsPerChunk. A row is `dim` values followed by state_slots() * dim state
// floats; its update count (the row's version, also Adam's step) sits in a
// parallel uint32 array of the chunk. An absl::flat_hash_map<uint64_t,
// uint32_t> maps a key to its row. Nothing is allocated for a key that is
// never trained: memory follows the rows created (bytes() reports it).
//
// Initial values. A row's values before its first update are a function of
// (seed, key, i) alone, so they do not depend on arrival order or on which
// shard holds the key: zeros (linear weights), or uniform in [-scale, scale]
// from SplitMix64 of (seed, key, i) (embeddings). Read returns them for a key
// without a row, and creates none.
//
// Update rules, per coordinate, with g the pushed (summed) gradient and t the
// row's update count including this one; for sgd, adagrad and adam g first
// gains weight_decay * w (L2, applied when a push touches the row: a key
// absent from a push is not decayed):
//   sgd:     w -= lr * g
//   adagrad: h += g^2;  w -= lr * g / (sqrt(h) + eps)                (state h)
//   adam:    m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//            w -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
//                                                                (state m, v)
//   ftrl:    FTRL-Proximal (McMahan et al., KDD 2013), alpha = lr:
//            sigma = (sqrt(n + g^2) - sqrt(n)) / alpha;  z += g - sigma w;
//            n += g^2;
//            w = 0 if |z| <= l1, else
//                -(z - sign(z) l1) / ((beta + sqrt(n)) / alpha + l2)
//                                                                (state z, n)
// FTRL's l1 sets weights to exactly 0; nonzero_values() counts the values
// that are not.
//
// Clock and eviction. The table's clock counts the key updates it applied
// (restored and merged with the rows); with Options::track_clocks each row
// keeps the clock of its last update in a parallel uint64 array per chunk.
// Evict drops the rows Options::evict_* name (untouched by the last
// evict_ttl_updates updates; then the least recently updated beyond
// evict_max_rows) with their state and version, and compacts the arena: the
// last row moves into each hole, so chunks past the end are freed and the
// rest reused. The versions of evicted rows stay in version_sum() (as
// evicted_versions()), so the row updates a table holds never fall by
// eviction. A key evicted and seen again starts from its initial values and
// passes admission again.
//
// Thread-compatible: const methods may run concurrently; Apply, Evict,
// Restore and Merge need exclusive access (the owner's lock).
#ifndef DOWNPOUR_SERVER_SPARSE_TABLE_H_
#define DOWNPOUR_SERVER_SPARSE_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace downpour::server {

enum class SparseOptimizerType { kSgd, kAdagrad, kAdam, kFtrl };

// "sgd", "adagrad", "adam", "ftrl".
const char* SparseOptimizerName(SparseOptimizerType type);
// InvalidArgument naming the valid names.
absl::StatusOr<SparseOptimizerType> ParseSparseOptimizer(
    const std::string& name);

struct SparseOptimizer {
  SparseOptimizerType type = SparseOptimizerType::kFtrl;
  double learning_rate = 0.05;  // sgd, adagrad, adam; ftrl's alpha. > 0
  double epsilon = 1e-8;        // adagrad, adam: > 0
  double weight_decay = 0.0;    // sgd, adagrad, adam: L2, >= 0 (ftrl: l2)
  double beta1 = 0.9;           // adam: in [0, 1)
  double beta2 = 0.999;         // adam: in [0, 1)
  double beta = 1.0;            // ftrl: >= 0
  double l1 = 0.0;              // ftrl: >= 0
  double l2 = 0.0;              // ftrl: >= 0
};

class SparseTable {
 public:
  enum class Init { kZeros, kUniform };

  struct Options {
    int dim = 1;  // floats per row, 1..4096
    SparseOptimizer optimizer;
    Init init = Init::kZeros;
    double init_scale = 0.01;  // kUniform: values in [-scale, scale]
    uint64_t seed = 1;
    // Apply refuses to create rows beyond this many (ResourceExhausted from
    // CheckCapacity); memory stays bounded. Default 2^31 - 1 (the row index
    // is 32 bits).
    int64_t max_rows = (int64_t{1} << 31) - 1;
    // Remember the rows Apply changes and the keys Evict drops, for
    // TakeChanges (a replicated shard's cuts to its backup). Costs 8 bytes
    // and a bit per row, and 4 bytes per row changed until taken.
    bool track_changes = false;
    // Keep each row's clock (the table's clock at its last update), for
    // Evict and ChangedSince (incremental checkpoints): 8 bytes a row. On
    // whenever eviction is.
    bool track_clocks = false;
    // Eviction (config eviction.*), done by Evict: rows untouched by the
    // table's last evict_ttl_updates key updates are dropped, then the least
    // recently updated beyond evict_max_rows. 0 = off (default).
    int64_t evict_ttl_updates = 0;
    int64_t evict_max_rows = 0;
    // Admission (config admission.*): a key without a row gets one once its
    // occurrences reach admit_min_count, or, with admit_probability < 1, once
    // a seeded draw per occurrence succeeds. Until then Apply counts it and
    // drops its gradient; reads return its initial values. Set at most one.
    int admit_min_count = 1;
    double admit_probability = 1.0;
  };

  // Rows per arena chunk.
  static constexpr int64_t kRowsPerChunk = 1 << 16;
  // Most keys one request may carry.
  static constexpr int64_t kMaxKeysPerRequest = int64_t{1} << 24;

  // InvalidArgument for a dim outside 1..4096 or an impossible
  // hyper-parameter (naming it).
  static absl::StatusOr<std::unique_ptr<SparseTable>> Create(
      const Options& options);

  SparseTable(const SparseTable&) = delete;
  SparseTable& operator=(const SparseTable&) = delete;
  ~SparseTable();

  int dim() const { return options_.dim; }
  // State floats per value: sgd 0, adagrad 1, adam 2, ftrl 2.
  int state_slots() const { return state_slots_; }
  const Options& options() const { return options_; }

  // Checks a push of `n` keys before anything is applied: n in 0 ..
  // kMaxKeysPerRequest, keys strictly ascending (sorted and unique: the
  // worker sums the gradients of a key seen twice), `grad_floats` == n * dim,
  // every gradient finite and |g| <= max_abs (0: no bound), every count >= 1
  // (counts may be null). InvalidArgument naming the first offending key or
  // index.
  static absl::Status CheckPush(const uint64_t* keys, int64_t n,
                                const float* grads, int64_t grad_floats,
                                const uint32_t* counts, int dim,
                                double max_abs);
  // ResourceExhausted when applying `keys` would create more rows than
  // Options::max_rows (names the table's size and the option).
  absl::Status CheckCapacity(const uint64_t* keys, int64_t n) const;

  // Writes the values of `keys` (n * dim floats) to `out`: a row's values,
  // or the initial values of a key without one. Creates nothing. `versions`
  // (may be null) receives each row's update count (0 without a row).
  void Read(const uint64_t* keys, int64_t n, float* out,
            uint32_t* versions = nullptr) const;

  // Applies gradients `grads` (n * dim floats) to rows `keys`, creating the
  // missing ones admission lets in with their initial values first; the
  // gradient of a key not admitted is dropped and its occurrences (`counts`,
  // one each when null) counted. Returns the rows created.
  // REQUIRES: CheckPush and CheckCapacity returned OK for this input.
  int64_t Apply(const uint64_t* keys, int64_t n, const float* grads,
                const uint32_t* counts = nullptr);

  int64_t rows() const { return static_cast<int64_t>(index_.size()); }
  bool Contains(uint64_t key) const { return index_.contains(key); }
  // Values that are not 0 (FTRL's l1 makes many exactly 0).
  int64_t nonzero_values() const { return nonzero_; }
  // Rows created by Apply since construction (not by Restore).
  int64_t rows_created() const { return created_; }
  // Admission: key updates dropped because the key was not admitted yet,
  // and the keys counted but not admitted now (kept in memory only, not in
  // checkpoints or replicas).
  int64_t updates_filtered() const { return filtered_; }
  int64_t pending_keys() const { return static_cast<int64_t>(pending_.size()); }
  // Updates applied to rows (keys applied over Apply calls; admission's
  // dropped ones not counted).
  int64_t row_updates() const { return updates_; }
  // The sum of the rows' versions and of evicted_versions(): the row updates
  // the table holds (those restored or merged included). Counted per row
  // version, as the dense blocks' versions are; eviction moves a row's
  // version from one term to the other.
  uint64_t version_sum() const { return version_sum_; }
  // The versions of the rows evicted so far (restored and merged too).
  uint64_t evicted_versions() const { return evicted_versions_; }
  // Rows Evict dropped since construction.
  int64_t rows_evicted() const { return evicted_rows_; }
  // Key updates applied so far (restored and merged too): the clock that
  // eviction and ChangedSince measure in.
  uint64_t clock() const { return clock_; }
  bool tracks_clocks() const { return track_clocks_; }
  // Heap bytes held: the arena's chunks, the index's slots, admission's
  // counts and the changes recorded for the next replica cut.
  int64_t bytes() const;
  // Bytes a row takes in the arena: values, state, version, clock (when
  // kept) and key (track_changes).
  int64_t row_bytes() const;
  // The heap bytes the table would hold with `rows` rows, admission's
  // counts left out: the arena's whole chunks, the index's slots (those it
  // has now, or, where `rows` needs more, those and the grown ones together,
  // as during a rehash) and the changes a replica cut may record. An upper
  // bound of bytes() after Apply or EvictForRoom leaves `rows` rows, for
  // the memory budget (server/memory_budget.h).
  int64_t BytesAt(int64_t rows) const;
  // Admission's counts' bytes (EvictForRoom drops them).
  int64_t pending_bytes() const;
  // How many of `keys` have no row (the rows Apply would create at most).
  int64_t CountFresh(const uint64_t* keys, int64_t n) const;

  // Rows of one moment, for checkpoints and replicas: keys ascending, with
  // values and state together (never taken at different moments), and the
  // table's figures of that moment. Every row (Snapshot), or a change cut
  // (TakeChanges, ChangedSince): the rows changed and the keys evicted since
  // an earlier cut, to apply to it as Merge and Overlay do (evicted_keys
  // first, then the rows).
  struct Rows {
    int dim = 0;
    int state_slots = 0;
    SparseOptimizerType optimizer = SparseOptimizerType::kSgd;
    std::vector<uint64_t> keys;
    // Per row: dim values then state_slots * dim state floats.
    std::vector<float> data;
    std::vector<uint32_t> versions;
    // Per row, the clock of its last update; empty when the table keeps no
    // clocks (Options::track_clocks).
    std::vector<uint64_t> clocks;
    // The table's clock() and evicted_versions() at the cut.
    uint64_t clock = 0;
    uint64_t evicted_versions = 0;
    // A change cut's tombstones: keys evicted since the earlier cut,
    // ascending and unique (a key may also be among `keys`: evicted, then
    // created again).
    std::vector<uint64_t> evicted_keys;
  };
  Rows Snapshot() const;
  // Replaces the table's rows with `rows` (its evicted_keys are moot: the
  // table starts empty), and its clock and evicted versions with those of
  // `rows`. InvalidArgument when its dim, optimizer or array sizes do not
  // match, or its keys are not strictly ascending; the table is then
  // unchanged.
  absl::Status Restore(const Rows& rows);
  // Applies a cut: drops the rows of `rows.evicted_keys` (their versions
  // counted evicted), then inserts `rows` whole (values, state, version and
  // clock; without clocks a row gets rows.clock), replacing the rows of keys
  // already held, and takes the cut's clock and evicted versions: a
  // backup's replica applying a cut. The same checks as Restore, and a
  // NaN/Inf value or state float is refused (a primary never holds one);
  // the table is then unchanged.
  absl::Status Merge(const Rows& rows);
  // Merge's checks alone: what Merge(rows) would return, changing nothing.
  absl::Status CheckMerge(const Rows& rows) const;
  // Merge without its checks (a replica checks every table of a cut before
  // it applies any). REQUIRES: CheckMerge(rows) returned OK, and the table
  // has not changed since.
  void MergeChecked(const Rows& rows);
  // The rows changed by Apply since the last TakeChanges (or ClearChanges),
  // keys ascending, each whole at this moment, and the keys Evict dropped
  // meanwhile; the record is cleared. Empty unless Options::track_changes.
  Rows TakeChanges();
  void ClearChanges();
  // Keeps clocks from now on (a replica whose primary sends them): each row
  // held gets the current clock. No-op when clocks are kept already.
  void TrackClocks();

  // The rows whose clock is above `clock` (updated, created, merged or
  // restored after the table's clock was `clock`), keys ascending, with the
  // table's figures; its evicted_keys are empty (the caller keeps the keys
  // Evict returned). A cut for an incremental checkpoint. REQUIRES:
  // tracks_clocks().
  Rows ChangedSince(uint64_t clock) const;

  // Live bucket moves (server/bucket_transfer.h). The rows of the keys whose
  // bucket (BucketOf(key, buckets)) is flagged in `in_buckets` and whose
  // clock is above `since` (0: every row; without clocks kept, every row),
  // keys ascending, with the table's figures.
  // At most `max_rows` rows (0: no bound) of whole buckets, the flagged
  // buckets taken in ascending order (at least one); *end: the first flagged
  // bucket left out (`buckets` when none). One pass over the index.
  Rows RowsInBuckets(const std::vector<char>& in_buckets, uint32_t buckets,
                     uint64_t since, int64_t max_rows = 0,
                     uint32_t* end = nullptr) const;
  // Rows moved in from another ps: inserted whole (values, state, version),
  // replacing rows of the same keys, each with one new clock tick (so that
  // the next incremental checkpoint and eviction see them as fresh) and noted
  // for the next replica cut. Unlike Merge, the table's clock and evicted
  // versions stay its own. Merge's checks; the table is unchanged on error.
  absl::Status Import(const Rows& rows);
  // Rows moved out to another ps, dropped in batches while pushes go on
  // (Shard::DropUnheldRows): KeysInBuckets lists them once, DropMovedKeys
  // drops a batch by key, without counting them evicted (their versions
  // leave version_sum() with them), with tombstones for the next replica
  // cut; it returns the keys dropped, ascending. Between KeepRowKeys(true)
  // and KeepRowKeys(false) the table keeps each row's key (8 bytes a row,
  // kept anyway with Options::track_changes), so that a batch costs its own
  // rows rather than a walk of the whole index.
  std::vector<uint64_t> KeysInBuckets(const std::vector<char>& in_buckets,
                                      uint32_t buckets) const;
  std::vector<uint64_t> DropMovedKeys(const uint64_t* keys, int64_t n);
  void KeepRowKeys(bool on);

  // Eviction: the rows Options::evict_* name are dropped (values, optimizer
  // state and version; the versions move to evicted_versions()) and the
  // arena compacted. Returns the keys dropped, ascending. Nothing happens
  // when eviction is off.
  std::vector<uint64_t> Evict();

  // Eviction for the memory budget (server/memory_budget.h): drops the
  // least valuable rows until `keep_rows` remain, never the rows of
  // `keep_keys` (n of them: the push about to be applied). Least valuable:
  // rows updated once (a flood of keys touched once) before rows updated
  // more often, each group least recently updated first. Admission's counts
  // are dropped too. Versions, tombstones and counts as Evict's. Returns
  // the keys dropped, ascending. Without clocks kept (tracks_clocks()), it
  // starts keeping them: every row then looks as recent as the others.
  std::vector<uint64_t> EvictForRoom(int64_t keep_rows,
                                     const uint64_t* keep_keys, int64_t n);

  // `over` applied to `under` (both of this table's shape): the rows of
  // over.evicted_keys dropped, then over's rows inserted or replacing, with
  // over's clock and evicted versions. Its evicted_keys are the union of
  // both (so a chain of change cuts composes: Overlay(Overlay(full, d1), d2)
  // == Overlay(full, Overlay(d1, d2))). InvalidArgument when the two differ
  // in dim, optimizer or state slots, or an array's size does not fit.
  static absl::StatusOr<Rows> Overlay(const Rows& under, const Rows& over);

  // The initial value i of `key` (Options::init).
  float InitialValue(uint64_t key, int i) const;

 private:
  explicit SparseTable(const Options& options);

  float* RowData(uint32_t row) const {
    return chunks_[row / kRowsPerChunk].get() +
           (row % kRowsPerChunk) * static_cast<int64_t>(stride_);
  }
  uint32_t& RowVersion(uint32_t row) const {
    return versions_[row / kRowsPerChunk][row % kRowsPerChunk];
  }
  // REQUIRES: row_keys_.
  uint64_t& RowKey(uint32_t row) const {
    return keys_[row / kRowsPerChunk][row % kRowsPerChunk];
  }
  // REQUIRES: track_clocks_.
  uint64_t& RowClock(uint32_t row) const {
    return clocks_[row / kRowsPerChunk][row % kRowsPerChunk];
  }
  // Marks in *victims the `excess` unmarked rows (not in *skip, when given)
  // of the lowest rank: the row's clock, with probation_first rows updated
  // once below the others. Returns how many it marked (fewer when fewer
  // are left).
  int64_t MarkLeast(int64_t excess, bool probation_first,
                    const std::vector<uint64_t>* skip,
                    std::vector<uint64_t>* victims) const;
  // DropRows, counted and kept as tombstones for the replica.
  std::vector<uint64_t> DropVictims(const std::vector<uint64_t>& victims,
                                    int64_t count);
  // The arena's bytes for `rows` rows (whole chunks).
  int64_t ArenaBytes(int64_t rows) const;
  // Drops the rows marked in `victims` (a bit per row), `count` of them,
  // compacting the arena; returns their keys, ascending.
  std::vector<uint64_t> DropRows(const std::vector<uint64_t>& victims,
                                 int64_t count);
  // A row's bit in a set of rows (DropRows' victims).
  static bool Marked(const std::vector<uint64_t>& bits, int64_t row) {
    return (bits[row / 64] >> (row % 64)) & 1;
  }
  static void Mark(std::vector<uint64_t>* bits, int64_t row) {
    (*bits)[row / 64] |= uint64_t{1} << (row % 64);
  }
  // Rows of the `n` keys held, as DropRows' bits; returns how many.
  int64_t MarkKeys(const uint64_t* keys, int64_t n,
                   std::vector<uint64_t>* victims) const;
  // A row index for "no row" (FindRows).
  static constexpr uint32_t kNoRow = UINT32_MAX;
  // Keys looked up per FindRows block: their rows fit a stack array.
  static constexpr int64_t kFindBlock = 256;
  // The rows of keys[0..n) into rows[i] (kNoRow where there is none), the
  // index's slots prefetched a few keys ahead so that the lookups' cache
  // misses overlap instead of following one another, and the first
  // `prefetch_floats` floats of each row found prefetched for the caller's
  // walk over the block. REQUIRES: n <= kFindBlock.
  void FindRows(const uint64_t* keys, int64_t n, uint32_t* rows,
                int prefetch_floats) const;
  // Prefetches the first `floats` floats of row `row` and its version
  // (nothing for kNoRow or floats 0).
  void PrefetchRow(uint32_t row, int floats) const;
  // Apply of one FindRows block.
  void ApplyBlock(const uint64_t* keys, int64_t n, const float* grads,
                  const uint32_t* counts, uint32_t* rows);
  // Appends a row for `key` with its initial values and zero state.
  uint32_t NewRow(uint64_t key);
  // Whether `count` more occurrences of `key` (without a row) admit it;
  // counts them otherwise.
  bool Admit(uint64_t key, uint32_t count);
  // InvalidArgument unless `rows` fits this table (Restore and Merge).
  absl::Status CheckRows(const Rows& rows, const char* what, bool finite) const;
  // Row i of `rows` held whole (values, state, version), a new row for a
  // new key; the figures follow. Returns the row. Merge and Import.
  uint32_t PutRow(const Rows& rows, size_t i);
  // `rows` for the given (key, row) pairs, in their order.
  Rows RowsOf(const std::vector<std::pair<uint64_t, uint32_t>>& order) const;
  void NoteChanged(uint32_t row) {
    if (!options_.track_changes) return;
    const size_t word = row / 64;
    if (word >= changed_bits_.size()) changed_bits_.resize(word + 1, 0);
    const uint64_t bit = uint64_t{1} << (row % 64);
    if ((changed_bits_[word] & bit) == 0) {
      changed_bits_[word] |= bit;
      changed_.push_back(row);
    }
  }
  void Update(float* row, uint32_t t, const float* g);

  const Options options_;
  const int state_slots_;
  const int stride_;  // floats per row
  bool track_clocks_;
  absl::flat_hash_map<uint64_t, uint32_t> index_;
  std::vector<std::unique_ptr<float[]>> chunks_;
  std::vector<std::unique_ptr<uint32_t[]>> versions_;
  // Per chunk, each row's clock (track_clocks_ only).
  std::vector<std::unique_ptr<uint64_t[]>> clocks_;
  int64_t nonzero_ = 0;
  int64_t created_ = 0;
  int64_t updates_ = 0;
  uint64_t version_sum_ = 0;
  uint64_t clock_ = 0;
  uint64_t evicted_versions_ = 0;
  int64_t evicted_rows_ = 0;
  // Admission: occurrences counted of keys without a row.
  absl::flat_hash_map<uint64_t, uint32_t> pending_;
  int64_t filtered_ = 0;
  // Rows changed since the last TakeChanges, and each row's key by chunk
  // (row_keys_ only: Options::track_changes, or KeepRowKeys; 8 bytes a row).
  std::vector<uint32_t> changed_;
  bool row_keys_;
  std::vector<std::unique_ptr<uint64_t[]>> keys_;
  std::vector<uint64_t> changed_bits_;
  // Keys Evict dropped since the last TakeChanges (Options::track_changes).
  std::vector<uint64_t> evicted_keys_;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_SPARSE_TABLE_H_
