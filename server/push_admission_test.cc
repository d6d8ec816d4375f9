#include "server/push_admission.h"

#include <cstdint>

#include "common/counters.h"
#include "common/push_key.h"
#include "common/push_sequence.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "server/sequence_window.h"

namespace downpour::server {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;
using Verdict = PushAdmission::Verdict;

class PushAdmissionTest : public ::testing::Test {
 protected:
  PushAdmission::Options Options() {
    PushAdmission::Options options;
    options.num_workers = 4;  // worker ids 0 to 3
    options.shard_index = 2;
    options.counters = &counters_;
    return options;
  }

  // Admits and applies `sequence` of `worker`, as Shard::Push does.
  void Apply(PushAdmission& admission, int32_t worker, uint64_t sequence) {
    absl::StatusOr<Verdict> verdict = admission.Admit(worker, sequence);
    ASSERT_THAT(verdict, IsOk());
    ASSERT_EQ(*verdict, Verdict::kNew);
    admission.MarkApplied(worker, sequence);
  }

  Counters counters_;
};

TEST_F(PushAdmissionTest, WorkerIdsOutsideTheConfigAreRefused) {
  PushAdmission admission(Options());
  for (const int32_t worker : {-2, -1, 4, 1 << 30}) {
    for (const uint64_t sequence : {uint64_t{0}, MakeSequence(1, 1)}) {
      EXPECT_THAT(
          admission.Admit(worker, sequence),
          StatusIs(absl::StatusCode::kInvalidArgument,
                   HasSubstr("push: worker_id " + std::to_string(worker) +
                             " is not a configured worker (4 worker slots "
                             "in cluster.workers and cluster.max_workers: 0 "
                             "to 3)")))
          << worker << " " << sequence;
    }
  }
  EXPECT_TRUE(admission.windows().empty()) << "no state for a stranger";
}

TEST_F(PushAdmissionTest, UntrackedPushesAreAlwaysNew) {
  PushAdmission admission(Options());
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<Verdict> verdict = admission.Admit(3, 0);
    ASSERT_THAT(verdict, IsOk());
    EXPECT_EQ(*verdict, Verdict::kNew);
  }
}

TEST_F(PushAdmissionTest, PushesInFlightMayArriveInAnyOrderAndAreNewOnce) {
  PushAdmission admission(Options());
  for (const uint64_t n : {3, 1, 2}) Apply(admission, 3, MakeSequence(5, n));
  for (const uint64_t n : {3, 1, 2}) {
    absl::StatusOr<Verdict> retry = admission.Admit(3, MakeSequence(5, n));
    ASSERT_THAT(retry, IsOk());
    EXPECT_EQ(*retry, Verdict::kDuplicate) << n;
    EXPECT_TRUE(admission.Applied(3, MakeSequence(5, n)));
    EXPECT_FALSE(admission.IsNew(3, MakeSequence(5, n)));
  }
  EXPECT_EQ(admission.windows().at(3).base(), MakeSequence(5, 3));
  // Another worker's window is its own.
  Apply(admission, 1, MakeSequence(5, 1));
  // An older incarnation (a replaced process) is stale, for good.
  EXPECT_THAT(admission.Admit(3, MakeSequence(4, 9)),
              StatusIs(absl::StatusCode::kOutOfRange,
                       HasSubstr("push: worker 3 incarnation 4 was replaced: "
                                 "a newer incarnation of that worker has "
                                 "pushed since; stop this process")));
  // Neither refusal names the incarnation a forged push would need.
  EXPECT_THAT(admission.Admit(3, MakeSequence(4, 9)).status().message(),
              ::testing::Not(HasSubstr("5")));
  EXPECT_FALSE(admission.IsNew(3, MakeSequence(4, 9)));
  EXPECT_FALSE(admission.Applied(3, MakeSequence(4, 9)));
  // A newer one starts a fresh window.
  Apply(admission, 3, MakeSequence(6, 1));
}

