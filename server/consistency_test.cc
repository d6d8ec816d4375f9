#include "server/consistency.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::server {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;
using Mode = Consistency::Mode;
using Contribution = Consistency::Contribution;

TEST(ConsistencyTest, SspGatesAWorkerTooFarAheadOfTheSlowest) {
  Consistency gate(Mode::kSsp, 3);
  gate.SetActiveWorkers({0, 1, 2});
  gate.SetClockForTest(0, 7, 45);
  gate.SetClockForTest(1, 7, 41);
  gate.SetClockForTest(2, 7, 42);
  // 45 - 41 = 4 > 3: worker 0 waits for worker 1 on block 7.
  auto wait = gate.SspWaitFor(0, {5, 7});
  ASSERT_TRUE(wait.has_value());
  EXPECT_EQ(wait->block, 7u);
  EXPECT_EQ(wait->worker, 1);
  EXPECT_EQ(wait->clock, 45);
  EXPECT_EQ(wait->slowest_clock, 41);
  // 42 - 41 = 1: worker 2 may push; so may the slowest.
  EXPECT_FALSE(gate.SspWaitFor(2, {7}).has_value());
  EXPECT_FALSE(gate.SspWaitFor(1, {7}).has_value());
  // Worker 1 pushes: 45 - 42 = 3 <= 3, worker 0 may go.
  EXPECT_EQ(gate.SspApplied(1, {7}), 0);
  EXPECT_FALSE(gate.SspWaitFor(0, {7}).has_value());
  EXPECT_EQ(gate.SspApplied(0, {7}), 3);  // its lead before the push
  EXPECT_EQ(gate.clock(0, 7), 46);
}

TEST(ConsistencyTest, SspZeroStalenessIsLockStepAndTheSlowestCanAlwaysPush) {
  Consistency gate(Mode::kSsp, 0);
  gate.SetActiveWorkers({0, 1});
  EXPECT_FALSE(gate.SspWaitFor(0, {0}).has_value());
  gate.SspApplied(0, {0});
  EXPECT_TRUE(gate.SspWaitFor(0, {0}).has_value());
  EXPECT_FALSE(gate.SspWaitFor(1, {0}).has_value());
  gate.SspApplied(1, {0});
  EXPECT_FALSE(gate.SspWaitFor(0, {0}).has_value());
}

TEST(ConsistencyTest, NobodyIsGatedBeforeTheFirstSetNorOutsideIt) {
  Consistency gate(Mode::kSsp, 0);
  for (int i = 0; i < 5; ++i) gate.SspApplied(0, {0});
  EXPECT_FALSE(gate.SspWaitFor(0, {0}).has_value());  // set unknown
  gate.SetActiveWorkers({1});
  EXPECT_FALSE(gate.Gated(0));
  EXPECT_FALSE(gate.SspWaitFor(0, {0}).has_value());  // not active
  gate.SetClockForTest(1, 0, 9);
  EXPECT_FALSE(gate.SspWaitFor(1, {0}).has_value());  // 0 is not counted
  Consistency async(Mode::kAsync, 0);
  async.SetActiveWorkers({0, 1});
  async.SspApplied(0, {0});
  EXPECT_FALSE(async.SspWaitFor(0, {0}).has_value());
}

// Two shards that hear of the workers at different moments still agree on
// every clock, because the clocks come with the pushes.
TEST(ConsistencyTest, ClocksComeFromThePushesSoShardsAgree) {
  Consistency a(Mode::kSsp, 1), b(Mode::kSsp, 1);
  a.SetActiveWorkers({0, 1});
  for (uint64_t c = 1; c <= 5; ++c) {
    a.SspApplied(0, {0}, c);
    b.SspApplied(0, {1}, c);  // b does not know the workers yet
    if (c == 3) b.SetActiveWorkers({0, 1});
  }
  EXPECT_EQ(a.clock(0, 0), 5);
  EXPECT_EQ(b.clock(0, 1), 5);
  a.SspApplied(1, {0}, 4);
  b.SspApplied(1, {1}, 4);
  // Worker 0 (clock 5, next push 6) is 1 ahead of worker 1 on both shards.
  EXPECT_FALSE(a.SspWaitFor(0, {0}, 6).has_value());
  EXPECT_FALSE(b.SspWaitFor(0, {1}, 6).has_value());
  EXPECT_TRUE(a.SspWaitFor(0, {0}, 7).has_value());
  EXPECT_TRUE(b.SspWaitFor(0, {1}, 7).has_value());
}

