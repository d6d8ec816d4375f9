// What a launcher run reports at its end: the figures (LaunchSummary), built
// from the coordinator's last ClusterStatus, and their two renderings, the
// closing lines on the terminal and summary.json.
//
//   LaunchSummary summary;
//   AddWorkerResults(WorkerResults(cluster_status), &summary);
//   std::fputs(FormatSummary(summary).c_str(), stdout);
//   RETURN_IF_ERROR(WriteSummary(summary));  // summary.summary_path
#ifndef DOWNPOUR_DEPLOY_LAUNCH_SUMMARY_H_
#define DOWNPOUR_DEPLOY_LAUNCH_SUMMARY_H_

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/config.h"
#include "proto/coordinator.pb.h"

namespace downpour {

// One worker's figures as the coordinator last saw them.
struct WorkerResult {
  int index = 0;
  int64_t step = 0;
  int64_t examples = 0;
  double examples_per_sec = 0;
  double loss = NAN;      // NaN until its first report
  double accuracy = NAN;  // NaN until its first report
  bool finished = false;
  // The worker's error when its training diverged (MemberReport.diverged).
  std::string diverged;
  // Staleness of the block updates its pushes made, since it started
  // (MemberReport.staleness_*): p50, p99, exact max and mean. NaN until its
  // first push was acknowledged.
  double staleness_p50 = NAN;
  double staleness_p99 = NAN;
  double staleness_max = NAN;
  double staleness_mean = NAN;
  int64_t pushes = 0;  // whole pushes the ps acknowledged (MemberReport.pushes)
  // Steps a ps's push guard refused as outliers (MemberReport.refused_steps).
  int64_t refused_steps = 0;
  // Its last test metrics (MemberReport.metrics): "accuracy", "auc", "rmse"...
  std::map<std::string, double> metrics;
  // Workers that stream their data (else empty and 0/0): the examples it
  // trained by epoch of the part they came from, and the bytes of its parts
  // read so far and to read over all epochs (MemberReport.epoch_examples,
  // data_bytes_read, data_bytes_total).
  std::vector<int64_t> epoch_examples;
  int64_t data_bytes_read = 0;
  int64_t data_bytes_total = 0;
  // The steps it takes in all as it reported them (MemberReport
  // planned_steps; 0: not known).
  int64_t planned_steps = 0;
  // Membership (MemberStatus): alive now, joined the running job
  // (ps_worker --join), drained (psctl drain-worker), and its data parts.
  bool alive = false;
  bool joined = false;
  bool drained = false;
  std::vector<int> parts;
};

// A daemon that ended while the job ran, and what the launcher did about it
// (deploy/restart_policy.h).
struct FaultRecord {
  double time_s = 0;    // since the launch began
  std::string daemon;   // "ps 0"
  std::string what;     // "killed by signal 9 (Killed)", "exited with status 1"
  int exit_status = 0;  // 128 + signal when a signal killed it
  int signal = 0;       // 0 when it exited
  // "restarted", "left down" or "gave up".
  std::string action;
  std::string reason;  // why that action, "" for a plain restart
};

struct LaunchSummary {
  // Mean over the workers of their test accuracy on the final parameters (each
  // pulls them after its last push and evaluates the whole test split).
  double final_accuracy = NAN;
  int64_t steps = 0;          // over all workers
  int64_t refused_steps = 0;  // over all workers (WorkerResult)
  int64_t examples = 0;
  // Examples trained in each epoch (index = epoch), summed over the workers'
  // last reports (WorkerResult.epoch_examples); empty when no worker streams.
  // Each part's examples appear once per epoch, give or take what one
  // heartbeat's worth of a worker that died or restarted trained twice.
  std::vector<int64_t> examples_per_epoch;
  double seconds = 0;           // wall time from the first start to the end
  double examples_per_sec = 0;  // examples / training seconds, whole cluster
  // The target the summary reports on: when a worker's test `mark_metric`
  // first reached `mark` (at least it for accuracy, auc and r2, at most it
  // for logloss, rmse and mae); -1: never. No mark when mark_metric is "".
  double seconds_to_mark = -1;
  std::string mark_metric = "accuracy";
  double mark = 0.95;
  // model.task, and the mean over finished workers of each test metric the
  // task measures, main first (TaskMetricNames).
  Task task = Task::kMulticlass;
  std::vector<std::pair<std::string, double>> final_metrics;
  // The mean over finished workers of their share of saturated test
  // predictions (model/metrics.h Metrics::saturated; NaN where none reports
  // it), and SaturationWarning's text for it and the model type ("" when at
  // most 1 % or unmeasured).
  double saturated = NAN;
  std::string saturation_warning;
  std::string stop_reason;
  std::vector<WorkerResult> workers;
  // The cluster's staleness: the largest of the workers' p50s, p99s and maxes
  // (an upper bound on the quantiles over all workers' updates: a mixture's
  // quantile never exceeds the largest of its parts'). NaN when no worker
  // pushed.
  double staleness_p50 = NAN;
  double staleness_p99 = NAN;
  double staleness_max = NAN;
  std::string log_dir;
  std::string checkpoint_dir;
  std::string summary_path;
  // The coordinator's metrics history (JSON, for `psctl plot --history`) and
  // the training curves drawn from it (SVG), next to summary.json; "" when the
  // coordinator could not be asked for it.
  std::string history_path;
  std::string plot_path;
  bool interrupted = false;
  // "succeeded", "failed: <reason>" or "interrupted" (SummaryOutcome).
  std::string outcome;
  // Daemons that ended while the job ran, in order.
  std::vector<FaultRecord> faults;
  // Every shard take-over and restart the coordinator saw, with the
  // acknowledged pushes each lost (ClusterStatusResponse.recoveries).
  std::vector<proto::ShardRecovery> shard_recoveries;
  // Acknowledged pushes lost over all recoveries, counted by the shards'
  // new servers from the workers' push sequences; exact when
  // acked_loss_final (every new server reported after the workers finished).
  uint64_t acked_pushes_lost = 0;
  bool acked_loss_final = true;
  // Each shard's backup at the end and its seconds without an in-sync one
  // (empty with cluster.replication 1).
  std::vector<proto::ShardReplication> shard_replication;
  // Members the coordinator declared dead, and for how long
  // (ClusterStatusResponse.outages; times on the coordinator's clock).
  std::vector<proto::MemberOutage> outages;
  // Launcher time minus coordinator uptime (to place the coordinator's
  // recovery times on the launcher's clock, as the faults are).
  double coordinator_offset_s = 0;
  // Why the job failed, "" when it did not (the launcher then says "Training
  // done."): when the launcher ended it (job_failed), the first line of its
  // error, with the daemon's own reason ("ps 1 exited with status 2 after
  // 0.1 s: checkpoint '...' is corrupt (...); ..."); else why training failed
  // although every daemon behaved: a worker diverged, or the final accuracy
  // is at chance level (see JudgeTraining).
  std::string failure;
  // The launcher ended the job (a daemon it gave up on, a failed start), so
  // `failure` is no training verdict.
  bool job_failed = false;
  // Why final_accuracy means nothing, "" when it means something: with
  // compute.device simulated the workers compute no real gradients.
  std::string accuracy_note;
};

// What the summary reports on: sets summary->task, mark_metric and mark from
// `accuracy_mark` (LaunchOptions; NaN = none given) or else the config's
// target (TargetOf; no mark when it has none).
void SetMark(const Config& config, double accuracy_mark,
             LaunchSummary* summary);

// "1/3/7": staleness p50/p99/max, "-" when any is NaN (unknown).
std::string FormatStaleness(double p50, double p99, double max);

// "1,000,123": `n` with its digits grouped by three.
std::string GroupDigits(int64_t n);

// The workers of a ClusterStatus, in its order.
std::vector<WorkerResult> WorkerResults(
    const proto::ClusterStatusResponse& status);

// Sets summary->workers and the totals over them: steps, examples,
// examples_per_epoch, examples_per_sec, final_accuracy (the mean over finished
// workers with an accuracy; NaN when there is none) and the staleness figures
// (the largest over workers that pushed).
void AddWorkerResults(std::vector<WorkerResult> workers,
                      LaunchSummary* summary);

// model::SaturationWarning for summary.saturated and config.model.type; ""
// when AccuracyNote says the metrics mean nothing.
std::string SaturationNote(const LaunchSummary& summary, const Config& config);

// Final accuracy at or below this many times chance (1 / classes) means the
// model did not learn.
inline constexpr double kChanceMargin = 1.5;
// A binary model's final test AUC at or below this means it did not learn
// (chance is 0.5). AUC, not accuracy, judges binary models: accuracy follows
// the class balance (95 % for always "good" on lending_club) and a model
// that ranks well on hard balanced data can sit near 0.7.
inline constexpr double kChanceAuc = 0.55;

// Why the run in `summary` (its workers and final_accuracy set) failed as
// training, naming the likely cause and the config keys to turn: the first
// worker that diverged, else for a binary model a final AUC <= kChanceAuc
// (the accuracy rule when the workers report no AUC), else a final accuracy
// <= kChanceMargin / classes (classes = config.model.layers.back()). "" when
// neither, or when the run was interrupted (its accuracy is not final). When
// AccuracyNote says the metrics mean nothing, only a divergence fails: the
// accuracy of a model that is not trained is no verdict.
std::string JudgeTraining(const LaunchSummary& summary, const Config& config);

// Why the job's test metrics mean nothing, for summary.accuracy_note: "not
// meaningful (...)" with compute.device simulated, which computes no
// gradients; "" otherwise, and with compute.simulated_real_gradients (only
// the step's time is simulated: the gradients and evaluations are real).
std::string AccuracyNote(const Config& config);

// "interrupted" when summary.interrupted; "failed: <job_error>" when
// `job_error` is set (a daemon given up on, a startup failure); "failed:
// <summary.failure>" when training failed; else "succeeded", or "succeeded
// with loss: 336 acknowledged pushes of shard 1" when recoveries lost
// acknowledged pushes (LossNote).
std::string SummaryOutcome(const LaunchSummary& summary,
                           const std::string& job_error);

// "336 acknowledged pushes of shard 1" ("at least ..." when a figure is not
// final; shards joined with "and"); "" when nothing acknowledged was lost.
std::string LossNote(const LaunchSummary& summary);

// Seconds from the fault before recovery `r` (the launcher saw the daemon
// end; summary.faults) to the shard's next in-sync backup; -1 when it never
// had one again or no fault precedes it.
double SecondsToBackup(const LaunchSummary& summary,
                       const proto::ShardRecovery& r);

// One sentence on the faults the job survived ("" when none): "the job went
// on after 1 fault: ps 0 killed by signal 9 (Killed), restarted".
std::string RecoveryNote(const std::vector<FaultRecord>& faults);

// The closing lines the launcher prints: "Training done.", "Training
// interrupted.", "Job FAILED: <reason>" (job_failed) or "Training FAILED:
// <summary.failure>" first. The accuracy
// line gives summary.accuracy_note instead of the figure when that is set.
std::string FormatSummary(const LaunchSummary& summary);

// summary.json's content: the figures, with null for unknown numbers
// ("examples_per_epoch": [n0, n1, ...] only when workers stream), and
// "ok" (true when the outcome is "succeeded"), "outcome", "failure",
// "accuracy_note", "faults" (one object per FaultRecord) and "recovery"
// (RecoveryNote).
std::string SummaryJson(const LaunchSummary& summary);

// Writes SummaryJson to summary.summary_path, atomically.
absl::Status WriteSummary(const LaunchSummary& summary);

}  // namespace downpour

#endif  // DOWNPOUR_DEPLOY_LAUNCH_SUMMARY_H_
