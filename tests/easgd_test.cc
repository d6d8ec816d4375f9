// End to end: training.mode easgd with real daemons (launcher, coordinator,
// 2 ps, 2 workers on loopback). Each worker steps its own copy with Adam and
// exchanges with the center every easgd_tau steps; the center, evaluated by
// the workers and checkpointed by the ps, learns MNIST (or digits-shaped
// synthetic data when DOWNPOUR_MNIST_DIR is not set), and every exchange is
// applied to every block exactly once.
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "common/testing/status_matchers.h"
#include "deploy/launcher_lib.h"
#include "gtest/gtest.h"
#include "server/checkpoint.h"
#include "tests/daemon_harness.h"

namespace downpour {
namespace {

using ::downpour::testing::IsOk;

std::string DataSection(int train, int test) {
  const std::string mnist = testing::MnistDir();
  if (mnist.empty()) {
    std::fprintf(stderr,
                 "DOWNPOUR_MNIST_DIR not set: training on synthetic data\n");
    return absl::StrCat("data:\n  source: synthetic\n  train_examples: ", train,
                        "\n  test_examples: ", test, "\n");
  }
  return absl::StrCat("data:\n  source: mnist\n  path: ", mnist,
                      "\n  train_examples: ", train,
                      "\n  test_examples: ", test, "\n");
}

TEST(EasgdTest, TwoWorkersTrainTheCenterAndEveryExchangeLandsOnce) {
  const std::string dir = testing::TestDir();
  const std::string yaml = testing::LoopbackConfig(
      2, 2,
      absl::StrCat(
          DataSection(3000, 500),
          "model:\n  layers: [784, 64, 10]\n  block_size: 16384\n"
          "optimizer:\n  type: adam\n  learning_rate: 0.003\n"
          "training:\n  batch_size: 32\n  epochs: 8\n  eval_every_steps: 20\n"
          "  mode: easgd\n  easgd_tau: 4\n"
          "checkpoint:\n  dir: ",
          dir, "/ckpt\n  interval_s: 1\n"));
  const std::string path = testing::WriteConfig("cluster.yaml", yaml);
  absl::StatusOr<Config> config = LoadConfig(path);
  ASSERT_THAT(config, IsOk());
  LaunchOptions options;
  options.config_path = path;
  options.run_dir = dir + "/run";
  options.bin_dir = testing::BinDir();
  options.progress_period = absl::Seconds(1);
  absl::StatusOr<LaunchSummary> summary = RunCluster(*config, options);
  ASSERT_THAT(summary, IsOk());
  EXPECT_FALSE(summary->interrupted);
  // The center's accuracy, evaluated by the last worker to finish.
  EXPECT_GT(summary->final_accuracy, 0.8)
      << "stop reason: " << summary->stop_reason;
  ASSERT_EQ(summary->workers.size(), 2u);
  const int steps = 8 * ((1500 + 31) / 32);  // 376 steps per worker
  for (const WorkerResult& w : summary->workers) {
    EXPECT_TRUE(w.finished) << "worker " << w.index;
    EXPECT_EQ(w.step, steps) << "worker " << w.index;
  }
  // Each block's version counts the exchanges applied to it: 94 a worker.
  int blocks = 0;
  for (int shard = 0; shard < 2; ++shard) {
    auto checkpoint = server::ReadNewestCheckpoint(dir + "/ckpt", shard);
    ASSERT_THAT(checkpoint, IsOk());
    blocks += checkpoint->blocks.size();
    for (const auto& block : checkpoint->blocks) {
      EXPECT_EQ(block.version, 2u * (steps / 4)) << "block " << block.id;
      // The center adds each push as it is (sgd at lr 1): no Adam state on
      // the ps, whose optimizer.* is the workers' local rule.
      EXPECT_TRUE(block.state.empty()) << "block " << block.id;
    }
  }
  EXPECT_EQ(blocks, 7);
}

}  // namespace
}  // namespace downpour
