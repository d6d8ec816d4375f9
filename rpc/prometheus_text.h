// A daemon's Prometheus text exposition (version 0.0.4), what GET /metrics
// answers (rpc/metrics_http.h), written by prometheus-cpp's TextSerializer
// from two sources. Every series carries the labels role and index.
//
// From the registries (common/counters.h Counters::Collect, the daemon's and
// RpcLatencies()'s):
//   downpour_<counter>_total         counter per declared counter exported
//   downpour_<gauge>                 gauge per declared gauge exported
//   downpour_suspect_pushes_total{worker=},
//   downpour_clipped_blocks_total{worker=} downpour_rpc_calls_total{call=}
//   counter per RPC kind downpour_rpc_duration_seconds{call=}  histogram
//   (kLatencyBucketBounds)
//
// From the daemon's Status, for what no registry holds:
//   downpour_up                      gauge, 1
//   downpour_<field>                 gauge per numeric Status field
//                                    (uptime_seconds, loss, accuracy,
//                                    memory_rss_bytes, staleness_p99, ...)
//   downpour_<counter>               gauge per Status counter a daemon's
//                                    filler sets (blocks, step, examples, ...)
//   downpour_test_metric{metric=}    gauge per worker test metric (auc, ...)
//   downpour_checkpoint_failing      gauge, 1 while last_checkpoint_error is
//   set downpour_waiting_for_ps          gauge, 1 while waiting_for is set
//   downpour_staleness               histogram (le: staleness upper bounds);
//                                    from Status because its buckets grow
//                                    with the staleness seen, which a
//                                    registry histogram's fixed bounds cannot
//
// Names are the Status names with every character outside [a-zA-Z0-9_]
// replaced by '_'.
#ifndef DOWNPOUR_RPC_PROMETHEUS_TEXT_H_
#define DOWNPOUR_RPC_PROMETHEUS_TEXT_H_

#include <string>
#include <vector>

#include "prometheus/metric_family.h"
#include "proto/status.pb.h"

namespace downpour {

// `registry` (families from Counters::Collect) and the Status families above
// that it does not hold, labelled with status's role and index, as text.
std::string PrometheusText(std::vector<prometheus::MetricFamily> registry,
                           const proto::GetStatusResponse& status);

// `name` with every character outside [a-zA-Z0-9_] replaced by '_' (and a
// leading digit prefixed by '_').
std::string PrometheusName(const std::string& name);

}  // namespace downpour

#endif  // DOWNPOUR_RPC_PROMETHEUS_TEXT_H_