TEST_F(PushAdmissionTest, ASequenceMayJumpOnlyABoundedWayPastItsWindow) {
  PushAdmission admission(Options());
  EXPECT_THAT(admission.Admit(3, MakeSequence(2, 0)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("n = 0")));
  // The first push of an incarnation here may lie far past the window (this
  // shard may hold an older state than the one that took earlier pushes).
  EXPECT_THAT(
      admission.Admit(3, MakeSequence(2, PushAdmission::kMaxSequenceJump + 1)),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("past its last applied push (more than 1048576")));
  EXPECT_THAT(
      admission.Admit(3, MakeSequence(2, PushAdmission::kMaxSequenceJump)),
      IsOk());
  Apply(admission, 3, MakeSequence(2, 1));
  // Once one is applied, the worker's pushes in flight bound any later one.
  constexpr uint64_t kNear = PushAdmission::kMaxAnchoredJump;
  const absl::Status far =
      admission.Admit(3, MakeSequence(2, 1 + kNear + 1)).status();
  EXPECT_THAT(far, StatusIs(absl::StatusCode::kInvalidArgument,
                            HasSubstr("more than 64, further than its pushes "
                                      "in flight ever lie")))
      << "one past the bound from the window base";
  // Issue 42: the message named n and its distance from the window, which
  // told a stranger the worker's last applied sequence.
  EXPECT_THAT(far.message(), ::testing::Not(HasSubstr("66")));
  EXPECT_THAT(far.message(), ::testing::Not(HasSubstr("65")));
  Apply(admission, 3, MakeSequence(2, 1 + kNear));
  EXPECT_EQ(counters_.Get("sequence_window_skips"), 0)
      << "the window is as wide as the bound: nothing skipped";
  // A stranger's jump of 2^20 (the attack that froze a worker) is refused
  // once the worker has pushed here, and moves nothing.
  const uint64_t base = admission.windows().at(3).base();
  EXPECT_THAT(admission.Admit(3, MakeSequence(2, (uint64_t{1} << 20))),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(admission.windows().at(3).base(), base);
}

