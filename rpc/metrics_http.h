// A daemon's Prometheus endpoint: GET /metrics over plain HTTP/1.1 answers
// the text exposition format (rpc/prometheus_text.h) of the daemon's Status.
//
//   MetricsHttpServer::Options options;
//   options.listen = "127.0.0.1:0";              // port 0: ephemeral
//   options.body = [&] { return PrometheusText(status.Fill...); };
//   ASSIGN_OR_RETURN(auto server, MetricsHttpServer::Start(options));
//   server->address();                            // "127.0.0.1:40123"
//
// One thread accepts and answers one connection at a time (a scrape every
// few seconds needs no more). Every read and write has a 2 s deadline and a
// request is at most 8 KiB, so a stalled or hostile client costs at most
// that and memory stays bounded. Answers: 200 with the body for GET
// /metrics, 401 without the bearer token when one is set, 404 for another
// path, 405 for another method, 400 for a malformed or oversized request;
// every connection is closed after its answer.
#ifndef DOWNPOUR_RPC_METRICS_HTTP_H_
#define DOWNPOUR_RPC_METRICS_HTTP_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

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
  };

  // Binds and starts answering. InvalidArgument for a malformed address,
  // Unavailable naming the address and errno when it cannot be bound (a
  // port in use).
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      Options options);
  ~MetricsHttpServer();  // stops the thread and closes the socket
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // host:port with the bound port.
  const std::string& address() const { return address_; }
  // Requests answered 200 so far.
  int64_t scrapes() const { return scrapes_.load(); }

 private:
  MetricsHttpServer(Options options, int fd, std::string address);
  void Loop();
  void Answer(int fd);

  const Options options_;
  const int listen_fd_;
  const std::string address_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> scrapes_{0};
  std::thread thread_;
};

// The endpoint `config` asks of a daemon whose gRPC server was asked to
// listen on `listen` (host:port as configured) and bound `bound`: null when
// metrics.port_offset is 0; else on the same host at the configured port
// plus metrics.port_offset, or an ephemeral port when the configured port
// is 0 (tests, local clusters). Its body is the Prometheus text
// (rpc/prometheus_text.h) of `status`, whose metrics_address it sets; with
// security.tls it takes the reader token as its bearer token and only a
// loopback host (the endpoint itself is plain HTTP). `status` must outlive
// the server.
absl::StatusOr<std::unique_ptr<MetricsHttpServer>> StartMetrics(
    const Config& config, const std::string& listen, const std::string& bound,
    StatusService* status);

}  // namespace downpour

#endif  // DOWNPOUR_RPC_METRICS_HTTP_H_
