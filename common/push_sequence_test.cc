#include "common/push_sequence.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace downpour {
namespace {

// The layout is the wire protocol: workers and ps of one job must agree, and
// checkpoints keep sequences in this form.
static_assert(MakeSequence(3, 99) == ((uint64_t{3} << 32) | 99));
static_assert(IncarnationOf(MakeSequence(7, 1)) == 7);
static_assert(CountOf(MakeSequence(7, 1)) == 1);

TEST(PushSequenceTest, PartsRoundTrip) {
  struct Case {
    uint64_t incarnation;
    uint64_t n;
  };
  for (const Case c : {Case{0, 0}, Case{0, 1}, Case{1, 1}, Case{5, 3},
                       Case{1, kMaxSequenceCount},
                       Case{kMaxSequenceCount, kMaxSequenceCount}}) {
    const uint64_t sequence = MakeSequence(c.incarnation, c.n);
    EXPECT_EQ(IncarnationOf(sequence), c.incarnation) << c.incarnation;
    EXPECT_EQ(CountOf(sequence), c.n) << c.n;
  }
}

TEST(PushSequenceTest, SequencesOfALaterIncarnationSortAfter) {
  EXPECT_LT(MakeSequence(4, kMaxSequenceCount), MakeSequence(5, 1));
  EXPECT_LT(MakeSequence(5, 1), MakeSequence(5, 2));
}

TEST(PushSequenceTest, TheWholeSpaceSplits) {
  EXPECT_EQ(IncarnationOf(~uint64_t{0}), kMaxSequenceCount);
  EXPECT_EQ(CountOf(~uint64_t{0}), kMaxSequenceCount);
  EXPECT_EQ(MakeSequence(IncarnationOf(~uint64_t{0}), CountOf(~uint64_t{0})),
            ~uint64_t{0});
}

}  // namespace
}  // namespace downpour
