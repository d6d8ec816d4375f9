// The accept guard's limits, and that accept4 is interposed in a binary that
// links it (the daemons' own behaviour under a flood is in
// tests/connection_test).
#include "rpc/accept_guard.h"

#include "gtest/gtest.h"

namespace downpour {
namespace {

TEST(AcceptGuardTest, LimitsKeepAReserveAndAShareForEveryPeer) {
  struct Case {
    uint64_t fd_limit;
    int reserve, per_peer;
  };
  for (const Case& c : {Case{64, 32, 16}, Case{256, 32, 56},
                        Case{1024, 64, 240}, Case{65536, 4096, 15360}}) {
    const AcceptGuardLimits limits = AcceptGuardLimitsFor(c.fd_limit);
    EXPECT_EQ(limits.reserve, c.reserve) << c.fd_limit;
    EXPECT_EQ(limits.per_peer, c.per_peer) << c.fd_limit;
  }
}

TEST(AcceptGuardTest, IsInterposedWhenLinked) {
  const std::string result = InstallAcceptGuard();
  EXPECT_EQ(result.rfind("connections capped at accept", 0), 0u) << result;
}

}  // namespace
}  // namespace downpour
