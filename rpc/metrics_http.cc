// The /metrics HTTP endpoint.
#include "rpc/metrics_http.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "proto/status.pb.h"
#include "rpc/prometheus_text.h"
#include "rpc/security.h"
#include "rpc/status_service.h"

namespace downpour {
namespace {

constexpr size_t kMaxRequestBytes = 8 << 10;
constexpr int kIoTimeoutMs = 2000;

// host and port of "host:port" or "[v6]:port".
absl::Status SplitAddress(const std::string& address, std::string* host,
                          std::string* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics: '", address, "' is not host:port"));
  }
  *host = address.substr(0, colon);
  *port = address.substr(colon + 1);
  if (host->size() >= 2 && host->front() == '[') {
    *host = host->substr(1, host->size() - 2);
  }
  return absl::OkStatus();
}

// Writes all of `data` within the I/O deadline; false when the peer stalls
// or goes away.
bool WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    pollfd p = {fd, POLLOUT, 0};
    if (poll(&p, 1, kIoTimeoutMs) <= 0) return false;
    const ssize_t n =
        send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n <= 0) {
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

std::string Response(int code, const char* reason, const std::string& body,
                     const char* extra_headers = "") {
  return absl::StrCat("HTTP/1.1 ", code, " ", reason,
                      "\r\nContent-Type: text/plain; version=0.0.4; "
                      "charset=utf-8\r\nContent-Length: ",
                      body.size(), "\r\nConnection: close\r\n", extra_headers,
                      "\r\n", body);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    Options options) {
  std::string host, port;
  RETURN_IF_ERROR(SplitAddress(options.listen, &host, &port));
  addrinfo hints = {};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (const int error = getaddrinfo(host.empty() ? nullptr : host.c_str(),
                                    port.c_str(), &hints, &found);
      error != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics: cannot resolve ", options.listen, ": ", gai_strerror(error)));
  }
  const int fd = socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC,
                        found->ai_protocol);
  if (fd < 0) {
    freeaddrinfo(found);
    return absl::UnavailableError(
        absl::StrCat("metrics: socket: ", std::strerror(errno)));
  }
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const int bound = bind(fd, found->ai_addr, found->ai_addrlen);
  const int bind_errno = errno;
  freeaddrinfo(found);
  if (bound != 0 || listen(fd, 16) != 0) {
    const int error = bound != 0 ? bind_errno : errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat(
        "metrics: cannot listen on ", options.listen, ": ",
        std::strerror(error),
        error == EADDRINUSE ? " (the port is in use: change "
                              "metrics.port_offset or free the port)"
                            : ""));
  }
  sockaddr_storage addr = {};
  socklen_t length = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length);
  const int bound_port =
      addr.ss_family == AF_INET6
          ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
          : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  const std::string address =
      absl::StrCat(host.find(':') != std::string::npos
                       ? absl::StrCat("[", host, "]")
                       : host,
                   ":", bound_port);
  return std::unique_ptr<MetricsHttpServer>(
      new MetricsHttpServer(std::move(options), fd, address));
}

MetricsHttpServer::MetricsHttpServer(Options options, int fd,
                                     std::string address)
    : options_(std::move(options)),
      listen_fd_(fd),
      address_(std::move(address)) {
  thread_ = std::thread([this] { Loop(); });
}

MetricsHttpServer::~MetricsHttpServer() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
}

void MetricsHttpServer::Loop() {
  while (!stop_.load()) {
    pollfd p = {listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    Answer(fd);
    close(fd);
  }
}

void MetricsHttpServer::Answer(int fd) {
  // The request head, up to its blank line, within the size and time limits.
  std::string request;
  char buffer[2048];
  while (request.find("\r\n\r\n") == std::string::npos) {
    if (request.size() > kMaxRequestBytes) {
      WriteAll(fd, Response(400, "Bad Request", "request too large\n"));
      return;
    }
    pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, kIoTimeoutMs) <= 0) return;  // stalled: drop it
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) return;
    request.append(buffer, static_cast<size_t>(n));
  }
  const std::vector<std::string> lines =
      absl::StrSplit(request.substr(0, request.find("\r\n\r\n")), "\r\n");
  const std::vector<std::string> first = absl::StrSplit(lines[0], ' ');
  if (first.size() != 3 || !absl::StartsWith(first[2], "HTTP/1.")) {
    WriteAll(fd, Response(400, "Bad Request", "malformed request line\n"));
    return;
  }
  if (first[0] != "GET") {
    WriteAll(fd, Response(405, "Method Not Allowed", "GET /metrics only\n",
                          "Allow: GET\r\n"));
    return;
  }
  const std::string path = first[1].substr(0, first[1].find('?'));
  if (path != "/metrics") {
    WriteAll(fd, Response(404, "Not Found", "GET /metrics\n"));
    return;
  }
  if (!options_.bearer_token.empty()) {
    bool authorized = false;
    for (size_t i = 1; i < lines.size(); ++i) {
      const size_t colon = lines[i].find(':');
      if (colon == std::string::npos) continue;
      if (!absl::EqualsIgnoreCase(lines[i].substr(0, colon), "authorization")) {
        continue;
      }
      const std::string value(absl::StripAsciiWhitespace(
          absl::string_view(lines[i]).substr(colon + 1)));
      authorized = value == "Bearer " + options_.bearer_token;
    }
    if (!authorized) {
      WriteAll(fd, Response(401, "Unauthorized",
                            "the reader token is required (Authorization: "
                            "Bearer <security.reader_token_file's token>)\n",
                            "WWW-Authenticate: Bearer\r\n"));
      return;
    }
  }
  if (WriteAll(fd, Response(200, "OK", options_.body()))) scrapes_.fetch_add(1);
}

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> StartMetrics(
    const Config& config, const std::string& listen, const std::string& bound,
    StatusService* status) {
  const int offset = config.metrics.port_offset;
  if (offset == 0) return std::unique_ptr<MetricsHttpServer>();
  std::string host, port;
  RETURN_IF_ERROR(SplitAddress(bound, &host, &port));
  std::string listen_host, listen_port;
  RETURN_IF_ERROR(SplitAddress(listen, &listen_host, &listen_port));
  int configured = 0;
  if (!absl::SimpleAtoi(listen_port, &configured)) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics: the port of '", listen, "' is not a number"));
  }
  if (configured > 0 && configured + offset > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics: port ", configured, " + metrics.port_offset ", offset,
        " is past 65535; lower metrics.port_offset"));
  }
  MetricsHttpServer::Options options;
  options.listen = absl::StrCat(
      host.find(':') != std::string::npos ? absl::StrCat("[", host, "]")
                                          : host,
      ":", configured == 0 ? 0 : configured + offset);
  if (config.security.tls) {
    if (!IsLoopbackHost(options.listen)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "metrics: /metrics is plain HTTP (TLS on it is not built), so with "
          "security.tls it serves on loopback only, and ", options.listen,
          " is not: listen on 127.0.0.1 and scrape from this host, or set "
          "metrics.port_offset 0"));
    }
    ASSIGN_OR_RETURN(options.bearer_token,
                     ReadTokenFile(config.security.reader_token_file));
  }
  options.body = [status] {
    proto::GetStatusResponse response;
    status->Fill(&response);
    return PrometheusText(response);
  };
  ASSIGN_OR_RETURN(std::unique_ptr<MetricsHttpServer> server,
                   MetricsHttpServer::Start(std::move(options)));
  status->set_metrics_address(server->address());
  SPDLOG_LOGGER_INFO(Log(Logger::kRpc), "Prometheus metrics on http://{}/metrics",
                     server->address());
  return server;
}

}  // namespace downpour
