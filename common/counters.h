// Named counters and gauges a daemon exports through its Status service.
#ifndef DOWNPOUR_COMMON_COUNTERS_H_
#define DOWNPOUR_COMMON_COUNTERS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace downpour {

// Thread-safe.
class Counters {
 public:
  explicit Counters(int staleness_buckets = 16);

  void Add(const std::string& name, double delta) ABSL_LOCKS_EXCLUDED(mu_);
  void Set(const std::string& name, double value) ABSL_LOCKS_EXCLUDED(mu_);
  double Get(const std::string& name) const ABSL_LOCKS_EXCLUDED(mu_);
  // Counts one push with this staleness (the last bucket collects the rest).
  void RecordStaleness(uint64_t staleness) ABSL_LOCKS_EXCLUDED(mu_);

  std::map<std::string, double> Snapshot() const ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<uint64_t> StalenessHistogram() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, double> values_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> staleness_ ABSL_GUARDED_BY(mu_);
};

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_COUNTERS_H_