TEST_F(PushAdmissionTest, ARestoredShardTakesOneFarJumpPerWorker) {
  std::map<int32_t, SequenceWindow> windows;
  windows[1] = SequenceWindow(MakeSequence(3, 10), 0);
  PushAdmission admission(Options(), windows);
  // The worker went on pushing to the shard's former server meanwhile.
  Apply(admission, 1, MakeSequence(3, 5010));
  EXPECT_EQ(counters_.Get("sequence_window_skips") + admission.Holes(),
            5010 - 10 - 1)
      << "the pushes this state never saw are counted";
  EXPECT_THAT(admission.Admit(1, MakeSequence(3, 5010 + 65)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  Apply(admission, 1, MakeSequence(3, 5011));
}

// Attack: one push with sequence 2^64-1 made every later push of that worker
// a duplicate, for good. It is refused, with or without the coordinator's
// word, and leaves no trace.
TEST_F(PushAdmissionTest, AForgedSequenceIsRefusedAndLeavesNoTrace) {
  for (const bool learned : {false, true}) {
    PushAdmission admission(Options());
    if (learned) admission.LearnWorkerIncarnations({{3, 1}});
    EXPECT_THAT(admission.Admit(3, ~uint64_t{0}),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << (learned ? "incarnation never issued" : "too far past the window");
    EXPECT_TRUE(admission.windows().empty());
    Apply(admission, 3, MakeSequence(1, 1));
  }
}

// With the coordinator's word, only incarnations it issued the worker count:
// a newer one waits for the next heartbeat (Unavailable: the worker
// retries), an older one not issued is a replaced process.
TEST_F(PushAdmissionTest, OnlyIncarnationsTheCoordinatorIssuedAreAdmitted) {
  PushAdmission admission(Options());
  admission.LearnWorkerIncarnations({{3, 5}, {9, 7}});  // 9: not configured
  EXPECT_THAT(admission.Admit(3, MakeSequence(6, 1)),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("push: ps 2 has not heard of worker 3's "
                                 "incarnation 6 from the coordinator yet")));
  Apply(admission, 3, MakeSequence(5, 1));
  admission.LearnWorkerIncarnations({{3, 6}});
  Apply(admission, 3, MakeSequence(6, 1));
  EXPECT_THAT(admission.Admit(3, MakeSequence(4, 1)),
              StatusIs(absl::StatusCode::kOutOfRange,
                       HasSubstr("incarnation 4 was not issued to worker 3")));
  EXPECT_THAT(admission.Admit(3, MakeSequence(4, 1)).status().message(),
              ::testing::Not(HasSubstr("6")));
  // Worker 2 has no incarnation yet; 7 was learned only for worker 9, which
  // is ignored, so 6 is the newest heard of and 7 may yet be issued.
  EXPECT_THAT(admission.Admit(2, MakeSequence(7, 1)),
              StatusIs(absl::StatusCode::kUnavailable));
  // Far beyond anything the coordinator has issued: never issued, refused
  // for good rather than retried.
  EXPECT_THAT(
      admission.Admit(
          2, MakeSequence(6 + PushAdmission::kIncarnationSlack + 1, 1)),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("was never issued: refused, nothing recorded")));
  EXPECT_THAT(
      admission.Admit(2, MakeSequence(6 + PushAdmission::kIncarnationSlack, 1)),
      StatusIs(absl::StatusCode::kUnavailable))
      << "at the slack's edge: perhaps issued since the last heartbeat";
}

// Attack: a stranger (plaintext) or another worker's token holder (TLS)
// pushed as worker 3 with its current incarnation and a far sequence, which
// froze the worker's window. Without the push key issued with the
// incarnation, a push is refused before the window is consulted.
TEST_F(PushAdmissionTest, OnlyTheWorkersPushKeyMovesItsWindow) {
  PushAdmission admission(Options());
  admission.LearnWorkerIncarnations(
      {{3, 5, PushKeyDigest(3, 5, 0xfeed)}, {2, 6, 0}});
  for (const uint64_t key : {uint64_t{0}, uint64_t{0xfeee}}) {
    EXPECT_THAT(
        admission.Admit(3, MakeSequence(5, 1 << 20), key),
        StatusIs(absl::StatusCode::kPermissionDenied,
                 HasSubstr("push: worker 3's push key does not match")));
    EXPECT_THAT(admission.Admit(3, MakeSequence(5, 1), key).status().message(),
                ::testing::Not(HasSubstr("feed")));
  }
  EXPECT_TRUE(admission.windows().empty()) << "nothing recorded";
  // The digest the ps holds is not a key that pushes.
  EXPECT_THAT(
      admission.Admit(3, MakeSequence(5, 1), PushKeyDigest(3, 5, 0xfeed)),
      StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(admission.Admit(3, MakeSequence(5, 1), 0xfeed), IsOk());
  // A key learned again later does not replace the first.
  admission.LearnWorkerIncarnations({{3, 5, PushKeyDigest(3, 5, 0xbad)}});
  EXPECT_THAT(admission.Admit(3, MakeSequence(5, 1), 0xfeed), IsOk());
  // An incarnation issued without a key (a state file from before keys).
  EXPECT_THAT(admission.Admit(2, MakeSequence(6, 1)), IsOk());
}

// In a coordinated job every push is windowed: an untracked one (sequence
// 0, which no window tracks) is refused.
TEST_F(PushAdmissionTest, UntrackedPushesAreRefusedInACoordinatedJob) {
  PushAdmission admission(Options());
  admission.LearnWorkerIncarnations({{3, 5, PushKeyDigest(3, 5, 0xfeed)}});
  EXPECT_THAT(admission.Admit(3, 0, 0xfeed),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("sent sequence 0 (untracked)")));
}

TEST_F(PushAdmissionTest, AppliedFromNamesTheIncarnationsThatPushedHere) {
  PushAdmission admission(Options());
  EXPECT_TRUE(admission.AppliedFrom().empty());
  Apply(admission, 3, MakeSequence(5, 2));
  Apply(admission, 1, MakeSequence(4, 1));
  const std::vector<IssuedIncarnation> from = admission.AppliedFrom();
  ASSERT_EQ(from.size(), 2u);
  EXPECT_EQ(from[0].worker, 1);
  EXPECT_EQ(from[0].incarnation, 4u);
  EXPECT_EQ(from[1].worker, 3);
  EXPECT_EQ(from[1].incarnation, 5u);
}

TEST_F(PushAdmissionTest, OnlyTheLastIncarnationsLearnedAreKept) {
  PushAdmission admission(Options());
  for (uint64_t incarnation = 1;
       incarnation <= PushAdmission::kIncarnationsKept + 1; ++incarnation) {
    admission.LearnWorkerIncarnations({{3, incarnation}, {3, incarnation}});
  }
  EXPECT_THAT(admission.Admit(3, MakeSequence(1, 1)),
              StatusIs(absl::StatusCode::kOutOfRange))
      << "the oldest was dropped";
  for (uint64_t incarnation = 2;
       incarnation <= PushAdmission::kIncarnationsKept + 1; ++incarnation) {
    EXPECT_THAT(admission.Admit(3, MakeSequence(incarnation, 1)), IsOk())
        << incarnation;
  }
}

TEST_F(PushAdmissionTest, RestoredWindowsGoOn) {
  std::map<int32_t, SequenceWindow> windows;
  windows[1] = SequenceWindow(MakeSequence(3, 10), 0);
  PushAdmission admission(Options(), windows);
  absl::StatusOr<Verdict> old = admission.Admit(1, MakeSequence(3, 10));
  ASSERT_THAT(old, IsOk());
  EXPECT_EQ(*old, Verdict::kDuplicate);
  Apply(admission, 1, MakeSequence(3, 11));
  EXPECT_EQ(admission.windows().at(1).base(), MakeSequence(3, 11));
}

}  // namespace
}  // namespace downpour::server
