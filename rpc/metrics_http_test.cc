#include "rpc/metrics_http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/counters.h"
#include "common/fd_limit.h"
#include "common/testing/http_client.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/security.h"
#include "rpc/status_service.h"

namespace downpour {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
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

// A TCP connection to 127.0.0.1:`port` that the kernel completed within
// `seconds` (the server need not have accepted it), blocking, each read and
// write then bounded by `seconds` too; -1 when none. `from`: the loopback
// address to connect from ("" for the kernel's choice).
int ConnectWithin(int port, int seconds, const char* from = "") {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  if (*from != '\0') {
    inet_pton(AF_INET, from, &address.sin_addr);
    if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address))) {
      close(fd);
      return -1;
    }
  }
  address.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  pollfd p = {fd, POLLOUT, 0};
  int error = 0;
  socklen_t length = sizeof(error);
  if ((connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) !=
           0 &&
       errno != EINPROGRESS) ||
      poll(&p, 1, seconds * 1000) != 1 ||
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0 ||
      error != 0) {
    close(fd);
    return -1;
  }
  const int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  const timeval timeout = {seconds, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  return fd;
}

int PortOf(const std::string& address) {
  return std::stoi(address.substr(address.rfind(':') + 1));
}

// GET /metrics in plain HTTP, giving up after `seconds` without progress;
// the raw answer ("" without one).
std::string BoundedGet(const std::string& address, int seconds) {
  const int fd = ConnectWithin(PortOf(address), seconds);
  if (fd < 0) return "";
  const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  std::string answer;
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
      static_cast<ssize_t>(request.size())) {
    char buffer[4096];
    ssize_t n;
    while ((n = recv(fd, buffer, sizeof(buffer), 0)) > 0) {
      answer.append(buffer, static_cast<size_t>(n));
    }
  }
  close(fd);
  return answer;
}

// Connections an attacker holds open to 127.0.0.1:`port`: `count` started
// at once from `from`, then, on those the kernel completed within 10 s,
// `first_bytes` sent and nothing more. Closed when it goes.
class Flood {
 public:
  Flood(int port, int count, const std::string& first_bytes,
        const char* from = "127.0.0.1") {
    sockaddr_in source = {}, target = {};
    source.sin_family = target.sin_family = AF_INET;
    inet_pton(AF_INET, from, &source.sin_addr);
    inet_pton(AF_INET, "127.0.0.1", &target.sin_addr);
    target.sin_port = htons(static_cast<uint16_t>(port));
    for (int i = 0; i < count; ++i) {
      const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
      if (fd < 0) break;
      fds_.push_back(fd);
      if (bind(fd, reinterpret_cast<sockaddr*>(&source), sizeof(source)) != 0 ||
          (connect(fd, reinterpret_cast<sockaddr*>(&target), sizeof(target)) !=
               0 &&
           errno != EINPROGRESS)) {
        break;
      }
    }
    std::vector<pollfd> waiting;
    for (int fd : fds_) waiting.push_back({fd, POLLOUT, 0});
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (!waiting.empty() && absl::Now() < deadline) {
      if (poll(waiting.data(), waiting.size(), 100) <= 0) continue;
      std::vector<pollfd> still;
      for (const pollfd& p : waiting) {
        if (p.revents == 0) {
          still.push_back({p.fd, POLLOUT, 0});
        } else if ((p.revents & POLLOUT) != 0) {
          ++connected_;
          send(p.fd, first_bytes.data(), first_bytes.size(), MSG_NOSIGNAL);
        }
      }
      waiting.swap(still);
    }
  }
  ~Flood() {
    for (int fd : fds_) close(fd);
  }
  Flood(const Flood&) = delete;
  Flood& operator=(const Flood&) = delete;

  int connected() const { return connected_; }

 private:
  std::vector<int> fds_;
  int connected_ = 0;
};

