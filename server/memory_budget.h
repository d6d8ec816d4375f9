// The ps's memory budget (config eviction.memory_budget_mb): how many bytes
// it has, where the default comes from, and what a push's new rows need of
// it: nothing, an eviction down to a low watermark, or a refusal.
//
//   MemoryBudget budget = MemoryBudget::ForPs(config, index);
//   ASSIGN_OR_RETURN(MemoryBudget::Plan plan, budget.PlanFor(needs));
//   for each table t with plan.evict: table->EvictForRoom(plan.keep_rows[t]..)
//
// Split of the budget: half for the sparse tables' rows (table_bytes(),
// SparseTable::bytes()), a quarter for the Lookup and pull replies in
// flight (reply_bytes(), server/reply_bytes.h), the rest for the process
// itself and the copies a checkpoint or a replica cut makes of the rows.
//
// Immutable after construction: thread-safe.
#ifndef DOWNPOUR_SERVER_MEMORY_BUDGET_H_
#define DOWNPOUR_SERVER_MEMORY_BUDGET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config.h"
#include "server/sparse_table.h"

namespace downpour::server {

class MemoryBudget {
 public:
  // The host's memory as a ps may use it: the smaller of /proc/meminfo's
  // MemTotal and the cgroup's limit (v2 memory.max, v1
  // memory.limit_in_bytes) when one is set.
  struct HostMemory {
    int64_t bytes = 0;
    std::string source;  // "MemTotal" or "cgroup memory.max" ...
  };
  // Reads them under `root` ("" = "/": tests pass a folder of fakes).
  // Without a readable MemTotal: 4 GiB, source says so.
  static HostMemory ReadHostMemory(const std::string& root = "");

  // eviction.memory_budget_mb, or with 0 half of `host` shared equally by
  // the cluster.ps and cluster.standby_ps entries on the host of
  // cluster.ps[index] (as written in the config), at least
  // kMinMemoryBudgetMb.
  static MemoryBudget ForPs(const Config& config, int index,
                            const HostMemory& host);
  static MemoryBudget ForPs(const Config& config, int index) {
    return ForPs(config, index, ReadHostMemory());
  }

  // `origin` says where the figure came from, for the log and errors.
  MemoryBudget(int64_t budget_bytes, std::string origin);

  int64_t budget_bytes() const { return budget_bytes_; }
  // What the sparse tables may hold: half of the budget.
  int64_t table_bytes() const { return budget_bytes_ / 2; }
  // Replies (Lookup, sparse pulls) in flight at once: a quarter.
  int64_t reply_bytes() const { return budget_bytes_ / 4; }
  const std::string& origin() const { return origin_; }

  // One table's part in a push: the table and how many of the push's keys
  // it holds already (kept: never evicted for this push) and lacks (the
  // rows the push may create).
  struct Need {
    const SparseTable* table = nullptr;
    int64_t held_keys = 0;
    int64_t fresh_keys = 0;
  };
  // What a push needs done first. With evict, each table keeps
  // keep_rows[t] rows (SparseTable::EvictForRoom): 90 % of the rows (beyond
  // the push's own) that would fit table_bytes() with the push's new rows,
  // so that the next pushes find room without evicting again (a low
  // watermark in rows: bytes jump where the index doubles).
  struct Plan {
    bool evict = false;
    std::vector<int64_t> keep_rows;  // by need
    int64_t bytes_after = 0;         // projected, SparseTable::BytesAt
  };
  // The plan for `needs`: no eviction while the tables with the push's new
  // rows stay within table_bytes(); else an eviction; ResourceExhausted
  // (the figures, no key: the caller adds it) when even with every row but
  // the push's own evicted they would not fit.
  absl::StatusOr<Plan> PlanFor(const std::vector<Need>& needs) const;

 private:
  // The tables' bytes with keep[t] rows held plus the push's new rows.
  static int64_t BytesWith(const std::vector<Need>& needs,
                           const std::vector<int64_t>& keep);

  const int64_t budget_bytes_;
  const std::string origin_;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_MEMORY_BUDGET_H_
