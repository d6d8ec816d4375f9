// ReplicaLog: which changes the next replica cut carries, and when kept
// updates give way to whole blocks.
#include "server/replication/replica_log.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::server {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

BlockStore::Replayed UpdateOf(uint32_t id, uint64_t version) {
  BlockStore::Replayed update;
  update.id = id;
  update.version = version;
  update.worker_id = 1;
  return update;
}

TEST(ReplicaLogTest, ChangesCountTheGenerationAndMarkBlocksOnce) {
  ReplicaLog log(/*num_blocks=*/4, /*state_slots=*/0);
  EXPECT_EQ(log.generation(), 1u);
  log.Changed(2);
  log.Changed(0);
  log.Changed(2);
  log.Changed(-1);  // a change no block carries
  log.Count();
  EXPECT_EQ(log.generation(), 6u);
  EXPECT_THAT(log.SortedDirty(), ElementsAre(0, 2));
  log.ClearDirty();
  EXPECT_THAT(log.SortedDirty(), IsEmpty());
}

TEST(ReplicaLogTest, KeepsUpdatesOnlyWhileLoggingAndTheBlockIsNotWhole) {
  ReplicaLog log(4, /*state_slots=*/2);
  EXPECT_FALSE(log.Keeps(1));
  log.SetLogging(true);
  EXPECT_TRUE(log.Keeps(1));
  EXPECT_FALSE(log.Keeps(4));  // not a block of the model
  log.Changed(1);
  EXPECT_FALSE(log.Keeps(1));
}

TEST(ReplicaLogTest, UpdatesSmallerThanTheirBlocksGoInTheCut) {
  // Adam-like: a block of 8 floats is 8 * 4 * 3 = 96 bytes with its state; an
  // update of it is 32 bytes.
  ReplicaLog log(4, /*state_slots=*/2);
  log.SetLogging(true);
  const std::vector<float> gradient(8, 0.5f);
  log.Log(UpdateOf(3, 7), 8, gradient.data());
  log.Log(UpdateOf(3, 8), 8, gradient.data());
  EXPECT_EQ(log.generation(), 3u);
  EXPECT_THAT(log.SortedDirty(), IsEmpty());
  std::vector<ReplicaUpdate> updates = log.TakeUpdates(/*full=*/false);
  ASSERT_EQ(updates.size(), 2u);
  EXPECT_EQ(updates[0].update.version, 7u);
  EXPECT_EQ(updates[1].update.version, 8u);
  EXPECT_EQ(updates[1].gradient.size(), 32u);
  EXPECT_EQ(updates[1].update.data, nullptr);
  EXPECT_THAT(log.TakeUpdates(false), IsEmpty());  // taken
}

TEST(ReplicaLogTest, UpdatesAsLargeAsTheirBlocksGiveWayToTheBlocks) {
  // SGD: a block is as many bytes as one float32 update of it.
  ReplicaLog log(4, /*state_slots=*/0);
  log.SetLogging(true);
  const std::vector<float> gradient(8, 0.5f);
  log.Log(UpdateOf(2, 1), 8, gradient.data());
  EXPECT_THAT(log.SortedDirty(), ElementsAre(2));
  EXPECT_THAT(log.TakeUpdates(false), IsEmpty());
}

TEST(ReplicaLogTest, LoggingOffOrAFullCutDropsTheKeptUpdates) {
  ReplicaLog log(4, /*state_slots=*/2);
  log.SetLogging(true);
  const std::vector<float> gradient(8, 0.5f);
  log.Log(UpdateOf(0, 1), 8, gradient.data());
  EXPECT_THAT(log.TakeUpdates(/*full=*/true), IsEmpty());
  log.Log(UpdateOf(1, 1), 8, gradient.data());
  log.SetLogging(false);  // the block goes whole instead
  EXPECT_THAT(log.SortedDirty(), ElementsAre(1));
  EXPECT_THAT(log.TakeUpdates(false), IsEmpty());
}

}  // namespace
}  // namespace downpour::server