// How many idle connections a flood test may open: two descriptors each
// (the client's and, while held, the server's) within the soft limit
// raised to the hard one; 0 when too few for the test to mean anything.
int IdleFloodSize(int wanted) {
  RaiseFdLimit();
  const int64_t room = static_cast<int64_t>(FdLimit()) - 64 - 256 - 64;
  const int size = static_cast<int>(std::min<int64_t>(wanted, room / 2));
  return size >= 500 ? size : 0;
}

constexpr char kHalfRequest[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
const std::string kHelloStart = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01};

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

// The attack of docs/SECURITY.md's "/metrics kept dark", plaintext: 64
// half-sent requests and as many idle connections as the descriptors allow,
// all from the scraper's own address, and the scrape is still answered
// (within 5 s: a liveness bound, not a timing target; bench/metrics_flood
// measures the latency).
TEST(MetricsHttpServerTest, AScrapeIsAnsweredWhileAFloodHoldsConnections) {
  const int idle = IdleFloodSize(2000);
  if (idle == 0) GTEST_SKIP() << "the descriptor limit is too low: ulimit -n";
  auto server = MetricsHttpServer::Start(Options());
  ASSERT_THAT(server, IsOk());
  const int port = PortOf((*server)->address());
  Flood stalled(port, 64, kHalfRequest);
  Flood flood(port, idle, "");
  EXPECT_THAT(BoundedGet((*server)->address(), 5), StartsWith("HTTP/1.1 200"))
      << stalled.connected() << " stalled and " << flood.connected()
      << " idle connections";
  EXPECT_GT((*server)->displaced(), 0);
  EXPECT_LE((*server)->max_connections(), 256);
}

