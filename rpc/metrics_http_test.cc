#include "rpc/metrics_http.h"

#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/counters.h"
#include "common/testing/http_client.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/status_service.h"

namespace downpour {
namespace {

using ::downpour::testing::IsOk;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Sends `request` and returns the whole raw answer ("" without one).
std::string Ask(const std::string& address, const std::string& request) {
  return testing::HttpExchange(address, request).value_or("");
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
  const int stalled = testing::ConnectTcp(address);  // sends nothing
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
