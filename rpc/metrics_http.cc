// The /metrics HTTP(S) endpoint.
#include "rpc/metrics_http.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/host_port.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "proto/status.pb.h"
#include "rpc/prometheus_text.h"
#include "rpc/security.h"
#include "rpc/status_service.h"

namespace downpour {
namespace {

constexpr size_t kMaxRequestBytes = 8 << 10;
constexpr std::chrono::milliseconds kIoTimeout(2000);

using Clock = std::chrono::steady_clock;

// host and port of "host:port" or "[v6]:port".
absl::Status SplitAddress(const std::string& address, std::string* host,
                          std::string* port) {
  std::optional<HostPort> split = SplitHostPort(address);
  if (!split.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics: '", address, "' is not host:port"));
  }
  *host = std::move(split->host);
  *port = std::move(split->port);
  return absl::OkStatus();
}

// Waits until `fd` is ready for `events` or `deadline` passes; false then.
bool WaitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p = {fd, events, 0};
    const int ready = poll(&p, 1, static_cast<int>(left.count()));
    if (ready > 0) return true;
    if (ready == 0 || errno != EINTR) return false;
  }
}

std::string Response(int code, const char* reason, const std::string& body,
                     const char* extra_headers = "") {
  return absl::StrCat("HTTP/1.1 ", code, " ", reason,
                      "\r\nContent-Type: text/plain; version=0.0.4; "
                      "charset=utf-8\r\nContent-Length: ",
                      body.size(), "\r\nConnection: close\r\n", extra_headers,
                      "\r\n", body);
}

// Equal, in a time that says nothing about how much of a wrong token
// matched.
bool SameToken(const std::string& a, const std::string& b) {
  return a.size() == b.size() &&
         CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

// OpenSSL's queued errors of this thread, one line ("" when none); clears
// them.
std::string OpenSslErrors() {
  std::string out;
  while (const unsigned long error = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(error, text, sizeof(text));
    absl::StrAppend(&out, out.empty() ? "" : "; ", text);
  }
  return out.empty() ? "no detail from OpenSSL" : out;
}

// A key or certificate file must never ask for a passphrase on the
// terminal: an encrypted key is refused instead.
int NoPassphrase(char*, int, int, void*) { return -1; }

// The PEM file `path` exists and is a readable regular file; else NotFound
// or InvalidArgument naming `what` (its config key) and the fix.
absl::Status CheckReadable(const char* what, const std::string& path) {
  const char* const kFix =
      " (deploy/make_certs.sh writes each daemon's certificate and key, and "
      "the CA; docs/SECURITY.md)";
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    const int error = errno;
    return absl::Status(error == ENOENT ? absl::StatusCode::kNotFound
                                        : absl::StatusCode::kInvalidArgument,
                        absl::StrCat("metrics: ", what, " '", path,
                                     "': ", std::strerror(error), kFix));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics: ", what, " '", path, "' is not a regular file", kFix));
  }
  FILE* file = std::fopen(path.c_str(), "r");
  if (file == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics: ", what, " '", path,
                     "' cannot be read: ", std::strerror(errno), kFix));
  }
  std::fclose(file);
  return absl::OkStatus();
}

// Blocks SIGPIPE in the calling thread: a write to a peer that went away
// (OpenSSL writes with write(2), which has no MSG_NOSIGNAL) then fails with
// EPIPE instead of killing the daemon. DrainSigpipe discards the pending
// signal such a write leaves.
void BlockSigpipe() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void DrainSigpipe() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  const timespec zero = {0, 0};
  while (sigtimedwait(&set, nullptr, &zero) == SIGPIPE) {
  }
}

}  // namespace

// The server's TLS settings, loaded once at Start.
struct MetricsHttpServer::TlsContext {
  ~TlsContext() { SSL_CTX_free(ctx); }

  // Null when `options` names no certificate (plain HTTP).
  static absl::StatusOr<std::unique_ptr<TlsContext>> Load(
      const Options& options);

  SSL_CTX* ctx = nullptr;
};

