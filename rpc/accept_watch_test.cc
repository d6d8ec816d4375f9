// CheckAccepts and AcceptWatch against listeners in this process: a gRPC
// server answers; a socket that listens but never accepts (what gRPC 1.51
// leaves after EMFILE) is "not accepted"; a server that takes the connection
// but fails the gRPC call (a handshake we cannot pass) still "accepts"; a
// process out of descriptors gives no verdict.
#include "rpc/accept_watch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/fd_limit.h"
#include "gtest/gtest.h"
#include "proto/status.grpc.pb.h"
#include "rpc/server_util.h"

namespace downpour {
namespace {

// A TCP socket listening on 127.0.0.1 (ephemeral port) that nobody accepts
// from unless asked to.
class RawListener {
 public:
  RawListener() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr = {};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd_, 16), 0);
    socklen_t length = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &length);
    port_ = ntohs(addr.sin_port);
  }
  ~RawListener() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    if (acceptor_.joinable()) acceptor_.join();
    close(fd_);
  }

  // Accepts every connection and closes it at once, like a TLS server that
  // refuses the handshake.
  void AcceptAndClose() {
    acceptor_ = std::thread([this] {
      while (!stop_) {
        const int fd = accept(fd_, nullptr, nullptr);
        if (fd >= 0) close(fd);
      }
    });
  }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
};

// Any callback service: gRPC wants one to poll; the health service is gRPC's.
proto::Status::CallbackService* AnyService() {
  static auto* const service = new proto::Status::CallbackService();
  return service;
}

TEST(CheckAcceptsTest, AServingGrpcServerAccepts) {
  auto server = StartServer("127.0.0.1:0", {AnyService()}, "test");
  ASSERT_TRUE(server.ok()) << server.status();
  const AcceptCheckResult result =
      CheckAccepts(server->address, absl::Seconds(5));
  EXPECT_EQ(result.outcome, AcceptCheck::kAccepted) << result.detail;
  EXPECT_EQ(result.detail, "");
  server->server->Shutdown();
}

TEST(CheckAcceptsTest, AListenerThatNeverAcceptsIsNotAccepting) {
  RawListener listener;  // the kernel completes TCP handshakes; nobody reads
  const absl::Time start = absl::Now();
  const AcceptCheckResult result =
      CheckAccepts(listener.address(), absl::Seconds(2));
  EXPECT_EQ(result.outcome, AcceptCheck::kNotAccepted) << result.detail;
  EXPECT_NE(result.detail.find("no reaction"), std::string::npos)
      << result.detail;
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(CheckAcceptsTest, AServerThatTakesTheConnectionButFailsTheCallAccepts) {
  RawListener listener;
  listener.AcceptAndClose();
  const AcceptCheckResult result =
      CheckAccepts(listener.address(), absl::Seconds(2));
  EXPECT_EQ(result.outcome, AcceptCheck::kAccepted) << result.detail;
  EXPECT_NE(result.detail.find("yet the server reacts"), std::string::npos)
      << result.detail;
}

TEST(CheckAcceptsTest, AClosedPortIsNotAccepting) {
  std::string address;
  {
    RawListener listener;
    address = listener.address();
  }
  const AcceptCheckResult result = CheckAccepts(address, absl::Seconds(2));
  EXPECT_EQ(result.outcome, AcceptCheck::kNotAccepted) << result.detail;
}

TEST(CheckAcceptsTest, AProcessOutOfDescriptorsGivesNoVerdict) {
  RawListener listener;  // would be "not accepted" if the check could tell
  rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit tight = saved;
  tight.rlim_cur = OpenFdCount() + 2;  // under kFdHeadroom free
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &tight), 0);
  const AcceptCheckResult result =
      CheckAccepts(listener.address(), absl::Seconds(2));
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  EXPECT_EQ(result.outcome, AcceptCheck::kNoDescriptors) << result.detail;
}

TEST(AcceptWatchTest, CallsOnStuckAfterTheFailuresInARow) {
  RawListener listener;
  absl::Notification stuck;
  AcceptWatch::Options options;
  options.period = absl::Milliseconds(10);
  options.deadline = absl::Milliseconds(200);
  options.failures = 2;
  AcceptWatch watch(
      "test", listener.address(), [&] { stuck.Notify(); }, options);
  EXPECT_TRUE(stuck.WaitForNotificationWithTimeout(absl::Seconds(20)));
  EXPECT_TRUE(watch.stuck());
}

TEST(AcceptWatchTest, LeavesAnAcceptingServerAlone) {
  auto server = StartServer("127.0.0.1:0", {AnyService()}, "test");
  ASSERT_TRUE(server.ok()) << server.status();
  AcceptWatch::Options options;
  options.period = absl::Milliseconds(10);
  options.failures = 1;
  {
    AcceptWatch watch(
        "test", server->address, [] {}, options);
    absl::SleepFor(absl::Milliseconds(300));  // some checks run
    EXPECT_FALSE(watch.stuck());
  }
  server->server->Shutdown();
}

}  // namespace
}  // namespace downpour
