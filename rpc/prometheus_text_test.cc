#include "rpc/prometheus_text.h"

#include <string>

#include "common/counters.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

proto::GetStatusResponse AStatus() {
  proto::GetStatusResponse s;
  s.set_role("ps");
  s.set_index(1);
  s.set_uptime_seconds(12.5);
  s.set_memory_rss_bytes(1048576);
  (*s.mutable_counters())["pushes"] = 40;
  (*s.mutable_rates())["pushes"] = 4;
  (*s.mutable_counters())["blocks"] = 3;
  (*s.mutable_counters())["called:ParameterServer/Pull"] = 2;
  (*s.mutable_metrics())["auc"] = 0.75;
  s.add_staleness_histogram(5);   // staleness 0
  s.add_staleness_histogram(0);   // 1
  s.add_staleness_histogram(2);   // 2
  s.set_staleness_mean(4.0 / 7);
  proto::RpcLatency* l = s.add_latencies();
  l->set_name("served:ParameterServer/Push");
  l->set_total_count(99);
  l->set_p50_seconds(0.001);
  l->set_p90_seconds(0.002);
  l->set_p99_seconds(0.004);
  // 90 calls at <= 1 ms, 9 at <= 10 ms (kLatencyBucketBounds).
  for (size_t i = 0; i <= kLatencyBucketBounds.size(); ++i) {
    l->add_bucket_counts(i == 3 ? 90 : i == 6 ? 9 : 0);
  }
  l->set_sum_seconds(0.2);
  s.set_last_checkpoint_error("disk full");
  return s;
}

TEST(PrometheusTextTest, EverySeriesIsLabelledAndTyped) {
  const std::string text = PrometheusText(AStatus());
  EXPECT_THAT(text, HasSubstr("# TYPE downpour_up gauge\n"
                              "downpour_up{role=\"ps\",index=\"1\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("downpour_uptime_seconds{role=\"ps\",index=\"1\"} "
                              "12.5\n"));
  EXPECT_THAT(text, HasSubstr("downpour_memory_rss_bytes{role=\"ps\",index=\"1\"}"
                              " 1048576\n"));
  // A counter with a rate is a Prometheus counter (_total), one without a
  // gauge; names lose the characters Prometheus does not allow.
  EXPECT_THAT(text, HasSubstr("# TYPE downpour_pushes_total counter\n"
                              "downpour_pushes_total{role=\"ps\",index=\"1\"} "
                              "40\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE downpour_blocks gauge\n"));
  EXPECT_THAT(text, HasSubstr("downpour_called_ParameterServer_Pull{"));
  EXPECT_THAT(text, HasSubstr("downpour_test_metric{role=\"ps\",index=\"1\","
                              "metric=\"auc\"} 0.75\n"));
  EXPECT_THAT(text, HasSubstr("downpour_checkpoint_failing{role=\"ps\","
                              "index=\"1\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("downpour_waiting_for_ps{role=\"ps\","
                              "index=\"1\"} 0\n"));
  // The index is a label, not a series.
  EXPECT_THAT(text, Not(HasSubstr("downpour_index{")));
}

TEST(PrometheusTextTest, StalenessIsACumulativeHistogram) {
  const std::string text = PrometheusText(AStatus());
  EXPECT_THAT(text, HasSubstr("# TYPE downpour_staleness histogram\n"));
  EXPECT_THAT(text, HasSubstr("downpour_staleness_bucket{role=\"ps\",index=\"1\","
                              "le=\"0\"} 5\n"
                              "downpour_staleness_bucket{role=\"ps\",index=\"1\","
                              "le=\"1\"} 5\n"
                              "downpour_staleness_bucket{role=\"ps\",index=\"1\","
                              "le=\"2\"} 7\n"
                              "downpour_staleness_bucket{role=\"ps\",index=\"1\","
                              "le=\"+Inf\"} 7\n"));
  EXPECT_THAT(text, HasSubstr("downpour_staleness_sum{role=\"ps\",index=\"1\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("downpour_staleness_count{role=\"ps\",index=\"1\"} 7\n"));
}

TEST(PrometheusTextTest, RpcLatencyQuantilesAndCounts) {
  const std::string text = PrometheusText(AStatus());
  EXPECT_THAT(text, HasSubstr("downpour_rpc_calls_total{role=\"ps\",index=\"1\","
                              "call=\"served:ParameterServer/Push\"} 99\n"));
  EXPECT_THAT(text, HasSubstr("downpour_rpc_latency_seconds{role=\"ps\","
                              "index=\"1\",call=\"served:ParameterServer/Push\","
                              "quantile=\"0.99\"} 0.0040000000000000001\n"));
}

TEST(PrometheusTextTest, RpcLatencyIsACumulativeHistogramSinceStart) {
  const std::string text = PrometheusText(AStatus());
  const std::string call =
      "{role=\"ps\",index=\"1\",call=\"served:ParameterServer/Push\",";
  EXPECT_THAT(text, HasSubstr("# TYPE downpour_rpc_duration_seconds histogram\n"));
  EXPECT_THAT(text, HasSubstr("downpour_rpc_duration_seconds_bucket" + call +
                              "le=\"0.0005\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("downpour_rpc_duration_seconds_bucket" + call +
                              "le=\"0.001\"} 90\n"));
  EXPECT_THAT(text, HasSubstr("downpour_rpc_duration_seconds_bucket" + call +
                              "le=\"0.01\"} 99\n"));
  EXPECT_THAT(text, HasSubstr("downpour_rpc_duration_seconds_bucket" + call +
                              "le=\"+Inf\"} 99\n"));
  EXPECT_THAT(text, HasSubstr("downpour_rpc_duration_seconds_count{role=\"ps\","
                              "index=\"1\",call=\"served:ParameterServer/"
                              "Push\"} 99\n"));
}

TEST(PrometheusTextTest, LabelValuesAreEscaped) {
  proto::GetStatusResponse s;
  s.set_role("a\"b\\c\nd");
  const std::string text = PrometheusText(s);
  EXPECT_THAT(text, HasSubstr("downpour_up{role=\"a\\\"b\\\\c\\nd\",index=\"0\"} 1"));
  EXPECT_EQ(PrometheusName("9lives.x-y"), "_9lives_x_y");
}

}  // namespace
}  // namespace downpour
