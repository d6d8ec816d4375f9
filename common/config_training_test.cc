// training.mode easgd: its keys parse, and every combination it cannot run
// is refused with a message naming the keys and the fix.
#include <string>

#include "common/config.h"
#include "common/config_test_util.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace downpour {
namespace {

using config_testing::BadCase;
using config_testing::ExpectAllFail;
using config_testing::Parse;
using ::downpour::testing::IsOk;

TEST(TrainingModeTest, EasgdKeysParse) {
  absl::StatusOr<Config> config = Parse(
      "optimizer:\n  type: adam\n  learning_rate: 0.002\n"
      "training:\n  mode: easgd\n  easgd_alpha: 0.05\n  easgd_tau: 8\n");
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->training.mode, TrainingMode::kEasgd);
  EXPECT_DOUBLE_EQ(config->training.easgd_alpha, 0.05);
  EXPECT_EQ(config->training.easgd_tau, 8);
  absl::StatusOr<Config> defaults = Parse("training:\n  epochs: 1\n");
  ASSERT_THAT(defaults, IsOk());
  EXPECT_EQ(defaults->training.mode, TrainingMode::kDownpour);
  EXPECT_DOUBLE_EQ(defaults->training.easgd_alpha, 0.0);
  EXPECT_EQ(defaults->training.easgd_tau, 4);
}

TEST(TrainingModeTest, EasgdRefusesWhatItCannotRun) {
  const std::string easgd = "training:\n  mode: easgd\n";
  ExpectAllFail({
      {"training:\n  mode: elastic\n", "training.mode"},
      {easgd + "  easgd_alpha: 1\n", "training.easgd_alpha"},
      {easgd + "  easgd_alpha: -0.1\n", "training.easgd_alpha"},
      {easgd + "  easgd_tau: 0\n", "training.easgd_tau"},
      {easgd + "  consistency: bsp\n", "training.consistency async (not bsp)"},
      {easgd + "  fetch: layerwise\n",
       "training.fetch after_push (not layerwise)"},
      {easgd + "  n_push: 4\n  n_fetch: 4\n", "set easgd_tau instead"},
      {easgd + "  warmstart_steps: 10\n", "warmstart_steps 0"},
      {easgd + "optimizer:\n  staleness_lr: true\n",
       "optimizer.staleness_lr and optimizer.delay_compensation do not apply"},
      {easgd + "optimizer:\n  delay_compensation: 0.1\n",
       "do not apply: remove them"},
      {easgd + "model:\n  type: sparse_linear\n  task: binary\n"
               "data:\n  source: libsvm\n  path: a\n  test_path: b\n",
       "use a dense model"},
  });
}

}  // namespace
}  // namespace downpour
