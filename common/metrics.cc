// The declared metrics: one prometheus family per metric, resolved to its
// handle once, at construction.
#include "common/metrics.h"

#include "absl/strings/str_cat.h"

namespace downpour {
namespace {

std::string CounterFamily(const char* name) {
  return absl::StrCat("downpour_", name, "_total");
}

std::string GaugeFamily(const char* name) {
  return absl::StrCat("downpour_", name);
}

}  // namespace

CounterStat::CounterStat(prometheus::Registry& registry, const char* name,
                         const char* help)
    : counter_(prometheus::BuildCounter()
                   .Name(CounterFamily(name))
                   .Help(help)
                   .Register(registry)
                   .Add({})) {}

GaugeStat::GaugeStat(prometheus::Registry& registry, const char* name,
                     const char* help)
    : gauge_(prometheus::BuildGauge()
                 .Name(GaugeFamily(name))
                 .Help(help)
                 .Register(registry)
                 .Add({})) {}

WorkerCounterStat::WorkerCounterStat(prometheus::Registry& registry,
                                     const char* name,
                                     const char* status_prefix,
                                     const char* help)
    : family_(prometheus::BuildCounter()
                  .Name(CounterFamily(name))
                  .Help(help)
                  .Register(registry)),
      status_prefix_(status_prefix) {}

void WorkerCounterStat::Increment(int32_t worker) {
  absl::MutexLock lock(&mu_);
  prometheus::Counter*& counter = workers_[worker];
  if (counter == nullptr) {
    counter = &family_.Add({{"worker", absl::StrCat(worker)}});
  }
  counter->Increment();
}

void WorkerCounterStat::ForEach(
    const std::function<void(const std::string&, double)>& fn) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [worker, counter] : workers_) {
    fn(absl::StrCat(status_prefix_, worker), counter->Value());
  }
}

Stats::Stats(prometheus::Registry& registry)
    :
#define DOWNPOUR_STATS_INIT(name, help) name(registry, #name, help),
#define DOWNPOUR_STATS_INIT_WORKER(name, prefix, help) \
  name(registry, #name, prefix, help),
      DOWNPOUR_COUNTERS(DOWNPOUR_STATS_INIT)
          DOWNPOUR_GAUGES(DOWNPOUR_STATS_INIT)
              DOWNPOUR_WORKER_COUNTERS(DOWNPOUR_STATS_INIT_WORKER)
#undef DOWNPOUR_STATS_INIT
#undef DOWNPOUR_STATS_INIT_WORKER
                  counters_() {
#define DOWNPOUR_STATS_INDEX_COUNTER(name, help) \
  counters_[#name] = &name;                      \
  exported_[CounterFamily(#name)] = [this] { return name.exported(); };
#define DOWNPOUR_STATS_INDEX_GAUGE(name, help) \
  gauges_[#name] = &name;                      \
  exported_[GaugeFamily(#name)] = [this] { return name.exported(); };
  DOWNPOUR_COUNTERS(DOWNPOUR_STATS_INDEX_COUNTER)
  DOWNPOUR_GAUGES(DOWNPOUR_STATS_INDEX_GAUGE)
#undef DOWNPOUR_STATS_INDEX_COUNTER
#undef DOWNPOUR_STATS_INDEX_GAUGE
}

CounterStat* Stats::FindCounter(absl::string_view name) const {
  auto it = counters_.find(name);
  return it == counters_.end() ? nullptr : it->second;
}

GaugeStat* Stats::FindGauge(absl::string_view name) const {
  auto it = gauges_.find(name);
  return it == gauges_.end() ? nullptr : it->second;
}

void Stats::ForEach(
    const std::function<void(const std::string&, double, bool)>& fn) const {
  for (const auto& [name, counter] : counters_) {
    if (counter->exported()) fn(name, counter->Value(), true);
  }
  for (const auto& [name, gauge] : gauges_) {
    if (gauge->exported()) fn(name, gauge->Value(), false);
  }
  const auto worker = [&](const std::string& name, double value) {
    fn(name, value, true);
  };
#define DOWNPOUR_STATS_FOR_WORKER(name, prefix, help) name.ForEach(worker);
  DOWNPOUR_WORKER_COUNTERS(DOWNPOUR_STATS_FOR_WORKER)
#undef DOWNPOUR_STATS_FOR_WORKER
}

bool Stats::Hidden(const std::string& family) const {
  auto it = exported_.find(family);
  return it != exported_.end() && !it->second();
}

}  // namespace downpour
