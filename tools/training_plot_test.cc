#include "tools/training_plot.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::tools {
namespace {

using ::testing::HasSubstr;

proto::MemberSample* Member(proto::HistorySample* s, const std::string& role,
                            int index, bool alive) {
  proto::MemberSample* m = s->add_members();
  m->set_role(role);
  m->set_index(index);
  m->set_alive(alive);
  return m;
}

// Worker 0 trains for 3 samples then dies; worker 1 reports nothing at first;
// ps 0 applies 10 pushes per second, then restarts.
proto::GetHistoryResponse History() {
  proto::GetHistoryResponse h;
  for (int t = 1; t <= 5; ++t) {
    proto::HistorySample* s = h.add_samples();
    s->set_time_seconds(t);
    proto::MemberSample* w0 = Member(s, "worker", 0, t <= 3);
    const int step0 = std::min(t, 3) * 100;
    w0->mutable_report()->set_step(step0);
    w0->mutable_report()->set_loss(2.0 / std::min(t, 3));
    w0->mutable_report()->set_accuracy(t == 1 ? NAN
                                              : 0.5 + 0.1 * std::min(t, 3));
    w0->mutable_report()->set_examples_per_sec(1000);
    w0->mutable_report()->set_pushes(t * 10);
    w0->mutable_report()->set_staleness_p99(std::min(t, 3));
    proto::MemberSample* w1 = Member(s, "worker", 1, true);
    if (t >= 3) {
      w1->mutable_report()->set_step(t * 50);
      w1->mutable_report()->set_loss(1.0);
      w1->mutable_report()->set_accuracy(NAN);
      w1->mutable_report()->set_examples_per_sec(500);
    }
    proto::MemberSample* ps = Member(s, "ps", 0, true);
    ps->mutable_report()->set_pushes(t < 5 ? t * 10 : 3);
    ps->mutable_report()->set_staleness_p99(2 * t);
  }
  return h;
}

TEST(TrainingChartsTest, CurvesPerWorkerAndPs) {
  const std::vector<Chart> charts = TrainingCharts(History());
  ASSERT_EQ(charts.size(), 7u);
  const Chart& loss_time = charts[0];
  ASSERT_EQ(loss_time.series.size(), 2u);
  EXPECT_EQ(loss_time.series[0].name, "worker 0");
  // Frozen figures after death are left out: 3 points, not 5.
  EXPECT_EQ(loss_time.series[0].points.size(), 3u);
  EXPECT_EQ(loss_time.series[1].points.size(), 3u);  // from t = 3
  // Unknown accuracy left out: worker 0 from t = 2, worker 1 never.
  EXPECT_EQ(charts[1].series[0].points.size(), 2u);
  EXPECT_EQ(charts[1].series[1].points.size(), 0u);
  // By step.
  EXPECT_EQ(charts[2].series[0].points.front().first, 100);
  EXPECT_EQ(charts[2].series[0].points.back().first, 300);
  // Throughput: two workers and the cluster line.
  ASSERT_EQ(charts[4].series.size(), 3u);
  EXPECT_EQ(charts[4].series[2].name, "cluster");
  EXPECT_EQ(charts[4].series[2].points[2].second, 1500);
  // ps pushes/s: 10/s, and no rate across the restart.
  ASSERT_EQ(charts[5].series.size(), 1u);
  const auto& pushes = charts[5].series[0].points;
  ASSERT_EQ(pushes.size(), 4u);
  EXPECT_EQ(pushes[0].second, 10);
  EXPECT_TRUE(std::isnan(pushes[3].second));
  // Staleness p99: worker 0 while it reports, worker 1 never pushed, ps 0.
  const Chart& staleness = charts[6];
  ASSERT_EQ(staleness.series.size(), 3u);
  EXPECT_EQ(staleness.series[0].name, "worker 0");
  ASSERT_EQ(staleness.series[0].points.size(), 3u);
  EXPECT_EQ(staleness.series[0].points[2].second, 3);
  EXPECT_EQ(staleness.series[1].points.size(), 0u);
  EXPECT_EQ(staleness.series[2].name, "ps 0");
  ASSERT_EQ(staleness.series[2].points.size(), 5u);
  EXPECT_EQ(staleness.series[2].points[4].second, 10);
}

// A regression job's test charts show its rmse, from the reports' metrics.
TEST(TrainingChartsTest, TestChartsShowTheTasksMainMetric) {
  proto::GetHistoryResponse h;
  for (int t = 1; t <= 3; ++t) {
    proto::HistorySample* s = h.add_samples();
    s->set_time_seconds(t);
    proto::MemberReport* r = Member(s, "worker", 0, true)->mutable_report();
    r->set_step(t * 10);
    r->set_loss(1.0 / t);
    r->set_accuracy(NAN);
    (*r->mutable_metrics())["rmse"] = 60.0 - t;
    (*r->mutable_metrics())["r2"] = 0.1 * t;
  }
  const std::vector<Chart> charts = TrainingCharts(h);
  ASSERT_GE(charts.size(), 2u);
  EXPECT_EQ(charts[1].title, "Test rmse");
  ASSERT_EQ(charts[1].series.size(), 1u);
  ASSERT_EQ(charts[1].series[0].points.size(), 3u);
  EXPECT_EQ(charts[1].series[0].points[2].second, 57.0);
}

// A sparse model's ps report rows and keys: two more charts, rows held and
// keys pushed and pulled per second, with no rate across a restart.
TEST(TrainingChartsTest, SparseRowsAndKeysPerSecondPerPs) {
  proto::GetHistoryResponse h;
  for (int t = 1; t <= 4; ++t) {
    proto::HistorySample* s = h.add_samples();
    s->set_time_seconds(t);
    proto::MemberReport* r = Member(s, "ps", 1, true)->mutable_report();
    r->set_sparse_rows(1000 * t);
    r->set_sparse_push_keys(t < 4 ? 5000 * t : 10);
    r->set_sparse_pull_keys(t < 4 ? 8000 * t : 10);
  }
  const std::vector<Chart> charts = TrainingCharts(h);
  ASSERT_EQ(charts.size(), 9u);
  const Chart& rows = charts[7];
  EXPECT_EQ(rows.title, "Sparse rows per ps");
  ASSERT_EQ(rows.series.size(), 1u);
  EXPECT_EQ(rows.series[0].name, "ps 1");
  ASSERT_EQ(rows.series[0].points.size(), 4u);
  EXPECT_EQ(rows.series[0].points[3].second, 4000);
  const Chart& keys = charts[8];
  ASSERT_EQ(keys.series.size(), 2u);
  EXPECT_EQ(keys.series[0].name, "ps 1 push");
  EXPECT_EQ(keys.series[1].name, "ps 1 pull");
  ASSERT_EQ(keys.series[0].points.size(), 3u);
  EXPECT_EQ(keys.series[0].points[0].second, 5000);
  EXPECT_EQ(keys.series[1].points[1].second, 8000);
  EXPECT_TRUE(std::isnan(keys.series[0].points[2].second)) << "restart";
  // A dense job draws no sparse charts.
  EXPECT_EQ(TrainingCharts(History()).size(), 7u);
}

// A ps that evicted rows (eviction.*) adds its evicted total to the rows
// chart, from its first eviction on.
TEST(TrainingChartsTest, EvictedRowsBesideTheRowsHeld) {
  proto::GetHistoryResponse h;
  for (int t = 1; t <= 4; ++t) {
    proto::HistorySample* s = h.add_samples();
    s->set_time_seconds(t);
    proto::MemberReport* r = Member(s, "ps", 0, true)->mutable_report();
    r->set_sparse_rows(1000);
    r->set_sparse_push_keys(5000 * t);
    r->set_sparse_evicted_rows(t < 3 ? 0 : 700 * t);
  }
  const std::vector<Chart> charts = TrainingCharts(h);
  ASSERT_EQ(charts.size(), 9u);
  const Chart& rows = charts[7];
  ASSERT_EQ(rows.series.size(), 2u);
  EXPECT_EQ(rows.series[1].name, "ps 0 evicted");
  ASSERT_EQ(rows.series[1].points.size(), 2u);
  EXPECT_EQ(rows.series[1].points[1].second, 2800);
}

TEST(TrainingPlotSvgTest, TitleCountsWorkersAndPs) {
  const std::string svg = TrainingPlotSvg(History());
  EXPECT_THAT(svg, HasSubstr("2 workers, 1 ps, 4 s of history"));
  EXPECT_THAT(svg, HasSubstr("Test accuracy by step"));
}

TEST(TrainingPlotSvgTest, EmptyHistoryDrawsEmptyCharts) {
  const std::string svg = TrainingPlotSvg(proto::GetHistoryResponse());
  EXPECT_THAT(svg, HasSubstr("0 workers, 0 ps"));
  EXPECT_THAT(svg, HasSubstr("no data yet"));
}

}  // namespace
}  // namespace downpour::tools
