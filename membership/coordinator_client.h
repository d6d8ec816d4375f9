// Client side of the Coordinator service, used by ps, workers, psctl and the
// launcher: the one implementation of each Coordinator call. Every call has the
// deadline rpc.deadline_s (psctl sets it from --timeout_s); the waiting calls
// are bounded by rpc.connect_timeout_s and log what they wait for.
//
//   RpcSection rpc;
//   rpc.deadline_s = 3;
//   CoordinatorClient client("127.0.0.1:7000", rpc, "psctl");
//   absl::StatusOr<proto::ClusterStatusResponse> status =
//   client.ClusterStatus();
#ifndef DOWNPOUR_MEMBERSHIP_COORDINATOR_CLIENT_H_
#define DOWNPOUR_MEMBERSHIP_COORDINATOR_CLIENT_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/config.h"
#include "proto/coordinator.grpc.pb.h"

namespace downpour::membership {

// Thread-safe.
class CoordinatorClient {
 public:
  CoordinatorClient(const CoordinatorClient&) = delete;
  CoordinatorClient& operator=(const CoordinatorClient&) = delete;

  // `who` names the caller in messages ("ps 1", "worker 0").
  // `fresh_connection`: a connection of its own rather than one shared with
  // other clients of the same address in this process (MakeChannel), so
  // that no earlier failed attempt's backoff delays its first call.
  CoordinatorClient(std::string address, const RpcSection& rpc, std::string who,
                    bool fresh_connection = false);

  const std::string& address() const { return address_; }

  // Retry until the coordinator answers (bounded by connect_timeout_s).
  // applied_total: a ps's restored updates (RegisterServerRequest).
  // Both carry the member key of an earlier registration through this client
  // (proving it is the same process) and keep the key the reply gives.
  absl::StatusOr<proto::RegisterServerResponse> RegisterServer(
      int index, const std::string& address, bool standby = false,
      uint64_t applied_total = 0);
  // Any registration of a ps or standby (a spare: RegisterServerRequest
  // .spare); member_key is filled in here.
  absl::StatusOr<proto::RegisterServerResponse> RegisterServer(
      proto::RegisterServerRequest request);
  // join: ps_worker --join (index ignored; the reply names the slot given).
  absl::StatusOr<proto::RegisterWorkerResponse> RegisterWorker(
      int index, const std::string& address, bool join = false);
  // Waits until the placement has an epoch >= min_epoch (> 0).
  absl::StatusOr<proto::GetPlacementResponse> WaitForPlacement(
      uint64_t min_epoch, const std::function<bool()>& should_stop = nullptr);

  // Single attempts with the RPC deadline. Errors carry gRPC's code and a
  // message that names the coordinator: "heartbeat to coordinator at A: ...",
  // "cannot read the placement from the coordinator at A: ...",
  // "cannot reach the coordinator at A: ..." (ClusterStatus),
  // "cannot read the history from the coordinator at A: ...",
  // "cannot read the model from the coordinator at A: ...".
  // A heartbeat without a member_key carries this client's.
  absl::StatusOr<proto::HeartbeatResponse> Heartbeat(
      proto::HeartbeatRequest request);
  absl::StatusOr<proto::GetPlacementResponse> GetPlacement();
  absl::StatusOr<proto::ClusterStatusResponse> ClusterStatus();
  // The metrics samples taken after `since_seconds` of coordinator uptime.
  absl::StatusOr<proto::GetHistoryResponse> History(double since_seconds);
  absl::StatusOr<proto::DescribeModelResponse> DescribeModel();
  // Starts live bucket moves (psctl move-buckets, add-ps, drain-ps):
  // "cannot start the bucket moves at the coordinator at A: ...".
  absl::StatusOr<proto::MoveBucketsResponse> MoveBuckets(
      const proto::MoveBucketsRequest& request);
  // Drains a worker (psctl drain-worker): "cannot drain the worker at the
  // coordinator at A: ...".
  absl::StatusOr<proto::DrainWorkerResponse> DrainWorker(
      const proto::DrainWorkerRequest& request);

  // The secret the last registration through this client got ("" before).
  std::string member_key() const ABSL_LOCKS_EXCLUDED(key_mu_);
  void set_member_key(const std::string& key) ABSL_LOCKS_EXCLUDED(key_mu_);

 private:
  const std::string address_;
  const RpcSection rpc_;
  const std::string who_;
  std::unique_ptr<proto::Coordinator::Stub> stub_;
  mutable absl::Mutex key_mu_;
  std::string member_key_ ABSL_GUARDED_BY(key_mu_);
};

}  // namespace downpour::membership

#endif  // DOWNPOUR_MEMBERSHIP_COORDINATOR_CLIENT_H_
