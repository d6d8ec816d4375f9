// The launcher's summary: figures from the coordinator, text and JSON.
#include "deploy/launch_summary.h"

#include <algorithm>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/divergence_advice.h"
#include "common/file_util.h"
#include "common/json.h"
#include "model/metrics.h"

namespace downpour {
namespace {

// How long outage `o` lasted: until it ended, or, for one still open (a
// member stopped or dead that never came back), until the end of the job.
double OutageSeconds(const LaunchSummary& s, const proto::MemberOutage& o) {
  if (o.end_seconds() >= 0) return o.end_seconds() - o.start_seconds();
  return std::max(0.0,
                  s.seconds - (o.start_seconds() + s.coordinator_offset_s));
}

std::string Num(double v, int precision) {
  return std::isnan(v) ? "    -   " : absl::StrFormat("%.*f", precision, v);
}

const char* Bool(bool b) { return b ? "true" : "false"; }

// The larger of `a` and `b`, ignoring NaN (NaN when both are).
double MaxKnown(double a, double b) {
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  return std::max(a, b);
}

// "\"auc\": 0.91, \"logloss\": 0.3" (null for NaN).
std::string MetricsJson(
    const std::vector<std::pair<std::string, double>>& metrics) {
  std::vector<std::string> parts;
  for (const auto& [name, value] : metrics) {
    parts.push_back(absl::StrCat(JsonString(name), ": ", JsonNumber(value)));
  }
  return absl::StrJoin(parts, ", ");
}

// The sum over `workers` of their examples by epoch (WorkerResult).
std::vector<int64_t> ExamplesPerEpoch(
    const std::vector<WorkerResult>& workers) {
  std::vector<int64_t> sums;
  for (const WorkerResult& w : workers) {
    if (w.epoch_examples.size() > sums.size()) {
      sums.resize(w.epoch_examples.size());
    }
    for (size_t e = 0; e < w.epoch_examples.size(); ++e) {
      sums[e] += w.epoch_examples[e];
    }
  }
  return sums;
}

}  // namespace

void SetMark(const Config& config, double accuracy_mark,
             LaunchSummary* summary) {
  summary->task = config.model.task;
  const JobTarget target = std::isnan(accuracy_mark)
                               ? TargetOf(config)
                               : JobTarget{"accuracy", accuracy_mark, false};
  summary->mark_metric = target.metric;
  summary->mark = target.value;
}

std::string FormatStaleness(double p50, double p99, double max) {
  if (std::isnan(p50) || std::isnan(p99) || std::isnan(max)) return "-";
  return absl::StrFormat("%.0f/%.0f/%.0f", p50, p99, max);
}

std::vector<WorkerResult> WorkerResults(
    const proto::ClusterStatusResponse& status) {
  std::vector<WorkerResult> workers;
  for (const proto::MemberStatus& m : status.members()) {
    if (m.role() != "worker") continue;
    const proto::MemberReport& r = m.report();
    // Before its first report a worker's figures are proto defaults, not zeros.
    const bool reported = r.step() > 0 || r.finished();
    const bool pushed = r.pushes() > 0;
    workers.push_back(
        {m.index(), static_cast<int64_t>(r.step()),
         static_cast<int64_t>(r.examples()), r.examples_per_sec(),
         reported ? r.loss() : NAN, reported ? r.accuracy() : NAN, r.finished(),
         r.diverged(), pushed ? r.staleness_p50() : NAN,
         pushed ? r.staleness_p99() : NAN, pushed ? r.staleness_max() : NAN,
         pushed ? r.mean_staleness() : NAN});
    workers.back().pushes = static_cast<int64_t>(r.pushes());
    workers.back().refused_steps = static_cast<int64_t>(r.refused_steps());
    workers.back().metrics = {r.metrics().begin(), r.metrics().end()};
    workers.back().epoch_examples = {r.epoch_examples().begin(),
                                     r.epoch_examples().end()};
    workers.back().data_bytes_read = r.data_bytes_read();
    workers.back().data_bytes_total = r.data_bytes_total();
    workers.back().planned_steps = r.planned_steps();
    workers.back().alive = m.alive();
    workers.back().joined = m.joined();
    workers.back().drained = m.drained();
    workers.back().parts = {m.parts().begin(), m.parts().end()};
  }
  return workers;
}

std::string GroupDigits(int64_t n) {
  std::string digits = absl::StrCat(n < 0 ? -static_cast<uint64_t>(n) : n);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) {
    digits.insert(i, ",");
  }
  return n < 0 ? "-" + digits : digits;
}

