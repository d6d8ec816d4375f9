// The non-blocking /metrics connection (see metrics_connection.h).
#include "rpc/metrics_connection.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "common/logging.h"

namespace downpour {

MetricsConnection::MetricsConnection(int fd, SSL_CTX* tls,
                                     Clock::time_point now)
    : fd_(fd), tls_(tls), deadline_(now + kIoTimeout) {
  if (tls_ == nullptr) state_ = State::kReading;
}

MetricsConnection::~MetricsConnection() {
  SSL_free(ssl_);
  close(fd_);
}

MetricsConnection::Step MetricsConnection::Advance(Clock::time_point now) {
  if (state_ == State::kHandshake) {
    const Step step = Handshake(now);
    if (state_ != State::kReading) return step;
  }
  if (state_ == State::kReading) return ReadRequest();
  if (state_ == State::kAnswering) return Step::kRequestReady;
  if (state_ == State::kWriting) return WriteAnswer(now);
  return Step::kClosed;
}

void MetricsConnection::SetAnswer(std::string answer, Clock::time_point now) {
  answer_ = std::move(answer);
  sent_ = 0;
  state_ = State::kWriting;
  deadline_ = now + kIoTimeout;
}

int MetricsConnection::progress() const {
  if (tls_ == nullptr) return request_.empty() ? 0 : 1;
  if (state_ != State::kHandshake) return 3;
  if (ssl_ == nullptr) return 0;
  if (BIO_number_written(SSL_get_wbio(ssl_)) > 0) return 2;
  return BIO_number_read(SSL_get_rbio(ssl_)) > 0 ? 1 : 0;
}

MetricsConnection::Step MetricsConnection::MakeSession() {
  char first;
  const ssize_t n = recv(fd_, &first, 1, MSG_PEEK);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    return Step::kWantRead;
  }
  if (n <= 0 || (ssl_ = SSL_new(tls_)) == nullptr) return Close();
  SSL_set_fd(ssl_, fd_);
  return Step::kWantWrite;
}

MetricsConnection::Step MetricsConnection::Handshake(Clock::time_point now) {
  if (ssl_ == nullptr) {
    const Step step = MakeSession();
    if (ssl_ == nullptr) return step;
  }
  ERR_clear_error();
  const int result = SSL_accept(ssl_);
  if (result <= 0) {
    const Step step = TlsWait(result);
    if (step == Step::kClosed) {
      char text[256] = "no detail from OpenSSL";
      if (const unsigned long error = ERR_peek_last_error()) {
        ERR_error_string_n(error, text, sizeof(text));
      }
      SPDLOG_LOGGER_DEBUG(Log(Logger::kRpc),
                          "metrics: TLS handshake failed: {}", text);
    }
    return step;
  }
  // The request head gets a deadline of its own, as the handshake had.
  state_ = State::kReading;
  deadline_ = now + kIoTimeout;
  return Step::kWantRead;
}

MetricsConnection::Step MetricsConnection::ReadRequest() {
  char buffer[2048];
  for (;;) {
    if (request_.find("\r\n\r\n") != std::string::npos ||
        request_.size() > kMaxRequestBytes) {
      state_ = State::kAnswering;
      return Step::kRequestReady;
    }
    ssize_t n;
    if (ssl_ != nullptr) {
      ERR_clear_error();
      n = SSL_read(ssl_, buffer, sizeof(buffer));
      if (n <= 0) return TlsWait(static_cast<int>(n));
    } else {
      n = recv(fd_, buffer, sizeof(buffer), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return Step::kWantRead;
      }
      if (n <= 0) return Close();  // the peer left or failed
    }
    request_.append(buffer, static_cast<size_t>(n));
  }
}

MetricsConnection::Step MetricsConnection::WriteAnswer(Clock::time_point now) {
  while (sent_ < answer_.size()) {
    const char* next = answer_.data() + sent_;
    const size_t left = answer_.size() - sent_;
    ssize_t n;
    if (ssl_ != nullptr) {
      ERR_clear_error();
      // The same arguments again after a would-block, as OpenSSL asks.
      n = SSL_write(ssl_, next,
                    static_cast<int>(std::min<size_t>(left, 1 << 20)));
      if (n <= 0) return TlsWait(static_cast<int>(n));
    } else {
      n = send(fd_, next, left, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return Step::kWantWrite;
      }
      if (n <= 0) return Close();
    }
    sent_ += static_cast<size_t>(n);
    deadline_ = now + kIoTimeout;
  }
  written_ = true;
  // close_notify, when the session is sound, without waiting for the
  // peer's: the answer is complete either way (Content-Length).
  if (ssl_ != nullptr && !broken_) {
    ERR_clear_error();
    SSL_shutdown(ssl_);
  }
  return Close();
}

MetricsConnection::Step MetricsConnection::TlsWait(int result) {
  const int error = SSL_get_error(ssl_, result);
  if (error == SSL_ERROR_WANT_READ) return Step::kWantRead;
  if (error == SSL_ERROR_WANT_WRITE) return Step::kWantWrite;
  // After SSL_ERROR_SSL or _SYSCALL no close_notify may be sent.
  broken_ = error != SSL_ERROR_ZERO_RETURN;
  return Close();
}

MetricsConnection::Step MetricsConnection::Close() {
  state_ = State::kClosed;
  return Step::kClosed;
}

}  // namespace downpour