absl::StatusOr<std::unique_ptr<MetricsHttpServer::TlsContext>>
MetricsHttpServer::TlsContext::Load(const Options& options) {
  if (options.tls_cert_file.empty()) {
    if (!options.tls_key_file.empty() || !options.tls_client_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "metrics: a TLS key or client CA without a certificate file");
    }
    return std::unique_ptr<TlsContext>();
  }
  RETURN_IF_ERROR(
      CheckReadable("certificate (security.cert_file)", options.tls_cert_file));
  RETURN_IF_ERROR(
      CheckReadable("private key (security.key_file)", options.tls_key_file));
  if (!options.tls_client_ca_file.empty()) {
    RETURN_IF_ERROR(CheckReadable("client CA (security.ca_file)",
                                  options.tls_client_ca_file));
  }
  ERR_clear_error();
  auto tls = std::make_unique<TlsContext>();
  tls->ctx = SSL_CTX_new(TLS_server_method());
  if (tls->ctx == nullptr ||
      SSL_CTX_set_min_proto_version(tls->ctx, TLS1_2_VERSION) != 1) {
    return absl::InternalError(
        absl::StrCat("metrics: cannot make a TLS context: ", OpenSslErrors()));
  }
  // Nothing a client may change mid-connection; partial writes so that a
  // slow reader is written to as far as it reads.
  SSL_CTX_set_options(tls->ctx, SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_mode(tls->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE);
  SSL_CTX_set_default_passwd_cb(tls->ctx, NoPassphrase);
  if (SSL_CTX_use_certificate_chain_file(tls->ctx,
                                         options.tls_cert_file.c_str()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics: certificate (security.cert_file) '", options.tls_cert_file,
        "' holds no PEM certificate: ", OpenSslErrors(),
        " (deploy/make_certs.sh writes one per daemon)"));
  }
  // The key alone first, so that a file that is no key and a key of another
  // certificate are told apart.
  EVP_PKEY* key = nullptr;
  if (FILE* file = std::fopen(options.tls_key_file.c_str(), "r")) {
    key = PEM_read_PrivateKey(file, nullptr, NoPassphrase, nullptr);
    std::fclose(file);
  }
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics: private key (security.key_file) '", options.tls_key_file,
        "' holds no unencrypted PEM private key: ", OpenSslErrors(),
        " (deploy/make_certs.sh writes one per daemon)"));
  }
  const bool used = SSL_CTX_use_PrivateKey(tls->ctx, key) == 1 &&
                    SSL_CTX_check_private_key(tls->ctx) == 1;
  EVP_PKEY_free(key);
  if (!used) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics: private key (security.key_file) '", options.tls_key_file,
        "' is not the key of certificate '", options.tls_cert_file,
        "': ", OpenSslErrors(),
        " (use the .key written with that .pem; \"{name}\" must expand to "
        "the same daemon in both)"));
  }
  if (!options.tls_client_ca_file.empty()) {
    const char* ca = options.tls_client_ca_file.c_str();
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(ca);
    if (names == nullptr ||
        SSL_CTX_load_verify_locations(tls->ctx, ca, nullptr) != 1) {
      if (names != nullptr) sk_X509_NAME_pop_free(names, X509_NAME_free);
      return absl::InvalidArgumentError(
          absl::StrCat("metrics: client CA (security.ca_file) '", ca,
                       "' holds no PEM certificate: ", OpenSslErrors(),
                       " (deploy/make_certs.sh writes ca.pem)"));
    }
    SSL_CTX_set_client_CA_list(tls->ctx, names);  // takes `names`
    SSL_CTX_set_verify(
        tls->ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  return tls;
}

// One accepted connection, plain or TLS, on a non-blocking socket: every
// operation waits with poll(2) up to a deadline, so none blocks for longer.
class MetricsHttpServer::Connection {
 public:
  // Owns `fd` and `ssl` (null: plain).
  Connection(int fd, SSL* ssl) : fd_(fd), ssl_(ssl) {
    if (ssl_ != nullptr) SSL_set_fd(ssl_, fd_);
  }
  ~Connection() {
    // close_notify, when the session is sound, without waiting for the
    // peer's: the answer is complete either way (Content-Length).
    if (ssl_ != nullptr && handshaken_ && !broken_) {
      ERR_clear_error();
      SSL_shutdown(ssl_);
    }
    SSL_free(ssl_);
    close(fd_);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // The TLS handshake (nothing for plain HTTP) within the I/O deadline;
  // false when it failed or the client stalled.
  bool Handshake() {
    if (ssl_ == nullptr) return true;
    const Clock::time_point deadline = Clock::now() + kIoTimeout;
    handshaken_ = Drive([this] { return SSL_accept(ssl_); }, deadline) > 0;
    if (!handshaken_) {
      SPDLOG_LOGGER_DEBUG(Log(Logger::kRpc),
                          "metrics: TLS handshake failed: {}", OpenSslErrors());
    }
    return handshaken_;
  }

  // Reads up to `size` bytes by `deadline`: how many, or <= 0 when the peer
  // closed, failed or stalled.
  ssize_t Read(char* buffer, size_t size, Clock::time_point deadline) {
    if (ssl_ != nullptr) {
      const int n = static_cast<int>(std::min<size_t>(size, 1 << 20));
      return Drive([&] { return SSL_read(ssl_, buffer, n); }, deadline);
    }
    for (;;) {
      const ssize_t n = recv(fd_, buffer, size, 0);
      if (n >= 0) return n;
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
      if (!WaitFor(fd_, POLLIN, deadline)) return -1;
    }
  }

  // Writes all of `data`, each part within the I/O deadline; false when the
  // peer stalls or goes away.
  bool WriteAll(const std::string& data) {
    size_t done = 0;
    while (done < data.size()) {
      const Clock::time_point deadline = Clock::now() + kIoTimeout;
      const char* next = data.data() + done;
      const size_t left = data.size() - done;
      ssize_t n;
      if (ssl_ != nullptr) {
        const int part = static_cast<int>(std::min<size_t>(left, 1 << 20));
        n = Drive([&] { return SSL_write(ssl_, next, part); }, deadline);
      } else {
        n = send(fd_, next, left, MSG_NOSIGNAL);
        if (n < 0 &&
            (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
          if (!WaitFor(fd_, POLLOUT, deadline)) return false;
          continue;
        }
      }
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }

 private:
  // Runs `op` (SSL_accept, SSL_read, SSL_write) again each time OpenSSL
  // waits for the socket, until it succeeds (its positive result), fails or
  // `deadline` passes (<= 0).
  template <typename Op>
  int Drive(Op op, Clock::time_point deadline) {
    for (;;) {
      ERR_clear_error();
      const int result = op();
      if (result > 0) return result;
      const int error = SSL_get_error(ssl_, result);
      short events = 0;
      if (error == SSL_ERROR_WANT_READ) events = POLLIN;
      if (error == SSL_ERROR_WANT_WRITE) events = POLLOUT;
      if (events == 0) {
        // After SSL_ERROR_SSL or _SYSCALL no close_notify may be sent.
        broken_ = error != SSL_ERROR_ZERO_RETURN;
        return result;
      }
      if (!WaitFor(fd_, events, deadline)) {
        broken_ = true;  // stalled mid-record: nothing more to say to it
        return -1;
      }
    }
  }

  const int fd_;
  SSL* const ssl_;
  bool handshaken_ = false;
  bool broken_ = false;
};

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    Options options) {
  std::string host, port;
  RETURN_IF_ERROR(SplitAddress(options.listen, &host, &port));
  ASSIGN_OR_RETURN(std::unique_ptr<TlsContext> tls, TlsContext::Load(options));
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
  const std::string address = absl::StrCat(
      host.find(':') != std::string::npos ? absl::StrCat("[", host, "]") : host,
      ":", bound_port);
  return std::unique_ptr<MetricsHttpServer>(
      new MetricsHttpServer(std::move(options), fd, address, std::move(tls)));
}

MetricsHttpServer::MetricsHttpServer(Options options, int fd,
                                     std::string address,
                                     std::unique_ptr<TlsContext> tls)
    : options_(std::move(options)),
      listen_fd_(fd),
      address_(std::move(address)),
      tls_(std::move(tls)) {
  thread_ = std::thread([this] { Loop(); });
}

MetricsHttpServer::~MetricsHttpServer() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
}

void MetricsHttpServer::Loop() {
  BlockSigpipe();
  while (!stop_.load()) {
    pollfd p = {listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    const int fd =
        accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) continue;
    SSL* ssl = nullptr;
    if (tls_ != nullptr && (ssl = SSL_new(tls_->ctx)) == nullptr) {
      close(fd);  // out of memory: drop this one
      continue;
    }
    {
      Connection connection(fd, ssl);  // closes fd
      if (connection.Handshake()) Answer(connection);
    }
    DrainSigpipe();
  }
}

void MetricsHttpServer::Answer(Connection& connection) {
  // The request head, up to its blank line, within the size and time limits.
  const Clock::time_point deadline = Clock::now() + kIoTimeout;
  std::string request;
  char buffer[2048];
  while (request.find("\r\n\r\n") == std::string::npos) {
    if (request.size() > kMaxRequestBytes) {
      connection.WriteAll(Response(400, "Bad Request", "request too large\n"));
      return;
    }
    const ssize_t n = connection.Read(buffer, sizeof(buffer), deadline);
    if (n <= 0) return;  // closed, broken or stalled: drop it
    request.append(buffer, static_cast<size_t>(n));
  }
  const std::vector<std::string> lines =
      absl::StrSplit(request.substr(0, request.find("\r\n\r\n")), "\r\n");
  const std::vector<std::string> first = absl::StrSplit(lines[0], ' ');
  if (first.size() != 3 || !absl::StartsWith(first[2], "HTTP/1.")) {
    connection.WriteAll(
        Response(400, "Bad Request", "malformed request line\n"));
    return;
  }
  if (first[0] != "GET") {
    connection.WriteAll(Response(405, "Method Not Allowed",
                                 "GET /metrics only\n", "Allow: GET\r\n"));
    return;
  }
  const std::string path = first[1].substr(0, first[1].find('?'));
  if (path != "/metrics") {
    connection.WriteAll(Response(404, "Not Found", "GET /metrics\n"));
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
      authorized = SameToken(value, "Bearer " + options_.bearer_token);
    }
    if (!authorized) {
      connection.WriteAll(
          Response(401, "Unauthorized",
                   "the reader token is required (Authorization: "
                   "Bearer <security.reader_token_file's token>)\n",
                   "WWW-Authenticate: Bearer\r\n"));
      return;
    }
  }
  if (connection.WriteAll(Response(200, "OK", options_.body()))) {
    scrapes_.fetch_add(1);
  }
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
    return absl::InvalidArgumentError(
        absl::StrCat("metrics: port ", configured, " + metrics.port_offset ",
                     offset, " is past 65535; lower metrics.port_offset"));
  }
  MetricsHttpServer::Options options;
  options.listen = absl::StrCat(
      host.find(':') != std::string::npos ? absl::StrCat("[", host, "]") : host,
      ":", configured == 0 ? 0 : configured + offset);
  if (config.security.tls) {
    // The daemon's own certificate, as its gRPC server uses it
    // (rpc/security.cc): "{name}" is ps-0, standby-1, worker-2, coordinator.
    const SecuritySection& security = config.security;
    if (security.cert_file.empty() || security.key_file.empty()) {
      return absl::FailedPreconditionError(
          "metrics: with security.tls /metrics is HTTPS with the daemon's own "
          "certificate: set security.cert_file and security.key_file "
          "(deploy/make_certs.sh), or metrics.port_offset 0");
    }
    const std::string name =
        status->role() == "coordinator"
            ? status->role()
            : absl::StrCat(status->role(), "-", status->index());
    options.tls_cert_file = ExpandName(security.cert_file, name);
    options.tls_key_file = ExpandName(security.key_file, name);
    if (security.mutual_tls) options.tls_client_ca_file = security.ca_file;
    ASSIGN_OR_RETURN(options.bearer_token,
                     ReadTokenFile(security.reader_token_file));
  }
  options.body = [status] {
    proto::GetStatusResponse response;
    status->Fill(&response);
    return PrometheusText(status->Collect(), response);
  };
  ASSIGN_OR_RETURN(std::unique_ptr<MetricsHttpServer> server,
                   MetricsHttpServer::Start(std::move(options)));
  status->set_metrics_address(server->address(), server->scheme());
  SPDLOG_LOGGER_INFO(Log(Logger::kRpc),
                     "Prometheus metrics on {}://{}/metrics{}",
                     server->scheme(), server->address(),
                     config.security.mutual_tls
                         ? " (client certificate and reader token required)"
                     : config.security.tls ? " (reader token required)"
                                           : "");
  return server;
}

}  // namespace downpour
