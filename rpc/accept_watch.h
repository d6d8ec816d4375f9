// Watches that a daemon's gRPC server still accepts connections. gRPC (1.51)
// stops accepting for good once accept() has failed with EMFILE (the process
// ran out of file descriptors, e.g. under a flood of idle connections), in
// plaintext and TLS alike: the daemon keeps heartbeating over its existing
// connections, so nobody replaces it, yet no new client can reach it, and it
// does not recover when descriptors free up again. The accept guard
// (rpc/accept_guard.h) normally keeps that from happening; this watch is the
// backstop for when it does anyway. The watch checks every
// `period` that a fresh connection to the server's own address is accepted
// (CheckAccepts); after `failures` checks in a row find it not accepting while
// descriptors are free, it says why once (ERROR log) and calls `on_stuck`.
// The daemons then shut down the normal way (health NOT_SERVING at once,
// final checkpoint) and exit 1, so the launcher or systemd restarts them and
// the coordinator moves a ps's shard to its backup meanwhile.
//
// A daemon merely short of descriptors is not "stuck": a check that cannot
// open its own socket, or finds fewer than kFdHeadroom descriptors free,
// proves nothing about the listener and neither counts nor resets the
// failures (a stranger holding descriptors for a while must not turn into a
// restart); only descriptors exhausted for `pressure_checks` checks in a row
// (a minute by default) count as stuck too.
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
    int failures = 4;          // in a row: ~20-40 s of not accepting
    int pressure_checks = 12;  // in a row without free descriptors: ~1 min
  };

  // `who` names the daemon in the log ("ps 0").
  AcceptWatch(std::string who, std::string address,
              std::function<void()> on_stuck);
  AcceptWatch(std::string who, std::string address,
              std::function<void()> on_stuck, Options options);
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

// Descriptors a check wants free before its verdict counts: the probe needs
// one, gRPC's channel a few more.
constexpr int kFdHeadroom = 8;

// What one check found.
enum class AcceptCheck {
  kAccepted,       // the server took a fresh connection and reacted to it
  kNotAccepted,    // a fresh connection got no reaction: the listener is gone
  kNoDescriptors,  // this process is (nearly) out of descriptors: no verdict
};

struct AcceptCheckResult {
  AcceptCheck outcome = AcceptCheck::kAccepted;
  std::string detail;  // what was seen, for the log ("" when accepted cleanly)
};

// One check of `address` (a wildcard host is reached at 127.0.0.1) within
// about `deadline`: a grpc.health.v1 Check on a fresh connection with this
// process's own transport (TLS, its certificate, when installed). Answered:
// kAccepted. Otherwise a raw TCP probe decides: it connects, sends a few
// bytes no server takes as a valid start (not a TLS ClientHello, not the
// HTTP/2 preface) and waits for any reaction: bytes, an end of stream or a
// reset mean the server accepted the connection (the gRPC call failed for
// another reason, e.g. a certificate not valid for this address: kAccepted
// with that reason in `detail`); silence until the deadline (the kernel
// completed the TCP handshake but nobody accepted it) or a refused connect
// mean kNotAccepted. kNoDescriptors when the probe's own socket cannot be
// made (EMFILE/ENFILE) or fewer than kFdHeadroom descriptors are free.
AcceptCheckResult CheckAccepts(const std::string& address,
                               absl::Duration deadline);

}  // namespace downpour

#endif  // DOWNPOUR_RPC_ACCEPT_WATCH_H_
