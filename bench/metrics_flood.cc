// Scrape latency of a daemon's /metrics endpoint (rpc/metrics_http.h, started
// as a ps starts it: StartMetrics with its defaults) while an attacker holds
// connections to it from the scraper's own address: `stalled` connections
// that stop halfway (through a ClientHello under TLS, through a request in
// plain HTTP) and `idle` ones that send nothing (docs/SECURITY.md, "/metrics
// kept dark"). For plain HTTP and HTTPS (certificates from
// deploy/make_certs.sh, the reader token) it runs `scrapes` scrapes one after
// another without the flood, then with it, and prints p50/p99/max latency
// (connect to the last byte), errors and the ratio flood/none:
//   bazel run -c opt //bench:metrics_flood [-- --scrapes=200 --idle=10000]
// The attacker runs in a child process. With --reconnect it reopens every
// connection the server closes, at once, while the scrapes run (a churning
// flood rather than a held one).
#ifndef _GNU_SOURCE
#define _GNU_SOURCE  // POLLRDHUP
#endif
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "bench/bench_util.h"
#include "common/config.h"
#include "common/counters.h"
#include "common/fd_limit.h"
#include "common/subprocess.h"
#include "rpc/metrics_http.h"
#include "rpc/security.h"
#include "rpc/status_service.h"

ABSL_FLAG(int, scrapes, 200, "scrapes per figure");
ABSL_FLAG(int, idle, 10000, "idle connections the attacker holds");
ABSL_FLAG(int, stalled, 64, "connections stalled halfway");
ABSL_FLAG(std::string, modes, "plain,tls", "which to run: plain, tls");
ABSL_FLAG(bool, reconnect, false,
          "the attacker reopens each connection the server closes");
ABSL_FLAG(std::string, make_certs, "deploy/make_certs.sh",
          "tls: the certificate script (relative paths are tried in the "
          "working directory, then in $BUILD_WORKSPACE_DIRECTORY)");

namespace downpour {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kTimeoutSeconds = 10;  // a scrape taking longer is an error

void Check(const absl::Status& status, const std::string& what) {
  bench::CheckOrExit(status, "metrics_flood", what);
}

sockaddr_in Loopback(int port) {
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  return address;
}

// A non-blocking connection to 127.0.0.1:`port` under way; -1 on failure.
int StartConnect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const sockaddr_in address = Loopback(port);
  if (fd >= 0 &&
      connect(fd, reinterpret_cast<const sockaddr*>(&address),
              sizeof(address)) != 0 &&
      errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  return fd;
}

// Connections to 127.0.0.1:`port` that each send `first_bytes` once
// connected and nothing after.
class Connections {
 public:
  Connections(int port, int count, std::string first_bytes)
      : port_(port), first_bytes_(std::move(first_bytes)) {
    for (int i = 0; i < count; ++i) slots_.push_back({StartConnect(port_)});
  }
  ~Connections() {
    for (const Slot& slot : slots_) close(slot.fd);
  }

  // One poll over every slot: sends the first bytes on those just
  // connected and, with `reopen`, reopens those the server closed. Returns
  // how many are connected.
  int Poll(int timeout_ms, bool reopen) {
    std::vector<pollfd> fds;
    for (const Slot& slot : slots_) {
      // POLLRDHUP: the server closed it (a FIN, so no POLLHUP yet).
      fds.push_back({slot.fd,
                     static_cast<short>(slot.connected ? POLLRDHUP : POLLOUT),
                     0});
    }
    if (poll(fds.data(), fds.size(), timeout_ms) < 0) return connected_;
    for (size_t i = 0; i < fds.size(); ++i) {
      Slot& slot = slots_[i];
      const bool failed =
          (fds[i].revents & (POLLERR | POLLHUP | POLLRDHUP)) != 0;
      if (!slot.connected && (fds[i].revents & POLLOUT) != 0 && !failed) {
        slot.connected = true;
        ++connected_;
        send(slot.fd, first_bytes_.data(), first_bytes_.size(), MSG_NOSIGNAL);
      } else if (reopen && failed) {
        if (slot.connected) --connected_;
        close(slot.fd);
        slot = {StartConnect(port_)};
      }
    }
    return connected_;
  }

