// The sparse tables of one ps shard (ModelSpec::sparse_tables()): which hash
// buckets of keys the shard holds, a push's rows decoded and checked, applied
// and counted, pulls and lookups read, eviction, and the rows of replica cuts.
//
//   ASSIGN_OR_RETURN(auto sparse, SparseTables::Create(config, 0, spec,
//                                                      nullptr, counters));
//   std::vector<SparseTables::DecodedRows> rows;
//   RETURN_IF_ERROR(sparse->DecodePush(request, &rows));
//   sparse->Apply(rows);
//
// Not thread-safe: the owner (Shard) serialises, holding its mutex shared for
// the const methods and exclusively for the others. The methods marked
// "constants only" read nothing that changes and may run without that lock.
#ifndef DOWNPOUR_SERVER_SPARSE_TABLES_H_
#define DOWNPOUR_SERVER_SPARSE_TABLES_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/config.h"
#include "common/counters.h"
#include "common/model_spec.h"
#include "common/push_view.h"
#include "proto/ps.pb.h"
#include "server/checkpoint.h"
#include "server/memory_budget.h"
#include "server/sparse_table.h"

namespace downpour::server {

class SparseTables {
 public:
  // One sparse table as Status and tests see it.
  struct Stats {
    uint32_t id = 0;
    int64_t rows = 0;
    int64_t bytes = 0;  // SparseTable::bytes()
    int64_t nonzero = 0;
    int64_t created = 0;
    uint64_t updates = 0;  // SparseTable::version_sum()
    int64_t pending = 0;   // SparseTable::pending_keys()
    int64_t evicted = 0;   // SparseTable::rows_evicted()
  };
  // One SparseRows of a push, decoded into aligned arrays and checked
  // (SparseTable::CheckPush, bucket ownership) for Apply.
  struct DecodedRows {
    SparseTable* table = nullptr;
    std::vector<uint64_t> keys;
    std::vector<float> grads;
    std::vector<uint32_t> counts;  // occurrences per key; empty: one each
  };

  // The model's tables for shard `index`, each with the rows `restored`
  // holds of it (nullptr: none). InvalidArgument for an optimizer that does
  // not train sparse tables; FailedPrecondition for restored rows that do
  // not fit the config. `counters` must outlive the object.
  static absl::StatusOr<std::unique_ptr<SparseTables>> Create(
      const Config& config, int index, const ModelSpec& spec,
      const Checkpoint* restored, Counters* counters);
  SparseTables(const SparseTables&) = delete;
  SparseTables& operator=(const SparseTables&) = delete;

  // Constants only.
  size_t size() const { return tables_.size(); }
  bool empty() const { return tables_.empty(); }

  // The hash buckets this shard holds (Shard::AssignBuckets), one flag per
  // bucket: InvalidArgument for a bucket beyond model.sparse_buckets.
  // Constants only; SetBuckets takes the result.
  absl::StatusOr<std::vector<char>> BucketFlags(
      const std::vector<uint32_t>& buckets) const;
  // Once the placement names buckets, a key of a bucket it gives another ps
  // is answered FAILED_PRECONDITION kBucketMovedMessage (common/sparse_keys.h:
  // the sender re-splits by the current placement), not INVALID_ARGUMENT.
  void SetBuckets(std::vector<char> own) { own_buckets_ = std::move(own); }
  // model.sparse_buckets. Constants only.
  uint32_t buckets() const { return specs_[0].buckets; }
  // Buckets whose keys this shard answers: held now (empty: b % shards).
  const std::vector<char>& own_buckets() const { return own_buckets_; }

  // The sparse rows of `request` decoded and checked for this shard into
  // *rows (InvalidArgument naming what is wrong, the table's max_rows'
  // error, each with "(worker N)"); *rows is cleared on error.
  absl::Status DecodePush(const wire::PushView& request,
                          std::vector<DecodedRows>* rows) const;
  // Room in the memory budget (server/memory_budget.h) for the rows a push
  // may create: when the tables with them would pass the budget's
  // table_bytes(), rows not in the push are evicted first
  // (SparseTable::EvictForRoom; counted "sparse_evicted_rows" and
  // "sparse_budget_evicted_rows"), their keys appended to (*evicted)[t].
  // ResourceExhausted naming the budget, the first new key and the fix when
  // even evicting every other row leaves no room; nothing is evicted then
  // and the new keys are counted ("sparse_refused_keys").
  absl::Status MakeRoom(const std::vector<DecodedRows>& rows, int32_t worker,
                        std::vector<std::vector<uint64_t>>* evicted);
  const MemoryBudget& budget() const { return budget_; }

  // Applies the decoded rows of a push; returns the keys applied.
  int64_t Apply(const std::vector<DecodedRows>& rows);
  // A bsp round's rows of table `table` (mean gradients, summed counts):
  // false, logged, when together they would pass the table's max_rows.
  bool ApplyRound(uint32_t table, const std::vector<uint64_t>& keys,
                  const std::vector<float>& mean,
                  const std::vector<uint32_t>& counts);
  // The width of table `table`'s rows (0 for an unknown table). Constants
  // only.
  int dim(uint32_t table) const;

  // The largest reply of a sparse pull or Lookup: gRPC's message limit
  // (rpc/server_util.h kMaxMessageBytes).
  static constexpr int64_t kMaxReplyBytes = int64_t{64} << 20;
  // The bytes a pull or a lookup of `request` holds while it is answered
  // (the keys copied, the values read, the reply and its serialized copy),
  // from the request's sizes alone, before anything is allocated: for
  // ReplyBytes::Take. InvalidArgument for an unknown table or a key count
  // beyond kMaxKeysPerRequest; ResourceExhausted when the reply would pass
  // kMaxReplyBytes (ask for fewer keys). Constants only.
  absl::StatusOr<int64_t> PullBytes(const proto::PullRequest& request) const;
  absl::StatusOr<int64_t> LookupBytes(
      const proto::LookupRequest& request) const;

