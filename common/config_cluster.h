// The `cluster` section of the config: where the coordinator, every ps shard,
// the standbys and every worker listen, and how many copies of a shard run.
#ifndef DOWNPOUR_COMMON_CONFIG_CLUSTER_H_
#define DOWNPOUR_COMMON_CONFIG_CLUSTER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace downpour {

struct ClusterSection {
  // host:port of the coordinator. Default "127.0.0.1:7000".
  std::string coordinator = "127.0.0.1:7000";
  // One host:port per ps shard; a port of 0 binds an ephemeral port and the ps
  // registers the address it got. At least one. Default: one at 127.0.0.1:7001.
  std::vector<std::string> ps = {"127.0.0.1:7001"};
  // One host:port per worker (its Status endpoint). At least one.
  // Default: one at 127.0.0.1:7101.
  std::vector<std::string> workers = {"127.0.0.1:7101"};
  // Spare ps addresses: when a shard dies, a standby that has registered takes
  // over its index and loads the shard's latest checkpoint. Default: none (a
  // dead shard waits for a ps restarted with the same index).
  std::vector<std::string> standby_ps;
  // Copies of each shard: 2 = the shard's primary streams every update to a
  // standby (its backup) and acknowledges a push only once the backup has it,
  // so a ps failure loses no acknowledged update; 3 = two backups, a push
  // acknowledged once both hold it, so two simultaneous failures on a shard
  // lose none; 1 = none (a failed shard comes back from its last
  // checkpoint). Backups are standby_ps daemons, replication - 1 per shard:
  // shards without a free standby run with fewer (the coordinator says so);
  // 3 needs 2 standby_ps entries per ps. 1 to 3. Default 2.
  int replication = 2;
  // Worker slots in all: cluster.workers, plus slots for workers that join
  // the running job with `ps_worker --join` (not listed above). The training
  // split is cut into this many data parts, so that a joining worker can be
  // handed parts: worker i starts with parts i, i + W, i + 2W, ... below
  // max_workers (W = the cluster.workers count). The ps keep per-worker state
  // for each slot. 0 (default) = the cluster.workers count: no worker joins.
  int max_workers = 0;
};

// The worker slots: max(cluster.workers count, cluster.max_workers).
int WorkerSlots(const ClusterSection& cluster);

// One daemon's address in the cluster section.
struct ClusterAddress {
  std::string key;      // the config key naming it: "cluster.ps[1]"
  std::string role;     // "coordinator", "ps", "standby" or "worker"
  int index = 0;        // its place in its list (0 for the coordinator)
  std::string address;  // host:port as written (port 0 = ephemeral)
};

// Every address the cluster section lists, in the order coordinator, ps,
// standby_ps, workers: the one enumeration for checks across addresses (the
// config's, the launcher's).
std::vector<ClusterAddress> ClusterAddresses(const ClusterSection& cluster);

// Internal to the config loader (common/config.cc).
namespace config_internal {
struct ConfigField;
// The section's keys bound to `cluster`, in docs/CONFIG.md's order.
std::vector<ConfigField> ClusterKeys(ClusterSection* cluster);
// Two daemons cannot listen on one fixed address: InvalidArgument naming both
// keys. Port 0 is ephemeral, so free; standbys are not checked.
absl::Status CheckDistinctAddresses(const ClusterSection& cluster);
// cluster.replication 3 with fewer than two standby_ps entries per ps:
// InvalidArgument naming how many to add.
absl::Status CheckReplication(const ClusterSection& cluster);
// InvalidArgument when cluster.max_workers is set below the workers listed.
absl::Status CheckMaxWorkers(const ClusterSection& cluster);
}  // namespace config_internal

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_CONFIG_CLUSTER_H_
