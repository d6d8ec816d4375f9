#include "common/backoff.h"

#include "gtest/gtest.h"

namespace downpour {
namespace {

TEST(BackoffTest, GrowsWithJitterUpToTheCap) {
  Backoff backoff(absl::Milliseconds(10), absl::Milliseconds(80), /*seed=*/7);
  absl::Duration ceiling = absl::Milliseconds(10);
  for (int i = 0; i < 8; ++i) {
    const absl::Duration d = backoff.Next();
    EXPECT_GE(d, ceiling / 2) << "attempt " << i;
    EXPECT_LE(d, ceiling) << "attempt " << i;
    ceiling = std::min(ceiling * 2, absl::Milliseconds(80));
  }
  EXPECT_EQ(backoff.attempts(), 8);
  backoff.Reset();
  EXPECT_LE(backoff.Next(), absl::Milliseconds(10));
}

}  // namespace
}  // namespace downpour