void AddWorkerResults(std::vector<WorkerResult> workers,
                      LaunchSummary* summary) {
  summary->workers = std::move(workers);
  summary->examples_per_epoch = ExamplesPerEpoch(summary->workers);
  summary->steps = 0;
  summary->refused_steps = 0;
  summary->examples = 0;
  summary->examples_per_sec = 0;
  summary->staleness_p50 = NAN;
  summary->staleness_p99 = NAN;
  summary->staleness_max = NAN;
  double accuracy_sum = 0;
  int evaluated = 0;
  for (const WorkerResult& w : summary->workers) {
    summary->staleness_p50 = MaxKnown(summary->staleness_p50, w.staleness_p50);
    summary->staleness_p99 = MaxKnown(summary->staleness_p99, w.staleness_p99);
    summary->staleness_max = MaxKnown(summary->staleness_max, w.staleness_max);
    summary->steps += w.step;
    summary->refused_steps += w.refused_steps;
    summary->examples += w.examples;
    summary->examples_per_sec += w.examples_per_sec;
    if (w.finished && !std::isnan(w.accuracy)) {
      accuracy_sum += w.accuracy;
      ++evaluated;
    }
  }
  summary->final_accuracy = evaluated > 0 ? accuracy_sum / evaluated : NAN;
  summary->final_metrics.clear();
  for (const std::string& name : TaskMetricNames(summary->task)) {
    double sum = 0;
    int n = 0;
    for (const WorkerResult& w : summary->workers) {
      const auto it = w.metrics.find(name);
      if (!w.finished || it == w.metrics.end() || std::isnan(it->second)) {
        continue;
      }
      sum += it->second;
      ++n;
    }
    // Workers that report only accuracy (MemberReport.accuracy) still count.
    const double mean = n > 0                ? sum / n
                        : name == "accuracy" ? summary->final_accuracy
                                             : NAN;
    summary->final_metrics.emplace_back(name, mean);
  }
  double saturated_sum = 0;
  int saturated_n = 0;
  for (const WorkerResult& w : summary->workers) {
    const auto it = w.metrics.find("saturated");
    if (!w.finished || it == w.metrics.end() || std::isnan(it->second)) {
      continue;
    }
    saturated_sum += it->second;
    ++saturated_n;
  }
  summary->saturated = saturated_n > 0 ? saturated_sum / saturated_n : NAN;
}

std::string SaturationNote(const LaunchSummary& summary, const Config& config) {
  if (!AccuracyNote(config).empty()) return "";
  return model::SaturationWarning(summary.saturated, config.model.type);
}

// "<what>; the model did not learn. Likely causes: ... To fix: ...".
std::string NotLearned(const Config& config, const std::string& what) {
  const DivergenceAdvice advice = AdviseOnDivergence(
      config.optimizer, static_cast<int>(config.cluster.workers.size()));
  return absl::StrFormat(
      "%s; the model did not learn. Likely causes: %s. To fix: %s.", what,
      advice.causes, advice.knobs);
}

std::string JudgeTraining(const LaunchSummary& summary, const Config& config) {
  for (const WorkerResult& w : summary.workers) {
    if (!w.diverged.empty()) return w.diverged;
  }
  if (summary.interrupted) return "";
  if (!AccuracyNote(config).empty()) return "";
  if (config.model.task == Task::kRegression) {
    double r2 = NAN;
    for (const auto& [name, value] : summary.final_metrics) {
      if (name == "r2") r2 = value;
    }
    if (!(r2 < 0)) return "";
    return NotLearned(
        config,
        absl::StrFormat("final test r2 %.4f is below 0: the model predicts "
                        "worse than the mean of the targets",
                        r2));
  }
  if (config.model.task == Task::kBinary) {
    double auc = NAN;
    for (const auto& [name, value] : summary.final_metrics) {
      if (name == "auc") auc = value;
    }
    if (!std::isnan(auc)) {
      if (auc > kChanceAuc) return "";
      return NotLearned(
          config, absl::StrFormat("final test AUC %.4f is at chance level "
                                  "(chance 0.5000, failure at or below %.4f)",
                                  auc, kChanceAuc));
    }
  }
  // A tensors model's classes are its workers' business.
  if (std::isnan(summary.final_accuracy) ||
      config.model.type == ModelType::kTensors) {
    return "";
  }
  // A binary model has one output but two classes.
  const int classes =
      config.model.task == Task::kBinary
          ? 2
          : (config.model.layers.empty() ? 0 : config.model.layers.back());
  if (classes < 2) return "";
  const double chance = 1.0 / classes;
  const double bar = kChanceMargin / classes;
  if (summary.final_accuracy > bar) return "";
  return NotLearned(
      config, absl::StrFormat("final test accuracy %.4f is at chance level (%d "
                              "classes: chance %.4f, failure at or below %.4f)",
                              summary.final_accuracy, classes, chance, bar));
}

