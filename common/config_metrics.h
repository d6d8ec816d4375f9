// The `metrics` section of the config: the Prometheus endpoint every daemon
// serves (rpc/metrics_http.h).
#ifndef DOWNPOUR_COMMON_CONFIG_METRICS_H_
#define DOWNPOUR_COMMON_CONFIG_METRICS_H_

#include <vector>

namespace downpour {

// Prometheus endpoints (config section `metrics`; rpc/metrics_http.h).
struct MetricsSection {
  // Non-zero: every daemon (coordinator, ps, worker) serves GET /metrics
  // over HTTP on its gRPC host at its gRPC port plus this (an ephemeral port
  // when its gRPC port is 0; Status metrics_address names it). With
  // security.tls it is HTTPS with the daemon's certificate (a client
  // certificate required with security.mutual_tls) and the reader token as
  // bearer token. 0 (default): off. -65535..65535.
  int port_offset = 0;
};

// Internal to the config loader (common/config.cc).
namespace config_internal {
struct ConfigField;
// The section's keys bound to `metrics`, in docs/CONFIG.md's order.
std::vector<ConfigField> MetricsKeys(MetricsSection* metrics);
}  // namespace config_internal

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_CONFIG_METRICS_H_
