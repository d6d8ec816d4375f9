#include "deploy/launch_summary.h"

#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "common/file_util.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour {
namespace {

using ::downpour::testing::IsOk;
using ::testing::HasSubstr;
using ::testing::Not;

proto::MemberStatus* AddMember(proto::ClusterStatusResponse* status,
                               const std::string& role, int index) {
  proto::MemberStatus* m = status->add_members();
  m->set_role(role);
  m->set_index(index);
  return m;
}

TEST(WorkerResultsTest, WorkersOnlyAndUnknownBeforeTheFirstReport) {
  proto::ClusterStatusResponse status;
  AddMember(&status, "ps", 0)->mutable_report()->set_step(99);
  proto::MemberStatus* trained = AddMember(&status, "worker", 0);
  trained->mutable_report()->set_step(10);
  trained->mutable_report()->set_examples(640);
  trained->mutable_report()->set_loss(0.5);
  trained->mutable_report()->set_accuracy(0.9);
  trained->mutable_report()->set_pushes(10);
  trained->mutable_report()->set_staleness_p50(1);
  trained->mutable_report()->set_staleness_p99(3);
  trained->mutable_report()->set_staleness_max(4);
  trained->mutable_report()->set_mean_staleness(1.5);
  trained->mutable_report()->set_refused_steps(2);
  AddMember(&status, "worker", 1);  // registered, no report yet
  const std::vector<WorkerResult> workers = WorkerResults(status);
  ASSERT_EQ(workers.size(), 2u);
  EXPECT_EQ(workers[0].step, 10);
  EXPECT_EQ(workers[0].examples, 640);
  EXPECT_DOUBLE_EQ(workers[0].accuracy, 0.9);
  EXPECT_EQ(workers[0].staleness_p50, 1);
  EXPECT_EQ(workers[0].staleness_p99, 3);
  EXPECT_EQ(workers[0].staleness_max, 4);
  EXPECT_EQ(workers[0].staleness_mean, 1.5);
  EXPECT_EQ(workers[0].refused_steps, 2);
  EXPECT_EQ(workers[1].index, 1);
  // The summary says how many steps were refused, and only then.
  LaunchSummary summary;
  AddWorkerResults(workers, &summary);
  EXPECT_EQ(summary.refused_steps, 2);
  EXPECT_THAT(FormatSummary(summary),
              HasSubstr("refused steps:        2 (a ps's push guard refused"));
  EXPECT_THAT(SummaryJson(summary), HasSubstr("\"refused_steps\": 2,"));
  AddWorkerResults({workers[1]}, &summary);
  EXPECT_THAT(FormatSummary(summary), Not(HasSubstr("refused steps")));
  EXPECT_TRUE(std::isnan(workers[1].loss));
  EXPECT_TRUE(std::isnan(workers[1].accuracy));
  EXPECT_TRUE(std::isnan(workers[1].staleness_p99)) << "no push yet";
}

TEST(AddWorkerResultsTest, ExamplesPerEpochSumTheWorkersDeadOrFinished) {
  proto::ClusterStatusResponse status;
  proto::MemberStatus* finished = AddMember(&status, "worker", 0);
  finished->mutable_report()->set_finished(true);
  for (int64_t n : {500000, 499935}) {
    finished->mutable_report()->add_epoch_examples(n);
  }
  proto::MemberStatus* dead = AddMember(&status, "worker", 1);
  dead->set_alive(false);
  dead->mutable_report()->add_epoch_examples(500123);
  proto::MemberStatus* adopter = AddMember(&status, "worker", 2);
  adopter->mutable_report()->set_data_bytes_read(300);
  adopter->mutable_report()->set_data_bytes_total(1000);
  for (int64_t n : {0, 499935}) {
    adopter->mutable_report()->add_epoch_examples(n);
  }
  LaunchSummary summary;
  AddWorkerResults(WorkerResults(status), &summary);
  EXPECT_THAT(summary.examples_per_epoch,
              ::testing::ElementsAre(1000123, 999870));
  EXPECT_EQ(summary.workers[2].data_bytes_read, 300);
  EXPECT_EQ(summary.workers[2].data_bytes_total, 1000);
  EXPECT_THAT(FormatSummary(summary),
              HasSubstr("  examples per epoch:   1,000,123 | 999,870\n"));
  EXPECT_THAT(SummaryJson(summary),
              HasSubstr("\"examples_per_epoch\": [1000123, 999870],"));
  // In-memory data: no worker streams, so neither says anything.
  AddWorkerResults({WorkerResult()}, &summary);
  EXPECT_THAT(FormatSummary(summary), Not(HasSubstr("examples per epoch")));
  EXPECT_THAT(SummaryJson(summary), Not(HasSubstr("examples_per_epoch")));
}

TEST(GroupDigitsTest, GroupsByThree) {
  for (const auto& [n, text] :
       std::vector<std::pair<int64_t, std::string>>{{0, "0"},
                                                    {999, "999"},
                                                    {1000, "1,000"},
                                                    {999870, "999,870"},
                                                    {1000123, "1,000,123"},
                                                    {-1234, "-1,234"}}) {
    EXPECT_EQ(GroupDigits(n), text) << n;
  }
}

TEST(AddWorkerResultsTest, ClusterStalenessIsTheWorstWorkers) {
  LaunchSummary summary;
  AddWorkerResults({{0, 10, 640, 100, 0.1, 0.9, true, "", 1, 5, 6, 1.2},
                    {1, 10, 640, 100, 0.1, 0.9, true, "", 2, 3, 9, 1.9},
                    {2, 0, 0, 0, NAN, NAN, false}},  // never pushed: NaN
                   &summary);
  EXPECT_EQ(summary.staleness_p50, 2);  // max of 1, 2
  EXPECT_EQ(summary.staleness_p99, 5);  // max of 5, 3
  EXPECT_EQ(summary.staleness_max, 9);  // max of 6, 9
}

TEST(AddWorkerResultsTest, TotalsAndMeanAccuracyOfFinishedWorkers) {
  LaunchSummary summary;
  AddWorkerResults(
      {{0, 100, 6400, 1000, 0.1, 0.9, true},
       {1, 50, 3200, 500, 0.2, 0.8, true},
       {2, 7, 448, 30, 0.3, 0.1, false}},  // still training: no vote
      &summary);
  EXPECT_EQ(summary.workers.size(), 3u);
  EXPECT_EQ(summary.steps, 157);
  EXPECT_EQ(summary.examples, 10048);
  EXPECT_DOUBLE_EQ(summary.examples_per_sec, 1530);
  EXPECT_DOUBLE_EQ(summary.final_accuracy, 0.85);
  AddWorkerResults({{0, 1, 1, 1, NAN, NAN, false}}, &summary);
  EXPECT_TRUE(std::isnan(summary.final_accuracy));
  EXPECT_TRUE(std::isnan(summary.staleness_p99));
  EXPECT_EQ(summary.steps, 1);
}

LaunchSummary Example() {
  LaunchSummary s;
  AddWorkerResults(
      {{0, 100, 6400, 1000, 0.125, 0.9, true, "", 1, 4, 7, 1.5, 90},
       {1, 3, 192, 10, NAN, NAN, false}},
      &s);
  s.seconds = 12.5;
  s.stop_reason = "every worker finished \"nicely\"\n";
  s.log_dir = "/run/logs";
  s.checkpoint_dir = "/run/ckpt";
  s.summary_path = "/run/summary.json";
  return s;
}

TEST(SummaryJsonTest, FiguresWithNullForUnknownAndEscapedText) {
  const std::string json = SummaryJson(Example());
  EXPECT_THAT(json, HasSubstr("\"accuracy\": 0.9,"));
  EXPECT_THAT(json, HasSubstr("\"steps\": 103,"));
  EXPECT_THAT(json, HasSubstr("\"seconds\": 12.5,"));
  EXPECT_THAT(json, HasSubstr("\"seconds_to_target\": null,"));
  EXPECT_THAT(json, HasSubstr("\"target_value\": 0.95,"));
  EXPECT_THAT(
      json,
      HasSubstr(
          "\"stop_reason\": \"every worker finished \\\"nicely\\\"\\n\","));
  EXPECT_THAT(json, HasSubstr("\"interrupted\": false,"));
  EXPECT_THAT(json, HasSubstr("\"history\": \"\","));
  EXPECT_THAT(
      json,
      HasSubstr(
          "{\"index\": 0, \"steps\": 100, \"examples\": 6400, "
          "\"examples_per_sec\": 1000, \"loss\": 0.125, "
          "\"accuracy\": 0.9, \"metrics\": {}, \"finished\": true, "
          "\"diverged\": \"\", \"staleness_p50\": 1, "
          "\"staleness_p99\": 4, \"staleness_max\": 7, "
          "\"staleness_mean\": 1.5, \"pushes\": 90, \"refused_steps\": 0, "
          "\"joined\": false, \"drained\": false}"));
  EXPECT_THAT(json, HasSubstr("\"staleness_p50\": null, \"staleness_p99\": "
                              "null, \"staleness_max\": null"));  // worker 1
  EXPECT_THAT(json, HasSubstr("\n  \"staleness_p50\": 1,\n  \"staleness_p99\": "
                              "4,\n  \"staleness_max\": 7,"));
  EXPECT_THAT(json, HasSubstr("\"loss\": null, \"accuracy\": null, "
                              "\"metrics\": {}, \"finished\": false,"));
  EXPECT_THAT(
      json,
      HasSubstr(
          "{\n  \"ok\": true,\n  \"outcome\": \"succeeded\",\n  "
          "\"failure\": \"\",\n  \"recovery\": \"\",\n  \"faults\": [],\n  "
          "\"acked_pushes_lost\": 0,\n  \"acked_loss_exact\": true,\n  "
          "\"acked_pushes_lost_per_shard\": {},\n  \"shard_recoveries\": [],\n "
          " "
          "\"shard_replication\": [],\n  \"outages\": [],\n  \"task\""));
}

TEST(SummaryJsonTest, ListsShardTakeOversWithWhatTheyLost) {
  LaunchSummary s;
  s.faults = {
      {3.25, "ps 1", "killed by signal 9 (Killed)", 137, 9, "restarted", ""}};
  s.coordinator_offset_s = 0.25;  // the coordinator started 0.25 s later
  proto::ShardRecovery replica;
  replica.set_shard(1);
  replica.set_time_seconds(3.25);  // 3.5 s on the launcher's clock
  replica.set_from_address("127.0.0.1:7002");
  replica.set_to_address("127.0.0.1:7201");
  replica.set_source("replica");
  replica.set_applied_before(900);
  replica.set_applied_after(950);
  replica.set_settled(true);
  replica.set_loss_final(true);
  replica.set_backup_in_sync_seconds(4.0);  // 4.25 s: 1 s after the kill
  proto::ShardRecovery checkpoint = replica;
  checkpoint.set_shard(0);
  checkpoint.set_source("checkpoint");
  checkpoint.set_settled(false);
  checkpoint.set_loss_final(false);
  checkpoint.set_acked_pushes_lost(336);
  checkpoint.set_backup_in_sync_seconds(-1);
  s.shard_recoveries = {replica, checkpoint};
  s.acked_pushes_lost = 336;
  s.acked_loss_final = false;
  EXPECT_DOUBLE_EQ(SecondsToBackup(s, replica), 1.0);
  EXPECT_EQ(SecondsToBackup(s, checkpoint), -1);
  const std::string json = SummaryJson(s);
  EXPECT_THAT(json,
              HasSubstr("\"shard_recoveries\": [\n    {\"shard\": 1, "
                        "\"time_s\": 3.5, \"from\": "
                        "\"127.0.0.1:7002\", \"to\": \"127.0.0.1:7201\", "
                        "\"source\": \"replica\", "
                        "\"acked_pushes_lost\": 0, \"loss_exact\": true, "
                        "\"seconds_to_backup\": 1, "
                        "\"applied_before\": 900, \"applied_after\": 950}"));
  EXPECT_THAT(
      json,
      HasSubstr("\"source\": \"checkpoint\", \"acked_pushes_lost\": "
                "336, \"loss_exact\": false, \"seconds_to_backup\": "
                "null, \"applied_before\": 900, \"applied_after\": null}"));
  EXPECT_THAT(
      json, HasSubstr("\"acked_pushes_lost\": 336,\n  \"acked_loss_exact\": "
                      "false,\n  \"acked_pushes_lost_per_shard\": {\"0\": 336, "
                      "\"1\": 0}"));
  const std::string text = FormatSummary(s);
  EXPECT_THAT(text,
              HasSubstr("shard 1 moved:        at 3.5 s, 127.0.0.1:7002 -> "
                        "127.0.0.1:7201 (from its replica): 0 acknowledged "
                        "pushes lost; in-sync backup again 1.00 s after "
                        "the fault"));
  EXPECT_THAT(text,
              HasSubstr("(from its checkpoint): at least 336 acknowledged "
                        "pushes lost; no in-sync backup after it"));
  EXPECT_THAT(text, HasSubstr("acknowledged lost:    at least 336 acknowledged "
                              "pushes of shard 0"));
}

TEST(SummaryJsonTest, ListsTheOutagesTheCoordinatorSaw) {
  LaunchSummary s;
  s.coordinator_offset_s = 0.5;
  proto::MemberOutage outage;
  outage.set_role("ps");
  outage.set_index(0);
  outage.set_address("127.0.0.1:7001");
  outage.set_start_seconds(20);
  outage.set_end_seconds(33.5);
  outage.set_ended_by("alive again");
  proto::MemberOutage open = outage;
  open.set_index(1);
  open.set_end_seconds(-1);
  open.set_ended_by("");
  s.outages = {outage, open};
  EXPECT_THAT(
      SummaryJson(s),
      HasSubstr("\"outages\": [\n    {\"daemon\": \"ps 0\", \"address\": "
                "\"127.0.0.1:7001\", \"dead_at_s\": 20.5, \"seconds\": "
                "13.5, \"ended_by\": \"alive again\"},\n    {\"daemon\": "
                "\"ps 1\""));
  // Issue 42: an outage still open at the end (a ps stopped by SIGTERM that
  // never came back) had "seconds": null; it lasted until the job ended.
  s.seconds = 60;
  EXPECT_THAT(SummaryJson(s),
              HasSubstr("\"dead_at_s\": 20.5, \"seconds\": 39.5, "
                        "\"ended_by\": \"still down at the end of the job\"}"));
  EXPECT_THAT(FormatSummary(s),
              HasSubstr("ps 1 at 127.0.0.1:7001 declared dead at 20.5 s, for "
                        "39.5 s (still down at the end of the job)"));
  EXPECT_THAT(FormatSummary(s),
              HasSubstr("outage:               ps 0 at 127.0.0.1:7001 declared "
                        "dead at 20.5 s, for 13.5 s (alive again)"));
}

TEST(SummaryJsonTest, AJobThatLostAcknowledgedPushesSaysSoFirst) {
  LaunchSummary s;
  EXPECT_EQ(SummaryOutcome(s, ""), "succeeded");
  proto::ShardRecovery r;
  r.set_shard(1);
  r.set_loss_final(true);
  s.shard_recoveries = {r};
  EXPECT_EQ(SummaryOutcome(s, ""), "succeeded")
      << "a recovery that lost nothing";
  r.set_acked_pushes_lost(336);
  s.shard_recoveries = {r};
  s.acked_pushes_lost = 336;
  EXPECT_EQ(SummaryOutcome(s, ""),
            "succeeded with loss: 336 acknowledged pushes of shard 1");
  s.outcome = SummaryOutcome(s, "");
  EXPECT_THAT(SummaryJson(s), HasSubstr("\"ok\": false,\n  \"outcome\": "
                                        "\"succeeded with loss: 336"));
  EXPECT_EQ(SummaryOutcome(s, "ps 1 exited with status 2"),
            "failed: ps 1 exited with status 2");
}

TEST(SummaryJsonTest, ListsFaultsAndTheOutcome) {
  LaunchSummary s;
  s.faults = {
      {3.5, "ps 0", "killed by signal 9 (Killed)", 137, 9, "restarted", ""},
      {9.25, "worker 1", "exited with status 1", 1, 0, "gave up",
       "gave up after 3 restarts (launcher.max_restarts is 3)"}};
  s.outcome = SummaryOutcome(s, "worker 1 exited with status 1 after 2.0 s");
  EXPECT_EQ(s.outcome, "failed: worker 1 exited with status 1 after 2.0 s");
  const std::string json = SummaryJson(s);
  EXPECT_THAT(json,
              HasSubstr("\"ok\": false,\n  \"outcome\": \"failed: worker 1"));
  EXPECT_THAT(json, HasSubstr("\"faults\": [\n    {\"time_s\": 3.5, "
                              "\"daemon\": \"ps 0\", \"what\": "
                              "\"killed by signal 9 (Killed)\", "
                              "\"exit_status\": 137, \"signal\": 9, "
                              "\"action\": \"restarted\", \"reason\": \"\"},\n "
                              "   {\"time_s\": 9.25, "
                              "\"daemon\": \"worker 1\""));
  EXPECT_THAT(json,
              HasSubstr("\"recovery\": \"the job saw 2 faults: ps 0 killed by "
                        "signal 9 (Killed), restarted; worker 1 exited with "
                        "status 1, gave up\""));
  EXPECT_THAT(FormatSummary(s), HasSubstr("Job FAILED: worker 1 exited"));
  EXPECT_THAT(FormatSummary(s),
              HasSubstr("faults:               the job saw 2"));
  s.interrupted = true;
  EXPECT_EQ(SummaryOutcome(s, "anything"), "interrupted");
  s.interrupted = false;
  s.failure = "diverged";
  EXPECT_EQ(SummaryOutcome(s, ""), "failed: diverged");
  s.failure = "";
  EXPECT_EQ(SummaryOutcome(s, ""), "succeeded");
}

TEST(FormatSummaryTest, NamesEveryFigureAndWhereThingsAre) {
  LaunchSummary s = Example();
  std::string text = FormatSummary(s);
  EXPECT_THAT(text, HasSubstr("Training done."));
  EXPECT_THAT(text, HasSubstr("final test metrics:   accuracy 0.9000"));
  EXPECT_THAT(text, HasSubstr("reached accuracy 0.95:  never"));
  EXPECT_THAT(text, HasSubstr("steps (all workers):  103"));
  EXPECT_THAT(text, HasSubstr("staleness p50/p99/max: 1/4/7"));
  EXPECT_THAT(text, HasSubstr("checkpoints:          /run/ckpt"));
  EXPECT_THAT(text, Not(HasSubstr("metrics history")));
  s.interrupted = true;
  s.seconds_to_mark = 4.25;
  s.history_path = "/run/history.json";
  text = FormatSummary(s);
  EXPECT_THAT(text, HasSubstr("Training interrupted."));
  EXPECT_THAT(text, HasSubstr("reached accuracy 0.95 after 4.2 s"));
  EXPECT_THAT(text, HasSubstr("metrics history:      /run/history.json"));
}

Config TenClasses(const std::string& optimizer, int workers) {
  Config config;
  config.model.layers = {784, 32, 10};
  config.optimizer.type = ParseOptimizerType(optimizer).value();
  config.optimizer.learning_rate = 0.01;
  config.optimizer.momentum = 0.9;
  config.cluster.workers.assign(workers, "127.0.0.1:0");
  return config;
}

LaunchSummary WithAccuracy(double accuracy) {
  LaunchSummary s;
  AddWorkerResults({{0, 100, 6400, 1000, 0.5, accuracy, true}}, &s);
  return s;
}

TEST(JudgeTrainingTest, ChanceAccuracyFailsNamingTheKnobs) {
  struct Case {
    double accuracy;
    bool fails;
  };
  // 10 classes: chance 0.1, failure at or below 0.15.
  for (const Case& c : {Case{0.117, true}, Case{0.15, true}, Case{0.0, true},
                        Case{0.1501, false}, Case{0.95, false}}) {
    SCOPED_TRACE(c.accuracy);
    EXPECT_EQ(
        !JudgeTraining(WithAccuracy(c.accuracy), TenClasses("sgd", 1)).empty(),
        c.fails);
  }
  const std::string failure =
      JudgeTraining(WithAccuracy(0.117), TenClasses("momentum", 4));
  EXPECT_THAT(failure,
              HasSubstr("final test accuracy 0.1170 is at chance level "
                        "(10 classes: chance 0.1000"));
  EXPECT_THAT(failure,
              HasSubstr("optimizer.learning_rate too high (now 0.01)"));
  EXPECT_THAT(
      failure,
      HasSubstr("optimizer.momentum too high for 4 worker(s) (now 0.9"));
  EXPECT_THAT(failure,
              HasSubstr("stale gradients from 4 asynchronous workers"));
  EXPECT_THAT(failure,
              HasSubstr("lower optimizer.learning_rate (e.g. to 0.001)"));
  // One sgd worker: neither momentum nor staleness is blamed.
  const std::string sgd =
      JudgeTraining(WithAccuracy(0.117), TenClasses("sgd", 1));
  EXPECT_THAT(sgd, Not(HasSubstr("momentum")));
  EXPECT_THAT(sgd, Not(HasSubstr("stale")));
}

TEST(JudgeTrainingTest, BinaryAtChanceAndRegressionBelowTheMeanFail) {
  Config binary = TenClasses("adam", 1);
  binary.model.task = Task::kBinary;
  binary.model.layers = {13, 1};
  // Two classes: chance 0.5, failure at or below 0.75.
  EXPECT_THAT(JudgeTraining(WithAccuracy(0.6), binary),
              HasSubstr("final test accuracy 0.6000 is at chance level (2 "
                        "classes: chance 0.5000"));
  EXPECT_EQ(JudgeTraining(WithAccuracy(0.8), binary), "");
  // With an AUC, the AUC judges: a model that ranks well at accuracy 0.73
  // (hard, balanced data) learned; one at AUC 0.52 and accuracy 0.95 (the
  // majority class of imbalanced data) did not.
  auto with_auc = [](double auc, double accuracy) {
    LaunchSummary s;
    s.task = Task::kBinary;
    WorkerResult w{0, 100, 6400, 1000, 0.5, accuracy, true};
    w.metrics = {{"auc", auc}, {"logloss", 0.5}, {"accuracy", accuracy}};
    AddWorkerResults({w}, &s);
    return s;
  };
  EXPECT_EQ(JudgeTraining(with_auc(0.86, 0.73), binary), "");
  EXPECT_THAT(JudgeTraining(with_auc(0.52, 0.95), binary),
              HasSubstr("final test AUC 0.5200 is at chance level (chance "
                        "0.5000, failure at or below 0.5500)"));

  Config regression = binary;
  regression.model.task = Task::kRegression;
  LaunchSummary s;
  s.task = Task::kRegression;
  WorkerResult w{0, 100, 6400, 1000, 0.5, NAN, true};
  w.metrics = {{"rmse", 80.0}, {"mae", 60.0}, {"r2", -0.2}};
  AddWorkerResults({w}, &s);
  EXPECT_THAT(JudgeTraining(s, regression),
              HasSubstr("final test r2 -0.2000 is below 0: the model predicts "
                        "worse than the mean of the targets; the model did not "
                        "learn"));
  s.workers[0].metrics["r2"] = 0.3;
  AddWorkerResults(s.workers, &s);
  EXPECT_EQ(JudgeTraining(s, regression), "");
}

TEST(SaturationNoteTest, WarnsWhenMoreThanOnePercentIsSaturated) {
  Config fm = TenClasses("ftrl", 2);
  fm.model.task = Task::kBinary;
  fm.model.type = ModelType::kFm;
  auto with_saturated = [](double a, double b) {
    WorkerResult w0{0, 100, 6400, 1000, 0.5, 0.9, true};
    w0.metrics = {{"auc", 0.6}, {"saturated", a}};
    WorkerResult w1{1, 100, 6400, 1000, 0.5, 0.9, true};
    w1.metrics = {{"auc", 0.6}, {"saturated", b}};
    LaunchSummary s;
    s.task = Task::kBinary;
    AddWorkerResults({w0, w1}, &s);
    return s;
  };
  LaunchSummary s = with_saturated(0.99, 0.97);  // mean 0.98
  EXPECT_DOUBLE_EQ(s.saturated, 0.98);
  s.saturation_warning = SaturationNote(s, fm);
  EXPECT_THAT(s.saturation_warning,
              HasSubstr("98.0 % of the test predictions are saturated"));
  EXPECT_THAT(s.saturation_warning, HasSubstr("lower fm.learning_rate"));
  EXPECT_THAT(FormatSummary(s),
              HasSubstr("WARNING:              98.0 % of the test"));
  EXPECT_THAT(SummaryJson(s), HasSubstr("\"saturated\": 0.98"));
  EXPECT_THAT(SummaryJson(s),
              HasSubstr("\"saturation_warning\": \"98.0 % of the test"));
  fm.model.type = ModelType::kWideDeep;
  EXPECT_THAT(SaturationNote(s, fm),
              HasSubstr("lower wide_deep.mlp_learning_rate"));
  // 1 % or less, or not measured: no warning.
  EXPECT_EQ(SaturationNote(with_saturated(0.01, 0.01), fm), "");
  EXPECT_EQ(SaturationNote(WithAccuracy(0.9), fm), "");
  EXPECT_THAT(FormatSummary(with_saturated(0, 0)), Not(HasSubstr("WARNING")));
}

TEST(JudgeTrainingTest, SimulatedComputeIsJudgedOnlyOnDivergence) {
  Config config = TenClasses("sgd", 1);
  config.compute.device = ComputeDevice::kSimulated;
  config.compute.simulated_step_ms = 200;
  EXPECT_THAT(AccuracyNote(config), HasSubstr("not meaningful"));
  EXPECT_EQ(JudgeTraining(WithAccuracy(0.0), config), "");
  LaunchSummary s = WithAccuracy(0.0);
  s.accuracy_note = "not meaningful (simulated)";
  EXPECT_THAT(FormatSummary(s),
              HasSubstr("final test metrics:   not meaningful (simulated)\n"));
  EXPECT_THAT(SummaryJson(s),
              HasSubstr("\"accuracy_note\": \"not meaningful (simulated)\""));
  WorkerResult diverged{0, 7, 448, 10, NAN, NAN, false};
  diverged.diverged = "worker 0: training diverged at step 7";
  AddWorkerResults({diverged}, &s);
  EXPECT_EQ(JudgeTraining(s, config), diverged.diverged);
}

// A scale model with compute.simulated_real_gradients trains for real (only
// the step's time is simulated): its accuracy is a figure, and a verdict.
TEST(JudgeTrainingTest, SimulatedComputeWithRealGradientsIsJudgedOnAccuracy) {
  Config config = TenClasses("sgd", 1);
  config.compute.device = ComputeDevice::kSimulated;
  config.compute.simulated_step_ms = 200;
  config.compute.simulated_real_gradients = true;
  EXPECT_EQ(AccuracyNote(config), "");
  EXPECT_THAT(JudgeTraining(WithAccuracy(0.0), config),
              HasSubstr("the model did not learn"));
  EXPECT_EQ(JudgeTraining(WithAccuracy(0.95), config), "");
}

TEST(JudgeTrainingTest, InterruptedOrUnknownAccuracyIsNoVerdict) {
  LaunchSummary s = WithAccuracy(0.1);
  s.interrupted = true;
  EXPECT_EQ(JudgeTraining(s, TenClasses("sgd", 1)), "");
  EXPECT_EQ(JudgeTraining(WithAccuracy(NAN), TenClasses("sgd", 1)), "");
}

TEST(JudgeTrainingTest, ADivergedWorkerFailsWithItsMessage) {
  LaunchSummary s;
  WorkerResult diverged{1, 7, 448, 10, NAN, NAN, false};
  diverged.diverged =
      "worker 1: training diverged at step 7: loss is nan. Likely...";
  AddWorkerResults({{0, 100, 6400, 1000, 0.5, 0.9, true}, diverged}, &s);
  EXPECT_EQ(JudgeTraining(s, TenClasses("sgd", 2)), diverged.diverged);
  s.interrupted = true;  // a divergence is a failure even when interrupted
  EXPECT_EQ(JudgeTraining(s, TenClasses("sgd", 2)), diverged.diverged);
}

TEST(FormatSummaryTest, AFailureIsTheHeadlineAndTheJsonSaysNotOk) {
  LaunchSummary s = Example();
  s.failure = "final test accuracy 0.1170 is at chance level";
  const std::string text = FormatSummary(s);
  EXPECT_THAT(text,
              HasSubstr("\nTraining FAILED: final test accuracy 0.1170 is at "
                        "chance level\n"));
  EXPECT_THAT(text, Not(HasSubstr("Training done.")));
  EXPECT_THAT(
      text,
      HasSubstr("final test metrics:   accuracy 0.9000"));  // figures stay
  const std::string json = SummaryJson(s);
  EXPECT_THAT(json,
              HasSubstr("\"ok\": false,\n  \"outcome\": \"failed: final test "
                        "accuracy 0.1170 is at chance level"));
  EXPECT_THAT(json, HasSubstr("\"accuracy\": 0.9,"));
}

TEST(FormatSummaryTest, AJobFailureCarriesTheDaemonsOwnReason) {
  LaunchSummary s = Example();
  const std::string error =
      "ps 1 exited with status 2 after 0.1 s: checkpoint 'c/ps-1/g.ckpt' is "
      "corrupt (checksum mismatch); move it away to start from fresh "
      "parameters, or restore a good copy";
  s.failure = error;
  s.job_failed = true;
  s.outcome = SummaryOutcome(s, error);
  EXPECT_EQ(s.outcome, "failed: " + error);
  const std::string text = FormatSummary(s);
  EXPECT_THAT(text, HasSubstr("\nJob FAILED: " + error + "\n"));
  EXPECT_THAT(text, Not(HasSubstr("Training FAILED")));
  const std::string json = SummaryJson(s);
  EXPECT_THAT(json, HasSubstr("\"ok\": false,\n  \"outcome\": \"failed: ps 1 "
                              "exited with status 2 after 0.1 s: checkpoint "
                              "'c/ps-1/g.ckpt' is corrupt"));
  EXPECT_THAT(json, HasSubstr("\"failure\": \"ps 1 exited with status 2 after "
                              "0.1 s: checkpoint 'c/ps-1/g.ckpt' is corrupt "
                              "(checksum mismatch); move it away"));
}

TEST(WriteSummaryTest, WritesTheJsonToSummaryPath) {
  LaunchSummary s = Example();
  s.summary_path =
      std::string(std::getenv("TEST_TMPDIR")) + "/run/summary.json";
  ASSERT_THAT(WriteSummary(s), IsOk());
  EXPECT_EQ(ReadFile(s.summary_path).value_or(""), SummaryJson(s));
}

}  // namespace
}  // namespace downpour
