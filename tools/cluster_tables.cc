// Fixed-width tables over ClusterStatus and the members' Status replies.
#include "tools/cluster_tables.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tools/status_table.h"

namespace downpour::tools {
namespace {

std::string Fixed(double value, int precision) {
  if (!std::isfinite(value)) return "-";
  return absl::StrFormat("%.*f", precision, value);
}

double Rate(const proto::GetStatusResponse& s, const std::string& name) {
  auto it = s.rates().find(name);
  return it == s.rates().end() ? 0.0 : it->second;
}

double Counter(const proto::GetStatusResponse& s, const std::string& name) {
  auto it = s.counters().find(name);
  return it == s.counters().end() ? 0.0 : it->second;
}

// "1.2/8.5": p50/p99 in milliseconds, "-" without recent calls.
std::string P50P99(const proto::GetStatusResponse& s, const std::string& name) {
  const proto::RpcLatency* l = FindLatency(s, name);
  if (l == nullptr || l->count() == 0) return "-";
  return absl::StrFormat("%.1f/%.1f", l->p50_seconds() * 1e3,
                         l->p99_seconds() * 1e3);
}

std::string Alive(const proto::MemberStatus& m) {
  if (!m.registered()) return "never";
  if (m.alive()) {
    // A standby's job, where it has one.
    if (m.role() == "standby" && m.serving_index() >= 0) {
      return absl::StrCat("yes (serves ps ", m.serving_index(), ")");
    }
    if (m.role() == "standby" && m.replica_of() >= 0) {
      return absl::StrCat("yes (backs up ps ", m.replica_of(), ")");
    }
    return "yes";
  }
  return m.report().finished() ? "done" : "DEAD";
}

std::string MegabytesPerSec(const proto::GetStatusResponse& s) {
  return Fixed((Rate(s, "bytes_in") + Rate(s, "bytes_out")) / 1e6, 1);
}

void AppendUnreachable(const proto::ClusterStatusResponse& cluster,
                       const MemberStatuses& statuses, const std::string& role,
                       std::string* out) {
  for (int i = 0; i < cluster.members_size(); ++i) {
    const proto::MemberStatus& m = cluster.members(i);
    if (m.role() != role || !m.registered() || statuses[i].ok()) continue;
    absl::StrAppendFormat(out, "  %s %d at %s: no status (%s)\n", role,
                          m.index(), m.address(),
                          statuses[i].status().message());
  }
}

}  // namespace

const proto::RpcLatency* FindLatency(const proto::GetStatusResponse& status,
                                     const std::string& name) {
  for (const proto::RpcLatency& l : status.latencies()) {
    if (l.name() == name) return &l;
  }
  return nullptr;
}

std::string StalenessP50P99Max(double p50, double p99, double max) {
  return absl::StrFormat("%.0f/%.0f/%.0f", p50, p99, max);
}

std::string Sparkline(const std::vector<double>& values, int width) {
  static const char* const kBars[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  const size_t first =
      values.size() > static_cast<size_t>(width) ? values.size() - width : 0;
  double lo = INFINITY, hi = -INFINITY;
  for (size_t i = first; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) continue;
    lo = std::min(lo, values[i]);
    hi = std::max(hi, values[i]);
  }
  std::string out;
  for (size_t i = first; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      out += " ";
      continue;
    }
    const int level =
        hi > lo ? static_cast<int>((values[i] - lo) / (hi - lo) * 7 + 0.5) : 3;
    out += kBars[std::clamp(level, 0, 7)];
  }
  return out;
}

