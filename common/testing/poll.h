// Waiting in tests on state a client can observe, with a deadline, instead of
// sleeping a guessed time; and a loopback port where nothing listens.
//
//   ASSERT_TRUE(WaitUntil([&] { return Status().step() >= 20; },
//   absl::Seconds(20)));
#ifndef DOWNPOUR_COMMON_TESTING_POLL_H_
#define DOWNPOUR_COMMON_TESTING_POLL_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace downpour::testing {

// Calls `done` every `period` until it returns true (returns true) or
// `timeout` has passed (returns false).
inline bool WaitUntil(const std::function<bool()>& done, absl::Duration timeout,
                      absl::Duration period = absl::Milliseconds(5)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(period);
  }
  return false;
}

// A 127.0.0.1 port that was bound a moment ago and closed again: nothing
// listens there, so a connection to it is refused.
inline int ClosedLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

}  // namespace downpour::testing

#endif  // DOWNPOUR_COMMON_TESTING_POLL_H_
