// History samples to chart series.
#include "tools/training_plot.h"

#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace downpour::tools {
namespace {

struct WorkerCurves {
  Series loss_time, acc_time, loss_step, acc_step, rate_time, stale_time;
  bool any = false;
  uint64_t last_step = 0;
  double last_loss = NAN, last_acc = NAN;
};

struct PsCurve {
  Series pushes_time, stale_time;
  // Sparse models: rows held, and pushed and pulled keys per second; rows
  // evicted since the ps started (once it evicted any).
  Series rows_time, push_keys_time, pull_keys_time, evicted_time;
  double last_time = NAN;
  double last_pushes = NAN;
  double last_push_keys = NAN, last_pull_keys = NAN;
};

// Per second between two cumulative counts, NaN across a restart (the count
// starts again) or while the member is dead.
double PerSecond(double now, double before, double seconds, bool alive) {
  return now >= before && alive ? (now - before) / seconds : NAN;
}

bool SameFigure(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || a == b;
}

// The task's main test metric as a worker reports it: "auc" (binary),
// "rmse" (regression), else "accuracy" (multiclass, and reports without
// metrics).
std::string MainMetric(const proto::MemberReport& r) {
  if (r.metrics().count("auc") > 0) return "auc";
  if (r.metrics().count("rmse") > 0) return "rmse";
  return "accuracy";
}

double MetricValue(const proto::MemberReport& r, const std::string& name) {
  const auto it = r.metrics().find(name);
  if (it != r.metrics().end()) return it->second;
  return name == "accuracy" ? r.accuracy() : NAN;
}

void AddWorker(double t, const proto::MemberSample& m,
               const std::string& metric, WorkerCurves& c) {
  const proto::MemberReport& r = m.report();
  if (r.step() == 0 && !r.finished()) return;  // not reported yet
  if (c.any && r.step() == c.last_step && SameFigure(r.loss(), c.last_loss) &&
      SameFigure(MetricValue(r, metric), c.last_acc)) {
    return;  // frozen figures: dead, finished or between heartbeats
  }
  c.any = true;
  c.last_step = r.step();
  c.last_loss = r.loss();
  c.last_acc = MetricValue(r, metric);
  const double step = static_cast<double>(r.step());
  c.loss_time.points.emplace_back(t, r.loss());
  c.loss_step.points.emplace_back(step, r.loss());
  if (std::isfinite(c.last_acc)) {
    c.acc_time.points.emplace_back(t, c.last_acc);
    c.acc_step.points.emplace_back(step, c.last_acc);
  }
  c.rate_time.points.emplace_back(t, m.alive() ? r.examples_per_sec() : NAN);
  if (r.pushes() > 0) c.stale_time.points.emplace_back(t, r.staleness_p99());
}

void AddPs(double t, const proto::MemberSample& m, PsCurve& c) {
  const proto::MemberReport& r = m.report();
  const double pushes = static_cast<double>(r.pushes());
  const double push_keys = static_cast<double>(r.sparse_push_keys());
  const double pull_keys = static_cast<double>(r.sparse_pull_keys());
  const bool sparse = r.sparse_rows() > 0 || push_keys > 0 || pull_keys > 0;
  if (std::isfinite(c.last_time) && t > c.last_time) {
    const double dt = t - c.last_time;
    c.pushes_time.points.emplace_back(
        t, PerSecond(pushes, c.last_pushes, dt, m.alive()));
    if (sparse) {
      c.push_keys_time.points.emplace_back(
          t, PerSecond(push_keys, c.last_push_keys, dt, m.alive()));
      c.pull_keys_time.points.emplace_back(
          t, PerSecond(pull_keys, c.last_pull_keys, dt, m.alive()));
    }
  }
  if (sparse) {
    c.rows_time.points.emplace_back(
        t, m.alive() ? static_cast<double>(r.sparse_rows()) : NAN);
  }
  if (sparse &&
      (r.sparse_evicted_rows() > 0 || !c.evicted_time.points.empty())) {
    c.evicted_time.points.emplace_back(
        t, m.alive() ? static_cast<double>(r.sparse_evicted_rows()) : NAN);
  }
  c.last_time = t;
  c.last_pushes = pushes;
  c.last_push_keys = push_keys;
  c.last_pull_keys = pull_keys;
  if (m.alive() && pushes > 0) {
    c.stale_time.points.emplace_back(t, m.report().staleness_p99());
  }
}

// The metric the test charts show: the first worker report with metrics says
// which the task measures.
std::string ChartedMetric(const proto::GetHistoryResponse& history) {
  std::string metric = "accuracy";
  for (const proto::HistorySample& sample : history.samples()) {
    for (const proto::MemberSample& m : sample.members()) {
      if (m.role() == "worker" && m.report().metrics_size() > 0) {
        metric = MainMetric(m.report());
      }
    }
  }
  return metric;
}

// Every sample's members into their curves, and the workers' summed rate
// into `cluster_rate`.
void CollectCurves(const proto::GetHistoryResponse& history,
                   const std::string& metric,
                   std::map<int, WorkerCurves>& workers,
                   std::map<int, PsCurve>& shards, Series& cluster_rate) {
  for (const proto::HistorySample& sample : history.samples()) {
    const double t = sample.time_seconds();
    double total_rate = 0;
    bool any_worker = false;
    for (const proto::MemberSample& m : sample.members()) {
      if (m.role() == "worker") {
        AddWorker(t, m, metric, workers[m.index()]);
        if (m.alive() && m.report().step() > 0) {
          total_rate += m.report().examples_per_sec();
          any_worker = true;
        }
      } else if (m.role() == "ps") {
        AddPs(t, m, shards[m.index()]);
      }
    }
    if (any_worker) cluster_rate.points.emplace_back(t, total_rate);
  }
}

// The charts drawn, in their order; rows and keys only for sparse models.
struct TrainingChartSet {
  Chart loss_time, acc_time, loss_step, acc_step, rate, pushes, staleness;
  Chart rows, keys;
};

// The charts with their titles and axes, and no series yet.
TrainingChartSet EmptyCharts(const std::string& metric) {
  TrainingChartSet c{
      {"Training loss", "seconds since the coordinator started", "loss"},
      {absl::StrCat("Test ", metric), "seconds since the coordinator started",
       metric},
      {"Training loss by step", "worker step", "loss"},
      {absl::StrCat("Test ", metric, " by step"), "worker step", metric},
      {"Throughput", "seconds since the coordinator started", "examples/s"},
      {"Pushes applied per ps", "seconds since the coordinator started",
       "pushes/s"},
      {"Staleness p99 since start", "seconds since the coordinator started",
       "updates"},
      {"Sparse rows per ps", "seconds since the coordinator started", "rows"},
      {"Sparse keys per second per ps", "seconds since the coordinator started",
       "keys/s"}};
  c.loss_time.y_min = c.loss_step.y_min = 0;
  c.rate.y_min = c.pushes.y_min = c.staleness.y_min = 0;
  c.rows.y_min = c.keys.y_min = 0;
  return c;
}

// Each worker's curves, and the cluster's rate when more than one worker ran.
void AddWorkerSeries(std::map<int, WorkerCurves>& workers, Series& cluster_rate,
                     TrainingChartSet& charts) {
  for (auto& [index, c] : workers) {
    const std::string name = absl::StrCat("worker ", index);
    c.loss_time.name = c.acc_time.name = c.loss_step.name = c.acc_step.name =
        c.rate_time.name = c.stale_time.name = name;
    charts.loss_time.series.push_back(std::move(c.loss_time));
    charts.acc_time.series.push_back(std::move(c.acc_time));
    charts.loss_step.series.push_back(std::move(c.loss_step));
    charts.acc_step.series.push_back(std::move(c.acc_step));
    charts.rate.series.push_back(std::move(c.rate_time));
    charts.staleness.series.push_back(std::move(c.stale_time));
  }
  if (workers.size() > 1) charts.rate.series.push_back(std::move(cluster_rate));
}

// Each ps's curves; the sparse ones only where the ps held sparse rows.
void AddPsSeries(std::map<int, PsCurve>& shards, TrainingChartSet& charts) {
  for (auto& [index, c] : shards) {
    const std::string name = absl::StrCat("ps ", index);
    c.pushes_time.name = c.stale_time.name = c.rows_time.name = name;
    c.push_keys_time.name = absl::StrCat(name, " push");
    c.pull_keys_time.name = absl::StrCat(name, " pull");
    c.evicted_time.name = absl::StrCat(name, " evicted");
    charts.pushes.series.push_back(std::move(c.pushes_time));
    charts.staleness.series.push_back(std::move(c.stale_time));
    if (!c.rows_time.points.empty()) {
      charts.rows.series.push_back(std::move(c.rows_time));
      if (!c.evicted_time.points.empty()) {
        charts.rows.series.push_back(std::move(c.evicted_time));
      }
      charts.keys.series.push_back(std::move(c.push_keys_time));
      charts.keys.series.push_back(std::move(c.pull_keys_time));
    }
  }
}

}  // namespace