std::string FormatWorkersTable(const proto::ClusterStatusResponse& cluster,
                               const MemberStatuses& statuses) {
  std::string out = absl::StrFormat(
      "%3s  %-21s %-5s %-7s %8s %8s %8s %7s %14s %7s %7s %6s %11s %11s %9s "
      "%s\n",
      "IDX", "ADDRESS", "ALIVE", "PARTS", "STEP", "EX/S", "LOSS", "TEST",
      "STALE50/99/MAX", "PULL/S", "PUSH/S", "MB/S", "PULL-MS", "PUSH-MS", "RSS",
      "DEVICE");
  for (int i = 0; i < cluster.members_size(); ++i) {
    const proto::MemberStatus& m = cluster.members(i);
    if (m.role() != "worker") continue;
    const proto::MemberReport& r = m.report();
    const bool reported = r.step() > 0 || r.finished();
    const proto::GetStatusResponse none;
    const proto::GetStatusResponse& s = statuses[i].ok() ? *statuses[i] : none;
    const bool live = statuses[i].ok();
    absl::StrAppendFormat(
        &out,
        "%3d  %-21s %-5s %-7s %8d %8.0f %8s %7s %14s %7s %7s %6s %11s %11s "
        "%9s %s\n",
        m.index(), m.address(), Alive(m),
        m.parts().empty() ? "-" : absl::StrJoin(m.parts(), ","), r.step(),
        r.examples_per_sec(), reported ? Fixed(r.loss(), 4) : "-",
        reported ? Fixed(TestFigure(r), 4) : "-",
        r.pushes() > 0
            ? StalenessP50P99Max(r.staleness_p50(), r.staleness_p99(),
                                 r.staleness_max())
            : "-",
        live ? Fixed(Rate(s, "pulls"), 1) : "-",
        live ? Fixed(Rate(s, "pushes"), 1) : "-",
        live ? MegabytesPerSec(s) : "-",
        live ? P50P99(s, "called:ParameterServer/Pull") : "-",
        live ? P50P99(s, "called:ParameterServer/Push") : "-",
        live ? FormatBytes(s.memory_rss_bytes()) : "-",
        !r.device().empty() ? r.device()
        : live              ? s.device()
                            : "-");
  }
  AppendUnreachable(cluster, statuses, "worker", &out);
  absl::StrAppend(
      &out,
      "PARTS: the data parts a worker trains on (its own, plus those of dead "
      "workers it adopted). STALE50/99/MAX: p50/p99/max staleness of the "
      "blocks the worker's pushes updated since it started (updates the ps "
      "applied to a block between the pull and the push). PULL-MS / PUSH-MS: "
      "p50/p99 round trip of the worker's pulls and pushes over the last "
      "10-20 s.\n");
  return out;
}

// "Suspect workers: ..." naming, per ps, the workers whose pushes its
// PushGuard refused (counters suspect_pushes_worker_<w>), most first.
void AppendSuspects(const proto::ClusterStatusResponse& cluster,
                    const MemberStatuses& statuses, std::string* out) {
  constexpr absl::string_view kPrefix = "suspect_pushes_worker_";
  std::vector<std::string> lines;
  for (int i = 0; i < cluster.members_size(); ++i) {
    const proto::MemberStatus& m = cluster.members(i);
    if (m.role() != "ps" || !statuses[i].ok()) continue;
    std::vector<std::pair<double, std::string>> suspects;
    for (const auto& [name, value] : statuses[i]->counters()) {
      if (value > 0 && absl::StartsWith(name, kPrefix)) {
        suspects.emplace_back(value, name.substr(kPrefix.size()));
      }
    }
    std::sort(suspects.rbegin(), suspects.rend());
    for (const auto& [value, worker] : suspects) {
      lines.push_back(absl::StrCat("ps ", m.index(), ": worker ", worker, " (",
                                   value, " pushes refused)"));
    }
  }
  if (lines.empty()) return;
  absl::StrAppend(out, "Suspect workers (robustness bounds): ",
                  absl::StrJoin(lines, "; "), "\n");
}

