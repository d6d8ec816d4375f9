#include "server/sequence_window.h"

#include "common/push_sequence.h"
#include "gtest/gtest.h"

namespace downpour::server {
namespace {

using Verdict = SequenceWindow::Verdict;

constexpr uint64_t Seq(uint64_t incarnation, uint64_t n) {
  return MakeSequence(incarnation, n);
}

TEST(SequenceWindowTest, InOrderPushesSlideTheBase) {
  SequenceWindow w;
  for (uint64_t n = 1; n <= 5; ++n) {
    ASSERT_EQ(w.Check(Seq(1, n)), Verdict::kNew);
    EXPECT_EQ(w.MarkApplied(Seq(1, n)), 0u);
    EXPECT_EQ(w.Check(Seq(1, n)), Verdict::kDuplicate);
  }
  EXPECT_EQ(w.base(), Seq(1, 5));
  EXPECT_EQ(w.mask(), 0u);
}

TEST(SequenceWindowTest, OutOfOrderPushesAreEachAppliedOnce) {
  SequenceWindow w;
  w.MarkApplied(Seq(1, 1));
  // 3 and 4 arrive before 2.
  ASSERT_EQ(w.Check(Seq(1, 3)), Verdict::kNew);
  w.MarkApplied(Seq(1, 3));
  ASSERT_EQ(w.Check(Seq(1, 4)), Verdict::kNew);
  w.MarkApplied(Seq(1, 4));
  EXPECT_EQ(w.base(), Seq(1, 1));
  EXPECT_EQ(w.mask(), 0b110u);  // 3 and 4 held past the base
  EXPECT_EQ(w.Check(Seq(1, 3)), Verdict::kDuplicate);
  EXPECT_EQ(w.Check(Seq(1, 2)), Verdict::kNew);  // the gap is not a duplicate
  w.MarkApplied(Seq(1, 2));
  EXPECT_EQ(w.base(), Seq(1, 4));
  EXPECT_EQ(w.mask(), 0u);
}

TEST(SequenceWindowTest, ANewIncarnationStartsAFreshWindowAndAnOldOneIsStale) {
  SequenceWindow w;
  w.MarkApplied(Seq(3, 1));
  w.MarkApplied(Seq(3, 2));
  EXPECT_EQ(w.Check(Seq(2, 900)), Verdict::kStale);
  // The restarted process's first request may overtake its own earlier ones.
  ASSERT_EQ(w.Check(Seq(4, 2)), Verdict::kNew);
  w.MarkApplied(Seq(4, 2));
  EXPECT_EQ(w.Check(Seq(4, 1)), Verdict::kNew);
  EXPECT_EQ(w.Check(Seq(3, 3)), Verdict::kStale);
  w.MarkApplied(Seq(4, 1));
  EXPECT_EQ(w.base(), Seq(4, 2));
}

TEST(SequenceWindowTest, ASequenceBeyondTheWindowMovesItAndCountsTheSkipped) {
  SequenceWindow w;
  w.MarkApplied(Seq(1, 1));
  w.MarkApplied(Seq(1, 3));  // 2 missing
  const uint64_t far = Seq(1, 1 + SequenceWindow::kWidth + 10);
  ASSERT_EQ(w.Check(far), Verdict::kNew);
  // The window moves up by 10 to end at `far`: of the sequences it leaves
  // behind (2 .. 11), all but 3 were never seen.
  EXPECT_EQ(w.MarkApplied(far), 9u);
  EXPECT_EQ(w.Check(far), Verdict::kDuplicate);
  EXPECT_EQ(w.Check(Seq(1, 2)), Verdict::kDuplicate);
  EXPECT_EQ(w.Check(far + 1), Verdict::kNew);
}

TEST(SequenceWindowTest, RestoredWindowKeepsItsHoles) {
  SequenceWindow w(Seq(2, 10), 0b101);  // 11 and 13 applied, 12 not
  EXPECT_EQ(w.Check(Seq(2, 11)), Verdict::kDuplicate);
  EXPECT_EQ(w.Check(Seq(2, 12)), Verdict::kNew);
  EXPECT_EQ(w.Check(Seq(2, 13)), Verdict::kDuplicate);
  w.MarkApplied(Seq(2, 12));
  EXPECT_EQ(w.base(), Seq(2, 13));
}

TEST(SequenceWindowTest, HolesAreTheSequencesMissingBelowTheNewest) {
  SequenceWindow w;
  EXPECT_EQ(w.holes(), 0u);
  w.MarkApplied(Seq(1, 1));
  EXPECT_EQ(w.holes(), 0u);
  // A shard restored from a checkpoint at n = 1 while the worker went on to
  // n = 6 (2 .. 5 were acknowledged by a server whose state is gone).
  w.MarkApplied(Seq(1, 6));
  w.MarkApplied(Seq(1, 8));
  EXPECT_EQ(w.holes(), 5u);  // 2, 3, 4, 5 and 7
  w.MarkApplied(Seq(1, 7));
  EXPECT_EQ(w.holes(), 4u);
  // Once the window slides past them they are counted as skipped instead
  // (2 .. 5, and 9, which was never sent either).
  EXPECT_EQ(w.MarkApplied(Seq(1, 1 + SequenceWindow::kWidth + 8)), 5u);
  EXPECT_EQ(w.holes(), SequenceWindow::kWidth - 1);  // only the newest is in
  EXPECT_EQ(SequenceWindow(Seq(2, 10), 0b101).holes(), 1u);
}

}  // namespace
}  // namespace downpour::server