  int size() const { return static_cast<int>(slots_.size()); }

 private:
  struct Slot {
    int fd;
    bool connected = false;
  };

  const int port_;
  const std::string first_bytes_;
  std::vector<Slot> slots_;
  int connected_ = 0;
};

// The attacker, in a child process of its own (so that its descriptors do
// not slow the server's process, whose Status counts its own): `stalled`
// connections that send `half` and `idle` ones that send nothing, held until
// the Flood goes; with `reconnect` each one the server closes is reopened.
class Flood {
 public:
  Flood(int port, int stalled, int idle, const std::string& half,
        bool reconnect) {
    int ends[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0 ||
        (child_ = fork()) < 0) {
      Check(absl::InternalError(std::strerror(errno)), "flood");
    }
    if (child_ == 0) {
      close(ends[0]);
      Attack(ends[1], port, stalled, idle, half, reconnect);
    }
    close(ends[1]);
    control_ = ends[0];
    int counts[2] = {0, 0};
    if (read(control_, counts, sizeof(counts)) == sizeof(counts)) {
      stalled_ = counts[0];
      idle_ = counts[1];
    }
  }
  ~Flood() {
    close(control_);  // the child sees it and exits
    waitpid(child_, nullptr, 0);
  }

  // Connections established (the kernel's handshake done) before scraping.
  int stalled() const { return stalled_; }
  int idle() const { return idle_; }

 private:
  // The child: connects, reports the counts on `control`, holds (or
  // reopens) the connections until `control` closes, exits.
  [[noreturn]] static void Attack(int control, int port, int stalled, int idle,
                                  const std::string& half, bool reconnect) {
    Connections halves(port, stalled, half);
    Connections silent(port, idle, "");
    const Clock::time_point deadline = Clock::now() + std::chrono::seconds(30);
    int counts[2] = {0, 0};
    while (Clock::now() < deadline &&
           (counts[0] < halves.size() || counts[1] < silent.size())) {
      counts[0] = halves.Poll(0, false);
      counts[1] = silent.Poll(100, false);
    }
    (void)!write(control, counts, sizeof(counts));
    for (;;) {
      pollfd p = {control, POLLIN, 0};
      if (poll(&p, 1, reconnect ? 0 : -1) > 0) break;  // the parent is done
      if (reconnect) {
        halves.Poll(0, true);
        silent.Poll(50, true);
      }
    }
    _exit(0);
  }

  pid_t child_ = -1;
  int control_ = -1;
  int stalled_ = 0, idle_ = 0;
};

// A legitimate scraper: GET /metrics with the bearer token, over TLS when
// `ctx` is set.
class Scraper {
 public:
  Scraper(int port, SSL_CTX* ctx, const std::string& token)
      : port_(port),
        ctx_(ctx),
        request_(absl::StrCat("GET /metrics HTTP/1.1\r\nHost: x\r\n",
                              token.empty() ? "" : "Authorization: Bearer ",
                              token, token.empty() ? "" : "\r\n", "\r\n")) {}

  // Seconds from connect to the last byte of a 200; nullopt for anything
  // else or a timeout.
  std::optional<double> Scrape() const {
    const Clock::time_point start = Clock::now();
    const int fd = Connect();
    if (fd < 0) return std::nullopt;
    const std::string answer = ctx_ != nullptr ? TlsExchange(fd) : Exchange(fd);
    close(fd);
    if (!absl::StartsWith(answer, "HTTP/1.1 200")) return std::nullopt;
    return std::chrono::duration<double>(Clock::now() - start).count();
  }

