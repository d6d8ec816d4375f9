// A daemon's Status (proto/status.proto GetStatusResponse) in the Prometheus
// text exposition format (version 0.0.4), what GET /metrics answers
// (rpc/metrics_http.h). Every series carries the labels role and index.
//
//   downpour_up                      gauge, 1
//   downpour_<field>                 gauge per numeric Status field
//                                    (uptime_seconds, loss, accuracy,
//                                    memory_rss_bytes, staleness_p99, ...)
//   downpour_<counter>_total         counter per Status counter with a rate
//   downpour_<counter>               gauge per other Status counter
//   downpour_test_metric{metric=}    gauge per worker test metric (auc, ...)
//   downpour_checkpoint_failing      gauge, 1 while last_checkpoint_error is set
//   downpour_waiting_for_ps          gauge, 1 while waiting_for is set
//   downpour_staleness               histogram (le: staleness upper bounds)
//   downpour_rpc_calls_total{call=}  counter per RPC kind
//   downpour_rpc_latency_seconds{call=,quantile=}  gauge, p50/p90/p99 over
//                                    the recent window
//
// Names are the Status names with every character outside [a-zA-Z0-9_]
// replaced by '_'; label values are escaped as the format requires.
#ifndef DOWNPOUR_RPC_PROMETHEUS_TEXT_H_
#define DOWNPOUR_RPC_PROMETHEUS_TEXT_H_

#include <string>

#include "proto/status.pb.h"

namespace downpour {

std::string PrometheusText(const proto::GetStatusResponse& status);

// `name` with every character outside [a-zA-Z0-9_] replaced by '_' (and a
// leading digit prefixed by '_').
std::string PrometheusName(const std::string& name);

}  // namespace downpour

#endif  // DOWNPOUR_RPC_PROMETHEUS_TEXT_H_
