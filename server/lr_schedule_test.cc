#include "server/lr_schedule.h"

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace downpour::server {
namespace {

OptimizerSection Schedule(const std::string& schedule, int64_t warmup,
                          int64_t decay) {
  OptimizerSection section;
  section.schedule = ParseLrScheduleType(schedule).value();
  section.warmup_updates = warmup;
  section.decay_updates = decay;
  return section;
}

struct Point {
  uint64_t global_step;
  double scale;
};

void ExpectScales(const OptimizerSection& section,
                  const std::vector<Point>& points) {
  for (const Point& p : points) {
    EXPECT_NEAR(LrScale(section, p.global_step), p.scale, 1e-12)
        << LrScheduleTypeName(section.schedule) << " at global step "
        << p.global_step;
  }
}

TEST(LrScaleTest, ConstantIsOneAtEveryStep) {
  ExpectScales(Schedule("constant", 0, 0),
               {{0, 1.0}, {1, 1.0}, {1000000, 1.0}});
}

// warmup 4: updates 0..3 use 1/4, 2/4, 3/4, 4/4 of lr; then the full lr.
TEST(LrScaleTest, WarmupRampsLinearlyFromLrOverWarmupToLr) {
  ExpectScales(Schedule("constant", 4, 0),
               {{0, 0.25}, {1, 0.5}, {2, 0.75}, {3, 1.0}, {4, 1.0}, {99, 1.0}});
}

// step, decay 10, factor 0.5, warmup 2: u = step - 2;
//   u 0..9 -> 1, u 10..19 -> 0.5, u 20 -> 0.25, u 35 -> 0.125.
TEST(LrScaleTest, StepMultipliesByTheFactorEveryDecayUpdatesAfterWarmup) {
  OptimizerSection section = Schedule("step", 2, 10);
  section.decay_factor = 0.5;
  ExpectScales(section, {{0, 0.5},
                         {1, 1.0},
                         {2, 1.0},
                         {11, 1.0},
                         {12, 0.5},
                         {21, 0.5},
                         {22, 0.25},
                         {37, 0.125}});
}

TEST(LrScaleTest, StepWithTheDefaultFactorDividesByTen) {
  ExpectScales(Schedule("step", 0, 100), {{99, 1.0}, {100, 0.1}, {250, 0.01}});
}

// cosine, decay 100, no warmup, f = 0:
//   u 0 -> 1; u 25 -> 0.5 (1 + cos(pi/4)) = 0.853553390593;
//   u 50 -> 0.5; u 75 -> 0.146446609407; u >= 100 -> 0.
TEST(LrScaleTest, CosineFallsToZeroOverDecayUpdates) {
  ExpectScales(Schedule("cosine", 0, 100), {{0, 1.0},
                                            {25, 0.853553390593274},
                                            {50, 0.5},
                                            {75, 0.146446609406726},
                                            {100, 0.0},
                                            {1000, 0.0}});
}

// cosine, warmup 10, decay 100, f = 0.2: scale = 0.2 + 0.8 * cosine part:
//   step 4 (warmup) -> 5/10; step 10 (u 0) -> 1; step 60 (u 50) -> 0.6;
//   step 85 (u 75) -> 0.2 + 0.8 * 0.146446609407 = 0.317157287525;
//   step 500 -> 0.2.
TEST(LrScaleTest, CosineAfterWarmupStopsAtTheMinimumFraction) {
  OptimizerSection section = Schedule("cosine", 10, 100);
  section.min_lr_fraction = 0.2;
  ExpectScales(section, {{4, 0.5},
                         {10, 1.0},
                         {60, 0.6},
                         {85, 0.317157287525381},
                         {110, 0.2},
                         {500, 0.2}});
}

}  // namespace
}  // namespace downpour::server
