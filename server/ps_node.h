// The ps daemon as a handle: a ps serving shard `index`, or a standby that
// waits and takes over a dead shard when the coordinator says so.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<PsNode> node, PsNode::Start(options));
//   WritePortFile(node->port());
//   WaitForShutdownSignal(node->ended());
//   absl::Status final_checkpoint = node->Stop();
//
// Start binds the gRPC server (ParameterServer, Status, health), registers with
// the coordinator and starts the node's threads: the heartbeat (MemberAgent), a
// placement thread that applies placement changes and take-overs off the
// heartbeat thread, and a checkpointer every checkpoint.interval_s. A node that
// learns that another daemon serves its shard now stands down at once, without
// writing a checkpoint, and ends (ended() is notified).
#ifndef DOWNPOUR_SERVER_PS_NODE_H_
#define DOWNPOUR_SERVER_PS_NODE_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "common/config.h"

namespace downpour::server {

// True for a PsNode::Start error that starting the same ps again cannot
// cure: its shard could not be built from the config and the checkpoints on
// disk (a bad model or optimizer section; every checkpoint generation corrupt;
// a checkpoint of another format, shard, model or optimizer). Not for errors
// the disk or system may recover from (UNAVAILABLE, RESOURCE_EXHAUSTED, ...),
// nor for the address, the coordinator or the placement. ps_server exits 2
// (kExitConfig) on it.
bool IsSetupError(const absl::Status& status);

// Thread-safe.
class PsNode {
 public:
  struct Options {
    // The validated cluster config.
    Config config;
    // The ps index, or the standby index when `standby`.
    int index = 0;
    // Serve no shard until the coordinator hands over a dead one.
    bool standby = false;
    // Join a running job as a new shard (psctl add-ps): `index` is ignored;
    // the coordinator gives the next shard index at registration.
    bool join = false;
    // A spare standby for a running job (psctl add-standby), not a
    // cluster.standby_ps entry: the coordinator gives it a spare slot and
    // names it the backup of a shard without one. Implies `standby`.
    bool spare = false;
    // host:port to bind (port 0 = ephemeral), e.g. config.cluster.ps[index].
    std::string listen;
    // The --advertise value ("" = the bound address; see AdvertisedAddress).
    std::string advertise;
    // Times the checkpoint interval; nullptr = Clock::Real(). For tests.
    Clock* clock = nullptr;
  };

  // Reads the shard's checkpoint (a ps; a corrupt one fails here, before
  // serving, marked IsSetupError), binds options.listen, registers with the
  // coordinator (bounded by rpc.connect_timeout_s) and, when the coordinator
  // already has a placement, serves it before returning. Errors name the cause:
  // the checkpoint, the address in use, the unreachable coordinator, a
  // placement that does not fit the model. Nothing is left running on error.
  static absl::StatusOr<std::unique_ptr<PsNode>> Start(Options options);

  PsNode(const PsNode&) = delete;
  PsNode& operator=(const PsNode&) = delete;
  // Stop()s if not stopped.
  ~PsNode();

  // The bound port and host:port.
  int port() const;
  std::string address() const;
  // "ps 1" or "standby 0"; changes when a standby takes a shard over.
  std::string name() const;

  // Notified when the node ends on its own: another daemon serves its shard.
  absl::Notification* ended();
  // Whether a ps started with `options` joined a running job instead of
  // being one of the config's, which the launcher starts and stops: --join,
  // a spare (--spare), or a joined shard restarted with its index beyond
  // cluster.ps.
  static bool JoinedTheJob(const Options& options);
  // A ps that JoinedTheJob whose coordinator said the job is over and has
  // not answered for kOrphanedAfterTimeouts x heartbeat.timeout_s since: no
  // worker trains and nobody will stop it, so it should end as on SIGTERM
  // (server/main.cc).
  bool Orphaned() const;
  static constexpr int kOrphanedAfterTimeouts = 3;
  // Blocks until ended() is notified or Stop() is called.
  void Wait();

  // Stops the checkpointer, shuts the gRPC server down, stops the heartbeat
  // (after one final heartbeat) and the placement thread, then writes the final
  // checkpoint (none when replaced, or before any placement) and returns its
  // status. Idempotent: later calls return the same status.
  absl::Status Stop();

 private:
  class Impl;
  explicit PsNode(std::unique_ptr<Impl> impl);

  const std::unique_ptr<Impl> impl_;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_PS_NODE_H_
