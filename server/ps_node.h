// A ps daemon's life with the coordinator: a ps serving shard `index`, or a
// standby that waits and takes over a dead shard when the coordinator says so.
// Owns the Shard, feeds the PsService, applies placements, writes periodic
// checkpoints, and stands down (without writing a checkpoint) when it learns
// that another daemon serves its shard now.
#ifndef DOWNPOUR_SERVER_PS_NODE_H_
#define DOWNPOUR_SERVER_PS_NODE_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/config.h"
#include "common/counters.h"
#include "coordinator/coordinator_client.h"
#include "proto/coordinator.pb.h"
#include "server/ps_service.h"
#include "server/shard.h"

namespace downpour::server {

// Thread-safe.
class PsNode {
 public:
  struct Options {
    Config config;
    int index = 0;         // ps index, or standby index when `standby`
    bool standby = false;
    Counters* counters = nullptr;
  };

  // A ps reads its checkpoint now (a corrupt one fails here, before serving).
  static absl::StatusOr<std::unique_ptr<PsNode>> Create(Options options);

  PsService* service() { return &service_; }
  // "ps 1" or "standby 0"; changes when a standby takes a shard over.
  std::string name() const ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t epoch() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t num_blocks() const ABSL_LOCKS_EXCLUDED(mu_);

  // Registers with the coordinator (bounded wait) from `address`, and serves the
  // placement if there is one. Used again after a coordinator restart.
  absl::Status Register(coordinator::CoordinatorClient* client,
                        const std::string& address) ABSL_LOCKS_EXCLUDED(mu_);

  // Acts on a heartbeat reply: newer placement, take-over order, replaced.
  // Returns the (role, index) to heartbeat as from now on.
  std::pair<std::string, int> OnHeartbeat(coordinator::CoordinatorClient* client,
                                          const proto::HeartbeatResponse& response)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Notified when this node was replaced and should exit.
  absl::Notification* replaced() { return &replaced_; }

  // Writes a checkpoint when serving a placed shard and not replaced.
  absl::Status Checkpoint() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  explicit PsNode(Options options) : options_(std::move(options)) {}

  absl::Status ApplyPlacement(coordinator::CoordinatorClient* client, uint64_t epoch)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status TakeOver(coordinator::CoordinatorClient* client, int shard_index,
                        uint64_t epoch) ABSL_LOCKS_EXCLUDED(mu_);

  const Options options_;
  PsService service_;
  absl::Notification replaced_;

  mutable absl::Mutex mu_;
  std::unique_ptr<Shard> shard_ ABSL_GUARDED_BY(mu_);
  int shard_index_ ABSL_GUARDED_BY(mu_) = -1;  // the shard served, -1: none yet
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_PS_NODE_H_
