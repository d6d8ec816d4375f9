// A daemon's Prometheus endpoint: GET /metrics over HTTP/1.1, or over
// HTTPS (TLS 1.2 or later, optionally demanding client certificates), answers
// the text exposition format (rpc/prometheus_text.h: prometheus-cpp's
// serializer over the daemon's registry and its Status).
//
//   MetricsHttpServer::Options options;
//   options.listen = "127.0.0.1:0";              // port 0: ephemeral
//   options.body = [&] { return PrometheusText(status.Collect(), ...); };
//   options.tls_cert_file = "certs/ps-0.pem";   // optional: HTTPS
//   options.tls_key_file = "certs/ps-0.key";
//   ASSIGN_OR_RETURN(auto server, MetricsHttpServer::Start(options));
//   server->address();                            // "127.0.0.1:40123"
//
// One thread serves every connection at once from an epoll loop on
// non-blocking sockets (TLS handshakes included), so no client waits for
// another. Each connection has deadlines of its own: the TLS handshake and
// the request each must complete within 2 s, every write must progress
// within 2 s, and a request is at most 8 KiB (rpc/metrics_connection.h).
// At most Options::max_connections are held at once (fewer when the
// descriptor limit is low), and at most max_connections_per_address from
// one peer address; past either, a new connection displaces one that has
// not yet sent its whole request (rpc/connection_share.h): from its own
// address's share when that is full, else from the address holding the most;
// of those the one that got least far (nothing sent, then a partial TLS
// ClientHello, then a handshake the server answered), the oldest first. So
// stalled TLS handshakes, idle or half-sent requests and plain HTTP sent to
// the TLS port, from any address including the scraper's own (a NAT,
// 127.0.0.1), cannot keep a scrape out, and memory and threads stay
// bounded whatever number of connections a client opens. A new connection
// is refused (closed at once) only when every held one is being answered.
// Answers: 200 with the body for GET /metrics, 401 without the bearer token
// when one is set, 404 for another path, 405 for another method, 400 for a
// malformed or oversized request; every connection is closed after its
// answer.
#ifndef DOWNPOUR_RPC_METRICS_HTTP_H_
#define DOWNPOUR_RPC_METRICS_HTTP_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/config.h"

namespace downpour {

class StatusService;

class MetricsHttpServer {
 public:
  struct Options {
    // host:port to bind (port 0: ephemeral).
    std::string listen;
    // Non-empty: a request must carry "Authorization: Bearer <token>".
    std::string bearer_token;
    // The body of GET /metrics, called on the server's thread per scrape.
    std::function<std::string()> body;
    // Non-empty: serve HTTPS with this PEM certificate (chain: the server's
    // certificate first, then any intermediates) and its PEM private key,
    // TLS 1.2 at least. Default "": plain HTTP.
    std::string tls_cert_file;
    std::string tls_key_file;
    // Non-empty (needs tls_cert_file): every client must present a
    // certificate signed by a CA in this PEM file, else the handshake fails
    // (as the daemons' gRPC servers do with security.mutual_tls). Default "".
    std::string tls_client_ca_file;
    // Connections held at once; at most an eighth of the descriptors left
    // beyond the daemon's reserve (rpc/accept_guard.h), and at least 16.
    // Default 256.
    int max_connections = 256;
    // Of them from one peer address (at most max_connections). Default 64.
    int max_connections_per_address = 64;
  };

  // Binds, loads the TLS files once (when set) and starts answering.
  // InvalidArgument for a malformed address, or for a TLS file that is
  // unreadable, not PEM, or a key that does not match its certificate
  // (naming the file and the fix); NotFound for a TLS file that does not
  // exist; Unavailable naming the address and errno when it cannot be bound
  // (a port in use).
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      Options options);
  ~MetricsHttpServer();  // stops the loop, closes every connection
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // host:port with the bound port.
  const std::string& address() const { return address_; }
  // "https" when serving TLS, else "http".
  const char* scheme() const { return tls_ != nullptr ? "https" : "http"; }
  // Requests answered 200 so far.
  int64_t scrapes() const { return scrapes_.load(); }
  // Connections closed to make room for newer ones, and new connections
  // refused because every held one was being answered, so far.
  int64_t displaced() const { return displaced_.load(); }
  int64_t refused() const { return refused_.load(); }
  // The limits in effect (Options' after the descriptor limit).
  int max_connections() const { return max_connections_; }
  int max_connections_per_address() const {
    return max_connections_per_address_;
  }

 private:
  class Loop;         // the event loop and its connections, in the .cc
  struct TlsContext;  // OpenSSL's, in the .cc

  MetricsHttpServer(Options options, int fd, std::string address,
                    std::unique_ptr<TlsContext> tls);
  // The answer to the request head `request`; `*ok` tells a 200.
  std::string Respond(const std::string& request, bool* ok) const;

  // Constant after construction.
  const Options options_;
  const int listen_fd_;
  const std::string address_;
  const std::unique_ptr<TlsContext> tls_;  // null: plain HTTP
  const int max_connections_;
  const int max_connections_per_address_;

  std::atomic<int64_t> scrapes_{0};
  std::atomic<int64_t> displaced_{0};
  std::atomic<int64_t> refused_{0};
  std::unique_ptr<Loop> loop_;  // its thread runs until destruction
};

// The endpoint `config` asks of a daemon whose gRPC server was asked to
// listen on `listen` (host:port as configured) and bound `bound`: null when
// metrics.port_offset is 0; else on the same host at the configured port
// plus metrics.port_offset, or an ephemeral port when the configured port
// is 0 (tests, local clusters). Its body is the Prometheus text
// (rpc/prometheus_text.h) of `status`'s registries and Status, whose
// metrics_address and metrics_scheme it sets. With security.tls it serves HTTPS
// with the daemon's own certificate and key (security.cert_file and key_file,
// with
// "{name}" the daemon's name from `status`: "ps-0", "coordinator"), demands
// a client certificate signed by security.ca_file when security.mutual_tls
// is on, and takes the reader token as its bearer token. Errors name the
// file or key at fault. `status` must outlive the server.
absl::StatusOr<std::unique_ptr<MetricsHttpServer>> StartMetrics(
    const Config& config, const std::string& listen, const std::string& bound,
    StatusService* status);

}  // namespace downpour

#endif  // DOWNPOUR_RPC_METRICS_HTTP_H_
