// Counters under one mutex: a few updates per RPC, far below the RPC's own
// cost.
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

Counters::Counters(Options options) : options_(std::move(options)) {
  samples_.push_back({options_.clock(), {}});
}

void Counters::Add(const std::string& name, double delta) {
  absl::MutexLock lock(&mu_);
  values_[name] += delta;
  monotonic_.insert(name);
}

void Counters::Set(const std::string& name, double value) {
  absl::MutexLock lock(&mu_);
  values_[name] = value;
}

double Counters::Get(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = values_.find(name);
  return it == values_.end() ? 0.0 : it->second;
}

void Counters::RecordStaleness(uint64_t staleness) {
  absl::MutexLock lock(&mu_);
  staleness_.Record(staleness);
}

void Counters::RecordLatency(const std::string& name, double seconds) {
  const absl::Time now = options_.clock();
  absl::MutexLock lock(&mu_);
  Latency& latency = latencies_[name];
  if (latency.total == 0) latency.current_start = now;
  RotateLatency(latency, now);
  latency.current.Record(seconds);
  ++latency.total;
  latency.since_start[std::lower_bound(kLatencyBucketBounds.begin(),
                                       kLatencyBucketBounds.end(), seconds) -
                      kLatencyBucketBounds.begin()]++;
  latency.total_s += seconds;
}

std::map<std::string, double> Counters::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return values_;
}

StalenessHistogram Counters::Staleness() const {
  absl::MutexLock lock(&mu_);
  return staleness_;
}

Counters::RateSnapshot Counters::Rates() const {
  const absl::Time now = options_.clock();
  absl::MutexLock lock(&mu_);
  Sample current{now, {}};
  for (const std::string& name : monotonic_)
    current.values[name] = values_.at(name);
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

void Counters::RotateLatency(Latency& latency, absl::Time now) const {
  const absl::Duration age = now - latency.current_start;
  if (age < options_.window) return;
  if (age < 2 * options_.window) {
    latency.previous = latency.current;
  } else {
    latency.previous.Clear();  // nothing happened for a whole window
  }
  latency.current.Clear();
  latency.current_start = now;
}

std::vector<LatencySummary> Counters::Latencies() const {
  const absl::Time now = options_.clock();
  absl::MutexLock lock(&mu_);
  std::vector<LatencySummary> out;
  for (auto& [name, latency] : latencies_) {
    RotateLatency(latency, now);
    LatencyHistogram both = latency.previous;
    both.Merge(latency.current);
    LatencySummary summary;
    summary.name = name;
    summary.count = both.count();
    summary.total_count = latency.total;
    summary.buckets.assign(latency.since_start.begin(),
                           latency.since_start.end());
    summary.total_s = latency.total_s;
    if (both.count() > 0) {
      summary.mean_s = both.sum() / both.count();
      summary.p50_s = both.Quantile(0.5);
      summary.p90_s = both.Quantile(0.9);
      summary.p99_s = both.Quantile(0.99);
      summary.max_s = both.max();
    }
    out.push_back(std::move(summary));
  }
  return out;
}

}  // namespace downpour
