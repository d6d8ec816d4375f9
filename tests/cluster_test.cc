// End to end: the launcher's RunCluster starts real coordinator, ps and worker
// processes on loopback ephemeral ports; they train, stop and checkpoint.
#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "common/file_util.h"
#include "common/subprocess.h"
#include "common/testing/status_matchers.h"
#include "deploy/launcher_lib.h"
#include "gtest/gtest.h"
#include "server/checkpoint.h"
#include "tests/daemon_harness.h"

namespace downpour {
namespace {

namespace fs = std::filesystem;
using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;

LaunchOptions Options(const std::string& config_path) {
  LaunchOptions options;
  options.config_path = config_path;
  options.run_dir = testing::TestDir() + "/run";
  options.bin_dir = testing::BinDir();
  options.progress_period = absl::Seconds(1);
  options.accuracy_mark = 0.8;
  return options;
}

// Writes `yaml` as the run's cluster file and launches it as the quick start
// does.
absl::StatusOr<LaunchSummary> Launch(const std::string& yaml) {
  const std::string path = testing::WriteConfig("cluster.yaml", yaml);
  absl::StatusOr<Config> config = LoadConfig(path);
  if (!config.ok()) return config.status();
  return RunCluster(*config, Options(path));
}

// Real MNIST when tests/run_all.sh fetched it, synthetic digits-shaped data
// otherwise (the daemons and the protocol are exercised the same way).
std::string DataSection(int train, int test) {
  const std::string mnist = testing::MnistDir();
  if (mnist.empty()) {
    return absl::StrCat("data:\n  source: synthetic\n  train_examples: ", train,
                        "\n  test_examples: ", test, "\n");
  }
  return absl::StrCat("data:\n  source: mnist\n  path: ", mnist,
                      "\n  train_examples: ", train,
                      "\n  test_examples: ", test, "\n");
}

TEST(ClusterTest, TwoPsTwoWorkersTrainToModestAccuracy) {
  if (testing::MnistDir().empty()) {
    std::fprintf(stderr,
                 "DOWNPOUR_MNIST_DIR not set: training on synthetic data\n");
  }
  const std::string dir = testing::TestDir();
  const std::string yaml = testing::LoopbackConfig(
      2, 2,
      absl::StrCat(
          DataSection(3000, 500),
          "model:\n  layers: [784, 64, 10]\n  block_size: 16384\n"
          "optimizer:\n  type: adam\n  learning_rate: 0.003\n"
          "training:\n  batch_size: 32\n  epochs: 16\n  eval_every_steps: 20\n"
          "checkpoint:\n  dir: ",
          dir, "/ckpt\n  interval_s: 1\n"));
  absl::StatusOr<LaunchSummary> summary = Launch(yaml);
  ASSERT_THAT(summary, IsOk());
  EXPECT_FALSE(summary->interrupted);
  EXPECT_GT(summary->final_accuracy, 0.8)
      << "stop reason: " << summary->stop_reason;
  ASSERT_EQ(summary->workers.size(), 2u);
  for (const WorkerResult& w : summary->workers) {
    EXPECT_TRUE(w.finished) << "worker " << w.index;
    EXPECT_EQ(w.step, 16 * ((1500 + 31) / 32)) << "worker " << w.index;
  }
  EXPECT_THAT(summary->stop_reason, HasSubstr("every worker finished"));
  // Each ps wrote a final checkpoint on SIGTERM, and it reads back whole.
  int blocks = 0;
  for (int shard = 0; shard < 2; ++shard) {
    auto checkpoint = server::ReadNewestCheckpoint(dir + "/ckpt", shard);
    ASSERT_THAT(checkpoint, IsOk());
    blocks += checkpoint->blocks.size();
    for (const auto& block : checkpoint->blocks) EXPECT_GT(block.version, 0u);
  }
  EXPECT_EQ(blocks, 7);  // the 784x64 weight in 4 blocks, 3 more tensors
  auto json = ReadFile(summary->summary_path);
  ASSERT_THAT(json, IsOk());
  EXPECT_THAT(*json, HasSubstr("\"accuracy\": "));
  EXPECT_THAT(*json, ::testing::Not(HasSubstr("\"accuracy\": null")));
}

// training.fetch layerwise end to end: each worker's gradients leave in
// block groups as backprop finishes them and the values come back in the
// pushes' replies. Every step's gradient reaches every block exactly once
// (each block's version in the final checkpoints is the steps of both
// workers), and the model trains as after_push's does.
TEST(ClusterTest, LayerwiseFetchAppliesEveryStepToEveryBlockOnce) {
  const std::string dir = testing::TestDir();
  const std::string yaml = testing::LoopbackConfig(
      2, 2,
      absl::StrCat(
          DataSection(3000, 500),
          "model:\n  layers: [784, 64, 10]\n  block_size: 16384\n"
          "optimizer:\n  type: adam\n  learning_rate: 0.003\n"
          "training:\n  batch_size: 32\n  epochs: 8\n  eval_every_steps: 20\n"
          "  fetch: layerwise\n"
          // The subject is delivery: with the push guard on, a late worker's
          // first gradients on synthetic data (1000x the converged worker's)
          // can be refused as outliers, and a refused push is not applied
          // (outage_test counts those; push_guard_test tests the guard).
          "robustness:\n  norm_refuse_factor: 0\n"
          "checkpoint:\n  dir: ",
          dir, "/ckpt\n  interval_s: 1\n"));
  absl::StatusOr<LaunchSummary> summary = Launch(yaml);
  ASSERT_THAT(summary, IsOk());
  EXPECT_EQ(summary->failure, "");
  EXPECT_GT(summary->final_accuracy, 0.8)
      << "stop reason: " << summary->stop_reason;
  ASSERT_EQ(summary->workers.size(), 2u);
  const int64_t steps = 8 * ((1500 + 31) / 32);
  for (const WorkerResult& w : summary->workers) {
    EXPECT_TRUE(w.finished) << "worker " << w.index;
    EXPECT_EQ(w.step, steps) << "worker " << w.index;
    EXPECT_EQ(w.pushes, steps) << "worker " << w.index;
  }
  int blocks = 0;
  for (int shard = 0; shard < 2; ++shard) {
    auto checkpoint = server::ReadNewestCheckpoint(dir + "/ckpt", shard);
    ASSERT_THAT(checkpoint, IsOk());
    blocks += checkpoint->blocks.size();
    for (const auto& block : checkpoint->blocks) {
      EXPECT_EQ(block.version, static_cast<uint64_t>(2 * steps))
          << "block " << block.id;
    }
  }
  EXPECT_EQ(blocks, 7);
}

TEST(ClusterTest, TargetAccuracyStopsTheJobEarly) {
  const std::string yaml = testing::LoopbackConfig(
      1, 2,
      absl::StrCat(DataSection(2000, 400),
                   "model:\n  layers: [784, 10]\n  type: softmax\n"
                   "optimizer:\n  type: sgd\n  learning_rate: 0.1\n"
                   "training:\n  batch_size: 32\n  epochs: 1000\n  "
                   "eval_every_steps: 10\n"
                   "  target_accuracy: 0.75\n"
                   "checkpoint:\n  dir: \"\"\n"));
  absl::StatusOr<LaunchSummary> summary = Launch(yaml);
  ASSERT_THAT(summary, IsOk());
  EXPECT_THAT(summary->stop_reason, HasSubstr("reached test accuracy"));
  EXPECT_LT(summary->steps, 2 * 1000 * 32);
}

TEST(ClusterTest, AWorkerThatCannotStartEndsTheRunWithItsLog) {
  const std::string yaml = testing::LoopbackConfig(
      1, 1,
      absl::StrCat("data:\n  source: mnist\n  path: ", testing::TestDir(),
                   "/no-such-folder\n", "checkpoint:\n  dir: \"\"\n"));
  const absl::Time start = absl::Now();
  absl::StatusOr<LaunchSummary> summary = Launch(yaml);
  EXPECT_THAT(summary, StatusIs(absl::StatusCode::kAborted,
                                ::testing::AllOf(
                                    HasSubstr("worker 0 exited with status 2"),
                                    HasSubstr("fetch_mnist.sh"))));
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
}

// An absurd learning rate makes the loss explode within a few steps: the
// worker that sees it first exits naming the knobs, the launcher stops the job
// and reports a failed training (summary ok=false), not "Training done".
TEST(ClusterTest, ADivergedJobIsAFailureThatNamesTheKnobs) {
  const std::string yaml = testing::LoopbackConfig(
      1, 2,
      absl::StrCat(
          "data:\n  source: synthetic\n  train_examples: 1000\n  "
          "test_examples: 200\n",
          "model:\n  layers: [784, 32, 10]\n"
          "optimizer:\n  type: sgd\n  learning_rate: 1000\n"
          "training:\n  batch_size: 32\n  epochs: 50\n  eval_every_steps: 0\n"
          "checkpoint:\n  dir: \"\"\n"));
  const absl::Time start = absl::Now();
  absl::StatusOr<LaunchSummary> summary = Launch(yaml);
  ASSERT_THAT(summary, IsOk());
  EXPECT_THAT(
      summary->failure,
      ::testing::AllOf(HasSubstr("training diverged at step"),
                       HasSubstr("optimizer.learning_rate too high (now 1000)"),
                       HasSubstr("Lower optimizer.learning_rate")));
  EXPECT_THAT(FormatSummary(*summary), HasSubstr("Training FAILED: worker "));
  EXPECT_THAT(FormatSummary(*summary),
              ::testing::Not(HasSubstr("Training done.")));
  auto json = ReadFile(summary->summary_path);
  ASSERT_THAT(json, IsOk());
  EXPECT_THAT(*json, HasSubstr("\"ok\": false,"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
}

}  // namespace
}  // namespace downpour
