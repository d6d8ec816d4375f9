// The accept guard's limits, that accept4 is interposed in a binary that
// links it, and that a gRPC server in this process keeps accepting after
// accept() failed with EMFILE (gRPC 1.51 alone stops for good). The daemons'
// behaviour under a flood is in tests/connection_test.
#include "rpc/accept_guard.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "proto/status.grpc.pb.h"
#include "rpc/accept_watch.h"
#include "rpc/server_util.h"

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
  const AcceptGuardLimits unknown = AcceptGuardLimitsFor(0);
  EXPECT_EQ(unknown.reserve, 0);
  EXPECT_GT(unknown.per_peer, 1 << 30);
}

TEST(AcceptGuardTest, IsInterposedWhenLinked) {
  const std::string result = InstallAcceptGuard();
  EXPECT_EQ(result.rfind("connections capped at accept", 0), 0u) << result;
}

TEST(AcceptGuardTest, AListenerOutOfDescriptorsKeepsAccepting) {
  ASSERT_EQ(InstallAcceptGuard().rfind("connections capped at accept", 0), 0u);
  static auto* const service = new proto::Status::CallbackService();
  auto server = StartServer("127.0.0.1:0", {service}, "test");
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_EQ(CheckAccepts(server->address, absl::Seconds(5)).outcome,
            AcceptCheck::kAccepted);
  const uint64_t before = GetAcceptGuardCounts().out_of_fds;

  // Every descriptor taken but one, which the client's socket gets: the
  // server's accept() then fails with EMFILE.
  std::vector<int> filler;
  for (;;) {
    const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) break;
    filler.push_back(fd);
    if (filler.size() > 100000) break;  // a limit too high to fill: give up
  }
  ASSERT_EQ(errno, EMFILE) << "could not use up the descriptors";
  close(filler.back());
  filler.pop_back();
  const int client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(client, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(server->port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)),
            0);
  // The guard accepts it into its spare descriptor and closes it.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (GetAcceptGuardCounts().out_of_fds == before &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  for (int fd : filler) close(fd);
  close(client);
  EXPECT_GT(GetAcceptGuardCounts().out_of_fds, before);

  // Descriptors free again: the listener still accepts.
  const AcceptCheckResult check =
      CheckAccepts(server->address, absl::Seconds(5));
  EXPECT_EQ(check.outcome, AcceptCheck::kAccepted) << check.detail;
  server->server->Shutdown();
}

}  // namespace
}  // namespace downpour