std::string SummaryOutcome(const LaunchSummary& summary,
                           const std::string& job_error) {
  if (summary.interrupted) return "interrupted";
  if (!job_error.empty()) return absl::StrCat("failed: ", job_error);
  if (!summary.failure.empty())
    return absl::StrCat("failed: ", summary.failure);
  const std::string loss = LossNote(summary);
  if (!loss.empty()) return absl::StrCat("succeeded with loss: ", loss);
  return "succeeded";
}

namespace {

// Per shard that was recovered: the acknowledged pushes lost over its
// recoveries, and whether every figure is final.
struct ShardLoss {
  uint64_t lost = 0;
  bool final = true;
};
std::map<int, ShardLoss> LossPerShard(const LaunchSummary& summary) {
  std::map<int, ShardLoss> per_shard;
  for (const proto::ShardRecovery& r : summary.shard_recoveries) {
    ShardLoss& loss = per_shard[r.shard()];
    loss.lost += r.acked_pushes_lost();
    loss.final = loss.final && r.loss_final();
  }
  return per_shard;
}

}  // namespace

std::string AccuracyNote(const Config& config) {
  if (config.compute.device != ComputeDevice::kSimulated ||
      config.compute.simulated_real_gradients) {
    return "";
  }
  return "not meaningful (compute.device simulated computes no real "
         "gradients)";
}

std::string LossNote(const LaunchSummary& summary) {
  std::vector<std::string> parts;
  for (const auto& [shard, loss] : LossPerShard(summary)) {
    if (loss.lost == 0) continue;
    parts.push_back(absl::StrCat(
        loss.final ? "" : "at least ", loss.lost, " acknowledged push",
        loss.lost == 1 ? "" : "es", " of shard ", shard));
  }
  return absl::StrJoin(parts, " and ");
}

double SecondsToBackup(const LaunchSummary& summary,
                       const proto::ShardRecovery& r) {
  if (r.backup_in_sync_seconds() < 0) return -1;
  const double at = r.time_seconds() + summary.coordinator_offset_s;
  // The last daemon end the launcher saw before the recovery (it polls
  // every 0.1 s, so a fault may be seen just after the coordinator acted).
  double fault = -1;
  for (const FaultRecord& f : summary.faults) {
    if (f.time_s <= at + 0.5 && f.time_s > fault) fault = f.time_s;
  }
  if (fault < 0) return -1;
  return r.backup_in_sync_seconds() + summary.coordinator_offset_s - fault;
}

std::string RecoveryNote(const std::vector<FaultRecord>& faults) {
  if (faults.empty()) return "";
  std::vector<std::string> parts;
  for (const FaultRecord& f : faults) {
    parts.push_back(absl::StrCat(f.daemon, " ", f.what, ", ", f.action));
  }
  return absl::StrCat("the job saw ", faults.size(),
                      faults.size() == 1 ? " fault: " : " faults: ",
                      absl::StrJoin(parts, "; "));
}

