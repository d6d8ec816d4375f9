// The /metrics HTTP(S) endpoint.
#include "rpc/metrics_http.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/fd_limit.h"
#include "common/host_port.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "proto/status.pb.h"
#include "rpc/accept_guard.h"
#include "rpc/connection_share.h"
#include "rpc/metrics_connection.h"
#include "rpc/prometheus_text.h"
#include "rpc/security.h"
#include "rpc/status_service.h"

namespace downpour {
namespace {

// Connections the kernel queues before they are accepted: enough that a
// burst of them does not drop a scraper's SYN (a 1 s retransmit) while the
// loop accepts and displaces the burst.
constexpr int kBacklog = 1024;

using Clock = MetricsConnection::Clock;

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

// The connection cap for `requested`: at most an eighth of the descriptors
// the process may open beyond the accept guard's reserve, at least 16.
int ConnectionCap(int requested) {
  const uint64_t limit = FdLimit();
  int cap = std::max(1, requested);
  if (limit > 0) {
    const uint64_t reserve = AcceptGuardLimitsFor(limit).reserve;
    const uint64_t share = limit > reserve ? (limit - reserve) / 8 : 0;
    cap = static_cast<int>(std::min<uint64_t>(
        cap, std::max<uint64_t>(16, std::min<uint64_t>(share, 1 << 20))));
  }
  return cap;
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

// The event loop: one thread waits with epoll on the listener, a wake-up
// eventfd and every held connection (level-triggered, each for what it
// waits for next), and runs whichever is ready as far as it goes without
// blocking. All its state belongs to that thread.
class MetricsHttpServer::Loop {
 public:
  explicit Loop(MetricsHttpServer* server);
  ~Loop();  // wakes the thread, joins it; closes every connection
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

 private:
  // epoll data of the listener and of the eventfd; connections count up
  // from kFirstConnection (their age order, as ConnectionShare needs it).
  static constexpr uint64_t kListener = 0;
  static constexpr uint64_t kWake = 1;
  static constexpr uint64_t kFirstConnection = 2;
  // How often deadlines are checked, and how long accepting pauses when
  // the process is out of descriptors.
  static constexpr std::chrono::milliseconds kTick{100};

  struct Held {
    std::unique_ptr<MetricsConnection> connection;
    uint32_t events = 0;  // what epoll watches for it
    bool scrape = false;  // its answer is a 200
  };

  void Run();
  void AcceptWaiting(Clock::time_point now);
  void Admit(int fd, Clock::time_point now);
  void Serve(uint64_t id, Clock::time_point now);
  void Watch(uint64_t id, Held& held, uint32_t events);
  void CloseConnection(uint64_t id);
  void Tick(Clock::time_point now);
  void SetListening(bool on);
  void MaybeWarn(Clock::time_point now);

  MetricsHttpServer* const server_;
  const int epoll_fd_;
  const int wake_fd_;
  ConnectionShare share_;
  std::unordered_map<uint64_t, Held> held_;
  uint64_t next_id_ = kFirstConnection;
  bool listening_ = true;
  Clock::time_point next_tick_;
  Clock::time_point next_warning_;
  int64_t warned_ = 0;  // displaced + refused at the last warning
  std::thread thread_;
};

MetricsHttpServer::Loop::Loop(MetricsHttpServer* server)
    : server_(server),
      epoll_fd_(epoll_create1(EPOLL_CLOEXEC)),
      wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      share_({server->max_connections_, server->max_connections_per_address_}) {
  epoll_event listener = {EPOLLIN, {.u64 = kListener}};
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, server_->listen_fd_, &listener);
  epoll_event wake = {EPOLLIN, {.u64 = kWake}};
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &wake);
  thread_ = std::thread([this] { Run(); });
}

MetricsHttpServer::Loop::~Loop() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  held_.clear();  // closes the connections
  close(wake_fd_);
  close(epoll_fd_);
}

void MetricsHttpServer::Loop::Run() {
  BlockSigpipe();
  epoll_event events[256];
  for (;;) {
    const int ready =
        epoll_wait(epoll_fd_, events, 256, static_cast<int>(kTick.count()));
    const Clock::time_point now = Clock::now();
    // Held connections first, new ones after: a client's bytes that
    // arrived are taken in before newer connections can displace it.
    bool accept = false;
    for (int i = 0; i < ready; ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == kWake) return;
      if (id == kListener) {
        accept = true;
      } else {
        Serve(id, now);
      }
    }
    if (accept) AcceptWaiting(now);
    if (now >= next_tick_) Tick(now);
    DrainSigpipe();
  }
}

// A batch well below the per-address share, so that connections already
// held are served between batches even while a flood keeps the listener
// ready, and one batch cannot displace a connection accepted in the batch
// before.
void MetricsHttpServer::Loop::AcceptWaiting(Clock::time_point now) {
  const int batch =
      std::max(1, std::min(32, share_.limits().max_per_address / 2));
  for (int i = 0; i < batch; ++i) {
    const int fd = accept4(server_->listen_fd_, nullptr, nullptr,
                           SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      Admit(fd, now);
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
        errno == ENOMEM) {
      // The connection stays queued and the listener ready: stop watching
      // it until the next tick instead of spinning.
      SetListening(false);
    }
    return;
  }
}

