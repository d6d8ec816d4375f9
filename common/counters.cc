// Counters: the declared stats on a registry, with a lock per part (the
// staleness histogram, each kind of call, the rate samples) and none on the
// counting path of a declared counter or gauge.
#include "common/counters.h"

#include <algorithm>
#include <cmath>

namespace downpour {
namespace {

constexpr double kFirstBound = 1e-6;       // seconds
constexpr double kBucketsPerDoubling = 4;  // growth 2^(1/4) per bucket
constexpr int kMaxSamplesPerWindow = 10;

}  // namespace

double LatencyHistogram::BucketLowerBound(int i) {
  return i <= 0 ? 0 : kFirstBound * std::exp2((i - 1) / kBucketsPerDoubling);
}

int LatencyHistogram::BucketOf(double seconds) {
  if (!(seconds >= kFirstBound)) return 0;  // also NaN
  const int i =
      1 + static_cast<int>(std::floor(std::log2(seconds / kFirstBound) *
                                      kBucketsPerDoubling));
  return std::min(i, kBuckets - 1);
}

void LatencyHistogram::Record(double seconds) {
  if (!(seconds >= 0)) seconds = 0;
  ++buckets_[BucketOf(seconds)];
  ++count_;
  sum_ += seconds;
  max_ = std::max(max_, seconds);
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  for (int i = 0; i < kBuckets; ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  sum_ += other.sum_;
  max_ = std::max(max_, other.max_);
}

double LatencyHistogram::Quantile(double q) const {
  if (count_ == 0) return 0;
  const double rank = std::clamp(q, 0.0, 1.0) * count_;
  uint64_t below = 0;
  for (int i = 0; i < kBuckets; ++i) {
    if (buckets_[i] == 0) continue;
    if (below + buckets_[i] >= rank) {
      const double lo = BucketLowerBound(i);
      const double hi = i + 1 < kBuckets ? BucketLowerBound(i + 1) : max_;
      const double fraction = (rank - below) / buckets_[i];
      return std::min(lo + fraction * (hi - lo), max_);
    }
    below += buckets_[i];
  }
  return max_;
}

uint64_t StalenessHistogram::BucketLowerBound(int i) {
  if (i < kExactBuckets) return static_cast<uint64_t>(std::max(i, 0));
  return static_cast<uint64_t>(std::ceil(
      kExactBuckets *
      std::exp2(static_cast<double>(i - kExactBuckets) / kBucketsPerDoubling)));
}

int StalenessHistogram::BucketOf(uint64_t staleness) {
  if (staleness < kExactBuckets) return static_cast<int>(staleness);
  int i = kExactBuckets +
          static_cast<int>(std::floor(
              std::log2(static_cast<double>(staleness) / kExactBuckets) *
              kBucketsPerDoubling));
  i = std::min(i, kBuckets - 1);
  // Settle rounding in log2 against the bounds themselves.
  while (i > kExactBuckets && staleness < BucketLowerBound(i)) --i;
  while (i + 1 < kBuckets && staleness >= BucketLowerBound(i + 1)) ++i;
  return i;
}

void StalenessHistogram::Record(uint64_t staleness) {
  ++buckets_[BucketOf(staleness)];
  ++count_;
  sum_ += static_cast<double>(staleness);
  max_ = std::max(max_, staleness);
}

void StalenessHistogram::Merge(const StalenessHistogram& other) {
  for (int i = 0; i < kBuckets; ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  sum_ += other.sum_;
  max_ = std::max(max_, other.max_);
}

uint64_t StalenessHistogram::Quantile(double q) const {
  if (count_ == 0) return 0;
  // Nearest rank; the epsilon keeps 0.99 * 100 from rounding up to rank 100.
  const double wanted =
      std::ceil(std::clamp(q, 0.0, 1.0) * static_cast<double>(count_) - 1e-9);
  const uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(wanted));
  uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += buckets_[i];
    if (seen < rank) continue;
    if (i < kExactBuckets) return static_cast<uint64_t>(i);
    const uint64_t top = i + 1 < kBuckets ? BucketLowerBound(i + 1) - 1 : max_;
    return std::min(top, max_);
  }
  return max_;
}

StalenessSummary StalenessHistogram::Summary() const {
  StalenessSummary s;
  s.count = count_;
  s.mean = mean();
  s.p50 = Quantile(0.5);
  s.p99 = Quantile(0.99);
  s.max = max_;
  return s;
}

std::vector<uint64_t> StalenessHistogram::Buckets() const {
  int n = kBuckets;
  while (n > 0 && buckets_[n - 1] == 0) --n;
  return std::vector<uint64_t>(buckets_.begin(), buckets_.begin() + n);
}

LatencyStat::LatencyStat(std::string name, prometheus::Histogram& histogram,
                         prometheus::Counter& calls, absl::Duration window,
                         std::function<absl::Time()> clock)
    : name_(std::move(name)),
      histogram_(histogram),
      calls_(calls),
      window_(window),
      clock_(std::move(clock)) {}

void LatencyStat::Record(double seconds) {
  histogram_.Observe(seconds);
  calls_.Increment();
  const absl::Time now = clock_();
  absl::MutexLock lock(&mu_);
  if (total_ == 0) current_start_ = now;
  Rotate(now);
  current_.Record(seconds);
  ++total_;
}

void LatencyStat::Rotate(absl::Time now) const {
  const absl::Duration age = now - current_start_;
  if (age < window_) return;
  if (age < 2 * window_) {
    previous_ = current_;
  } else {
    previous_.Clear();  // nothing happened for a whole window
  }
  current_.Clear();
  current_start_ = now;
}

LatencySummary LatencyStat::Summary() const {
  // The since-start buckets, per bucket rather than cumulative.
  const prometheus::ClientMetric metric = histogram_.Collect();
  LatencySummary summary;
  summary.name = name_;
  uint64_t below = 0;
  for (const prometheus::ClientMetric::Bucket& b : metric.histogram.bucket) {
    summary.buckets.push_back(b.cumulative_count - below);
    below = b.cumulative_count;
  }
  summary.total_s = metric.histogram.sample_sum;
  const absl::Time now = clock_();
  absl::MutexLock lock(&mu_);
  Rotate(now);
  LatencyHistogram both = previous_;
  both.Merge(current_);
  summary.count = both.count();
  summary.total_count = total_;
  if (both.count() > 0) {
    summary.mean_s = both.sum() / both.count();
    summary.p50_s = both.Quantile(0.5);
    summary.p90_s = both.Quantile(0.9);
    summary.p99_s = both.Quantile(0.99);
    summary.max_s = both.max();
  }
  return summary;
}

Counters::Counters(Options options)
    : options_(std::move(options)),
      registry_(std::make_unique<prometheus::Registry>()),
      stats_(*registry_),
      latency_family_(prometheus::BuildHistogram()
                          .Name("downpour_rpc_duration_seconds")
                          .Help("RPC latency since start (served:... and "
                                "called:...).")
                          .Register(*registry_)),
      calls_family_(prometheus::BuildCounter()
                        .Name("downpour_rpc_calls_total")
                        .Help("RPCs of each kind since start (served:... and "
                              "called:...).")
                        .Register(*registry_)) {
  samples_.push_back({options_.clock(), {}});
}

double Counters::Get(const std::string& name) const {
  if (const CounterStat* c = stats_.FindCounter(name)) return c->Value();
  if (const GaugeStat* g = stats_.FindGauge(name)) return g->Value();
  const std::map<std::string, double> all = Snapshot();  // per-worker ones
  auto it = all.find(name);
  return it == all.end() ? 0.0 : it->second;
}

void Counters::RecordStaleness(uint64_t staleness) {
  absl::MutexLock lock(&staleness_mu_);
  staleness_.Record(staleness);
}

LatencyStat& Counters::Latency(const std::string& name) {
  {
    absl::ReaderMutexLock lock(&latency_mu_);
    auto it = latencies_.find(name);
    if (it != latencies_.end()) return *it->second;
  }
  absl::MutexLock lock(&latency_mu_);
  std::unique_ptr<LatencyStat>& stat = latencies_[name];
  if (stat == nullptr) {
    const std::vector<double> bounds(kLatencyBucketBounds.begin(),
                                     kLatencyBucketBounds.end());
    stat = std::make_unique<LatencyStat>(
        name, latency_family_.Add({{"call", name}}, bounds),
        calls_family_.Add({{"call", name}}), options_.window, options_.clock);
  }
  return *stat;
}

void Counters::RecordLatency(const std::string& name, double seconds) {
  Latency(name).Record(seconds);
}

std::map<std::string, double> Counters::Snapshot() const {
  std::map<std::string, double> values;
  stats_.ForEach([&](const std::string& name, double value, bool) {
    values[name] = value;
  });
  return values;
}

StalenessHistogram Counters::Staleness() const {
  absl::MutexLock lock(&staleness_mu_);
  return staleness_;
}

Counters::RateSnapshot Counters::Rates() const {
  const absl::Time now = options_.clock();
  Sample current{now, {}};
  stats_.ForEach([&](const std::string& name, double value, bool monotonic) {
    if (monotonic) current.values[name] = value;
  });
  absl::MutexLock lock(&samples_mu_);
  // Keep at most ~10 samples per window, and the newest one at least a window
  // old as the base, so the rate covers about one window.
  if (now - samples_.back().time >= options_.window / kMaxSamplesPerWindow) {
    samples_.push_back(current);
  }
  while (samples_.size() > 2 && samples_[1].time <= now - options_.window) {
    samples_.pop_front();
  }
  const Sample& base = samples_.front();
  RateSnapshot rates;
  rates.window_seconds = absl::ToDoubleSeconds(now - base.time);
  for (const auto& [name, value] : current.values) {
    auto it = base.values.find(name);
    const double delta = value - (it == base.values.end() ? 0.0 : it->second);
    rates.per_second[name] =
        rates.window_seconds > 0 ? delta / rates.window_seconds : 0.0;
  }
  return rates;
}

std::vector<LatencySummary> Counters::Latencies() const {
  std::vector<const LatencyStat*> stats;
  {
    absl::ReaderMutexLock lock(&latency_mu_);
    for (const auto& [name, stat] : latencies_) stats.push_back(stat.get());
  }
  std::vector<LatencySummary> out;
  for (const LatencyStat* stat : stats) out.push_back(stat->Summary());
  return out;
}

std::vector<prometheus::MetricFamily> Counters::Collect() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  families.erase(std::remove_if(families.begin(), families.end(),
                                [&](const prometheus::MetricFamily& f) {
                                  return f.metric.empty() ||
                                         stats_.Hidden(f.name);
                                }),
                 families.end());
  return families;
}

}  // namespace downpour
