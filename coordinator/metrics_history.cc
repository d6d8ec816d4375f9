// A ring of cluster samples under one mutex; sampled about once a second, read
// by tools now and then.
#include "coordinator/metrics_history.h"

#include <algorithm>

namespace downpour::coordinator {

MetricsHistory::MetricsHistory(Options options)
    : options_(std::move(options)) {}

proto::HistorySample MetricsHistory::MakeSample(
    const proto::ClusterStatusResponse& status) const {
  proto::HistorySample sample;
  sample.set_time_seconds(status.uptime_seconds());
  sample.set_unix_seconds(
      absl::ToDoubleSeconds(options_.clock() - absl::UnixEpoch()));
  sample.set_stop(status.stop());
  for (const proto::MemberStatus& m : status.members()) {
    if (!m.registered()) continue;
    proto::MemberSample* member = sample.add_members();
    member->set_role(m.role());
    member->set_index(m.index());
    member->set_alive(m.alive());
    *member->mutable_report() = m.report();
  }
  return sample;
}

void MetricsHistory::Record(const proto::ClusterStatusResponse& status) {
  proto::HistorySample sample = MakeSample(status);
  absl::MutexLock lock(&mu_);
  samples_.push_back(std::move(sample));
  while (samples_.size() >
         static_cast<size_t>(std::max(1, options_.capacity))) {
    samples_.pop_front();
    ++dropped_;
  }
}

proto::GetHistoryResponse MetricsHistory::Get(
    double since_seconds, const proto::ClusterStatusResponse* now) const {
  proto::GetHistoryResponse response;
  response.set_interval_seconds(options_.interval_s);
  response.set_capacity(options_.capacity);
  absl::MutexLock lock(&mu_);
  response.set_dropped(dropped_);
  for (const proto::HistorySample& sample : samples_) {
    if (sample.time_seconds() > since_seconds) *response.add_samples() = sample;
  }
  if (now != nullptr && now->uptime_seconds() > since_seconds &&
      (samples_.empty() ||
       now->uptime_seconds() > samples_.back().time_seconds())) {
    *response.add_samples() = MakeSample(*now);
  }
  return response;
}

size_t MetricsHistory::size() const {
  absl::MutexLock lock(&mu_);
  return samples_.size();
}

HistorySampler::HistorySampler(
    MetricsHistory* history,
    std::function<proto::ClusterStatusResponse()> source,
    absl::Duration interval)
    : thread_([this, history, source = std::move(source), interval] {
        history->Record(source());
        while (!stop_.WaitForNotificationWithTimeout(interval)) {
          history->Record(source());
        }
      }) {}

HistorySampler::~HistorySampler() {
  stop_.Notify();
  thread_.join();
}

}  // namespace downpour::coordinator
