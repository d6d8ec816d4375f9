// Status service adapter.
#include "rpc/status_service.h"

#include <unistd.h>

#include <fstream>
#include <iterator>

#include "common/fd_limit.h"
#include "rpc/accept_guard.h"
#include "rpc/security.h"
#include "rpc/server_util.h"

namespace downpour {
namespace {

void AddLatencies(const std::vector<LatencySummary>& latencies,
                  proto::GetStatusResponse* response) {
  for (const LatencySummary& l : latencies) {
    proto::RpcLatency* out = response->add_latencies();
    out->set_name(l.name);
    out->set_count(l.count);
    out->set_total_count(l.total_count);
    out->set_mean_seconds(l.mean_s);
    out->set_p50_seconds(l.p50_s);
    out->set_p90_seconds(l.p90_s);
    out->set_p99_seconds(l.p99_s);
    out->set_max_seconds(l.max_s);
    for (uint64_t n : l.buckets) out->add_bucket_counts(n);
    out->set_sum_seconds(l.total_s);
  }
}

}  // namespace

void FillStaleness(const StalenessHistogram& staleness,
                   proto::GetStatusResponse* response) {
  response->clear_staleness_histogram();
  for (uint64_t n : staleness.Buckets()) response->add_staleness_histogram(n);
  const StalenessSummary s = staleness.Summary();
  response->set_staleness_p50(s.p50);
  response->set_staleness_p99(s.p99);
  response->set_staleness_max(s.max);
  response->set_staleness_mean(s.mean);
}

uint64_t ResidentMemoryBytes() {
  // statm: size resident shared text lib data dt, in pages.
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

StatusService::StatusService(std::string role, int index,
                             const Counters* counters, Filler filler)
    : role_(std::move(role)),
      index_(index),
      counters_(counters),
      filler_(std::move(filler)) {}

void StatusService::set_address(const std::string& address) {
  absl::MutexLock lock(&address_mu_);
  address_ = address;
}

void StatusService::set_metrics_address(const std::string& address,
                                        const std::string& scheme) {
  absl::MutexLock lock(&address_mu_);
  metrics_address_ = address;
  metrics_scheme_ = scheme;
}

void StatusService::Fill(proto::GetStatusResponse* response) const {
  response->set_role(role_);
  response->set_index(index_.load());
  response->set_version(kDownpourVersion);
  {
    absl::MutexLock lock(&address_mu_);
    response->set_address(address_);
    response->set_metrics_address(metrics_address_);
    response->set_metrics_scheme(metrics_scheme_);
  }
  response->set_uptime_seconds(absl::ToDoubleSeconds(absl::Now() - start_));
  response->set_pid(static_cast<uint32_t>(getpid()));
  for (const auto& [name, value] : counters_->Snapshot()) {
    (*response->mutable_counters())[name] = value;
  }
  // Connections closed at accept (rpc/accept_guard.h), process-wide.
  const AcceptGuardCounts closed = GetAcceptGuardCounts();
  auto& counters = *response->mutable_counters();
  counters["connections_closed_over_reserve"] = closed.over_reserve;
  counters["connections_closed_over_per_peer"] = closed.over_per_peer;
  counters["connections_closed_out_of_fds"] = closed.out_of_fds;
  FillStaleness(counters_->Staleness(), response);
  const Counters::RateSnapshot rates = counters_->Rates();
  response->set_rate_window_seconds(rates.window_seconds);
  for (const auto& [name, value] : rates.per_second) {
    (*response->mutable_rates())[name] = value;
  }
  AddLatencies(counters_->Latencies(), response);
  AddLatencies(RpcLatencies().Latencies(), response);
  response->set_memory_rss_bytes(ResidentMemoryBytes());
  response->set_open_fds(OpenFdCount());
  response->set_fd_limit(FdLimit());
  response->set_transport(TransportSummary());
  if (filler_) filler_(response);
}

std::vector<prometheus::MetricFamily> StatusService::Collect() const {
  std::vector<prometheus::MetricFamily> families = counters_->Collect();
  std::vector<prometheus::MetricFamily> rpc = RpcLatencies().Collect();
  families.insert(families.end(), std::make_move_iterator(rpc.begin()),
                  std::make_move_iterator(rpc.end()));
  return families;
}

grpc::ServerUnaryReactor* StatusService::GetStatus(
    grpc::CallbackServerContext* context, const proto::GetStatusRequest*,
    proto::GetStatusResponse* response) {
  Fill(response);
  auto* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace downpour
