// The coordinator's core: membership, heartbeats, placement and job state.
//
// Plain C++ (no gRPC): the Coordinator service adapter forwards each RPC here, and
// tests drive it directly with an injected clock.
#ifndef DOWNPOUR_COORDINATOR_CLUSTER_STATE_H_
#define DOWNPOUR_COORDINATOR_CLUSTER_STATE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/config.h"
#include "common/model_spec.h"
#include "proto/coordinator.pb.h"

namespace downpour::coordinator {

// Thread-safe.
class ClusterState {
 public:
  struct Options {
    Config config;
    // Source of time; tests advance a fake one instead of sleeping.
    std::function<absl::Time()> clock = [] { return absl::Now(); };
  };

  static absl::StatusOr<std::unique_ptr<ClusterState>> Create(Options options);

  ClusterState(const ClusterState&) = delete;
  ClusterState& operator=(const ClusterState&) = delete;

  // InvalidArgument for an index outside the config's ps / workers lists.
  // A ps that re-registers from a new address bumps the placement epoch.
  absl::StatusOr<proto::RegisterServerResponse> RegisterServer(
      const proto::RegisterServerRequest& request) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<proto::RegisterWorkerResponse> RegisterWorker(
      const proto::RegisterWorkerRequest& request) ABSL_LOCKS_EXCLUDED(mu_);

  // FailedPrecondition for a member that never registered (it should register
  // first: the coordinator may have restarted); InvalidArgument for a bad role.
  absl::StatusOr<proto::HeartbeatResponse> Heartbeat(
      const proto::HeartbeatRequest& request) ABSL_LOCKS_EXCLUDED(mu_);

  proto::GetPlacementResponse Placement() const ABSL_LOCKS_EXCLUDED(mu_);
  proto::ClusterStatusResponse Status() const ABSL_LOCKS_EXCLUDED(mu_);

  // Marks members silent for longer than heartbeat.timeout_s dead (and logs it).
  // Returns how many changed state. Called periodically by the daemon.
  int CheckLiveness() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Member {
    std::string role;
    int index = 0;
    std::string address;
    bool registered = false;
    bool alive = false;
    absl::Time last_heartbeat = absl::InfinitePast();
    proto::MemberReport report;
  };

  ClusterState(Options options, ModelSpec spec);

  Member* Find(const std::string& role, int index)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybePlace() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeStop() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  proto::Partition PartitionOf(int worker) const;

  // Constant after construction.
  const Options options_;
  const ModelSpec spec_;
  const absl::Time start_;

  // State below is protected by mu_.
  mutable absl::Mutex mu_;
  std::vector<Member> ps_ ABSL_GUARDED_BY(mu_);
  std::vector<Member> workers_ ABSL_GUARDED_BY(mu_);
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::vector<uint32_t>> placement_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::string stop_reason_ ABSL_GUARDED_BY(mu_);
};

}  // namespace downpour::coordinator

#endif  // DOWNPOUR_COORDINATOR_CLUSTER_STATE_H_
