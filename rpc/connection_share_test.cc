#include "rpc/connection_share.h"

#include "gtest/gtest.h"

namespace downpour {
namespace {

TEST(ConnectionShareTest, AdmitsWithinTheLimitsWithoutDisplacing) {
  ConnectionShare share({4, 2});
  for (uint64_t id : {1, 2}) {
    const ConnectionShare::Admission a = share.Admit("10.0.0.1");
    EXPECT_TRUE(a.admit);
    EXPECT_FALSE(a.displace.has_value());
    share.Add(id, "10.0.0.1");
  }
  EXPECT_EQ(share.size(), 2);
}

TEST(ConnectionShareTest, AnAddressAtItsShareDisplacesItsOwnOldestPending) {
  ConnectionShare share({8, 3});
  share.Add(1, "10.0.0.9");  // another address: never touched
  for (uint64_t id : {2, 3, 4}) share.Add(id, "10.0.0.1");
  share.MarkAnswering(2);  // answering: kept
  const ConnectionShare::Admission a = share.Admit("10.0.0.1");
  EXPECT_TRUE(a.admit);
  EXPECT_EQ(a.displace, 3u);
}

TEST(ConnectionShareTest, AnAddressWhoseConnectionsAllAnswerIsRefused) {
  ConnectionShare share({8, 2});
  for (uint64_t id : {1, 2}) {
    share.Add(id, "10.0.0.1");
    share.MarkAnswering(id);
  }
  EXPECT_FALSE(share.Admit("10.0.0.1").admit);
  EXPECT_TRUE(share.Admit("10.0.0.2").admit);
  share.Remove(1);
  const ConnectionShare::Admission a = share.Admit("10.0.0.1");
  EXPECT_TRUE(a.admit);
  EXPECT_FALSE(a.displace.has_value());
}

TEST(ConnectionShareTest, AFullListenerDisplacesFromTheLargestHolder) {
  ConnectionShare share({5, 3});
  share.Add(1, "10.0.0.1");  // oldest of all, but its address holds one
  for (uint64_t id : {2, 3, 4}) share.Add(id, "10.0.0.2");
  share.Add(5, "10.0.0.3");
  const ConnectionShare::Admission a = share.Admit("10.0.0.4");
  EXPECT_TRUE(a.admit);
  EXPECT_EQ(a.displace, 2u);
  // The largest holder answering everything: the next largest gives way.
  for (uint64_t id : {2, 3, 4}) share.MarkAnswering(id);
  EXPECT_EQ(share.Admit("10.0.0.4").displace, 1u);  // 1 and 5 tie: oldest
}

TEST(ConnectionShareTest, AFullListenerOfAnsweringConnectionsRefuses) {
  ConnectionShare share({2, 2});
  for (uint64_t id : {1, 2}) {
    share.Add(id, "10.0.0.1");
    share.MarkAnswering(id);
  }
  EXPECT_FALSE(share.Admit("10.0.0.2").admit);
}

TEST(ConnectionShareTest, RemoveForgetsAndIgnoresUnknownIds) {
  ConnectionShare share({2, 2});
  share.Add(1, "10.0.0.1");
  share.Remove(7);
  share.MarkAnswering(7);
  EXPECT_EQ(share.size(), 1);
  share.Remove(1);
  EXPECT_EQ(share.size(), 0);
  share.Add(2, "10.0.0.1");
  share.Add(3, "10.0.0.1");
  EXPECT_EQ(share.Admit("10.0.0.1").displace, 2u);
}

TEST(ConnectionShareTest, TheLeastProgressedIsDisplacedBeforeTheOldest) {
  ConnectionShare share({8, 3});
  share.Add(1, "10.0.0.1");  // oldest: halfway through its handshake
  share.Add(2, "10.0.0.1");  // its handshake answered
  share.Add(3, "10.0.0.1");  // silent
  share.SetProgress(1, 1);
  share.SetProgress(2, 2);
  EXPECT_EQ(share.Admit("10.0.0.1").displace, 3u);
  share.Remove(3);
  share.Add(4, "10.0.0.1");
  share.SetProgress(4, 1);
  EXPECT_EQ(share.Admit("10.0.0.1").displace, 1u);  // 1 and 4 tie: oldest
  share.MarkAnswering(1);
  share.SetProgress(1, 0);  // answering: stays out of line
  EXPECT_EQ(share.Admit("10.0.0.1").displace, 4u);
}

}  // namespace
}  // namespace downpour