 private:
  int Connect() const {
    const int fd = StartConnect(port_);
    pollfd p = {fd, POLLOUT, 0};
    int error = 0;
    socklen_t length = sizeof(error);
    if (fd < 0 || poll(&p, 1, kTimeoutSeconds * 1000) != 1 ||
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0 ||
        error != 0) {
      if (fd >= 0) close(fd);
      return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    const timeval timeout = {kTimeoutSeconds, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    return fd;
  }

  std::string Exchange(int fd) const {
    std::string answer;
    if (send(fd, request_.data(), request_.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(request_.size())) {
      return answer;
    }
    char buffer[16384];
    ssize_t n;
    while ((n = recv(fd, buffer, sizeof(buffer), 0)) > 0)
      answer.append(buffer, n);
    return answer;
  }

  std::string TlsExchange(int fd) const {
    std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ctx_), SSL_free);
    SSL_set_fd(ssl.get(), fd);
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl.get()), "127.0.0.1");
    std::string answer;
    if (SSL_connect(ssl.get()) == 1 &&
        SSL_write(ssl.get(), request_.data(),
                  static_cast<int>(request_.size())) ==
            static_cast<int>(request_.size())) {
      char buffer[16384];
      int n;
      while ((n = SSL_read(ssl.get(), buffer, sizeof(buffer))) > 0) {
        answer.append(buffer, n);
      }
    }
    ERR_clear_error();
    return answer;
  }

  const int port_;
  SSL_CTX* const ctx_;
  const std::string request_;
};

struct Figures {
  int errors = 0;
  double p50 = 0, p99 = 0, max = 0;  // seconds, of the scrapes answered
};

Figures Run(const Scraper& scraper, int scrapes) {
  std::vector<double> seconds;
  Figures figures;
  for (int i = 0; i < scrapes; ++i) {
    const std::optional<double> s = scraper.Scrape();
    if (s.has_value()) {
      seconds.push_back(*s);
    } else {
      ++figures.errors;
    }
  }
  if (seconds.empty()) return figures;
  std::sort(seconds.begin(), seconds.end());
  const auto at = [&](double q) {
    const size_t rank = static_cast<size_t>(std::ceil(q * seconds.size()));
    return seconds[std::clamp<size_t>(rank, 1, seconds.size()) - 1];
  };
  figures.p50 = at(0.5);
  figures.p99 = at(0.99);
  figures.max = seconds.back();
  return figures;
}

void Print(const char* mode, const char* flood, const Figures& f, int n) {
  absl::PrintF("%-6s %-6s %8d %7d %9.2f %9.2f %9.2f\n", mode, flood, n,
               f.errors, f.p50 * 1e3, f.p99 * 1e3, f.max * 1e3);
}

// deploy/make_certs.sh's certificates and tokens in a temp folder; the
// security section a ps with TLS uses.
SecuritySection MakeCerts() {
  std::string script = absl::GetFlag(FLAGS_make_certs);
  if (!std::filesystem::exists(script)) {
    const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
    if (workspace != nullptr) script = std::string(workspace) + "/" + script;
  }
  const std::string dir = bench::RunDirOr("", "metrics-flood");
  const std::string certs = dir + "/certs";
  auto make = Subprocess::Start(
      "make_certs",
      {script, "--out", certs, "--ps", "1", "--standby", "0", "--workers", "0"},
      dir + "/make_certs.log");
  Check(make.status(), "start " + script);
  if ((*make)->Wait(absl::Seconds(60)) != 0) {
    Check(absl::InternalError((*make)->LogTail(10)), script);
  }
  SecuritySection security;
  security.tls = true;
  security.ca_file = certs + "/ca.pem";
  security.cert_file = certs + "/{name}.pem";
  security.key_file = certs + "/{name}.key";
  security.reader_token_file = certs + "/reader.token";
  return security;
}