std::vector<Chart> TrainingCharts(const proto::GetHistoryResponse& history) {
  std::map<int, WorkerCurves> workers;
  std::map<int, PsCurve> shards;
  Series cluster_rate{"cluster", {}};
  const std::string metric = ChartedMetric(history);
  CollectCurves(history, metric, workers, shards, cluster_rate);
  TrainingChartSet c = EmptyCharts(metric);
  AddWorkerSeries(workers, cluster_rate, c);
  AddPsSeries(shards, c);
  std::vector<Chart> charts = {c.loss_time, c.acc_time, c.loss_step, c.acc_step,
                               c.rate,      c.pushes,   c.staleness};
  if (!c.rows.series.empty()) {
    charts.push_back(std::move(c.rows));
    charts.push_back(std::move(c.keys));
  }
  return charts;
}

std::string TrainingPlotSvg(const proto::GetHistoryResponse& history) {
  std::vector<Chart> charts = TrainingCharts(history);
  const size_t workers = charts[0].series.size();
  const size_t shards = charts[5].series.size();
  double span = 0;
  if (history.samples_size() > 0) {
    span = history.samples(history.samples_size() - 1).time_seconds() -
           history.samples(0).time_seconds();
  }
  const std::string title = absl::StrFormat(
      "Downpour training: %d worker%s, %d ps, %.0f s of history", workers,
      workers == 1 ? "" : "s", shards, span);
  return RenderSvg(title, charts, 2);
}

}  // namespace downpour::tools
