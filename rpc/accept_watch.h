// Watches that a daemon's gRPC server still accepts connections. gRPC (1.51)
// stops accepting for good once accept() has failed with EMFILE (the process
// ran out of file descriptors, e.g. under a flood of idle connections): the
// daemon keeps heartbeating over its existing connections, so nobody replaces
// it, yet no new client can reach it. The watch connects to the server's own
// address over a fresh connection and asks grpc.health.v1 every `period`;
// after `failures` checks in a row fail, it says why once (ERROR log) and
// calls `on_stuck`. The daemons then shut down the normal way (final
// checkpoint) and exit 1, so the launcher or systemd restarts them and the
// coordinator moves a ps's shard to its backup meanwhile.
//
//   AcceptWatch watch(node->address(), [] { kill(getpid(), SIGTERM); });
//   ...
//   if (watch.stuck()) return kExitFailure;
#ifndef DOWNPOUR_RPC_ACCEPT_WATCH_H_
#define DOWNPOUR_RPC_ACCEPT_WATCH_H_

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace downpour {

class AcceptWatch {
 public:
  struct Options {
    absl::Duration period = absl::Seconds(5);
    absl::Duration deadline = absl::Seconds(5);  // per check
    int failures = 4;  // in a row: ~20-40 s of not accepting
  };

  // `who` names the daemon in the log ("ps 0").
  AcceptWatch(std::string who, std::string address, std::function<void()> on_stuck);
  AcceptWatch(std::string who, std::string address, std::function<void()> on_stuck,
              Options options);
  ~AcceptWatch();  // stops the checks

  AcceptWatch(const AcceptWatch&) = delete;
  AcceptWatch& operator=(const AcceptWatch&) = delete;

  // True once the server was found not accepting (on_stuck was called).
  bool stuck() const { return stuck_.load(); }

 private:
  void Loop();

  const std::string who_;
  const std::string address_;
  const std::function<void()> on_stuck_;
  const Options options_;
  std::atomic<bool> stuck_{false};
  absl::Notification stop_;
  std::thread thread_;
};

// One check: a fresh connection to `address` (a wildcard host is reached at
// 127.0.0.1) gets an answer to a health Check within `deadline`. Returns ""
// when the server answered anything (an error it sent proves it accepted the
// connection), else what went wrong.
std::string CheckAccepts(const std::string& address, absl::Duration deadline);

}  // namespace downpour

#endif  // DOWNPOUR_RPC_ACCEPT_WATCH_H_