  // A pull's keys per SparseRows, decoded and checked as Shard::PullSparse
  // says (not the buckets); *total: how many. Constants only.
  absl::StatusOr<std::vector<std::vector<uint64_t>>> DecodePull(
      const proto::PullRequest& request, int64_t* total) const;
  // The rows of `keys` (from DecodePull) into *response; InvalidArgument for
  // a key of a bucket another ps serves.
  absl::Status ReadPull(const proto::PullRequest& request,
                        const std::vector<std::vector<uint64_t>>& keys,
                        proto::PullResponse* response) const;
  // A lookup's keys decoded and checked as Shard::Lookup says (not the
  // buckets: InvalidArgument for a key asked twice, found before the reply
  // is allocated), and response's values and missing sized. Constants only.
  absl::StatusOr<std::vector<uint64_t>> DecodeLookup(
      const proto::LookupRequest& request,
      proto::LookupResponse* response) const;
  // The rows of `keys` (from DecodeLookup) into *response; InvalidArgument
  // for a key of a bucket another ps serves.
  absl::Status ReadLookup(const proto::LookupRequest& request,
                          const std::vector<uint64_t>& keys,
                          proto::LookupResponse* response) const;

  std::vector<Stats> stats() const;
  // The figures of `tables` summed (id 0), for reports over all tables.
  static Stats SumOf(const std::vector<Stats>& tables);
  // Row updates held, summed over the tables.
  uint64_t version_sum() const;

  // Eviction (config eviction.*) of every table, logged and counted
  // ("sparse_evicted_rows"); returns the keys evicted, by table.
  std::vector<std::vector<uint64_t>> Evict();
  // Every table's rows for a replica cut: all of them (`full`), or those
  // changed since the last cut; a table with nothing to send is left out.
  std::vector<std::pair<uint32_t, SparseTable::Rows>> CutForReplica(bool full);
  // Forgets the changes and tombstones recorded for the next replica cut
  // (SparseTable::ClearChanges): for a shard without a backup, whose next
  // backup starts from a full cut.
  void ClearChanges();
  const SparseTable& table(size_t t) const { return *tables_[t]; }
  // For bucket moves (server/bucket_transfer.h): rows imported into table
  // `t` (SparseTable::Import).
  absl::Status Import(uint32_t t, const SparseTable::Rows& rows);
  // The keys of buckets neither held nor flagged in `keep`, by table: rows
  // moved away, or imported by a move that rolled back. A table with such
  // rows keeps its row keys from now on (SparseTable::KeepRowKeys) until
  // ForgetRowKeys, for DropMovedKeys, which drops `n` of table `t`'s keys
  // (SparseTable::DropMovedKeys).
  std::vector<std::vector<uint64_t>> UnheldKeys(const std::vector<char>& keep);
  std::vector<uint64_t> DropMovedKeys(uint32_t t, const uint64_t* keys,
                                      int64_t n);
  void ForgetRowKeys();

 private:
  SparseTables(const Config& config, int index, const ModelSpec& spec,
               std::vector<std::unique_ptr<SparseTable>> tables,
               Counters* counters);

  // Whether the tables stay within the budget even if every key of `rows`
  // were new (the most a push can create): MakeRoom then looks up no key,
  // Apply alone does.
  bool FitsAllNew(const std::vector<DecodedRows>& rows) const;
  // MakeRoom's eviction by `plan`; the keys of `rows` kept.
  void EvictForRoom(const std::vector<DecodedRows>& rows,
                    const MemoryBudget::Plan& plan,
                    std::vector<std::vector<uint64_t>>* evicted);
  // MakeRoom's refusal: `why` with the first new key, the worker and the fix.
  absl::Status RefuseForBudget(const std::vector<DecodedRows>& rows,
                               int32_t worker, const absl::Status& why) const;
  // The id of `table`, one of tables_.
  size_t IdOf(const SparseTable* table) const;

  // The table `rows` names and its keys decoded and checked for this shard.
  absl::Status Decode(const wire::SparseRef& rows, DecodedRows* out) const;
  // For the first of `keys` whose bucket another ps serves: InvalidArgument
  // naming it while the placement names no buckets (bucket % shards), else
  // FailedPrecondition kBucketMovedMessage.
  absl::Status CheckOwnKeys(const char* op, const uint64_t* keys, int64_t n,
                            uint32_t buckets) const;
  // SparseTable::Apply, counting the rows it created and the updates its
  // admission dropped ("sparse_rows_created", "sparse_filtered_updates").
  void ApplyToTable(SparseTable* table, const uint64_t* keys, int64_t n,
                    const float* grads, const uint32_t* counts);

  // Constant after construction.
  const int index_;
  const int num_shards_;             // config.cluster.ps
  const double max_gradient_value_;  // optimizer.max_gradient_value
  const std::vector<SparseTableSpec> specs_;
  const std::vector<std::unique_ptr<SparseTable>> tables_;  // by id
  Counters* const counters_;
  const MemoryBudget budget_;  // eviction.memory_budget_mb

  // By bucket: 1 where this shard holds the bucket's keys (SetBuckets).
  std::vector<char> own_buckets_;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_SPARSE_TABLES_H_