namespace {

// The verdict line and the job's results: metrics, target, steps, rates.
void AppendResults(const LaunchSummary& s, std::string* out) {
  if (s.job_failed && !s.failure.empty()) {
    absl::StrAppendFormat(out, "Job FAILED: %s\n", s.failure);
  } else if (!s.failure.empty()) {
    absl::StrAppendFormat(out, "Training FAILED: %s\n", s.failure);
  } else if (absl::StartsWith(s.outcome, "failed")) {
    absl::StrAppendFormat(out, "Job FAILED: %s\n", s.outcome.substr(8));
  } else {
    absl::StrAppendFormat(
        out, "%s\n",
        s.interrupted ? "Training interrupted." : "Training done.");
  }
  if (!s.stop_reason.empty()) {
    absl::StrAppendFormat(out, "  why it stopped:       %s\n", s.stop_reason);
  }
  if (!s.accuracy_note.empty()) {
    absl::StrAppendFormat(out, "  final test metrics:   %s\n", s.accuracy_note);
  } else {
    std::vector<std::string> parts;
    for (const auto& [name, value] : s.final_metrics) {
      parts.push_back(absl::StrCat(name, " ", Num(value, 4)));
    }
    if (parts.empty())
      parts.push_back(absl::StrCat("accuracy ", Num(s.final_accuracy, 4)));
    absl::StrAppendFormat(out,
                          "  final test metrics:   %s (%s; mean of the "
                          "workers' evaluations of the final parameters)\n",
                          absl::StrJoin(parts, ", "), TaskName(s.task));
  }
  if (!s.saturation_warning.empty()) {
    absl::StrAppendFormat(out, "  WARNING:              %s\n",
                          s.saturation_warning);
  }
  if (!s.mark_metric.empty()) {
    const std::string mark = absl::StrFormat("%s %g", s.mark_metric, s.mark);
    if (s.seconds_to_mark >= 0) {
      absl::StrAppendFormat(out, "  reached %s after %.1f s\n", mark,
                            s.seconds_to_mark);
    } else {
      absl::StrAppendFormat(out, "  reached %s:  never\n", mark);
    }
  }
  absl::StrAppendFormat(out, "  steps (all workers):  %d\n", s.steps);
  if (s.refused_steps > 0) {
    absl::StrAppendFormat(
        out,
        "  refused steps:        %d (a ps's push guard refused their pushes "
        "as outliers, robustness.norm_refuse_factor: not applied, not in "
        "examples/s; the ps logs why)\n",
        s.refused_steps);
  }
  absl::StrAppendFormat(out, "  examples/s (cluster): %.0f\n",
                        s.examples_per_sec);
  absl::StrAppendFormat(
      out,
      "  staleness p50/p99/max: %s (updates a block received "
      "between pull and push; worst worker)\n",
      FormatStaleness(s.staleness_p50, s.staleness_p99, s.staleness_max));
}

// The faults and what they cost: shard moves, backups, outages, losses.
void AppendFaults(const LaunchSummary& s, std::string* out) {
  if (!s.faults.empty()) {
    absl::StrAppendFormat(out, "  faults:               %s\n",
                          RecoveryNote(s.faults));
  }
  for (const proto::ShardRecovery& r : s.shard_recoveries) {
    const double to_backup = SecondsToBackup(s, r);
    absl::StrAppendFormat(
        out,
        "  shard %d moved:        at %.1f s, %s -> %s (from its %s): %s%d "
        "acknowledged pushes lost; %s\n",
        r.shard(), r.time_seconds() + s.coordinator_offset_s, r.from_address(),
        r.to_address(), r.source(), r.loss_final() ? "" : "at least ",
        r.acked_pushes_lost(),
        to_backup >= 0
            ? absl::StrFormat("in-sync backup again %.2f s after the fault",
                              to_backup)
            : std::string("no in-sync backup after it"));
  }
  for (const proto::ShardReplication& r : s.shard_replication) {
    if (r.unreplicated_seconds() <= 0 && r.backup_standby() >= 0) continue;
    absl::StrAppendFormat(
        out, "  shard %d backup:       %s; %.1f s without an in-sync one\n",
        r.shard(),
        r.backup_standby() < 0
            ? std::string("NONE at the end")
            : absl::StrCat("standby ", r.backup_standby(), " at the end"),
        r.unreplicated_seconds());
  }
  for (const proto::MemberOutage& o : s.outages) {
    const double start = o.start_seconds() + s.coordinator_offset_s;
    absl::StrAppendFormat(
        out,
        "  outage:               %s %d at %s declared dead at %.1f s, %s\n",
        o.role(), o.index(), o.address(), start,
        o.end_seconds() < 0
            ? absl::StrFormat("for %.1f s (still down at the end of the job)",
                              OutageSeconds(s, o))
            : absl::StrFormat("for %.1f s (%s)", OutageSeconds(s, o),
                              o.ended_by()));
  }
  if (!s.shard_recoveries.empty()) {
    const std::string loss = LossNote(s);
    absl::StrAppendFormat(out, "  acknowledged lost:    %s\n",
                          loss.empty() ? "none (0 pushes)" : loss);
  }
}

// One object per line inside a JSON array that opens on the key's line.
std::string JsonArray(const std::vector<std::string>& items) {
  if (items.empty()) return "[]";
  return absl::StrCat("[\n", absl::StrJoin(items, ",\n"), "\n  ]");
}

std::string WorkerJson(const WorkerResult& w) {
  return absl::StrCat(
      "    {\"index\": ", w.index, ", \"steps\": ", w.step,
      ", \"examples\": ", w.examples,
      ", \"examples_per_sec\": ", JsonNumber(w.examples_per_sec),
      ", \"loss\": ", JsonNumber(w.loss),
      ", \"accuracy\": ", JsonNumber(w.accuracy), ", \"metrics\": {",
      MetricsJson({w.metrics.begin(), w.metrics.end()}),
      "}, \"finished\": ", Bool(w.finished),
      ", \"diverged\": ", JsonString(w.diverged),
      ", \"staleness_p50\": ", JsonNumber(w.staleness_p50),
      ", \"staleness_p99\": ", JsonNumber(w.staleness_p99),
      ", \"staleness_max\": ", JsonNumber(w.staleness_max),
      ", \"staleness_mean\": ", JsonNumber(w.staleness_mean),
      ", \"pushes\": ", w.pushes, ", \"refused_steps\": ", w.refused_steps,
      ", \"joined\": ", Bool(w.joined), ", \"drained\": ", Bool(w.drained),
      "}");
}

std::string FaultJson(const FaultRecord& f) {
  return absl::StrCat(
      "    {\"time_s\": ", JsonNumber(f.time_s),
      ", \"daemon\": ", JsonString(f.daemon),
      ", \"what\": ", JsonString(f.what), ", \"exit_status\": ", f.exit_status,
      ", \"signal\": ", f.signal, ", \"action\": ", JsonString(f.action),
      ", \"reason\": ", JsonString(f.reason), "}");
}

std::string RecoveryJson(const LaunchSummary& s,
                         const proto::ShardRecovery& r) {
  const double to_backup = SecondsToBackup(s, r);
  return absl::StrCat(
      "    {\"shard\": ", r.shard(),
      ", \"time_s\": ", JsonNumber(r.time_seconds() + s.coordinator_offset_s),
      ", \"from\": ", JsonString(r.from_address()),
      ", \"to\": ", JsonString(r.to_address()),
      ", \"source\": ", JsonString(r.source()),
      ", \"acked_pushes_lost\": ", r.acked_pushes_lost(),
      ", \"loss_exact\": ", Bool(r.loss_final()), ", \"seconds_to_backup\": ",
      to_backup >= 0 ? JsonNumber(to_backup) : "null",
      ", \"applied_before\": ", r.applied_before(), ", \"applied_after\": ",
      r.settled() ? absl::StrCat(r.applied_after()) : "null", "}");
}

std::string OutageJson(const LaunchSummary& s, const proto::MemberOutage& o) {
  return absl::StrCat(
      "    {\"daemon\": ", JsonString(absl::StrCat(o.role(), " ", o.index())),
      ", \"address\": ", JsonString(o.address()), ", \"dead_at_s\": ",
      JsonNumber(o.start_seconds() + s.coordinator_offset_s),
      ", \"seconds\": ", JsonNumber(OutageSeconds(s, o)), ", \"ended_by\": ",
      JsonString(o.end_seconds() < 0 ? "still down at the end of the job"
                                     : o.ended_by()),
      "}");
}

std::string ReplicationJson(const proto::ShardReplication& r) {
  return absl::StrCat(
      "    {\"shard\": ", r.shard(), ", \"backup_standby\": ",
      r.backup_standby() >= 0 ? absl::StrCat(r.backup_standby()) : "null",
      ", \"in_sync\": ", Bool(r.in_sync()),
      ", \"unreplicated_s\": ", JsonNumber(r.unreplicated_seconds()), "}");
}

// The "faults" to "outages" members of summary.json (what went wrong and
// what it cost), each line but the first opening with ",\n  ".
std::string FaultsJson(const LaunchSummary& s) {
  std::vector<std::string> faults, recoveries, outages, per_shard, replication;
  for (const FaultRecord& f : s.faults) faults.push_back(FaultJson(f));
  for (const proto::ShardRecovery& r : s.shard_recoveries) {
    recoveries.push_back(RecoveryJson(s, r));
  }
  for (const proto::MemberOutage& o : s.outages) {
    outages.push_back(OutageJson(s, o));
  }
  for (const auto& [shard, loss] : LossPerShard(s)) {
    per_shard.push_back(absl::StrCat("\"", shard, "\": ", loss.lost));
  }
  for (const proto::ShardReplication& r : s.shard_replication) {
    replication.push_back(ReplicationJson(r));
  }
  return absl::StrCat("\"faults\": ", JsonArray(faults),
                      ",\n  \"acked_pushes_lost\": ", s.acked_pushes_lost,
                      ",\n  \"acked_loss_exact\": ", Bool(s.acked_loss_final),
                      ",\n  \"acked_pushes_lost_per_shard\": {",
                      absl::StrJoin(per_shard, ", "), "}",
                      ",\n  \"shard_recoveries\": ", JsonArray(recoveries),
                      ",\n  \"shard_replication\": ", JsonArray(replication),
                      ",\n  \"outages\": ", JsonArray(outages));
}

}  // namespace

