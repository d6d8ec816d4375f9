#include "rpc/prometheus_text.h"

#include <string>

#include "common/counters.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A ps's Status as StatusService fills it, with its registry's counter
// "pushes" (and its rate) in it too.
proto::GetStatusResponse AStatus() {
  proto::GetStatusResponse s;
  s.set_role("ps");
  s.set_index(1);
  s.set_uptime_seconds(12.5);
  s.set_memory_rss_bytes(1048576);
  (*s.mutable_counters())["pushes"] = 40;
  (*s.mutable_rates())["pushes"] = 4;
  (*s.mutable_counters())["blocks"] = 3;  // set by the ps's filler
  (*s.mutable_counters())["called:ParameterServer/Pull"] = 2;
  (*s.mutable_metrics())["auc"] = 0.75;
  s.add_staleness_histogram(5);  // staleness 0
  s.add_staleness_histogram(0);  // 1
  s.add_staleness_histogram(2);  // 2
  s.set_staleness_mean(4.0 / 7);
  s.set_last_checkpoint_error("disk full");
  return s;
}

// The exposition of AStatus() and a registry holding pushes = 40 and 99
// served Pushes: 90 at <= 1 ms, 9 at <= 10 ms (kLatencyBucketBounds).
std::string Text() {
  Counters counters;
  counters.stats().pushes.Increment(40);
  for (int i = 0; i < 90; ++i) {
    counters.RecordLatency("served:ParameterServer/Push", 0.0008);
  }
  for (int i = 0; i < 9; ++i) {
    counters.RecordLatency("served:ParameterServer/Push", 0.008);
  }
  return PrometheusText(counters.Collect(), AStatus());
}

TEST(PrometheusTextTest, EverySeriesIsLabelledAndTyped) {
  const std::string text = Text();
  EXPECT_THAT(text, HasSubstr("# TYPE downpour_up gauge\n"
                              "downpour_up{role=\"ps\",index=\"1\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("downpour_uptime_seconds{role=\"ps\",index=\"1\"} "
                        "12.5\n"));
  EXPECT_THAT(text,
              HasSubstr("downpour_memory_rss_bytes{role=\"ps\",index=\"1\"}"
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
  const std::string text = Text();
  EXPECT_THAT(text, HasSubstr("# TYPE downpour_staleness histogram\n"));
  EXPECT_THAT(text,
              HasSubstr("downpour_staleness_bucket{role=\"ps\",index=\"1\","
                        "le=\"0\"} 5\n"
                        "downpour_staleness_bucket{role=\"ps\",index=\"1\","
                        "le=\"1\"} 5\n"
                        "downpour_staleness_bucket{role=\"ps\",index=\"1\","
                        "le=\"2\"} 7\n"
                        "downpour_staleness_bucket{role=\"ps\",index=\"1\","
                        "le=\"+Inf\"} 7\n"));
  EXPECT_THAT(text,
              HasSubstr("downpour_staleness_sum{role=\"ps\",index=\"1\"} 4\n"));
  EXPECT_THAT(
      text, HasSubstr("downpour_staleness_count{role=\"ps\",index=\"1\"} 7\n"));
}

TEST(PrometheusTextTest, RpcCallsAreCountedPerKind) {
  const std::string text = Text();
  EXPECT_THAT(text,
              HasSubstr("downpour_rpc_calls_total{role=\"ps\",index=\"1\","
                        "call=\"served:ParameterServer/Push\"} 99\n"));
  // Quantile gauges gave way to the histogram below (histogram_quantile).
  EXPECT_THAT(text, Not(HasSubstr("downpour_rpc_latency_seconds")));
}

TEST(PrometheusTextTest, RpcLatencyIsACumulativeHistogramSinceStart) {
  const std::string text = Text();
  const std::string call =
      "{role=\"ps\",index=\"1\",call=\"served:ParameterServer/Push\",";
  EXPECT_THAT(text,
              HasSubstr("# TYPE downpour_rpc_duration_seconds histogram\n"));
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
  const std::string text = PrometheusText({}, s);
  EXPECT_THAT(text,
              HasSubstr("downpour_up{role=\"a\\\"b\\\\c\\nd\",index=\"0\"} 1"));
  EXPECT_EQ(PrometheusName("9lives.x-y"), "_9lives_x_y");
}

TEST(PrometheusTextTest, RegistrySeriesAppearOnceAndUntouchedOnesNotAtAll) {
  const std::string text = Text();
  // "pushes" is in both the registry and Status: the registry's counter only.
  EXPECT_EQ(text.find("downpour_pushes_total{"),
            text.rfind("downpour_pushes_total{"));
  EXPECT_THAT(text, Not(HasSubstr("downpour_pushes{")));
  // Declared but never counted: not exported, as before the registry.
  EXPECT_THAT(text, Not(HasSubstr("downpour_pulls_total")));
}

}  // namespace
}  // namespace downpour