// A late or restarted worker starts at the start clock the coordinator gave
// it (the others' minimum): until its first push the others may wait for it,
// it is never held itself, and then nobody waits for it to redo history.
TEST(ConsistencyTest, ALateWorkerJoinsAtItsStartClock) {
  Consistency gate(Mode::kSsp, 1);
  gate.SetActiveWorkers({0, 1});
  gate.SspApplied(0, {3}, 40);
  gate.SspApplied(1, {3}, 38);
  gate.SetActiveWorkers({0, 1, 2});  // worker 2 registered with start 38
  auto wait = gate.SspWaitFor(1, {3}, 39);
  ASSERT_TRUE(wait.has_value()) << "worker 2 has not pushed: it counts 0";
  EXPECT_EQ(wait->worker, 2);
  EXPECT_FALSE(gate.SspWaitFor(2, {3}, 39).has_value());
  gate.SspApplied(2, {3}, 39);
  EXPECT_FALSE(gate.SspWaitFor(1, {3}, 39).has_value());
  wait = gate.SspWaitFor(0, {3}, 41);  // 40 - 38 = 2 > 1: waits for worker 1
  ASSERT_TRUE(wait.has_value());
  EXPECT_EQ(wait->worker, 1);
  EXPECT_EQ(wait->slowest_clock, 38);
}

TEST(ConsistencyTest, ADeadWorkerDroppingOutFreesThoseWaitingForIt) {
  Consistency gate(Mode::kSsp, 2);
  gate.SetActiveWorkers({0, 1});
  gate.SetClockForTest(0, 0, 10);
  gate.SetClockForTest(1, 0, 3);
  ASSERT_TRUE(gate.SspWaitFor(0, {0}).has_value());
  gate.SetActiveWorkers({0});
  EXPECT_FALSE(gate.SspWaitFor(0, {0}).has_value());
}

std::vector<float> Floats(std::initializer_list<float> v) { return v; }

Consistency::BlockGradient Grad(uint32_t block, const std::vector<float>& g) {
  return {block, g.data(), g.size()};
}

TEST(ConsistencyTest, BspRoundCompletesWhenEveryActiveWorkerContributed) {
  Consistency gate(Mode::kBsp, 0);
  gate.SetActiveWorkers({0, 1});
  const auto a = Floats({1, 2}), b = Floats({3, 6}), c = Floats({5});
  EXPECT_EQ(gate.BspContribute(0, 7, {Grad(4, a), Grad(5, c)}),
            Contribution::kAdded);
  EXPECT_THAT(gate.BspCompleteRounds(), IsEmpty());
  EXPECT_THAT(gate.BspWaitingFor(4), ElementsAre(1));
  EXPECT_EQ(gate.BspContribute(1, 3, {Grad(4, b)}), Contribution::kAdded);
  EXPECT_THAT(gate.BspCompleteRounds(), ElementsAre(4));
  std::vector<float> mean;
  // Worker 1's push carried only block 4: applied now; worker 0's waits for 5.
  EXPECT_THAT(gate.BspTakeRound(4, &mean), ElementsAre(Pair(1, 3u)));
  EXPECT_THAT(mean, ElementsAre(2.0f, 4.0f));  // the mean, not the sum
  EXPECT_TRUE(gate.BspHasPending(0));
  EXPECT_THAT(gate.BspCompleteRounds(), IsEmpty());
}

TEST(ConsistencyTest, BspRoundCompletesEarlyWhenTheActiveSetShrinks) {
  Consistency gate(Mode::kBsp, 0);
  gate.SetActiveWorkers({0, 1, 2});
  const auto a = Floats({1}), b = Floats({3});
  gate.BspContribute(0, 1, {Grad(0, a)});
  gate.BspContribute(2, 1, {Grad(0, b)});
  EXPECT_THAT(gate.BspCompleteRounds(), IsEmpty());
  EXPECT_THAT(gate.BspWaitingFor(0), ElementsAre(1));
  gate.SetActiveWorkers({0, 2});  // worker 1 died mid-step
  EXPECT_THAT(gate.BspCompleteRounds(), ElementsAre(0));
  std::vector<float> mean;
  EXPECT_THAT(gate.BspTakeRound(0, &mean),
              ElementsAre(Pair(0, 1u), Pair(2, 1u)));
  EXPECT_THAT(mean, ElementsAre(2.0f));
}

TEST(ConsistencyTest, BspRetryOfAPendingContributionIsNotAddedTwice) {
  Consistency gate(Mode::kBsp, 0);
  gate.SetActiveWorkers({0, 1});
  const auto a = Floats({1}), b = Floats({3});
  EXPECT_EQ(gate.BspContribute(0, 5, {Grad(0, a)}), Contribution::kAdded);
  EXPECT_EQ(gate.BspContribute(0, 5, {Grad(0, a)}), Contribution::kPending);
  // Its next push waits for this round.
  EXPECT_EQ(gate.BspContribute(0, 6, {Grad(0, a)}), Contribution::kBusy);
  gate.BspContribute(1, 9, {Grad(0, b)});
  std::vector<float> mean;
  gate.BspTakeRound(0, &mean);
  EXPECT_THAT(mean, ElementsAre(2.0f));  // (1 + 3) / 2: worker 0 counted once
  EXPECT_FALSE(gate.BspHasPending(0));
  EXPECT_EQ(gate.BspContribute(0, 6, {Grad(0, a)}), Contribution::kAdded);
}

}  // namespace
}  // namespace downpour::server
