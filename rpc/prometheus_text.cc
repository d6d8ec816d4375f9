// GetStatusResponse -> Prometheus text format.
#include "rpc/prometheus_text.h"

#include <cstdint>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/counters.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace downpour {
namespace {

// A label value escaped: backslash, double quote and newline.
std::string Escape(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// A sample value: integers without a fraction, others as %.17g does.
std::string Value(double v) {
  if (v != v) return "NaN";
  if (v == static_cast<double>(static_cast<int64_t>(v)) && v < 9e15 &&
      v > -9e15) {
    return absl::StrCat(static_cast<int64_t>(v));
  }
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.17g", v);
  return buffer;
}

class Writer {
 public:
  explicit Writer(const proto::GetStatusResponse& s)
      : labels_(absl::StrCat("role=\"", Escape(s.role()), "\",index=\"",
                             s.index(), "\"")) {}

  // Starts a metric family (once per name).
  void Family(const std::string& name, const char* type,
              const std::string& help) {
    if (!families_.insert(name).second) return;
    absl::StrAppend(&out_, "# HELP ", name, " ", help, "\n# TYPE ", name, " ",
                    type, "\n");
  }
  void Sample(const std::string& name, double value,
              const std::string& extra = "") {
    absl::StrAppend(&out_, name, "{", labels_, extra.empty() ? "" : ",", extra,
                    "} ", Value(value), "\n");
  }
  bool Has(const std::string& name) const { return families_.count(name); }
  std::string Take() { return std::move(out_); }

 private:
  const std::string labels_;
  std::set<std::string> families_;
  std::string out_;
};

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

std::string PrometheusText(const proto::GetStatusResponse& s) {
  Writer w(s);
  w.Family("downpour_up", "gauge", "1 while the daemon answers.");
  w.Sample("downpour_up", 1);
  // Every numeric scalar field of Status, by reflection, so that a field
  // added to status.proto shows here without a change.
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
    w.Family(name, "gauge", absl::StrCat("Status field ", f->name(), "."));
    w.Sample(name, v);
  }
  w.Family("downpour_checkpoint_failing", "gauge",
           "1 while the ps's last checkpoint attempt failed "
           "(Status last_checkpoint_error).");
  w.Sample("downpour_checkpoint_failing",
           s.last_checkpoint_error().empty() ? 0 : 1);
  w.Family("downpour_waiting_for_ps", "gauge",
           "1 while a worker's training waits for an unreachable ps "
           "(Status waiting_for).");
  w.Sample("downpour_waiting_for_ps", s.waiting_for().empty() ? 0 : 1);
  for (const auto& [counter, value] : s.counters()) {
    const bool monotonic = s.rates().count(counter) > 0;
    const std::string name =
        "downpour_" + PrometheusName(counter) + (monotonic ? "_total" : "");
    if (w.Has(name)) continue;  // a counter named like a Status field
    w.Family(name, monotonic ? "counter" : "gauge",
             absl::StrCat("Status counter ", counter, "."));
    w.Sample(name, value);
  }
  if (!s.metrics().empty()) {
    w.Family("downpour_test_metric", "gauge",
             "The worker's last test metrics of model.task.");
    for (const auto& [metric, value] : s.metrics()) {
      w.Sample("downpour_test_metric", value,
               absl::StrCat("metric=\"", Escape(metric), "\""));
    }
  }
  // Staleness: cumulative buckets up to the largest staleness each counts.
  w.Family("downpour_staleness", "histogram",
           "Updates a block received between the pull a gradient was "
           "computed on and the push that applied it, per applied block "
           "update.");
  uint64_t cumulative = 0;
  for (int i = 0; i < s.staleness_histogram_size(); ++i) {
    cumulative += s.staleness_histogram(i);
    const uint64_t le = StalenessHistogram::BucketLowerBound(i + 1) - 1;
    w.Sample("downpour_staleness_bucket", static_cast<double>(cumulative),
             absl::StrCat("le=\"", le, "\""));
  }
  w.Sample("downpour_staleness_bucket", static_cast<double>(cumulative),
           "le=\"+Inf\"");
  w.Sample("downpour_staleness_sum",
           s.staleness_mean() * static_cast<double>(cumulative));
  w.Sample("downpour_staleness_count", static_cast<double>(cumulative));
  if (s.latencies_size() > 0) {
    w.Family("downpour_rpc_calls_total", "counter",
             "RPCs of each kind since start (served:... and called:...).");
    for (const proto::RpcLatency& l : s.latencies()) {
      w.Sample("downpour_rpc_calls_total",
               static_cast<double>(l.total_count()),
               absl::StrCat("call=\"", Escape(l.name()), "\""));
    }
    w.Family("downpour_rpc_duration_seconds", "histogram",
             "RPC latency since start (served:... and called:...).");
    for (const proto::RpcLatency& l : s.latencies()) {
      if (l.bucket_counts_size() != kLatencyBucketBounds.size() + 1) continue;
      const std::string call = absl::StrCat("call=\"", Escape(l.name()), "\"");
      uint64_t cumulative = 0;
      for (size_t i = 0; i < kLatencyBucketBounds.size(); ++i) {
        cumulative += l.bucket_counts(static_cast<int>(i));
        w.Sample("downpour_rpc_duration_seconds_bucket",
                 static_cast<double>(cumulative),
                 absl::StrCat(call, ",le=\"", kLatencyBucketBounds[i], "\""));
      }
      cumulative += l.bucket_counts(static_cast<int>(kLatencyBucketBounds.size()));
      w.Sample("downpour_rpc_duration_seconds_bucket",
               static_cast<double>(cumulative), call + ",le=\"+Inf\"");
      w.Sample("downpour_rpc_duration_seconds_sum", l.sum_seconds(), call);
      w.Sample("downpour_rpc_duration_seconds_count",
               static_cast<double>(cumulative), call);
    }
    w.Family("downpour_rpc_latency_seconds", "gauge",
             "RPC latency quantiles over the recent window (about 10 s).");
    for (const proto::RpcLatency& l : s.latencies()) {
      const std::string call = absl::StrCat("call=\"", Escape(l.name()), "\"");
      w.Sample("downpour_rpc_latency_seconds", l.p50_seconds(),
               call + ",quantile=\"0.5\"");
      w.Sample("downpour_rpc_latency_seconds", l.p90_seconds(),
               call + ",quantile=\"0.9\"");
      w.Sample("downpour_rpc_latency_seconds", l.p99_seconds(),
               call + ",quantile=\"0.99\"");
    }
  }
  return w.Take();
}

}  // namespace downpour
