// One accepted /metrics connection (rpc/metrics_http.h), plain HTTP or TLS,
// on a non-blocking socket, driven step by step by the server's event loop:
// the TLS handshake, the request head (at most kMaxRequestBytes), then the
// answer. Advance() never blocks; it says what the connection waits for,
// and deadline() says when waiting has lasted too long (the handshake and
// the request head each within kIoTimeout, every write progressing within
// kIoTimeout). Not thread-safe: the loop's thread owns it.
#ifndef DOWNPOUR_RPC_METRICS_CONNECTION_H_
#define DOWNPOUR_RPC_METRICS_CONNECTION_H_

#include <openssl/ssl.h>

#include <chrono>
#include <cstddef>
#include <string>

namespace downpour {

class MetricsConnection {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxRequestBytes = 8 << 10;
  static constexpr std::chrono::milliseconds kIoTimeout{2000};

  enum class Step {
    kWantRead,      // wait until the socket is readable, then Advance
    kWantWrite,     // wait until the socket is writable, then Advance
    kRequestReady,  // request() is complete (or too large): SetAnswer
    kClosed,        // done or failed: destroy it
  };

  // Owns `fd` (non-blocking); serves TLS with `tls` (null: plain HTTP),
  // whose session it makes once the client's first bytes arrive (a silent
  // connection costs no OpenSSL state).
  MetricsConnection(int fd, SSL_CTX* tls, Clock::time_point now);
  ~MetricsConnection();  // frees its session, closes `fd`
  MetricsConnection(const MetricsConnection&) = delete;
  MetricsConnection& operator=(const MetricsConnection&) = delete;

  // Goes as far as the socket allows without blocking.
  Step Advance(Clock::time_point now);

  // The request head read so far: after kRequestReady it holds its blank
  // line ("\r\n\r\n"), or it grew past kMaxRequestBytes without one.
  const std::string& request() const { return request_; }
  // What to write back; then Advance writes it, closing after it (a
  // close_notify first under TLS).
  void SetAnswer(std::string answer, Clock::time_point now);
  // Whether the whole answer was written.
  bool answered() const { return state_ == State::kClosed && written_; }
  // How far it got before its request was complete: 0 nothing received, 1
  // some bytes, 2 the server answered its ClientHello (TLS), 3 its
  // handshake is done (TLS). ConnectionShare displaces the least first.
  int progress() const;
  // The time by which it must have progressed, else it is closed.
  Clock::time_point deadline() const { return deadline_; }
  int fd() const { return fd_; }

 private:
  enum class State { kHandshake, kReading, kAnswering, kWriting, kClosed };

  Step Handshake(Clock::time_point now);
  // Makes ssl_ once the client has sent something: kWantRead before that,
  // kClosed when it left or OpenSSL has no memory; else kWantWrite (go on).
  Step MakeSession();
  Step ReadRequest();
  Step WriteAnswer(Clock::time_point now);
  // For a failed or would-block call (`result` <= 0) of SSL_accept,
  // SSL_read or SSL_write: what to wait for, or kClosed (marking the
  // session broken).
  Step TlsWait(int result);
  Step Close();

  const int fd_;
  SSL_CTX* const tls_;
  SSL* ssl_ = nullptr;  // made by Handshake
  State state_ = State::kHandshake;
  Clock::time_point deadline_;
  std::string request_;
  std::string answer_;
  size_t sent_ = 0;
  bool broken_ = false;  // no close_notify may be sent
  bool written_ = false;
};

}  // namespace downpour

#endif  // DOWNPOUR_RPC_METRICS_CONNECTION_H_
