// Counters under one mutex: a few updates per RPC, far below the RPC's own cost.
#include "common/counters.h"

#include <algorithm>

namespace downpour {

Counters::Counters(int staleness_buckets) : staleness_(staleness_buckets, 0) {}

void Counters::Add(const std::string& name, double delta) {
  absl::MutexLock lock(&mu_);
  values_[name] += delta;
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
  const size_t bucket =
      std::min<uint64_t>(staleness, staleness_.size() - 1);
  ++staleness_[bucket];
}

std::map<std::string, double> Counters::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return values_;
}

std::vector<uint64_t> Counters::StalenessHistogram() const {
  absl::MutexLock lock(&mu_);
  return staleness_;
}

}  // namespace downpour