// Sparse models: a row per ps that holds sparse tables, from its Status
// (summed over its tables; a sparse_linear model has one): rows, heap bytes
// and bytes a row, non-zero weights, rows created and their rate, keys
// pulled and pushed per second, the row updates held, admission's keys
// counted but not admitted and updates dropped, and the rows evicted.
void AppendSparseTables(const proto::ClusterStatusResponse& cluster,
                        const MemberStatuses& statuses, std::string* out) {
  bool header = false;
  for (int i = 0; i < cluster.members_size(); ++i) {
    const proto::MemberStatus& m = cluster.members(i);
    if (m.role() != "ps" || !statuses[i].ok()) continue;
    const proto::GetStatusResponse& s = *statuses[i];
    if (Counter(s, "sparse_tables") <= 0) continue;
    if (!header) {
      absl::StrAppendFormat(out,
                            "\nSparse tables:\n%3s  %6s %11s %9s %6s %11s %11s "
                            "%9s %11s %11s %12s %9s %11s %11s\n",
                            "IDX", "TABLES", "ROWS", "BYTES", "B/ROW",
                            "NONZERO", "CREATED", "CREATE/S", "PULL-KEY/S",
                            "PUSH-KEY/S", "ROW-UPDATES", "PENDING", "FILTERED",
                            "EVICTED");
      header = true;
    }
    absl::StrAppendFormat(
        out,
        "%3d  %6d %11d %9s %6.1f %11d %11d %9s %11s %11s %12d %9d %11d %11d\n",
        m.index(), static_cast<int64_t>(Counter(s, "sparse_tables")),
        static_cast<int64_t>(Counter(s, "sparse_rows")),
        FormatBytes(Counter(s, "sparse_bytes")),
        Counter(s, "sparse_bytes_per_row"),
        static_cast<int64_t>(Counter(s, "sparse_nonzero")),
        static_cast<int64_t>(Counter(s, "sparse_rows_created")),
        Fixed(Rate(s, "sparse_rows_created"), 1),
        Fixed(Rate(s, "sparse_pull_keys"), 0),
        Fixed(Rate(s, "sparse_push_keys"), 0),
        static_cast<int64_t>(Counter(s, "sparse_row_updates")),
        static_cast<int64_t>(Counter(s, "sparse_pending_keys")),
        static_cast<int64_t>(Counter(s, "sparse_filtered_updates")),
        static_cast<int64_t>(Counter(s, "sparse_evicted_rows")));
  }
}