void MetricsHttpServer::Loop::Admit(int fd, Clock::time_point now) {
  const std::string peer = PeerHost(fd);
  const ConnectionShare::Admission admission = share_.Admit(peer);
  if (!admission.admit) {
    server_->refused_.fetch_add(1);
    close(fd);
    return;
  }
  if (admission.displace.has_value()) {
    server_->displaced_.fetch_add(1);
    CloseConnection(*admission.displace);
  }
  const uint64_t id = next_id_++;
  share_.Add(id, peer);
  Held& held = held_[id];
  held.connection = std::make_unique<MetricsConnection>(
      fd, server_->tls_ != nullptr ? server_->tls_->ctx : nullptr, now);
  epoll_event event = {0, {.u64 = id}};
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event);
  // A client's first bytes often arrived with its connection.
  Serve(id, now);
}

void MetricsHttpServer::Loop::Serve(uint64_t id, Clock::time_point now) {
  const auto it = held_.find(id);
  if (it == held_.end()) return;  // closed earlier in this batch
  Held& held = it->second;
  MetricsConnection::Step step = held.connection->Advance(now);
  if (step == MetricsConnection::Step::kRequestReady) {
    share_.MarkAnswering(id);
    held.connection->SetAnswer(
        server_->Respond(held.connection->request(), &held.scrape), now);
    step = held.connection->Advance(now);
  }
  if (step == MetricsConnection::Step::kWantRead ||
      step == MetricsConnection::Step::kWantWrite) {
    share_.SetProgress(id, held.connection->progress());
    Watch(id, held,
          step == MetricsConnection::Step::kWantRead ? EPOLLIN : EPOLLOUT);
  } else {
    if (held.scrape && held.connection->answered()) {
      server_->scrapes_.fetch_add(1);
    }
    CloseConnection(id);
  }
}

void MetricsHttpServer::Loop::Watch(uint64_t id, Held& held, uint32_t events) {
  if (held.events == events) return;
  held.events = events;
  epoll_event event = {events, {.u64 = id}};
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, held.connection->fd(), &event);
}

// Closing the descriptor also takes it out of the epoll set (nothing else
// holds it).
void MetricsHttpServer::Loop::CloseConnection(uint64_t id) {
  share_.Remove(id);
  held_.erase(id);
}

// Closes the connections past their deadline, listens again after a pause,
// and warns about displaced connections.
void MetricsHttpServer::Loop::Tick(Clock::time_point now) {
  next_tick_ = now + kTick;
  std::vector<uint64_t> expired;
  for (const auto& [id, held] : held_) {
    if (held.connection->deadline() <= now) expired.push_back(id);
  }
  for (const uint64_t id : expired) CloseConnection(id);
  SetListening(true);
  MaybeWarn(now);
}

void MetricsHttpServer::Loop::SetListening(bool on) {
  if (listening_ == on) return;
  listening_ = on;
  epoll_event event = {on ? static_cast<uint32_t>(EPOLLIN) : 0u,
                       {.u64 = kListener}};
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, server_->listen_fd_, &event);
}

// WARN at most once per 10 s while connections are being displaced or
// refused: a client is opening more than the endpoint holds.
void MetricsHttpServer::Loop::MaybeWarn(Clock::time_point now) {
  const int64_t displaced = server_->displaced_.load();
  const int64_t refused = server_->refused_.load();
  if (now < next_warning_ || displaced + refused == warned_) return;
  warned_ = displaced + refused;
  next_warning_ = now + std::chrono::seconds(10);
  SPDLOG_LOGGER_WARN(
      Log(Logger::kRpc),
      "metrics on {}: since start {} connections that had not sent their "
      "request were closed to make room for newer ones and {} refused (at "
      "most {} held, {} per address); a client opens more connections than "
      "a scraper needs (docs/SECURITY.md, \"/metrics kept dark\")",
      server_->address_, displaced, refused, server_->max_connections_,
      server_->max_connections_per_address_);
}

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
  const int fd = socket(found->ai_family,
                        found->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
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
  if (bound != 0 || listen(fd, kBacklog) != 0) {
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
      tls_(std::move(tls)),
      max_connections_(ConnectionCap(options_.max_connections)),
      max_connections_per_address_(std::clamp(
          options_.max_connections_per_address, 1, max_connections_)) {
  loop_ = std::make_unique<Loop>(this);
}

MetricsHttpServer::~MetricsHttpServer() {
  loop_.reset();
  close(listen_fd_);
}

std::string MetricsHttpServer::Respond(const std::string& request,
                                       bool* ok) const {
  *ok = false;
  if (request.find("\r\n\r\n") == std::string::npos) {
    return Response(400, "Bad Request", "request too large\n");
  }
  const std::vector<std::string> lines =
      absl::StrSplit(request.substr(0, request.find("\r\n\r\n")), "\r\n");
  const std::vector<std::string> first = absl::StrSplit(lines[0], ' ');
  if (first.size() != 3 || !absl::StartsWith(first[2], "HTTP/1.")) {
    return Response(400, "Bad Request", "malformed request line\n");
  }
  if (first[0] != "GET") {
    return Response(405, "Method Not Allowed", "GET /metrics only\n",
                    "Allow: GET\r\n");
  }
  const std::string path = first[1].substr(0, first[1].find('?'));
  if (path != "/metrics") {
    return Response(404, "Not Found", "GET /metrics\n");
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
      return Response(401, "Unauthorized",
                      "the reader token is required (Authorization: "
                      "Bearer <security.reader_token_file's token>)\n",
                      "WWW-Authenticate: Bearer\r\n");
    }
  }
  *ok = true;
  return Response(200, "OK", options_.body());
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
