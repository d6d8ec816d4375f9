// Every counter and gauge a daemon exports, declared once with its help text
// (like Envoy's ALL_*_STATS macros), registered on a prometheus::Registry and
// used through handles: no metric name is typed at a call site, and counting
// takes no lock and does no lookup.
//
//   prometheus::Registry registry;
//   Stats stats(registry);                 // common/counters.h owns one
//   stats.pulls.Increment();               // Status "pulls",
//   downpour_pulls_total stats.ssp_max_lead.Set(3);             // Status
//   "ssp_max_lead", downpour_ssp_max_lead stats.suspect_pushes.Increment(2); //
//   worker 2: Status "suspect_pushes_worker_2"
//
// A metric is exported (in Status and on /metrics) once it has been touched:
// incremented (by 0 too, which exports it from the start) or set.
#ifndef DOWNPOUR_COMMON_METRICS_H_
#define DOWNPOUR_COMMON_METRICS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace downpour {

// X(name, help) per monotonic counter: Status counter `name` with a rate,
// Prometheus counter downpour_<name>_total. Grouped by who counts.
#define DOWNPOUR_COUNTERS(X)                                                  \
  /* ps and worker traffic (server/shard.cc, worker/grpc_ps_client.cc) */     \
  X(pulls, "Pull requests answered (ps) or made (worker).")                   \
  X(pushes, "Push requests applied (ps) or sent (worker).")                   \
  X(bytes_in, "Payload bytes received in pushes (ps) or pulls (worker).")     \
  X(bytes_out, "Payload bytes sent in pulls (ps) or pushes (worker).")        \
  X(applied_updates, "Block updates applied (ps).")                           \
  X(rejected_pushes, "Pushes refused: unknown block, wrong size, NaN/Inf.")   \
  X(duplicate_pushes, "Retried pushes acknowledged without applying again.")  \
  X(bsp_rounds, "BSP rounds completed (ps).")                                 \
  X(bsp_waits, "Pushes that waited at the BSP barrier (ps).")                 \
  X(ssp_waits, "Pushes that waited for the SSP bound (ps).")                  \
  X(sparse_rows_created, "Sparse rows created (ps).")                         \
  X(sparse_push_keys, "Sparse keys applied (ps).")                            \
  X(sparse_pull_keys, "Sparse keys read (ps).")                               \
  X(sparse_filtered_updates,                                                  \
    "Sparse key updates dropped because the key was not admitted (ps).")      \
  X(sparse_evicted_rows,                                                      \
    "Sparse rows evicted, at checkpoints and for the memory budget (ps).")    \
  X(sparse_budget_evicted_rows,                                               \
    "Sparse rows evicted to keep the tables within the memory budget (ps).")  \
  X(sparse_refused_keys,                                                      \
    "New sparse keys refused: no room left in the memory budget (ps).")       \
  X(sequence_window_skips,                                                    \
    "Push sequences skipped past the exactly-once window (ps).")              \
  /* ps: optimizer and push guard (server/block_store.cc, push_guard.cc) */   \
  X(clipped_gradients, "Block gradients scaled down to the norm bound (ps).") \
  X(refused_overflows,                                                        \
    "Block updates refused because they would overflow to Inf/NaN (ps).")     \
  X(dc_misses, "DC-ASGD updates without the served values (ps).")             \
  X(guard_refused_norm, "Pushes the push guard refused for their norm (ps).") \
  X(guard_refused_rate, "Pushes the push guard refused for their rate (ps).") \
  X(guard_clipped_blocks, "Block gradients the push guard clipped (ps).")     \
  /* ps: checkpoints, takeovers, replication (server/ps_node.cc, ...) */      \
  X(checkpoints_written, "Checkpoints written (ps).")                         \
  X(checkpoint_failures, "Checkpoint attempts that failed (ps).")             \
  X(checkpoints_skipped, "Checkpoints skipped: one still in progress (ps).")  \
  X(checkpoint_fallbacks,                                                     \
    "Checkpoint chains cut short at start: an older cut was loaded (ps).")    \
  X(takeovers, "Shards taken over from a checkpoint (ps).")                   \
  X(takeovers_from_replica, "Shards taken over from a replica (ps).")         \
  X(replicated_cuts, "Cuts sent to the backup (ps).")                         \
  X(replicated_bytes, "Bytes sent to the backup (ps).")                       \
  X(replicated_updates, "Updates sent to the backup (ps).")                   \
  X(replication_degraded, "Cuts not replicated while degraded (ps).")         \
  X(replication_mismatches, "Backup checks that found a mismatch (ps).")      \
  X(replication_failures, "Replication attempts that failed (ps).")           \
  /* worker (worker/grpc_ps_client.cc) */                                     \
  X(pushes_acked, "Push requests acknowledged (worker).")                     \
  X(pushes_refused, "Push requests a push guard refused (worker).")           \
  X(push_resends, "Push requests sent again after a failure (worker).")       \
  X(push_pins_abandoned, "Pinned pushes given up (worker).")                  \
  X(rpc_retries, "RPCs retried (worker).")                                    \
  X(outage_seconds, "Seconds spent waiting for an unreachable ps (worker).")  \
  /* coordinator (coordinator/coordinator_node.cc) */                         \
  X(isolations, "Members isolated after missed heartbeats (coordinator).")