namespace {

// The `top` blocks of most updates a second (then newest, then by id), with
// their tensors from `info`.
void AppendHottestBlocks(
    std::vector<BlockRate> blocks, int top,
    const std::map<uint32_t, const proto::BlockInfo*>& info, std::string* out) {
  std::sort(blocks.begin(), blocks.end(),
            [](const BlockRate& a, const BlockRate& b) {
              if (a.updates_per_sec != b.updates_per_sec)
                return a.updates_per_sec > b.updates_per_sec;
              if (a.version != b.version) return a.version > b.version;
              return a.id < b.id;
            });
  if (blocks.size() > static_cast<size_t>(top)) blocks.resize(top);
  if (!blocks.empty()) {
    absl::StrAppendFormat(
        out, "\nHottest blocks:\n%6s  %-14s %9s %3s %10s %8s\n", "BLOCK",
        "TENSOR", "FLOATS", "PS", "UPDATES", "UPD/S");
    for (const BlockRate& b : blocks) {
      const proto::BlockInfo* i = info.count(b.id) ? info.at(b.id) : nullptr;
      absl::StrAppendFormat(out, "%6d  %-14s %9s %3d %10d %8.1f\n", b.id,
                            i ? i->tensor() : "?",
                            i ? absl::StrCat(i->floats()) : "?", b.shard,
                            b.version, b.updates_per_sec);
    }
  }
}

// The watch frame's first lines: the coordinator and the workers summed.
std::string WatchSummary(const std::string& coordinator,
                         const proto::ClusterStatusResponse& cluster) {
  int running = 0, workers = 0;
  double rate = 0, best = NAN, loss_sum = 0;
  int loss_n = 0;
  uint64_t steps = 0;
  for (const proto::MemberStatus& m : cluster.members()) {
    if (m.role() != "worker") continue;
    ++workers;
    const proto::MemberReport& r = m.report();
    if (m.alive() && !r.finished()) ++running;
    if (m.alive()) rate += r.examples_per_sec();
    steps += r.step();
    if (r.step() > 0 && std::isfinite(r.accuracy()) &&
        !(r.accuracy() <= best)) {
      best = r.accuracy();
    }
    if (m.alive() && r.step() > 0 && std::isfinite(r.loss())) {
      loss_sum += r.loss();
      ++loss_n;
    }
  }
  std::string out = absl::StrFormat(
      "downpour  coordinator %s  up %.0f s  placement epoch %d  %s\n",
      coordinator, cluster.uptime_seconds(), cluster.placement_epoch(),
      cluster.stop() ? absl::StrCat("job done: ", cluster.stop_reason())
                     : "training");
  absl::StrAppendFormat(
      &out,
      "workers %d/%d running  steps %d  %.0f examples/s  mean loss %s  "
      "best test acc %s\n",
      running, workers, steps, rate, loss_n ? Fixed(loss_sum / loss_n, 4) : "-",
      Fixed(best, 4));
  return out;
}

// Sparklines of the workers' rate and best accuracy over `history`.
void AppendHistory(const proto::GetHistoryResponse& history, std::string* out) {
  std::vector<double> rates, accuracies;
  for (const proto::HistorySample& sample : history.samples()) {
    double r = 0, a = NAN;
    for (const proto::MemberSample& m : sample.members()) {
      if (m.role() != "worker" || m.report().step() == 0) continue;
      if (m.alive()) r += m.report().examples_per_sec();
      const double acc = m.report().accuracy();
      if (std::isfinite(acc) && !(acc <= a)) a = acc;
    }
    rates.push_back(r);
    accuracies.push_back(a);
  }
  if (!rates.empty()) {
    absl::StrAppendFormat(out, "examples/s  %s\nbest acc    %s\n",
                          Sparkline(rates, 60), Sparkline(accuracies, 60));
  }
}

}  // namespace

std::string FormatShardsTable(const proto::ClusterStatusResponse& cluster,
                              const MemberStatuses& statuses,
                              const proto::GetPlacementResponse& placement,
                              const proto::DescribeModelResponse& model,
                              std::vector<BlockRate> blocks, int top) {
  std::map<uint32_t, const proto::BlockInfo*> info;
  for (const proto::BlockInfo& b : model.blocks()) info[b.id()] = &b;
  std::map<int, std::pair<int, double>> held;  // shard -> (blocks, floats)
  for (const proto::ShardInfo& shard : placement.shards()) {
    for (uint32_t id : shard.block_ids()) {
      auto& [count, floats] = held[shard.index()];
      ++count;
      if (info.count(id)) floats += info[id]->floats();
    }
  }
  std::string out = absl::StrFormat(
      "placement epoch %d, %d blocks, %d parameters (%s)\n", placement.epoch(),
      model.blocks_size(), model.num_params(),
      FormatBytes(model.num_params() * 4.0));
  absl::StrAppendFormat(
      &out, "%3s  %-21s %-5s %6s %9s %7s %7s %8s %6s %11s %11s %6s %14s %9s\n",
      "IDX", "ADDRESS", "ALIVE", "BLOCKS", "BYTES", "PULL/S", "PUSH/S", "UPD/S",
      "MB/S", "PULL-MS", "PUSH-MS", "REJECT", "STALE50/99/MAX", "RSS");
  for (int i = 0; i < cluster.members_size(); ++i) {
    const proto::MemberStatus& m = cluster.members(i);
    if (m.role() != "ps") continue;
    const proto::GetStatusResponse none;
    const proto::GetStatusResponse& s = statuses[i].ok() ? *statuses[i] : none;
    const bool live = statuses[i].ok();
    const auto [count, floats] = held[m.index()];
    absl::StrAppendFormat(
        &out,
        "%3d  %-21s %-5s %6d %9s %7s %7s %8s %6s %11s %11s %6s %14s %9s\n",
        m.index(), m.address(), Alive(m), count, FormatBytes(floats * 4),
        live ? Fixed(Rate(s, "pulls"), 1) : "-",
        live ? Fixed(Rate(s, "pushes"), 1) : "-",
        live ? Fixed(Rate(s, "applied_updates"), 1) : "-",
        live ? MegabytesPerSec(s) : "-",
        live ? P50P99(s, "served:ParameterServer/Pull") : "-",
        live ? P50P99(s, "served:ParameterServer/Push") : "-",
        live ? absl::StrCat(Counter(s, "rejected_pushes")) : "-",
        live ? StalenessP50P99Max(s.staleness_p50(), s.staleness_p99(),
                                  s.staleness_max())
             : "-",
        live ? FormatBytes(s.memory_rss_bytes()) : "-");
  }
  AppendUnreachable(cluster, statuses, "ps", &out);
  AppendSuspects(cluster, statuses, &out);
  AppendSparseTables(cluster, statuses, &out);
  AppendHottestBlocks(std::move(blocks), top, info, &out);
  return out;
}

