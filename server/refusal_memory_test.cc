// Tests of RefusalMemory: what is remembered, per worker, and for how long.
#include "server/refusal_memory.h"

#include <string>

#include "gtest/gtest.h"

namespace downpour::server {
namespace {

TEST(RefusalMemoryTest, RemembersWhyPerWorkerAndSequence) {
  RefusalMemory memory;
  EXPECT_EQ(memory.Of(0, 1), nullptr);
  memory.Remember(0, 1, "outlier");
  memory.Remember(1, 1, "other worker");
  ASSERT_NE(memory.Of(0, 1), nullptr);
  EXPECT_EQ(*memory.Of(0, 1), "outlier");
  EXPECT_EQ(*memory.Of(1, 1), "other worker");
  EXPECT_EQ(memory.Of(0, 2), nullptr);
  EXPECT_EQ(memory.Of(2, 1), nullptr);
}

TEST(RefusalMemoryTest, KeepsTheLatestPerWorker) {
  RefusalMemory memory;
  for (uint64_t s = 1; s <= RefusalMemory::kKept + 1; ++s) {
    memory.Remember(3, s, "why " + std::to_string(s));
  }
  EXPECT_EQ(memory.Of(3, 1), nullptr);  // the oldest is forgotten
  ASSERT_NE(memory.Of(3, 2), nullptr);
  EXPECT_EQ(*memory.Of(3, 2), "why 2");
  ASSERT_NE(memory.Of(3, RefusalMemory::kKept + 1), nullptr);
}

TEST(RefusalMemoryTest, ARetryOfARefusedPushIsRefusedAgain) {
  RefusalMemory memory;
  proto::PushResponse refused;
  memory.Refuse(1, 7, "outlier", &refused);
  EXPECT_EQ(refused.refused(), "outlier");
  proto::PushResponse retry;
  memory.AnswerDuplicate(1, 7, &retry);
  EXPECT_EQ(retry.refused(), "outlier");
  EXPECT_FALSE(retry.duplicate());
  proto::PushResponse other;
  memory.AnswerDuplicate(1, 8, &other);
  EXPECT_TRUE(other.duplicate());
  EXPECT_TRUE(other.refused().empty());
  // An untracked push (sequence 0) is answered, not remembered.
  proto::PushResponse untracked;
  memory.Refuse(2, 0, "outlier", &untracked);
  EXPECT_EQ(untracked.refused(), "outlier");
  EXPECT_EQ(memory.Of(2, 0), nullptr);
}

}  // namespace
}  // namespace downpour::server
