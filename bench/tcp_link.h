// A plain loopback TCP sender/receiver pair: the baseline the ps figures are
// divided by. The receiver runs on its own thread and reads into a reused
// buffer, as a server reading requests would; no framing beyond a 16-byte
// header per message.
//
//   absl::StatusOr<std::unique_ptr<TcpLink>> link = TcpLink::Open();
//   absl::StatusOr<double> seconds = (*link)->Transfer(16 << 20, 4 << 20);
#ifndef DOWNPOUR_BENCH_TCP_LINK_H_
#define DOWNPOUR_BENCH_TCP_LINK_H_

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"

namespace downpour::bench {

// Transfer() from one thread at a time.
class TcpLink {
 public:
  // Listens on 127.0.0.1:0, connects to it and starts the receiver thread.
  static absl::StatusOr<std::unique_ptr<TcpLink>> Open();

  TcpLink(const TcpLink&) = delete;
  TcpLink& operator=(const TcpLink&) = delete;
  ~TcpLink();  // closes the sockets and joins the receiver

  // Sends `total_bytes` in messages of at most `message_bytes` and waits for
  // the receiver's one-byte acknowledgement of the last one. Returns the
  // seconds from the first send to the acknowledgement.
  absl::StatusOr<double> Transfer(int64_t total_bytes, int64_t message_bytes);

 private:
  TcpLink(int send_fd, int recv_fd);
  void Receive();

  const int send_fd_;
  const int recv_fd_;
  std::vector<char> payload_;  // sender's buffer, grown on demand
  std::thread receiver_;
};

}  // namespace downpour::bench

#endif  // DOWNPOUR_BENCH_TCP_LINK_H_
