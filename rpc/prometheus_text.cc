// Registry families + Status families -> Prometheus text, by
// prometheus::TextSerializer.
#include "rpc/prometheus_text.h"

#include <cstdint>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/counters.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "prometheus/client_metric.h"
#include "prometheus/metric_type.h"
#include "prometheus/text_serializer.h"

namespace downpour {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// Families by name: the registries' first, then Status's for names they lack.
class Families {
 public:
  explicit Families(std::vector<MetricFamily> registry) {
    for (MetricFamily& f : registry) Merge(std::move(f));
  }

  bool Has(const std::string& name) const { return index_.count(name) > 0; }

  // Starts a family (once per name) and returns it.
  MetricFamily& Family(const std::string& name, MetricType type,
                       const std::string& help) {
    auto [it, added] = index_.emplace(name, families_.size());
    if (added) families_.push_back({name, help, type, {}});
    return families_[it->second];
  }

  void Gauge(const std::string& name, const std::string& help, double value,
             std::vector<ClientMetric::Label> labels = {}) {
    ClientMetric m;
    m.label = std::move(labels);
    m.gauge.value = value;
    Family(name, MetricType::Gauge, help).metric.push_back(std::move(m));
  }

  // Every family, every series labelled role and index first.
  std::vector<MetricFamily> Take(const proto::GetStatusResponse& s) {
    for (MetricFamily& f : families_) {
      for (ClientMetric& m : f.metric) {
        m.label.insert(m.label.begin(), {{"role", s.role()},
                                         {"index", absl::StrCat(s.index())}});
      }
    }
    return std::move(families_);
  }

 private:
  // Two registries (the daemon's, the process's RPC latencies) may hold the
  // same family: one family, the series of both.
  void Merge(MetricFamily f) {
    auto [it, added] = index_.emplace(f.name, families_.size());
    if (added) {
      families_.push_back(std::move(f));
      return;
    }
    std::vector<ClientMetric>& into = families_[it->second].metric;
    into.insert(into.end(), f.metric.begin(), f.metric.end());
  }

  std::map<std::string, size_t> index_;
  std::vector<MetricFamily> families_;
};

// Every numeric scalar field of Status, by reflection, so that a field added
// to status.proto shows here without a change.
void AddStatusFields(const proto::GetStatusResponse& s, Families* out) {
  const google::protobuf::Descriptor* d = s.GetDescriptor();
  const google::protobuf::Reflection* r = s.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = d->field(i);
    if (f->is_repeated()) continue;
    double v = 0;
    switch (f->cpp_type()) {
      case google::protobuf::FieldDescriptor::CPPTYPE_DOUBLE:
        v = r->GetDouble(s, f);
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_FLOAT:
        v = r->GetFloat(s, f);
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_UINT64:
        v = static_cast<double>(r->GetUInt64(s, f));
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_INT64:
        v = static_cast<double>(r->GetInt64(s, f));
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_UINT32:
        v = r->GetUInt32(s, f);
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_INT32:
        if (f->name() == "index") continue;  // a label
        v = r->GetInt32(s, f);
        break;
      default:
        continue;
    }
    const std::string name = "downpour_" + PrometheusName(f->name());
    if (out->Has(name)) continue;
    out->Gauge(name, absl::StrCat("Status field ", f->name(), "."), v);
  }
}

// The Status counters no registry exports: those a daemon's filler sets.
// Counters with a rate come from the registry (Counters::Rates samples it).
void AddFilledCounters(const proto::GetStatusResponse& s, Families* out) {
  for (const auto& [counter, value] : s.counters()) {
    if (s.rates().count(counter) > 0) continue;
    const std::string name = "downpour_" + PrometheusName(counter);
    if (out->Has(name) || out->Has(name + "_total")) continue;
    out->Gauge(name, absl::StrCat("Status counter ", counter, "."), value);
  }
}

// Staleness: cumulative buckets up to the largest staleness each counts.
void AddStaleness(const proto::GetStatusResponse& s, Families* out) {
  ClientMetric m;
  uint64_t cumulative = 0;
  for (int i = 0; i < s.staleness_histogram_size(); ++i) {
    cumulative += s.staleness_histogram(i);
    const uint64_t le = StalenessHistogram::BucketLowerBound(i + 1) - 1;
    m.histogram.bucket.push_back({cumulative, static_cast<double>(le)});
  }
  // The serializer writes the +Inf bucket itself, from the count.
  m.histogram.sample_count = cumulative;
  m.histogram.sample_sum = s.staleness_mean() * static_cast<double>(cumulative);
  out->Family("downpour_staleness", MetricType::Histogram,
              "Updates a block received between the pull a gradient was "
              "computed on and the push that applied it, per applied block "
              "update.")
      .metric.push_back(std::move(m));
}

}  // namespace

std::string PrometheusName(const std::string& name) {
  std::string out;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '_';
    out += ok ? c : '_';
  }
  if (out.empty() || (out[0] >= '0' && out[0] <= '9')) out = "_" + out;
  return out;
}

std::string PrometheusText(std::vector<MetricFamily> registry,
                           const proto::GetStatusResponse& s) {
  Families families(std::move(registry));
  families.Gauge("downpour_up", "1 while the daemon answers.", 1);
  AddStatusFields(s, &families);
  families.Gauge("downpour_checkpoint_failing",
                 "1 while the ps's last checkpoint attempt failed "
                 "(Status last_checkpoint_error).",
                 s.last_checkpoint_error().empty() ? 0 : 1);
  families.Gauge("downpour_waiting_for_ps",
                 "1 while a worker's training waits for an unreachable ps "
                 "(Status waiting_for).",
                 s.waiting_for().empty() ? 0 : 1);
  AddFilledCounters(s, &families);
  for (const auto& [metric, value] : s.metrics()) {
    families.Gauge("downpour_test_metric",
                   "The worker's last test metrics of model.task.", value,
                   {{"metric", metric}});
  }
  AddStaleness(s, &families);
  return prometheus::TextSerializer().Serialize(families.Take(s));
}

}  // namespace downpour