// One mode: a ps's /metrics, the scrapes without and with the flood.
void RunMode(bool tls) {
  const char* mode = tls ? "tls" : "plain";
  Counters counters;
  StatusService status("ps", 0, &counters);
  Config config;
  config.metrics.port_offset = 1000;
  std::string token;
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(nullptr, SSL_CTX_free);
  if (tls) {
    config.security = MakeCerts();
    absl::StatusOr<std::string> read =
        ReadTokenFile(config.security.reader_token_file);
    Check(read.status(), "reader token");
    token = *read;
    ctx.reset(SSL_CTX_new(TLS_client_method()));
    SSL_CTX_load_verify_locations(ctx.get(), config.security.ca_file.c_str(),
                                  nullptr);
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  }
  auto server = StartMetrics(config, "127.0.0.1:0", "127.0.0.1:40000", &status);
  Check(server.status(), "StartMetrics");
  const std::string& address = (*server)->address();
  const int port = std::stoi(address.substr(address.rfind(':') + 1));
  const Scraper scraper(port, ctx.get(), token);
  const int n = absl::GetFlag(FLAGS_scrapes);
  const Figures none = Run(scraper, n);
  Print(mode, "none", none, n);
  const std::string half =
      tls ? std::string({0x16, 0x03, 0x01, 0x02, 0x00, 0x01})
          : std::string("GET /metrics HTTP/1.1\r\nHost: x\r\n");
  const bool reconnect = absl::GetFlag(FLAGS_reconnect);
  const Flood attacker(port, absl::GetFlag(FLAGS_stalled),
                       absl::GetFlag(FLAGS_idle), half, reconnect);
  const Figures flood = Run(scraper, n);
  Print(mode, "flood", flood, n);
  absl::PrintF(
      "%-6s flood: %d stalled + %d idle connections established before the "
      "scrapes; the server holds at most %d (%d per address), displaced %d "
      "and refused %d; ratio flood/none p50 %.2f, p99 %.2f\n",
      mode, attacker.stalled(), attacker.idle(), (*server)->max_connections(),
      (*server)->max_connections_per_address(), (*server)->displaced(),
      (*server)->refused(), none.p50 > 0 ? flood.p50 / none.p50 : 0,
      none.p99 > 0 ? flood.p99 / none.p99 : 0);
}

int Main() {
  const auto start = Clock::now();
  signal(SIGPIPE, SIG_IGN);  // a client writing to a closed connection
  const std::string raised = RaiseFdLimit();
  const int wanted =
      absl::GetFlag(FLAGS_idle) + absl::GetFlag(FLAGS_stalled) + 512;
  if (FdLimit() < static_cast<uint64_t>(wanted)) {
    absl::FPrintF(stderr,
                  "metrics_flood: %s: %d descriptors needed; raise the hard "
                  "limit (ulimit -Hn) or lower --idle\n",
                  raised, wanted);
    return 1;
  }
  absl::PrintF(
      "/metrics scrapes (connect to last byte), one after another, without "
      "and with %d stalled and %d idle connections%s from the scraper's own "
      "address; %s\n",
      absl::GetFlag(FLAGS_stalled), absl::GetFlag(FLAGS_idle),
      absl::GetFlag(FLAGS_reconnect) ? " (reopened as the server closes them)"
                                     : "",
      raised);
  absl::PrintF("%-6s %-6s %8s %7s %9s %9s %9s\n", "mode", "flood", "scrapes",
               "errors", "p50 ms", "p99 ms", "max ms");
  const std::string modes = absl::GetFlag(FLAGS_modes);
  if (bench::SectionOn(modes, "plain")) RunMode(false);
  if (bench::SectionOn(modes, "tls")) RunMode(true);
  absl::PrintF("target: p99 under 1000 ms with the flood held\n");
  bench::PrintTotal(start);
  return 0;
}

}  // namespace
}  // namespace downpour

int main(int argc, char** argv) {
  return downpour::bench::ParseFlagsAndRun(argc, argv, downpour::Main);
}