std::string FormatSummary(const LaunchSummary& s) {
  std::string out = "\n";
  AppendResults(s, &out);
  if (!s.examples_per_epoch.empty()) {
    std::vector<std::string> epochs;
    for (int64_t n : s.examples_per_epoch) epochs.push_back(GroupDigits(n));
    absl::StrAppendFormat(&out, "  examples per epoch:   %s\n",
                          absl::StrJoin(epochs, " | "));
  }
  AppendFaults(s, &out);
  absl::StrAppendFormat(&out, "  wall time:            %.1f s\n", s.seconds);
  absl::StrAppendFormat(&out, "  logs:                 %s\n", s.log_dir);
  absl::StrAppendFormat(&out, "  checkpoints:          %s\n", s.checkpoint_dir);
  absl::StrAppendFormat(&out, "  summary:              %s\n", s.summary_path);
  if (!s.history_path.empty()) {
    absl::StrAppendFormat(&out, "  metrics history:      %s\n", s.history_path);
    absl::StrAppendFormat(
        &out, "  training curves:      %s (open in a browser)\n", s.plot_path);
  }
  return out;
}

std::string SummaryJson(const LaunchSummary& s) {
  std::vector<std::string> workers;
  for (const WorkerResult& w : s.workers) workers.push_back(WorkerJson(w));
  const std::string outcome =
      s.outcome.empty() ? SummaryOutcome(s, "") : s.outcome;
  return absl::StrCat(
      "{\n  \"ok\": ", Bool(outcome == "succeeded"),
      ",\n  \"outcome\": ", JsonString(outcome),
      ",\n  \"failure\": ", JsonString(s.failure),
      ",\n  \"recovery\": ", JsonString(RecoveryNote(s.faults)), ",\n  ",
      FaultsJson(s), ",\n  \"task\": ", JsonString(TaskName(s.task)),
      ",\n  \"metrics\": {", MetricsJson(s.final_metrics), "}",
      ",\n  \"accuracy\": ", JsonNumber(s.final_accuracy),
      ",\n  \"accuracy_note\": ", JsonString(s.accuracy_note),
      ",\n  \"saturated\": ", JsonNumber(s.saturated),
      ",\n  \"saturation_warning\": ", JsonString(s.saturation_warning),
      ",\n  \"steps\": ", s.steps, ",\n  \"refused_steps\": ", s.refused_steps,
      ",\n  \"seconds\": ", JsonNumber(s.seconds),
      ",\n  \"examples_per_sec\": ", JsonNumber(s.examples_per_sec),
      s.examples_per_epoch.empty() ? "" : ",\n  \"examples_per_epoch\": [",
      absl::StrJoin(s.examples_per_epoch, ", "),
      s.examples_per_epoch.empty() ? "" : "]",
      ",\n  \"staleness_p50\": ", JsonNumber(s.staleness_p50),
      ",\n  \"staleness_p99\": ", JsonNumber(s.staleness_p99),
      ",\n  \"staleness_max\": ", JsonNumber(s.staleness_max),
      ",\n  \"target_metric\": ", JsonString(s.mark_metric),
      ",\n  \"target_value\": ", JsonNumber(s.mark),
      ",\n  \"seconds_to_target\": ",
      s.seconds_to_mark >= 0 ? JsonNumber(s.seconds_to_mark) : "null",
      ",\n  \"stop_reason\": ", JsonString(s.stop_reason),
      ",\n  \"interrupted\": ", Bool(s.interrupted),
      ",\n  \"log_dir\": ", JsonString(s.log_dir),
      ",\n  \"checkpoint_dir\": ", JsonString(s.checkpoint_dir),
      ",\n  \"history\": ", JsonString(s.history_path),
      ",\n  \"plot\": ", JsonString(s.plot_path), ",\n  \"workers\": [\n",
      absl::StrJoin(workers, ",\n"), "\n  ]\n}\n");
}

absl::Status WriteSummary(const LaunchSummary& summary) {
  return WriteFileAtomically(summary.summary_path, SummaryJson(summary));
}

}  // namespace downpour
