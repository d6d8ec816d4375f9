// TcpLink: blocking sockets, TCP_NODELAY, default kernel buffer sizes (as
// gRPC's own sockets get).
#include "bench/tcp_link.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace downpour::bench {
namespace {

struct Header {
  int64_t length;
  int64_t last;  // 1 on the last message of a transfer: acknowledge it
};

absl::Status Errno(const char* what) {
  return absl::InternalError(absl::StrCat("tcp ", what, ": ", strerror(errno)));
}

// Reads exactly n bytes; false on EOF or error.
bool ReadFull(int fd, void* data, size_t n) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t got = read(fd, p, n);
    if (got <= 0) {
      if (got < 0 && errno == EINTR) continue;
      return false;
    }
    p += got;
    n -= got;
  }
  return true;
}

bool WriteFull(int fd, struct iovec* iov, int count) {
  while (count > 0) {
    ssize_t sent = writev(fd, iov, count);
    if (sent < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    while (count > 0 && static_cast<size_t>(sent) >= iov->iov_len) {
      sent -= iov->iov_len;
      ++iov;
      --count;
    }
    if (count > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + sent;
      iov->iov_len -= sent;
    }
  }
  return true;
}

void NoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpLink>> TcpLink::Open() {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) return Errno("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    absl::Status status = Errno("listen");
    close(listener);
    return status;
  }
  const int send_fd = socket(AF_INET, SOCK_STREAM, 0);
  if (send_fd < 0 ||
      connect(send_fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    absl::Status status = Errno("connect");
    if (send_fd >= 0) close(send_fd);
    close(listener);
    return status;
  }
  const int recv_fd = accept(listener, nullptr, nullptr);
  close(listener);
  if (recv_fd < 0) {
    absl::Status status = Errno("accept");
    close(send_fd);
    return status;
  }
  NoDelay(send_fd);
  NoDelay(recv_fd);
  return std::unique_ptr<TcpLink>(new TcpLink(send_fd, recv_fd));
}

TcpLink::TcpLink(int send_fd, int recv_fd)
    : send_fd_(send_fd), recv_fd_(recv_fd) {
  receiver_ = std::thread([this] { Receive(); });
}

TcpLink::~TcpLink() {
  shutdown(send_fd_, SHUT_RDWR);  // the receiver sees EOF and returns
  receiver_.join();
  close(send_fd_);
  close(recv_fd_);
}

void TcpLink::Receive() {
  std::vector<char> buffer;
  Header header;
  while (ReadFull(recv_fd_, &header, sizeof(header))) {
    if (buffer.size() < static_cast<size_t>(header.length)) {
      buffer.resize(header.length);
    }
    if (!ReadFull(recv_fd_, buffer.data(), header.length)) return;
    if (header.last) {
      const char ack = 1;
      if (write(recv_fd_, &ack, 1) != 1) return;
    }
  }
}

absl::StatusOr<double> TcpLink::Transfer(int64_t total_bytes,
                                         int64_t message_bytes) {
  if (payload_.size() < static_cast<size_t>(message_bytes)) {
    payload_.assign(message_bytes, 'x');
  }
  const auto start = std::chrono::steady_clock::now();
  for (int64_t sent = 0; sent < total_bytes;) {
    Header header;
    header.length = std::min(message_bytes, total_bytes - sent);
    sent += header.length;
    header.last = sent == total_bytes ? 1 : 0;
    struct iovec iov[2] = {
        {&header, sizeof(header)},
        {payload_.data(), static_cast<size_t>(header.length)}};
    if (!WriteFull(send_fd_, iov, 2)) return Errno("send");
  }
  char ack;
  if (!ReadFull(send_fd_, &ack, 1)) return Errno("ack");
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace downpour::bench
