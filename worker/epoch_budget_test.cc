#include "worker/epoch_budget.h"

#include <map>

#include "gtest/gtest.h"

namespace downpour::worker {
namespace {

// Runs a budget to its end like the Downpour loop does, changing the set to
// `changes[step]` examples before that step; returns the steps taken.
int64_t RunToTheEnd(EpochBudget* budget,
                    const std::map<int64_t, int64_t>& changes) {
  int64_t step = 0;
  for (; step < budget->total_steps(); ++step) {
    auto change = changes.find(step);
    if (change != changes.end()) budget->SetExamples(change->second);
    budget->StepTaken();
  }
  return step;
}

TEST(EpochBudgetTest, WithoutChangesItIsEpochsTimesStepsPerEpoch) {
  EpochBudget budget(10, 64, 4000);  // 63 steps an epoch
  EXPECT_EQ(budget.total_steps(), 630);
  EXPECT_EQ(RunToTheEnd(&budget, {}), 630);
  EXPECT_DOUBLE_EQ(budget.epochs_done(), 10);
}

TEST(EpochBudgetTest, AnAdoptedPartIsTrainedForTheEpochsLeft) {
  EpochBudget budget(10, 64, 4000);
  // Half-way (5 epochs of 63 steps) the set doubles to 125 steps an epoch:
  // the 5 epochs left take 625 steps.
  EXPECT_EQ(RunToTheEnd(&budget, {{315, 8000}}), 315 + 625);
  EXPECT_DOUBLE_EQ(budget.epochs_done(), 10);
}

// The reported fault: a worker that gave an adopted part back trained
// 5,330-7,000 steps instead of 4,200, because the epochs done were counted
// as if every step so far had run on the set it was giving back.
TEST(EpochBudgetTest, GivingAPartBackKeepsTheEpochsDoneOnTheBiggerSet) {
  EpochBudget budget(10, 64, 4000);  // 63 steps an epoch
  // Adopts a part at step 63 (1 epoch done) and gives it back 250 steps (2
  // epochs of 125) later: 3 epochs done, 7 left over its own part.
  EXPECT_EQ(RunToTheEnd(&budget, {{63, 8000}, {313, 4000}}), 313 + 7 * 63);
  EXPECT_DOUBLE_EQ(budget.epochs_done(), 10);
}

TEST(EpochBudgetTest, GivingAPartBackBeforeTrainingOnItChangesNothing) {
  EpochBudget budget(10, 64, 4000);
  EpochBudget unchanged(10, 64, 4000);
  for (int i = 0; i < 100; ++i) {
    budget.StepTaken();
    unchanged.StepTaken();
  }
  budget.SetExamples(8000);
  budget.SetExamples(4000);
  EXPECT_EQ(budget.total_steps(), unchanged.total_steps());
  EXPECT_EQ(budget.total_steps(), 630);
}

TEST(EpochBudgetTest, ManyMovesEndAfterTheConfiguredEpochs) {
  // Three workers' parts of 2,000 examples (32 steps an epoch each) moving
  // to this worker and back, at odd steps.
  EpochBudget budget(20, 64, 2000);
  const int64_t steps = RunToTheEnd(&budget, {{17, 4000},
                                              {90, 6000},
                                              {91, 4000},
                                              {250, 2000},
                                              {333, 6000},
                                              {400, 2000}});
  // Every step ran on some set; together they make the 20 epochs, to within
  // the last step.
  EXPECT_GE(budget.epochs_done(), 20 - 1e-9);
  EXPECT_LT(budget.epochs_done(), 20 + 1.0 / 32);
  EXPECT_EQ(budget.steps_taken(), steps);
}

TEST(EpochBudgetTest, ShrinkingAtTheEndAddsNoStep) {
  EpochBudget budget(2, 10, 100);  // 10 steps an epoch, 20 in all
  for (int i = 0; i < 15; ++i) budget.StepTaken();
  budget.SetExamples(1000);  // 100 steps an epoch: 0.5 epoch left = 50
  EXPECT_EQ(budget.total_steps(), 65);
  for (int i = 0; i < 50; ++i) budget.StepTaken();
  budget.SetExamples(10);
  EXPECT_EQ(budget.total_steps(), 65);
}

TEST(EpochBudgetTest, ASetSmallerThanABatchTakesAStepAnEpoch) {
  EpochBudget budget(3, 64, 5);
  EXPECT_EQ(budget.total_steps(), 3);
  EpochBudget empty(3, 64, 0);
  EXPECT_EQ(empty.total_steps(), 3);
}

}  // namespace
}  // namespace downpour::worker
