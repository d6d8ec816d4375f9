#include "server/push_guard.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "common/counters.h"
#include "common/testing/fake_clock.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::server {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

class PushGuardTest : public ::testing::Test {
 protected:
  PushGuard::Options Options(int workers) {
    PushGuard::Options options;
    options.num_workers = workers;
    options.num_blocks = 4;
    options.shard_index = 1;
    options.counters = &counters_;
    options.clock = &clock_;
    return options;
  }
  // Records `n` applied pushes of `norm` by `worker` to `block`.
  static void Feed(PushGuard* guard, uint32_t block, int worker, double norm,
                   int n) {
    for (int i = 0; i < n; ++i) guard->RecordNorm(block, worker, norm);
  }
  // A deterministic factor in [0.5, 2): batch noise.
  double Noise() {
    state_ = state_ * 6364136223846793005ULL + 1442695040888963407ULL;
    return std::exp2(
        static_cast<double>(state_ >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }

  Counters counters_;
  FakeClock clock_;
  uint64_t state_ = 7;
};

TEST_F(PushGuardTest, OnlyAbsoluteBoundsApplyDuringWarmup) {
  PushGuard guard(Options(2));
  Feed(&guard, 0, 0, 1.0, 19);
  EXPECT_EQ(guard.TypicalNormForTest(0), 0);
  absl::StatusOr<double> clip = guard.CheckNorm(0, 1, 1e12);
  ASSERT_THAT(clip.status(), IsOk());
  EXPECT_EQ(*clip, 0);
  Feed(&guard, 0, 0, 1.0, 1);  // the 20th: worker 0's norms now count
  EXPECT_DOUBLE_EQ(guard.TypicalNormForTest(0), 1.0);
  EXPECT_EQ(guard.TypicalNormForTest(1), 0);  // per block
}

TEST_F(PushGuardTest, ClipsBeyondTheClipFactorAndRefusesBeyondTheRefuseFactor) {
  PushGuard guard(Options(3));
  Feed(&guard, 2, 0, 2.0, 20);
  Feed(&guard, 2, 1, 2.0, 20);
  // A newcomer beyond two established workers is refused from its first push.
  EXPECT_THAT(guard.CheckNorm(2, 2, 9e8).status(),
              StatusIs(absl::StatusCode::kAborted,
                       AllOf(HasSubstr("block 2"), HasSubstr("worker 2"),
                             HasSubstr("9e+08"), HasSubstr("1000 x 2"),
                             HasSubstr("robustness.norm_refuse_factor"))));
  Feed(&guard, 2, 2, 2.0, 20);
  absl::StatusOr<double> clip = guard.CheckNorm(2, 2, 19.0);
  ASSERT_THAT(clip.status(), IsOk());
  EXPECT_EQ(*clip, 0);
  clip = guard.CheckNorm(2, 2, 500.0);
  ASSERT_THAT(clip.status(), IsOk());
  EXPECT_DOUBLE_EQ(*clip, 20.0);
  EXPECT_THAT(guard.CheckNorm(2, 2, 9e8).status(),
              StatusIs(absl::StatusCode::kAborted));
  EXPECT_EQ(counters_.Get("suspect_pushes_worker_2"), 2);
  EXPECT_EQ(counters_.Get("clipped_blocks_worker_2"), 1);
  EXPECT_EQ(counters_.Get("guard_clipped_blocks"), 1);
  EXPECT_EQ(counters_.Get("guard_refused_norm"), 2);
  EXPECT_EQ(counters_.Get("suspect_pushes_worker_0"), 0);
}

TEST_F(PushGuardTest, AWorkersOwnHistoryNeverExcusesIt) {
  PushGuard guard(Options(3));
  Feed(&guard, 0, 0, 1.0, 20);
  Feed(&guard, 0, 1, 1.0, 20);
  Feed(&guard, 0, 2, 1e6, 20);  // warmed up on huge norms (no bound then)
  EXPECT_THAT(guard.CheckNorm(0, 2, 1e6).status(),
              StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(guard.CheckNorm(0, 0, 1.0).status(), IsOk());
}

TEST_F(PushGuardTest, OfTwoWorkersTheEstablishedOneIsTrustedOverANewcomer) {
  PushGuard guard(Options(2));
  Feed(&guard, 0, 0, 1.0, 20);
  EXPECT_THAT(guard.CheckNorm(0, 1, 1e6).status(),
              StatusIs(absl::StatusCode::kAborted));
  // Two established workers: neither can get the other refused.
  Feed(&guard, 1, 0, 1.0, 20);
  Feed(&guard, 1, 1, 1e-3, 20);
  EXPECT_THAT(guard.CheckNorm(1, 0, 1e4).status(), IsOk());
  EXPECT_THAT(guard.CheckNorm(1, 1, 1e4).status(), IsOk());
}

TEST_F(PushGuardTest, HonestShrinkingNoisyNormsAreNeverClipped) {
  PushGuard guard(Options(4));
  // Norms fall 1000-fold over training, each push off by up to 2x either way.
  for (int step = 0; step < 20000; ++step) {
    const double trend = 10.0 * std::pow(1e-3, step / 20000.0);
    for (int worker = 0; worker < 4; ++worker) {
      for (uint32_t block = 0; block < 2; ++block) {
        const double norm = trend * Noise() * (block + 1);
        absl::StatusOr<double> clip = guard.CheckNorm(block, worker, norm);
        ASSERT_THAT(clip.status(), IsOk()) << "step " << step;
        ASSERT_EQ(*clip, 0) << "step " << step << " worker " << worker;
        guard.RecordNorm(block, worker, norm);
      }
    }
  }
  EXPECT_EQ(counters_.Get("guard_clipped_blocks"), 0);
}

TEST_F(PushGuardTest, AFloodingWorkerCannotRaiseTheBound) {
  PushGuard guard(Options(3));
  int refused = 0, clipped = 0;
  for (int round = 0; round < 2000; ++round) {
    for (int worker = 0; worker < 2; ++worker) {
      const double norm = 0.5 * Noise();
      ASSERT_EQ(*guard.CheckNorm(0, worker, norm), 0);
      guard.RecordNorm(0, worker, norm);
    }
    // Worker 2 pushes 10 times as often, at 9e5 per element of 65536 and
    // at 9 times the typical norm.
    for (int i = 0; i < 10; ++i) {
      const double norm = i % 2 == 0 ? 9e5 * 256 : 4.5;
      absl::StatusOr<double> clip = guard.CheckNorm(0, 2, norm);
      if (!clip.ok()) {
        ++refused;
        continue;
      }
      if (*clip > 0) ++clipped;
      guard.RecordNorm(0, 2, norm);
    }
  }
  EXPECT_GE(refused, 9900);  // all but a few before the others counted
  EXPECT_LT(guard.TypicalNormForTest(0), 1.0);
  EXPECT_EQ(counters_.Get("suspect_pushes_worker_0"), 0);
  EXPECT_EQ(counters_.Get("suspect_pushes_worker_1"), 0);
  EXPECT_GE(counters_.Get("suspect_pushes_worker_2"), 9900);
}

TEST_F(PushGuardTest, OfTwoWorkersATinyOneCannotGetTheOtherRefused) {
  PushGuard guard(Options(2));
  Feed(&guard, 1, 0, 1.0, 20);  // worker 0 was there first
  for (int i = 0; i < 500; ++i) {
    guard.RecordNorm(1, 1, 1e-9);
    absl::StatusOr<double> clip = guard.CheckNorm(1, 0, 1.0);
    ASSERT_THAT(clip.status(), IsOk()) << i;  // clipped at worst
    guard.RecordNorm(1, 0, 1.0);
  }
}

// A damaged model: every honest worker's gradients grow 1e5-fold at once.
// Each is refused a few times (until the next recompute of the medians sees
// the others' refused norms), not for good; before, none of them ever
// pushed again (issue 26: on synthetic digits a flood did this, and then
// the workers dropped out of the rate bound's median).
TEST_F(PushGuardTest, WhenEveryHonestGradientGrowsNoWorkerIsLockedOut) {
  PushGuard guard(Options(3));
  for (int worker = 0; worker < 3; ++worker) Feed(&guard, 0, worker, 1.0, 20);
  std::vector<int> refused(3, 0);
  for (int round = 0; round < 40; ++round) {
    for (int worker = 0; worker < 3; ++worker) {
      absl::StatusOr<double> clip = guard.CheckNorm(0, worker, 1e5 * Noise());
      if (clip.ok()) {
        guard.RecordNorm(0, worker, 1e5);
      } else {
        EXPECT_LT(round, 10) << "worker " << worker << " still refused";
        ++refused[worker];
      }
    }
  }
  for (int worker = 0; worker < 3; ++worker) {
    EXPECT_GT(refused[worker], 0) << worker;
    EXPECT_LE(refused[worker], 3) << worker;
  }
}

// What a worker's refused norms raise is the others' bounds, never its own,
// and they never make it count: 200 refused pushes of 1e8 later, 1e4 (beyond
// 1000 x the others' 1) is still refused, from a counted worker and from a
// newcomer beside one established worker (counted, it would be one of two
// established workers, whom the guard cannot tell apart, and go unrefused).
TEST_F(PushGuardTest, AWorkersRefusedNormsNeverRaiseItsOwnBound) {
  for (const int workers : {4, 2}) {
    PushGuard guard(Options(workers));
    for (int worker = 0; worker < workers - 1; ++worker) {
      Feed(&guard, 0, worker, 1.0, 20);
    }
    const int worker = 1;  // with 4: counted; with 2: a newcomer
    for (int i = 0; i < 200; ++i) {
      ASSERT_THAT(guard.CheckNorm(0, worker, 1e8).status(),
                  StatusIs(absl::StatusCode::kAborted))
          << i << " with " << workers << " workers";
    }
    EXPECT_THAT(guard.CheckNorm(0, worker, 1e4).status(),
                StatusIs(absl::StatusCode::kAborted));
    EXPECT_DOUBLE_EQ(guard.TypicalNormForTest(0), 1.0);
  }
}

TEST_F(PushGuardTest, NormChecksAreOffAtFactorZero) {
  PushGuard::Options options = Options(2);
  options.robustness.norm_clip_factor = 0;
  options.robustness.norm_refuse_factor = 0;
  PushGuard guard(options);
  EXPECT_FALSE(guard.wants_norms());
  Feed(&guard, 0, 0, 1.0, 100);
  EXPECT_EQ(*guard.CheckNorm(0, 1, 1e30), 0);
}

// Pushes of `worker` every `every` for `span`; returns how many were refused.
int Drive(PushGuard* guard, FakeClock* clock,
          const std::vector<std::pair<int, absl::Duration>>& workers,
          absl::Duration span, std::vector<int>* refused) {
  refused->assign(workers.size(), 0);
  std::vector<absl::Time> next(workers.size(), clock->Now());
  const absl::Time end = clock->Now() + span;
  const absl::Duration tick = absl::Milliseconds(1);
  int total = 0;
  for (absl::Time now = clock->Now(); now < end; now += tick) {
    clock->Advance(tick);
    for (size_t i = 0; i < workers.size(); ++i) {
      while (next[i] <= now) {
        next[i] += workers[i].second;
        const int worker = workers[i].first;
        if (guard->CheckRate(worker, now).ok()) {
          guard->RecordPush(worker, now);
        } else {
          ++(*refused)[i];
          ++total;
        }
      }
    }
  }
  return total;
}

TEST_F(PushGuardTest, OneWorkerIsNeverRateLimited) {
  PushGuard guard(Options(3));
  std::vector<int> refused;
  EXPECT_EQ(Drive(&guard, &clock_, {{1, absl::Microseconds(100)}},
                  absl::Seconds(20), &refused),
            0);
}

TEST_F(PushGuardTest, AFloodingWorkerGetsAFairMultipleOfTheMedianRate) {
  PushGuard guard(Options(4));
  std::vector<int> refused;
  // Three honest workers at 50, 60 and 70 pushes/s; worker 3 at 2000/s.
  Drive(&guard, &clock_,
        {{0, absl::Milliseconds(20)},
         {1, absl::Microseconds(16667)},
         {2, absl::Microseconds(14286)},
         {3, absl::Microseconds(500)}},
        absl::Seconds(20), &refused);
  EXPECT_EQ(refused[0], 0);
  EXPECT_EQ(refused[1], 0);
  EXPECT_EQ(refused[2], 0);
  // Applied: about 4 x 60/s + slack, i.e. far below the 40000 offered.
  const int applied = 40000 - refused[3];
  EXPECT_LT(applied, 7000);
  EXPECT_GT(applied, 3000);
  EXPECT_EQ(counters_.Get("guard_refused_rate"), refused[3]);
  EXPECT_EQ(counters_.Get("suspect_pushes_worker_3"), refused[3]);
  EXPECT_THAT(guard.CheckRate(3, clock_.Now()),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr("worker 3"), HasSubstr("4 x"),
                             HasSubstr("robustness.rate_factor"))));
}

TEST_F(PushGuardTest, LateStartersAndLeaversLimitNobodyHonest) {
  PushGuard guard(Options(3));
  std::vector<int> refused;
  // Worker 0 alone for 10 s, then worker 1 joins at a third of its rate.
  Drive(&guard, &clock_, {{0, absl::Milliseconds(5)}}, absl::Seconds(10),
        &refused);
  Drive(&guard, &clock_,
        {{0, absl::Milliseconds(5)}, {1, absl::Milliseconds(15)}},
        absl::Seconds(10), &refused);
  EXPECT_EQ(refused[0], 0);
  EXPECT_EQ(refused[1], 0);
  // Worker 1 finishes; worker 0 goes on at full speed.
  Drive(&guard, &clock_, {{0, absl::Milliseconds(5)}}, absl::Seconds(30),
        &refused);
  EXPECT_EQ(refused[0], 0);
}

TEST_F(PushGuardTest, RateLimitIsOffAtFactorZero) {
  PushGuard::Options options = Options(2);
  options.robustness.rate_factor = 0;
  PushGuard guard(options);
  std::vector<int> refused;
  EXPECT_EQ(Drive(&guard, &clock_,
                  {{0, absl::Milliseconds(100)}, {1, absl::Microseconds(100)}},
                  absl::Seconds(10), &refused),
            0);
}

}  // namespace
}  // namespace downpour::server