// A flood from other addresses fills the listener: the largest holder gives
// way, not the scraper.
TEST(MetricsHttpServerTest, AFloodFromOtherAddressesDoesNotKeepAScrapeOut) {
  MetricsHttpServer::Options options = Options();
  options.max_connections = 16;
  options.max_connections_per_address = 8;
  auto server = MetricsHttpServer::Start(options);
  ASSERT_THAT(server, IsOk());
  ASSERT_EQ((*server)->max_connections(), 16);
  const int port = PortOf((*server)->address());
  Flood a(port, 200, "", "127.0.0.2");
  Flood b(port, 200, kHalfRequest, "127.0.0.3");
  EXPECT_THAT(BoundedGet((*server)->address(), 5), StartsWith("HTTP/1.1 200"));
  EXPECT_GT((*server)->displaced(), 0);
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
  counters.stats().pushes.Increment(3);
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
  EXPECT_EQ(response.metrics_scheme(), "http");
  const std::string text = Get((*on)->address(), "/metrics");
  EXPECT_THAT(text, HasSubstr("downpour_up{role=\"ps\",index=\"2\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("downpour_pushes"));
}

// Certificates and tokens from deploy/make_certs.sh, made once for all
// tests: `dir` holds the cluster's (ca.pem, ps-0.pem/.key, worker-0,
// client, reader.token...), `other` a second CA's (client.pem signed by a CA
// the server does not trust). `error` is non-empty when they could not be
// made.
struct Certs {
  std::string dir, other, error;
  std::string File(const std::string& name) const { return dir + "/" + name; }
};

const Certs& TestCerts() {
  static const Certs* const certs = [] {
    auto* c = new Certs();
    const char* tmp = std::getenv("TEST_TMPDIR");
    const char* srcdir = std::getenv("TEST_SRCDIR");
    const char* workspace = std::getenv("TEST_WORKSPACE");
    const std::string root = absl::StrCat(tmp != nullptr ? tmp : "/tmp",
                                          "/metrics_http_test.", getpid());
    const std::string script = absl::StrCat(
        srcdir != nullptr ? srcdir : ".", "/",
        workspace != nullptr ? workspace : "downpour", "/deploy/make_certs.sh");
    std::filesystem::create_directories(root);
    c->dir = root + "/certs";
    c->other = root + "/other";
    for (const auto& [out, workers] :
         {std::pair{c->dir, 1}, std::pair{c->other, 0}}) {
      const std::string log = out + ".log";
      const std::string command = absl::StrCat(
          "'", script, "' --out '", out, "' --ps 1 --standby 0 --workers ",
          workers, " >'", log, "' 2>&1");
      if (std::system(command.c_str()) != 0) {
        c->error = absl::StrCat("`", command, "` failed; see ", log);
      }
    }
    return c;
  }();
  return *certs;
}

// Blocks SIGPIPE in this thread while alive (a test client writing to a
// server that hung up gets EPIPE), then discards what it left pending and
// restores the mask: threads started later (servers) do not inherit it.
class ScopedNoSigpipe {
 public:
  ScopedNoSigpipe() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
  }
  ~ScopedNoSigpipe() {
    const timespec zero = {0, 0};
    while (sigtimedwait(&set_, nullptr, &zero) == SIGPIPE) {
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t set_, old_;
};

// What a TLS client presents: the CA it checks the server against and,
// optionally, its own certificate and key.
struct ClientTls {
  std::string ca, cert, key;
  // Closes the connection right after sending the request, reading nothing.
  bool leave_at_once = false;
  // Gives up when connecting, or any read or write, takes longer.
  int seconds = 10;
};

// Connects to `address` over TLS (the server's certificate checked against
// client.ca for 127.0.0.1), sends `request` and returns all that comes back
// until the server closes; "" when the handshake failed. `handshake_ok`:
// whether it succeeded (with TLS 1.3 a server refusing the client's
// certificate says so only after the client's handshake completed).
std::string TlsAsk(const std::string& address, const std::string& request,
                   const ClientTls& client, bool* handshake_ok = nullptr) {
  ScopedNoSigpipe no_sigpipe;
  if (handshake_ok != nullptr) *handshake_ok = false;
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(
      SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  if (ctx == nullptr || SSL_CTX_load_verify_locations(
                            ctx.get(), client.ca.c_str(), nullptr) != 1) {
    ADD_FAILURE() << "test client: cannot load " << client.ca;
    return "";
  }
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  if (!client.cert.empty() &&
      (SSL_CTX_use_certificate_chain_file(ctx.get(), client.cert.c_str()) !=
           1 ||
       SSL_CTX_use_PrivateKey_file(ctx.get(), client.key.c_str(),
                                   SSL_FILETYPE_PEM) != 1)) {
    ADD_FAILURE() << "test client: cannot load " << client.cert;
    return "";
  }
  const int fd = ConnectWithin(PortOf(address), client.seconds);
  if (fd < 0) {
    ADD_FAILURE() << "test client: cannot connect to " << address;
    return "";
  }
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ctx.get()), SSL_free);
  SSL_set_fd(ssl.get(), fd);
  X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl.get()), "127.0.0.1");
  std::string answer;
  if (SSL_connect(ssl.get()) == 1) {
    if (handshake_ok != nullptr) *handshake_ok = true;
    if (SSL_write(ssl.get(), request.data(),
                  static_cast<int>(request.size())) ==
            static_cast<int>(request.size()) &&
        !client.leave_at_once) {
      char buffer[4096];
      int n;
      while ((n = SSL_read(ssl.get(), buffer, sizeof(buffer))) > 0) {
        answer.append(buffer, static_cast<size_t>(n));
      }
    }
  }
  ERR_clear_error();
  ssl.reset();
  close(fd);
  return answer;
}

std::string TlsGet(const std::string& address, const ClientTls& client,
                   const std::string& headers = "") {
  return TlsAsk(
      address,
      absl::StrCat("GET /metrics HTTP/1.1\r\nHost: x\r\n", headers, "\r\n"),
      client);
}

// 127.0.0.1 with the port of `address` (which may name 0.0.0.0).
std::string Loopback(const std::string& address) {
  return absl::StrCat("127.0.0.1", address.substr(address.rfind(':')));
}

constexpr char kToken[] = "0123456789abcdef-metrics";
const std::string kBearer =
    absl::StrCat("Authorization: Bearer ", kToken, "\r\n");

class MetricsHttpTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(certs().error, "");
    trusted_ = {certs().File("ca.pem"), "", ""};
    member_ = {certs().File("ca.pem"), certs().File("client.pem"),
               certs().File("client.key")};
  }

  static const Certs& certs() { return TestCerts(); }

  // Options for HTTPS with ps-0's certificate and kToken.
  static MetricsHttpServer::Options TlsOptions() {
    MetricsHttpServer::Options options = Options(kToken);
    options.tls_cert_file = certs().File("ps-0.pem");
    options.tls_key_file = certs().File("ps-0.key");
    return options;
  }

  ClientTls trusted_;  // checks the server; presents no certificate
  ClientTls member_;   // and presents client.pem
};

TEST_F(MetricsHttpTlsTest, ATlsClientWithTheTokenGetsTheBody) {
  auto server = MetricsHttpServer::Start(TlsOptions());
  ASSERT_THAT(server, IsOk());
  EXPECT_STREQ((*server)->scheme(), "https");
  const std::string address = (*server)->address();
  const std::string ok = TlsGet(address, trusted_, kBearer);
  EXPECT_THAT(ok, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(ok, HasSubstr("\r\n\r\ndownpour_up 1\n"));
  EXPECT_THAT(TlsGet(address, trusted_), StartsWith("HTTP/1.1 401"));
  EXPECT_THAT(TlsGet(address, trusted_, "Authorization: Bearer nope\r\n"),
              StartsWith("HTTP/1.1 401"));
  EXPECT_THAT(TlsAsk(address, "GET / HTTP/1.1\r\n\r\n", trusted_),
              StartsWith("HTTP/1.1 404"));
  EXPECT_EQ((*server)->scrapes(), 1);
}

TEST_F(MetricsHttpTlsTest,
       PlainHttpAndStalledClientsDoNotStopTheNextTlsClient) {
  auto server = MetricsHttpServer::Start(TlsOptions());
  ASSERT_THAT(server, IsOk());
  const std::string address = (*server)->address();
  // Plain HTTP to the TLS port: a failed handshake, no answer.
  const std::string plain = Get(address, "/metrics", kBearer);
  EXPECT_THAT(plain,
              AllOf(Not(HasSubstr("HTTP/1.1")), Not(HasSubstr("downpour_up"))));
  // A client that connects and sends nothing, then one that stops halfway
  // through its ClientHello: served beside them (each is closed at its 2 s
  // handshake deadline).
  const int stalled = testing::ConnectTcp(address);
  ASSERT_GE(stalled, 0);
  const int halfway = testing::ConnectTcp(address);
  ASSERT_GE(halfway, 0);
  ASSERT_EQ(send(halfway, kHelloStart.data(), kHelloStart.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(kHelloStart.size()));
  const absl::Time start = absl::Now();
  EXPECT_THAT(TlsGet(address, trusted_, kBearer), StartsWith("HTTP/1.1 200"));
  // Two deadlines, with room for a loaded machine.
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  close(stalled);
  close(halfway);
  EXPECT_EQ((*server)->scrapes(), 1);
}

// The attack of docs/SECURITY.md's "/metrics kept dark" under TLS: 64
// handshakes stalled halfway through a ClientHello and as many idle
// connections as the descriptors allow, from the scraper's own address.
TEST_F(MetricsHttpTlsTest, AScrapeIsAnsweredWhileStalledHandshakesAreHeld) {
  const int idle = IdleFloodSize(2000);
  if (idle == 0) GTEST_SKIP() << "the descriptor limit is too low: ulimit -n";
  auto server = MetricsHttpServer::Start(TlsOptions());
  ASSERT_THAT(server, IsOk());
  const int port = PortOf((*server)->address());
  Flood stalled(port, 64, kHelloStart);
  Flood flood(port, idle, "");
  ClientTls scraper = trusted_;
  scraper.seconds = 5;
  EXPECT_THAT(TlsGet((*server)->address(), scraper, kBearer),
              StartsWith("HTTP/1.1 200"))
      << stalled.connected() << " stalled and " << flood.connected()
      << " idle connections";
  EXPECT_EQ((*server)->scrapes(), 1);
  EXPECT_GT((*server)->displaced(), 0);
}

TEST_F(MetricsHttpTlsTest, AClientLeavingMidAnswerDoesNotStopTheServer) {
  // A body far larger than the socket buffers: the server is still writing
  // when the client has gone, and its writes fail (EPIPE, no SIGPIPE).
  MetricsHttpServer::Options options = TlsOptions();
  options.body = [] { return std::string(16 << 20, 'x'); };
  auto server = MetricsHttpServer::Start(options);
  ASSERT_THAT(server, IsOk());
  const std::string address = (*server)->address();
  ClientTls leaving = trusted_;
  leaving.leave_at_once = true;
  for (int i = 0; i < 3; ++i) {
    TlsAsk(address, absl::StrCat("GET /metrics HTTP/1.1\r\n", kBearer, "\r\n"),
           leaving);
  }
  const std::string ok = TlsGet(address, trusted_, kBearer);
  EXPECT_THAT(ok, StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(ok, HasSubstr("Content-Length: 16777216\r\n"));
  EXPECT_GE(ok.size(), 16u << 20);
}

TEST_F(MetricsHttpTlsTest, WithAClientCaOnlyACertifiedClientIsAnswered) {
  MetricsHttpServer::Options options = TlsOptions();
  options.tls_client_ca_file = certs().File("ca.pem");
  auto server = MetricsHttpServer::Start(options);
  ASSERT_THAT(server, IsOk());
  const std::string address = (*server)->address();
  // No certificate: refused in the handshake (TLS 1.3: on its first read).
  EXPECT_THAT(TlsGet(address, trusted_, kBearer), Not(HasSubstr("HTTP/1.1")));
  // A certificate of another CA: refused too.
  const ClientTls stranger = {certs().File("ca.pem"),
                              certs().other + "/client.pem",
                              certs().other + "/client.key"};
  EXPECT_THAT(TlsGet(address, stranger, kBearer), Not(HasSubstr("HTTP/1.1")));
  // A member's certificate: answered, and the token is still required.
  EXPECT_THAT(TlsGet(address, member_, kBearer), StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(TlsGet(address, member_), StartsWith("HTTP/1.1 401"));
  EXPECT_EQ((*server)->scrapes(), 1);
}

TEST_F(MetricsHttpTlsTest, TlsFileErrorsAreClearAtStart) {
  struct Case {
    const char* what;
    std::string cert, key, client_ca;
    absl::StatusCode code;
    std::vector<std::string> says;
  };
  const std::string missing = certs().dir + "/nonexistent.key";
  // clang-format off
  const Case cases[] = {
      {"missing key", certs().File("ps-0.pem"), missing, "",
       absl::StatusCode::kNotFound,
       {"security.key_file", missing, "No such file", "make_certs.sh"}},
      {"missing certificate", certs().dir + "/nope.pem", certs().File("ps-0.key"),
       "", absl::StatusCode::kNotFound,
       {"security.cert_file", "nope.pem", "make_certs.sh"}},
      {"key of another certificate", certs().File("ps-0.pem"),
       certs().File("worker-0.key"), "", absl::StatusCode::kInvalidArgument,
       {"worker-0.key", "is not the key of certificate", "ps-0.pem"}},
      {"no key in the key file", certs().File("ps-0.pem"),
       certs().File("reader.token"), "", absl::StatusCode::kInvalidArgument,
       {"reader.token", "holds no unencrypted PEM private key"}},
      {"no certificate in the certificate file", certs().File("reader.token"),
       certs().File("ps-0.key"), "", absl::StatusCode::kInvalidArgument,
       {"reader.token", "holds no PEM certificate"}},
      {"a folder as client CA", certs().File("ps-0.pem"),
       certs().File("ps-0.key"), certs().dir, absl::StatusCode::kInvalidArgument,
       {"security.ca_file", "not a regular file"}},
      {"no certificate in the client CA", certs().File("ps-0.pem"),
       certs().File("ps-0.key"), certs().File("reader.token"),
       absl::StatusCode::kInvalidArgument,
       {"security.ca_file", "holds no PEM certificate"}},
  };
  // clang-format on
  for (const Case& c : cases) {
    MetricsHttpServer::Options options = Options(kToken);
    options.tls_cert_file = c.cert;
    options.tls_key_file = c.key;
    options.tls_client_ca_file = c.client_ca;
    const auto server = MetricsHttpServer::Start(options);
    EXPECT_THAT(server, StatusIs(c.code)) << c.what;
    for (const std::string& says : c.says) {
      EXPECT_THAT(std::string(server.status().message()), HasSubstr(says))
          << c.what;
    }
  }
}

// A daemon's endpoint with security.tls: HTTPS on the gRPC server's own host
// (any host, not only loopback), the daemon's certificate, the reader token,
// and a client certificate with mutual TLS.
TEST_F(MetricsHttpTlsTest, StartMetricsWithTlsServesHttpsOnTheGrpcHost) {
  Counters counters;
  StatusService status("ps", 0, &counters);
  Config config;
  config.metrics.port_offset = 1000;
  config.security.tls = true;
  config.security.ca_file = certs().File("ca.pem");
  config.security.cert_file = certs().dir + "/{name}.pem";
  config.security.key_file = certs().dir + "/{name}.key";
  config.security.reader_token_file = certs().File("reader.token");
  absl::StatusOr<std::string> token =
      ReadTokenFile(config.security.reader_token_file);
  ASSERT_THAT(token, IsOk());
  const std::string reader =
      absl::StrCat("Authorization: Bearer ", *token, "\r\n");

  auto on = StartMetrics(config, "0.0.0.0:0", "0.0.0.0:40000", &status);
  ASSERT_THAT(on, IsOk());
  ASSERT_NE(*on, nullptr);
  EXPECT_THAT((*on)->address(), StartsWith("0.0.0.0:"));
  proto::GetStatusResponse response;
  status.Fill(&response);
  EXPECT_EQ(response.metrics_address(), (*on)->address());
  EXPECT_EQ(response.metrics_scheme(), "https");
  const std::string address = Loopback((*on)->address());
  EXPECT_THAT(TlsGet(address, trusted_, reader),
              AllOf(StartsWith("HTTP/1.1 200"),
                    HasSubstr("downpour_up{role=\"ps\",index=\"0\"} 1\n")));
  EXPECT_THAT(TlsGet(address, trusted_), StartsWith("HTTP/1.1 401"));
  EXPECT_THAT(Get(address, "/metrics", reader), Not(HasSubstr("HTTP/1.1")));
  on->reset();

  // Mutual TLS: a client certificate from security.ca_file is required.
  config.security.mutual_tls = true;
  auto mutual = StartMetrics(config, "0.0.0.0:0", "0.0.0.0:40000", &status);
  ASSERT_THAT(mutual, IsOk());
  ASSERT_NE(*mutual, nullptr);
  const std::string mutual_address = Loopback((*mutual)->address());
  EXPECT_THAT(TlsGet(mutual_address, trusted_, reader),
              Not(HasSubstr("HTTP/1.1")));
  EXPECT_THAT(TlsGet(mutual_address, member_, reader),
              StartsWith("HTTP/1.1 200"));
  mutual->reset();

  // The daemon's own certificate: a worker's StartMetrics fails clearly
  // when its files are missing (make_certs.sh made worker-0 only).
  StatusService worker("worker", 7, &counters);
  auto missing =
      StartMetrics(config, "127.0.0.1:0", "127.0.0.1:40000", &worker);
  EXPECT_THAT(missing,
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("worker-7.pem")));
}

}  // namespace
}  // namespace downpour
