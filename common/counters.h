// A daemon's metrics, exported through its Status service and /metrics: the
// declared counters and gauges (common/metrics.h) on a prometheus::Registry,
// rates, latency histograms and the staleness histogram.
//
//   Counters counters;
//   counters.stats().pulls.Increment();            // monotonic: has a rate
//   counters.stats().blocks.Set(12);               // gauge: no rate
//   counters.RecordLatency("called:ParameterServer/Pull", 0.0021);
//   Counters::RateSnapshot r = counters.Rates();   // r.per_second["pulls"]
//   std::vector<LatencySummary> l = counters.Latencies();  // p50, p99, ...
//   counters.RecordStaleness(3);                   // one applied block update
//   StalenessSummary s = counters.Staleness().Summary();  // p50, p99, max
#ifndef DOWNPOUR_COMMON_COUNTERS_H_
#define DOWNPOUR_COMMON_COUNTERS_H_

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/metrics.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"

namespace downpour {

// The upper bounds (seconds) of the since-start latency buckets Counters
// keeps per kind of call, for a Prometheus histogram: 100 us to 10 s; a last
// bucket holds the calls above 10 s.
inline constexpr std::array<double, 16> kLatencyBucketBounds = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
    0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};

// Latency of one kind of call over the recent window (see Counters::Latencies).
struct LatencySummary {
  std::string name;
  uint64_t count = 0;        // calls in the window
  uint64_t total_count = 0;  // calls since start
  double mean_s = 0;
  double p50_s = 0;
  double p90_s = 0;
  double p99_s = 0;
  double max_s = 0;
  // Since start: calls per kLatencyBucketBounds bucket (at most that bound,
  // above the one before), then those above the last; their summed seconds.
  std::vector<uint64_t> buckets;
  double total_s = 0;
};

// Log-bucketed histogram of durations: buckets grow by 2^(1/4) from 1 us, so a
// quantile is off by at most ~19% (it is interpolated inside its bucket and
// never reported above the largest value seen). Not thread-safe; its
// LatencyStat locks.
class LatencyHistogram {
 public:
  static constexpr int kBuckets = 100;  // the last one also takes >= ~33 s

  void Record(double seconds);
  void Merge(const LatencyHistogram& other);
  void Clear() { *this = LatencyHistogram(); }

  uint64_t count() const { return count_; }
  double sum() const { return sum_; }
  double max() const { return max_; }
  // The q-quantile (q in [0, 1]) in seconds; 0 when empty.
  double Quantile(double q) const;

  // Lower bound of bucket i in seconds.
  static double BucketLowerBound(int i);

 private:
  static int BucketOf(double seconds);

  std::array<uint64_t, kBuckets> buckets_{};
  uint64_t count_ = 0;
  double sum_ = 0;
  double max_ = 0;
};

// Staleness quantiles, mean and exact maximum (see StalenessHistogram).
struct StalenessSummary {
  uint64_t count = 0;  // block updates recorded
  double mean = 0;
  uint64_t p50 = 0;
  uint64_t p99 = 0;
  uint64_t max = 0;  // exact
};

// Histogram of staleness: for one applied block update, the number of updates
// the block received between the pull the gradient was computed on and the
// push that applied it. The ps records each block it applies (server/shard.cc),
// the worker each block its pushes' acks report (worker/downpour.cc).
//
// Buckets: bucket i < kExactBuckets (256) counts staleness exactly i; above
// that, buckets grow by 2^(1/8) (kBucketsPerDoubling) and the last one also
// takes everything >= ~2^32. Why: staleness is a small integer in the cases
// that matter (0..~8 per worker in flight, so up to a few hundred with tens of
// workers and n_push 1), and there quantiles must be exact so tests and users
// can check them by hand; past 255 something is badly wrong and 9% is plenty.
// Below 256 the raw buckets keep the meaning Status.staleness_histogram always
// had ("bucket i counts staleness i"). 448 buckets, 3.5 KB.
//
// Quantiles use the nearest rank: Quantile(q) is the smallest recorded value v
// with at least ceil(q * count) values <= v, exact below 256; above, the top
// of v's bucket (never below v, at most ~9% above, never above max()).
// Not thread-safe; Counters locks.
class StalenessHistogram {
 public:
  static constexpr int kExactBuckets = 256;
  static constexpr int kBucketsPerDoubling = 8;
  static constexpr int kBuckets = kExactBuckets + 24 * kBucketsPerDoubling;

  void Record(uint64_t staleness);
  void Merge(const StalenessHistogram& other);

  uint64_t count() const { return count_; }
  double mean() const { return count_ > 0 ? sum_ / count_ : 0; }
  uint64_t max() const { return max_; }
  // The q-quantile (q in [0, 1]) as above; 0 when empty.
  uint64_t Quantile(double q) const;
  StalenessSummary Summary() const;

  // Counts per bucket, trailing empty buckets left out (bucket i covers
  // [BucketLowerBound(i), BucketLowerBound(i + 1))).
  std::vector<uint64_t> Buckets() const;
  // The smallest staleness bucket i counts: i for i < kExactBuckets.
  static uint64_t BucketLowerBound(int i);

 private:
  static int BucketOf(uint64_t staleness);