// X(name, help) per gauge: Status counter `name` without a rate, Prometheus
// gauge downpour_<name>.
#define DOWNPOUR_GAUGES(X)                                                    \
  X(blocks, "Blocks this ps holds.")                                          \
  X(spare, "1 while this ps is a spare without a shard.")                     \
  X(member_incarnation, "This member's incarnation at the coordinator.")      \
  X(lr_scale, "The learning-rate scale last applied (ps).")                   \
  X(momentum_applied, "The momentum last applied (ps).")                      \
  X(ssp_max_lead, "Steps the fastest worker leads the slowest by (ps, SSP).") \
  X(checkpoint_deltas_restored,                                               \
    "Incremental checkpoint deltas applied over the full cut at start (ps).") \
  X(replication_lag_ms, "Milliseconds the backup lags behind (ps).")

// X(name, status_prefix, help) per counter with a worker label: Status
// counter "<status_prefix><worker>", Prometheus downpour_<name>_total{worker}.
#define DOWNPOUR_WORKER_COUNTERS(X)                       \
  X(suspect_pushes, "suspect_pushes_worker_",             \
    "Pushes of this worker the push guard refused (ps).") \
  X(clipped_blocks, "clipped_blocks_worker_",             \
    "Block gradients of this worker the push guard clipped (ps).")

// A monotonic counter. Thread-safe.
class CounterStat {
 public:
  CounterStat(prometheus::Registry& registry, const char* name,
              const char* help);
  CounterStat(const CounterStat&) = delete;
  CounterStat& operator=(const CounterStat&) = delete;

  // Adds `delta` (>= 0; a negative one is ignored, as counters never go
  // down) and exports the counter.
  void Increment(double delta = 1) {
    Touch();
    counter_.Increment(delta);
  }
  double Value() const { return counter_.Value(); }
  bool exported() const { return exported_.load(std::memory_order_relaxed); }

 private:
  void Touch() {
    if (!exported()) exported_.store(true, std::memory_order_relaxed);
  }

  prometheus::Counter& counter_;
  std::atomic<bool> exported_{false};
};

// A gauge. Thread-safe.
class GaugeStat {
 public:
  GaugeStat(prometheus::Registry& registry, const char* name, const char* help);
  GaugeStat(const GaugeStat&) = delete;
  GaugeStat& operator=(const GaugeStat&) = delete;

  void Set(double value) {
    if (!exported()) exported_.store(true, std::memory_order_relaxed);
    gauge_.Set(value);
  }
  double Value() const { return gauge_.Value(); }
  bool exported() const { return exported_.load(std::memory_order_relaxed); }

 private:
  prometheus::Gauge& gauge_;
  std::atomic<bool> exported_{false};
};

// A counter per worker (label worker="<id>"). Thread-safe; Increment looks
// the worker up under the family's lock, so it is for rare events (a push
// guard's refusal), not for every push.
class WorkerCounterStat {
 public:
  WorkerCounterStat(prometheus::Registry& registry, const char* name,
                    const char* status_prefix, const char* help);
  WorkerCounterStat(const WorkerCounterStat&) = delete;
  WorkerCounterStat& operator=(const WorkerCounterStat&) = delete;

  void Increment(int32_t worker) ABSL_LOCKS_EXCLUDED(mu_);
  // Calls fn("<status_prefix><worker>", value) per worker counted.
  void ForEach(const std::function<void(const std::string&, double)>& fn) const
      ABSL_LOCKS_EXCLUDED(mu_);
  const char* status_prefix() const { return status_prefix_; }

 private:
  // Constant after construction.
  prometheus::Family<prometheus::Counter>& family_;
  const char* const status_prefix_;

  // State below is protected by mu_.
  mutable absl::Mutex mu_;
  absl::flat_hash_map<int32_t, prometheus::Counter*> workers_
      ABSL_GUARDED_BY(mu_);
};

// The declared metrics of one daemon, registered on `registry` (which must
// outlive this object). Thread-safe.
class Stats {
 public:
  explicit Stats(prometheus::Registry& registry);
  Stats(const Stats&) = delete;
  Stats& operator=(const Stats&) = delete;

#define DOWNPOUR_STATS_COUNTER_FIELD(name, help) CounterStat name;
#define DOWNPOUR_STATS_GAUGE_FIELD(name, help) GaugeStat name;
#define DOWNPOUR_STATS_WORKER_FIELD(name, prefix, help) WorkerCounterStat name;
  DOWNPOUR_COUNTERS(DOWNPOUR_STATS_COUNTER_FIELD)
  DOWNPOUR_GAUGES(DOWNPOUR_STATS_GAUGE_FIELD)
  DOWNPOUR_WORKER_COUNTERS(DOWNPOUR_STATS_WORKER_FIELD)
#undef DOWNPOUR_STATS_COUNTER_FIELD
#undef DOWNPOUR_STATS_GAUGE_FIELD
#undef DOWNPOUR_STATS_WORKER_FIELD

  // The handle declared under a Status name; null when none is. For readers
  // by name (Counters::Get).
  CounterStat* FindCounter(absl::string_view name) const;
  GaugeStat* FindGauge(absl::string_view name) const;

  // Calls fn(status name, value, monotonic) per exported metric.
  void ForEach(
      const std::function<void(const std::string&, double, bool)>& fn) const;

  // Whether the Prometheus family `family` belongs to a metric not exported
  // yet (left out of the scrape).
  bool Hidden(const std::string& family) const;

 private:
  // Constant after construction: handles by Status name and by family name.
  absl::flat_hash_map<std::string, CounterStat*> counters_;
  absl::flat_hash_map<std::string, GaugeStat*> gauges_;
  absl::flat_hash_map<std::string, std::function<bool()>> exported_;
};

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_METRICS_H_
