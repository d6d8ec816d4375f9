// The Status service every daemon serves: role, id, uptime, counters, rates,
// RPC latencies, memory and daemon-specific figures.
#ifndef DOWNPOUR_RPC_STATUS_SERVICE_H_
#define DOWNPOUR_RPC_STATUS_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/counters.h"
#include "prometheus/metric_family.h"
#include "proto/status.grpc.pb.h"

namespace downpour {

// Thin adapter: reads the daemon's Counters (totals, staleness histogram,
// rates), the process's RPC latencies (RpcLatencies()) and resident memory,
// then calls `filler` for daemon-specific fields (loss, accuracy, device...).
// Thread-safe; the filler runs on gRPC threads and must not block.
class StatusService final : public proto::Status::CallbackService {
 public:
  using Filler = std::function<void(proto::GetStatusResponse*)>;

  StatusService(std::string role, int index, const Counters* counters,
                Filler filler = nullptr);

  // The address the daemon serves on; known only once its server has bound, so
  // it may be set while GetStatus calls are already being served.
  void set_address(const std::string& address) ABSL_LOCKS_EXCLUDED(address_mu_);
  // The Prometheus endpoint's address (host:port) and scheme ("http" or
  // "https"; rpc/metrics_http.h), once it serves.
  void set_metrics_address(const std::string& address,
                           const std::string& scheme)
      ABSL_LOCKS_EXCLUDED(address_mu_);

  // "coordinator", "ps", "standby", "worker" and the index, as constructed or
  // set since (a daemon that joined learns its index when it registers).
  const std::string& role() const { return role_; }
  int index() const { return index_.load(); }
  void set_index(int index) { index_.store(index); }

  // Fills `response` as GetStatus does (for tests and in-process callers).
  void Fill(proto::GetStatusResponse* response) const;
  // The exported families of the daemon's registry and of RpcLatencies()'s,
  // for GET /metrics (rpc/prometheus_text.h).
  std::vector<prometheus::MetricFamily> Collect() const;

  grpc::ServerUnaryReactor* GetStatus(
      grpc::CallbackServerContext* context,
      const proto::GetStatusRequest* request,
      proto::GetStatusResponse* response) override;

 private:
  const std::string role_;
  std::atomic<int> index_;
  const Counters* const counters_;
  const Filler filler_;
  const absl::Time start_ = absl::Now();
  mutable absl::Mutex address_mu_;
  std::string address_ ABSL_GUARDED_BY(address_mu_);  // "" until set_address
  std::string metrics_address_ ABSL_GUARDED_BY(address_mu_);
  std::string metrics_scheme_ ABSL_GUARDED_BY(address_mu_);
};

// Sets response's staleness_histogram (replacing what it held) and its
// staleness_p50, _p99, _max and _mean from `staleness`.
void FillStaleness(const StalenessHistogram& staleness,
                   proto::GetStatusResponse* response);

// Resident memory (RSS) of this process in bytes, 0 where /proc is unreadable.
uint64_t ResidentMemoryBytes();

// The version string every daemon reports.
inline constexpr char kDownpourVersion[] = "0.1.0";

}  // namespace downpour

#endif  // DOWNPOUR_RPC_STATUS_SERVICE_H_