  std::array<uint64_t, kBuckets> buckets_{};
  uint64_t count_ = 0;
  double sum_ = 0;
  uint64_t max_ = 0;
};

// One kind of call (a Counters::Latency handle): a Prometheus histogram
// since start (downpour_rpc_duration_seconds{call}, kLatencyBucketBounds),
// its count (downpour_rpc_calls_total{call}), and log-bucketed quantiles over
// the recent window for Status. Thread-safe: one lock per kind of call.
class LatencyStat {
 public:
  LatencyStat(std::string name, prometheus::Histogram& histogram,
              prometheus::Counter& calls, absl::Duration window,
              std::function<absl::Time()> clock);
  LatencyStat(const LatencyStat&) = delete;
  LatencyStat& operator=(const LatencyStat&) = delete;

  // Records one call that took `seconds`.
  void Record(double seconds) ABSL_LOCKS_EXCLUDED(mu_);
  // The window's quantiles and the since-start buckets.
  LatencySummary Summary() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Rotate(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const std::string name_;
  prometheus::Histogram& histogram_;
  prometheus::Counter& calls_;
  const absl::Duration window_;
  const std::function<absl::Time()> clock_;

  // State below is protected by mu_. Two windows: quantiles read both, so a
  // fresh window never reports from a handful of calls.
  mutable absl::Mutex mu_;
  mutable LatencyHistogram current_ ABSL_GUARDED_BY(mu_);
  mutable LatencyHistogram previous_ ABSL_GUARDED_BY(mu_);
  mutable absl::Time current_start_ ABSL_GUARDED_BY(mu_);
  uint64_t total_ ABSL_GUARDED_BY(mu_) = 0;
};

// A daemon's metrics: the declared Stats (common/metrics.h) on its own
// prometheus::Registry, the staleness histogram, latencies per kind of call,
// and rates sampled from the counters. Thread-safe. Call sites count through
// stats() handles; no metric is named at a call site.
class Counters {
 public:
  struct Options {
    // Rates and latency quantiles cover about this much recent time.
    absl::Duration window = absl::Seconds(10);
    // Source of time; tests advance a fake one instead of sleeping.
    std::function<absl::Time()> clock = [] { return absl::Now(); };
  };

  // Figures per second of every exported counter.
  struct RateSnapshot {
    // Seconds the rates are measured over: about Options::window once the
    // counters are that old and asked for often enough (each Rates() call
    // takes a sample), else the time since the oldest sample kept.
    double window_seconds = 0;
    std::map<std::string, double> per_second;
  };

  Counters() : Counters(Options()) {}
  explicit Counters(Options options);

  Counters(const Counters&) = delete;
  Counters& operator=(const Counters&) = delete;

  // The declared handles: stats().pulls.Increment().
  Stats& stats() { return stats_; }
  const Stats& stats() const { return stats_; }

  // The value of a counter or gauge by its Status name ("pulls",
  // "suspect_pushes_worker_2"), as Status shows it; 0 when not exported.
  // For readers (tests, tools); counting goes through stats().
  double Get(const std::string& name) const;

  // Counts one applied block update with this staleness.
  void RecordStaleness(uint64_t staleness) ABSL_LOCKS_EXCLUDED(staleness_mu_);
  // The handle of one kind of call `name` ("served:Status/GetStatus"),
  // created on first use; it lives as long as this object.
  LatencyStat& Latency(const std::string& name)
      ABSL_LOCKS_EXCLUDED(latency_mu_);
  // Records one call of kind `name` that took `seconds`: Latency(name).Record.
  void RecordLatency(const std::string& name, double seconds);

  // Every exported counter and gauge by Status name.
  std::map<std::string, double> Snapshot() const;
  // Every staleness recorded since start.
  StalenessHistogram Staleness() const ABSL_LOCKS_EXCLUDED(staleness_mu_);

  // Rates over the recent window. Takes a sample of the counters (at most ten
  // per window are kept), so it is logically const but not free.
  RateSnapshot Rates() const ABSL_LOCKS_EXCLUDED(samples_mu_);

  // Latency per kind of call over the last one to two windows, sorted by name.
  std::vector<LatencySummary> Latencies() const
      ABSL_LOCKS_EXCLUDED(latency_mu_);

  // The registry's families for a scrape: every exported metric (counters
  // and gauges not touched yet are left out).
  std::vector<prometheus::MetricFamily> Collect() const;

 private:
  struct Sample {
    absl::Time time;
    std::map<std::string, double> values;  // monotonic counters only
  };

  // Constant after construction.
  const Options options_;
  const std::unique_ptr<prometheus::Registry> registry_;
  Stats stats_;
  prometheus::Family<prometheus::Histogram>& latency_family_;
  prometheus::Family<prometheus::Counter>& calls_family_;

  // Each lock below guards one part; none is taken while another is held.
  mutable absl::Mutex staleness_mu_;
  StalenessHistogram staleness_ ABSL_GUARDED_BY(staleness_mu_);
  mutable absl::Mutex latency_mu_;
  std::map<std::string, std::unique_ptr<LatencyStat>> latencies_
      ABSL_GUARDED_BY(latency_mu_);
  mutable absl::Mutex samples_mu_;
  mutable std::deque<Sample> samples_ ABSL_GUARDED_BY(samples_mu_);
};

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_COUNTERS_H_