std::string FormatWatchFrame(const std::string& coordinator,
                             const proto::ClusterStatusResponse& cluster,
                             const MemberStatuses& statuses,
                             const proto::GetHistoryResponse& history) {
  std::string out = WatchSummary(coordinator, cluster);
  AppendHistory(history, &out);
  absl::StrAppendFormat(
      &out, "\n%-7s %3s %-5s %8s %8s %8s %7s %7s %7s %6s %11s %9s\n", "ROLE",
      "IDX", "ALIVE", "STEP", "EX/S", "LOSS", "TEST", "PULL/S", "PUSH/S",
      "MB/S", "PUSH-MS", "RSS");
  for (int i = 0; i < cluster.members_size(); ++i) {
    const proto::MemberStatus& m = cluster.members(i);
    const proto::MemberReport& r = m.report();
    const bool worker = m.role() == "worker";
    const bool reported = worker && (r.step() > 0 || r.finished());
    const proto::GetStatusResponse none;
    const proto::GetStatusResponse& s = statuses[i].ok() ? *statuses[i] : none;
    const bool live = statuses[i].ok();
    absl::StrAppendFormat(
        &out, "%-7s %3d %-5s %8s %8s %8s %7s %7s %7s %6s %11s %9s\n", m.role(),
        m.index(), Alive(m), worker ? absl::StrCat(r.step()) : "-",
        worker ? Fixed(r.examples_per_sec(), 0) : "-",
        reported ? Fixed(r.loss(), 4) : "-",
        reported ? Fixed(TestFigure(r), 4) : "-",
        live ? Fixed(Rate(s, "pulls"), 1) : "-",
        live ? Fixed(Rate(s, "pushes"), 1) : "-",
        live ? MegabytesPerSec(s) : "-",
        live ? P50P99(s, worker ? "called:ParameterServer/Push"
                                : "served:ParameterServer/Push")
             : "-",
        live ? FormatBytes(s.memory_rss_bytes()) : "-");
  }
  return out;
}

MemberHealth DescribeHealth(
    const absl::StatusOr<std::string>& health,
    const absl::StatusOr<proto::GetStatusResponse>& status) {
  MemberHealth member;
  if (!health.ok()) {
    member.text = std::string(health.status().message());
    return member;
  }
  member.answered = true;
  member.text = *health;
  member.serving = *health == "SERVING";
  if (member.serving && status.ok() &&
      !status->last_checkpoint_error().empty()) {
    member.degraded = true;
    member.text = absl::StrCat(
        "DEGRADED (serving, but its last checkpoint "
        "failed: ",
        status->last_checkpoint_error(), ")");
  }
  return member;
}

}  // namespace downpour::tools
