// The coordinator's bounded time series of the cluster's figures, so `psctl
// plot` and `psctl watch` work after the fact and the launcher can save a run's
// curves.
//
//   MetricsHistory history({/*capacity=*/3600});
//   HistorySampler sampler(&history, [&] { return state->Status(); },
//                          absl::Seconds(1));
//   proto::GetHistoryResponse all = history.Get(0);
//
// Plain C++ over proto messages (no gRPC): the Coordinator service's GetHistory
// forwards here. Memory: about 150 bytes per member per sample.
#ifndef DOWNPOUR_COORDINATOR_METRICS_HISTORY_H_
#define DOWNPOUR_COORDINATOR_METRICS_HISTORY_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "proto/coordinator.pb.h"

namespace downpour::coordinator {

// Thread-safe.
class MetricsHistory {
 public:
  struct Options {
    // Samples kept at most (coordinator.history_size), >= 1; the oldest go
    // first.
    int capacity = 3600;
    // Seconds between samples (coordinator.history_interval_s); reported only.
    double interval_s = 1.0;
    // Wall clock for HistorySample.unix_seconds; tests inject a fixed one.
    std::function<absl::Time()> clock = [] { return absl::Now(); };
  };

  explicit MetricsHistory(Options options);

  MetricsHistory(const MetricsHistory&) = delete;
  MetricsHistory& operator=(const MetricsHistory&) = delete;

  // One sample of `status`: its registered members, timed by its
  // uptime_seconds.
  proto::HistorySample MakeSample(
      const proto::ClusterStatusResponse& status) const;

  // Appends MakeSample(status); drops the oldest sample when full.
  void Record(const proto::ClusterStatusResponse& status)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The samples with time_seconds > since_seconds, oldest first. With `now`,
  // MakeSample(*now) is added at the end (not kept), so a reader sees the
  // latest figures and not only those of the last period.
  proto::GetHistoryResponse Get(double since_seconds,
                                const proto::ClusterStatusResponse* now =
                                    nullptr) const ABSL_LOCKS_EXCLUDED(mu_);

  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Constant after construction.
  const Options options_;

  // State below is protected by mu_.
  mutable absl::Mutex mu_;
  std::deque<proto::HistorySample> samples_ ABSL_GUARDED_BY(mu_);
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

// Records `source()` into `history` every `interval` on its own thread, from
// construction until destruction (which joins it). Thread-compatible.
class HistorySampler {
 public:
  HistorySampler(MetricsHistory* history,
                 std::function<proto::ClusterStatusResponse()> source,
                 absl::Duration interval);
  ~HistorySampler();

  HistorySampler(const HistorySampler&) = delete;
  HistorySampler& operator=(const HistorySampler&) = delete;

 private:
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace downpour::coordinator

#endif  // DOWNPOUR_COORDINATOR_METRICS_HISTORY_H_
