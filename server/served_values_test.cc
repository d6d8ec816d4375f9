#include "server/served_values.h"

#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::server {
namespace {

using ::testing::ElementsAre;

// The copy of (worker, block, version), or {} when none is held.
std::vector<float> Held(const ServedValues& served, int32_t worker,
                        uint32_t block, uint64_t version, int64_t n) {
  std::vector<float> out;
  served.Visit(worker, block, version, n,
               [&](const float* values) { out.assign(values, values + n); });
  return out;
}

TEST(ServedValuesTest, KeepsTheLastTwoVersionsPerWorkerAndBlock) {
  ServedValues served(2);
  const float v1[] = {1, 1}, v2[] = {2, 2}, v3[] = {3, 3};
  served.Record(0, 7, 1, v1, 2);
  served.Record(0, 7, 2, v2, 2);
  EXPECT_THAT(Held(served, 0, 7, 1, 2), ElementsAre(1, 1));
  EXPECT_THAT(Held(served, 0, 7, 2, 2), ElementsAre(2, 2));
  served.Record(0, 7, 3, v3, 2);  // drops version 1, the oldest
  EXPECT_TRUE(Held(served, 0, 7, 1, 2).empty());
  EXPECT_THAT(Held(served, 0, 7, 2, 2), ElementsAre(2, 2));
  EXPECT_THAT(Held(served, 0, 7, 3, 2), ElementsAre(3, 3));
  // Pulling a version again keeps both copies.
  served.Record(0, 7, 3, v3, 2);
  EXPECT_THAT(Held(served, 0, 7, 2, 2), ElementsAre(2, 2));
  // Other workers and blocks are separate.
  EXPECT_TRUE(Held(served, 1, 7, 3, 2).empty());
  EXPECT_TRUE(Held(served, 0, 8, 3, 2).empty());
  EXPECT_EQ(served.num_floats(), 4);
}

TEST(ServedValuesTest, IgnoresWorkersOutsideTheClusterAndWrongLengths) {
  ServedValues served(2);
  const float v[] = {5, 6, 7};
  served.Record(-1, 0, 1, v, 3);  // a tool
  served.Record(2, 0, 1, v, 3);   // not in cluster.workers
  EXPECT_EQ(served.num_floats(), 0);
  EXPECT_TRUE(Held(served, -1, 0, 1, 3).empty());
  served.Record(1, 0, 1, v, 3);
  EXPECT_TRUE(Held(served, 1, 0, 1, 2).empty()) << "length differs";
  EXPECT_THAT(Held(served, 1, 0, 1, 3), ElementsAre(5, 6, 7));
}

TEST(ServedValuesTest, ForgetDropsABlockForEveryWorker) {
  ServedValues served(2);
  const float v[] = {1};
  served.Record(0, 3, 1, v, 1);
  served.Record(1, 3, 1, v, 1);
  served.Record(1, 4, 1, v, 1);
  served.Forget(3);
  EXPECT_TRUE(Held(served, 0, 3, 1, 1).empty());
  EXPECT_TRUE(Held(served, 1, 3, 1, 1).empty());
  EXPECT_THAT(Held(served, 1, 4, 1, 1), ElementsAre(1));
}

TEST(ServedValuesTest, NoWorkersHoldsNothing) {
  ServedValues served(0);
  const float v[] = {1};
  served.Record(0, 0, 1, v, 1);
  EXPECT_EQ(served.num_floats(), 0);
}

// Concurrent pulls of different workers record at once (as under the Shard's
// shared lock); run under tsan to see races.
TEST(ServedValuesTest, WorkersRecordConcurrently) {
  ServedValues served(4);
  std::vector<std::thread> threads;
  for (int32_t worker = 0; worker < 4; ++worker) {
    threads.emplace_back([&served, worker] {
      std::vector<float> values(64, static_cast<float>(worker));
      for (uint64_t version = 1; version <= 100; ++version) {
        served.Record(worker, 0, version, values.data(), 64);
        served.Record(worker, 1, version, values.data(), 64);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(served.num_floats(), 4 * 2 * 2 * 64);
  EXPECT_EQ(Held(served, 3, 1, 100, 64)[0], 3.0f);
  EXPECT_EQ(Held(served, 2, 0, 99, 64)[63], 2.0f);
}

}  // namespace
}  // namespace downpour::server
