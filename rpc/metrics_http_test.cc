#include "rpc/metrics_http.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/counters.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/status_service.h"

namespace downpour {
namespace {

using ::downpour::testing::IsOk;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Connects to `address` (host:port); -1 on failure.
int Connect(const std::string& address) {
  const size_t colon = address.rfind(':');
  addrinfo hints = {};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(address.substr(0, colon).c_str(),
                  address.substr(colon + 1).c_str(), &hints, &found) != 0) {
    return -1;
  }
  const int fd = socket(found->ai_family, found->ai_socktype, 0);
  const int ok = connect(fd, found->ai_addr, found->ai_addrlen);
  freeaddrinfo(found);
  if (ok != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Sends `request` and reads the whole answer (until the server closes).
std::string Ask(const std::string& address, const std::string& request) {
  const int fd = Connect(address);
  if (fd < 0) return "connect failed";
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string answer;
  char buffer[4096];
  for (;;) {
    pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 10000) <= 0) break;
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    answer.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return answer;
}

std::string Get(const std::string& address, const std::string& path,
                const std::string& headers = "") {
  return Ask(address, absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: x\r\n",
                                   headers, "\r\n"));
}

MetricsHttpServer::Options Options(std::string token = "") {
  MetricsHttpServer::Options options;
  options.listen = "127.0.0.1:0";
  options.bearer_token = std::move(token);
  options.body = [] { return std::string("downpour_up 1\n"); };
  return options;
}

TEST(MetricsHttpServerTest, AnswersGetMetricsAndRefusesTheRest) {
  auto server = MetricsHttpServer::Start(Options());
  ASSERT_THAT(server, IsOk());
  const std::string address = (*server)->address();
  EXPECT_THAT(address, StartsWith("127.0.0.1:"));
  const std::string ok = Get(address, "/metrics");
  EXPECT_THAT(ok, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(ok, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  EXPECT_THAT(ok, HasSubstr("Content-Length: 14\r\n"));
  EXPECT_THAT(ok, HasSubstr("\r\n\r\ndownpour_up 1\n"));
  EXPECT_THAT(Get(address, "/metrics?x=1"), StartsWith("HTTP/1.1 200 OK"));
  EXPECT_THAT(Get(address, "/"), StartsWith("HTTP/1.1 404 Not Found"));
  EXPECT_THAT(Ask(address, "POST /metrics HTTP/1.1\r\n\r\n"),
              StartsWith("HTTP/1.1 405"));
  EXPECT_THAT(Ask(address, "hello\r\n\r\n"), StartsWith("HTTP/1.1 400"));
  EXPECT_THAT(Ask(address, std::string(20000, 'a')),
              StartsWith("HTTP/1.1 400"));
  EXPECT_EQ((*server)->scrapes(), 2);
}

TEST(MetricsHttpServerTest, WithATokenOnlyItsBearerIsAnswered) {
  auto server = MetricsHttpServer::Start(Options("s3cret"));
  ASSERT_THAT(server, IsOk());
  const std::string address = (*server)->address();
  EXPECT_THAT(Get(address, "/metrics"), StartsWith("HTTP/1.1 401"));
  EXPECT_THAT(Get(address, "/metrics", "Authorization: Bearer nope\r\n"),
              StartsWith("HTTP/1.1 401"));
  EXPECT_THAT(Get(address, "/metrics", "authorization: Bearer s3cret\r\n"),
              StartsWith("HTTP/1.1 200"));
}

TEST(MetricsHttpServerTest, AStalledClientDoesNotStopTheNext) {
  auto server = MetricsHttpServer::Start(Options());
  ASSERT_THAT(server, IsOk());
  const std::string address = (*server)->address();
  const int stalled = Connect(address);  // sends nothing
  ASSERT_GE(stalled, 0);
  const absl::Time start = absl::Now();
  EXPECT_THAT(Get(address, "/metrics"), StartsWith("HTTP/1.1 200"));
  // At most the stalled one's 2 s deadline, with room for a loaded machine.
  EXPECT_LT(absl::Now() - start, absl::Seconds(8));
  close(stalled);
}

TEST(MetricsHttpServerTest, APortInUseIsAClearError) {
  auto first = MetricsHttpServer::Start(Options());
  ASSERT_THAT(first, IsOk());
  MetricsHttpServer::Options options = Options();
  options.listen = (*first)->address();
  auto second = MetricsHttpServer::Start(options);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr("the port is in use"));
}

TEST(StartMetricsTest, OffByDefaultOnAnEphemeralPortForPortZero) {
  Counters counters;
  counters.Add("pushes", 3);
  StatusService status("ps", 2, &counters);
  Config config;
  auto off = StartMetrics(config, "127.0.0.1:0", "127.0.0.1:40000", &status);
  ASSERT_THAT(off, IsOk());
  EXPECT_EQ(*off, nullptr);
  config.metrics.port_offset = 1000;
  auto on = StartMetrics(config, "127.0.0.1:0", "127.0.0.1:40000", &status);
  ASSERT_THAT(on, IsOk());
  ASSERT_NE(*on, nullptr);
  proto::GetStatusResponse response;
  status.Fill(&response);
  EXPECT_EQ(response.metrics_address(), (*on)->address());
  const std::string text = Get((*on)->address(), "/metrics");
  EXPECT_THAT(text, HasSubstr("downpour_up{role=\"ps\",index=\"2\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("downpour_pushes"));
}

TEST(StartMetricsTest, WithTlsOnlyOnLoopback) {
  Counters counters;
  StatusService status("ps", 0, &counters);
  Config config;
  config.metrics.port_offset = 1000;
  config.security.tls = true;
  auto refused = StartMetrics(config, "0.0.0.0:0", "0.0.0.0:40000", &status);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("loopback only"));
}

}  // namespace
}  // namespace downpour
