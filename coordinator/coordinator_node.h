// The coordinator daemon as an object: ClusterState, its metrics history, the
// Coordinator and Status services behind one gRPC server, and the threads that
// check liveness and sample the history. coordinator/main.cc is a thin shell
// around it; tests start it in-process.
//
//   CoordinatorNode::Options options;
//   options.config = config;
//   options.listen = "127.0.0.1:0";
//   ASSIGN_OR_RETURN(std::unique_ptr<CoordinatorNode> node,
//                    CoordinatorNode::Start(std::move(options)));
//   CoordinatorClient client(node->address(), config.rpc, "test");
//   ...
//   node->Stop();
#ifndef DOWNPOUR_COORDINATOR_COORDINATOR_NODE_H_
#define DOWNPOUR_COORDINATOR_COORDINATOR_NODE_H_

#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/counters.h"
#include "common/model_spec.h"
#include "coordinator/cluster_state.h"
#include "coordinator/coordinator_service.h"
#include "coordinator/metrics_history.h"
#include "rpc/metrics_http.h"
#include "rpc/server_util.h"
#include "rpc/status_service.h"

namespace downpour::coordinator {

// Thread-safe.
class CoordinatorNode {
 public:
  struct Options {
    // The cluster file (heartbeat.*, coordinator.*, model, cluster lists).
    Config config;
    // host:port to serve on; port 0 = an ephemeral one (see port()). Default:
    // config.cluster.coordinator.
    std::string listen;
    // Time for heartbeats, liveness checks and timeouts; nullptr =
    // Clock::Real(). Tests pass a FakeClock and advance it. Not owned.
    Clock* clock = nullptr;
  };

  // Loads the saved state (coordinator.state_dir), binds options.listen, serves
  // and starts checking liveness every heartbeat.interval_s / 2. Errors: those
  // of ClusterState::Create (the model or the state file: never Unavailable),
  // or Unavailable when options.listen cannot be bound.
  static absl::StatusOr<std::unique_ptr<CoordinatorNode>> Start(
      Options options);

  CoordinatorNode(const CoordinatorNode&) = delete;
  CoordinatorNode& operator=(const CoordinatorNode&) = delete;
  ~CoordinatorNode();  // Stop()s if not stopped

  int port() const { return server_.port; }  // the bound port
  const std::string& address() const { return server_.address; }  // host:port

  // Notified when the node ends on its own; a coordinator never does (it
  // serves until stopped), so this is for WaitForShutdownSignal's sake.
  absl::Notification* ended() { return &ended_; }
  // Blocks until ended() is notified or Stop() is called.
  void Wait();
  // Stops the liveness and history threads, then the server (2 s grace for
  // calls in flight). Idempotent; always OK (the coordinator keeps its state
  // on disk as it changes, nothing is left to save).
  absl::Status Stop();

  // The core, for in-process callers and tests.
  ClusterState* state() { return state_.get(); }

 private:
  CoordinatorNode(Options options, std::unique_ptr<ClusterState> state);
  void LivenessLoop();

  // Constant after Start.
  const Options options_;
  Clock* const clock_;
  const std::unique_ptr<ClusterState> state_;
  const std::optional<ModelSpec> model_;
  MetricsHistory history_;
  CoordinatorService service_;
  Counters counters_;
  StatusService status_;
  StartedServer server_;
  std::unique_ptr<MetricsHttpServer> metrics_;  // null: metrics off
  std::unique_ptr<HistorySampler> sampler_;
  std::thread liveness_;

  absl::Notification ended_;     // never notified: see ended()
  absl::Notification stopping_;  // Stop was called
  absl::Mutex stop_mu_;          // serializes Stop
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;
};

}  // namespace downpour::coordinator

#endif  // DOWNPOUR_COORDINATOR_COORDINATOR_NODE_H_
