// A whole Downpour cluster in the test's own process: coordinator, ps shards,
// standbys and workers as node handles on 127.0.0.1 ephemeral ports.
// Use it where the behaviour lives in the protocol (training, placement,
// heartbeats, a ps stopped in order, a standby taking over); use
// tests/daemon_harness (real processes) for kills, signals, exit codes, flags,
// port files and logs, i.e. wherever the behaviour crosses process boundaries.
//
//   absl::StatusOr<std::unique_ptr<InProcessCluster>> cluster =
//       InProcessCluster::Start(config);
//   ASSERT_THAT(cluster, IsOk());
//   EXPECT_THAT((*cluster)->WaitForWorkersToEnd(absl::Seconds(60)), IsOk());
//   EXPECT_THAT((*cluster)->worker(0).Stop(), IsOk());  // training result
//   absl::StatusOr<proto::ClusterStatusResponse> status =
//       (*cluster)->ClusterStatus();
//   EXPECT_THAT((*cluster)->Stop(), IsOk());
#ifndef DOWNPOUR_TESTS_IN_PROCESS_CLUSTER_H_
#define DOWNPOUR_TESTS_IN_PROCESS_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/config.h"
#include "coordinator/coordinator_node.h"
#include "membership/coordinator_client.h"
#include "proto/coordinator.pb.h"
#include "server/ps_node.h"
#include "worker/worker_node.h"

namespace downpour::testing {

// Thread-compatible: one test thread drives it; the nodes themselves are
// thread-safe.
class InProcessCluster {
 public:
  // Starts the coordinator, then every ps of config.cluster.ps in index order
  // (a ps returns before placement until the last one registers; the last one
  // waits for it), then every standby of config.cluster.standby_ps, then every
  // worker of config.cluster.workers (each waits for the placement and starts
  // training). Every node listens on 127.0.0.1:0 whatever the config says;
  // config.cluster.coordinator is set to the coordinator's bound address.
  // Errors: the first node's Start error, prefixed with the node's name
  // ("ps 1: ..."); what was started is stopped again.
  static absl::StatusOr<std::unique_ptr<InProcessCluster>> Start(Config config);

  InProcessCluster(const InProcessCluster&) = delete;
  InProcessCluster& operator=(const InProcessCluster&) = delete;
  ~InProcessCluster();  // Stop()s

  // The config the nodes were started with (bound coordinator address).
  const Config& config() const { return config_; }

  coordinator::CoordinatorNode& coordinator() { return *coordinator_; }
  // REQUIRES: 0 <= i < the size of the config's list.
  server::PsNode& ps(int i) { return *ps_[i]; }
  server::PsNode& standby(int i) { return *standbys_[i]; }
  worker::WorkerNode& worker(int i) { return *workers_[i]; }
  int num_ps() const { return static_cast<int>(ps_.size()); }
  int num_standbys() const { return static_cast<int>(standbys_.size()); }
  int num_workers() const { return static_cast<int>(workers_.size()); }

  // The coordinator's view (one attempt, rpc.deadline_s).
  absl::StatusOr<proto::ClusterStatusResponse> ClusterStatus();

  // Waits until every worker's ended() is notified (training done, told to
  // stop, or failed), for at most `deadline` in all. DeadlineExceeded names
  // the workers still training.
  absl::Status WaitForWorkersToEnd(absl::Duration deadline);

  // Stops ps i in order (it writes its final checkpoint) and returns that
  // Stop's status. The coordinator learns of it only when its heartbeats stop
  // for heartbeat.timeout_s. The node stays, stopped (Stop is idempotent).
  absl::Status StopPs(int i);

  // Stops in the launcher's order: workers, then ps and standbys, then the
  // coordinator. Returns the first error (a worker's training result or a ps's
  // final checkpoint), prefixed with the node's name. Idempotent.
  absl::Status Stop();

 private:
  InProcessCluster() = default;

  Config config_;
  std::unique_ptr<coordinator::CoordinatorNode> coordinator_;
  std::vector<std::unique_ptr<server::PsNode>> ps_;
  std::vector<std::unique_ptr<server::PsNode>> standbys_;
  std::vector<std::unique_ptr<worker::WorkerNode>> workers_;
  std::unique_ptr<membership::CoordinatorClient> client_;
};

}  // namespace downpour::testing

#endif  // DOWNPOUR_TESTS_IN_PROCESS_CLUSTER_H_
