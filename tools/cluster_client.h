// The calls psctl makes to a running cluster: the coordinator (status, history,
// placement, model) and each member's own endpoints (Status, grpc.health.v1, a
// ps's block versions). Every call is a single attempt bounded by `timeout_s`.
//
//   ClusterClient client("127.0.0.1:7000", /*timeout_s=*/3);
//   absl::StatusOr<proto::ClusterStatusResponse> status =
//   client.ClusterStatus();
#ifndef DOWNPOUR_TOOLS_CLUSTER_CLIENT_H_
#define DOWNPOUR_TOOLS_CLUSTER_CLIENT_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "proto/coordinator.pb.h"
#include "proto/ps.pb.h"
#include "proto/status.pb.h"

namespace downpour::tools {

// Thread-safe. Channels are kept per address, so `psctl watch` reuses them.
class ClusterClient {
 public:
  ClusterClient(std::string coordinator, double timeout_s);

  ClusterClient(const ClusterClient&) = delete;
  ClusterClient& operator=(const ClusterClient&) = delete;

  const std::string& coordinator() const { return coordinator_; }

  // Coordinator calls. Errors carry gRPC's code and a message that starts
  // "cannot reach the coordinator at HOST:PORT" when it did not answer.
  absl::StatusOr<proto::ClusterStatusResponse> ClusterStatus();
  absl::StatusOr<proto::GetHistoryResponse> History(double since_seconds);
  absl::StatusOr<proto::DescribeModelResponse> Model();
  absl::StatusOr<proto::GetPlacementResponse> Placement();

  // A member's Status service.
  absl::StatusOr<proto::GetStatusResponse> MemberStatus(
      const std::string& address);
  // Every block a ps holds with its version (its Checksums RPC).
  absl::StatusOr<proto::ChecksumResponse> BlockVersions(
      const std::string& address);
  // grpc.health.v1.Health/Check of `service` ("" = the whole server) at
  // `address`: "SERVING", "NOT_SERVING", ... or the error.
  absl::StatusOr<std::string> Health(const std::string& address,
                                     const std::string& service = "");

  // MemberStatus of every registered member of `status`, in parallel; entry i
  // belongs to status.members(i) (Unavailable for a member never registered).
  std::vector<absl::StatusOr<proto::GetStatusResponse>> AllMemberStatus(
      const proto::ClusterStatusResponse& status);

 private:
  std::shared_ptr<grpc::Channel> Channel(const std::string& address)
      ABSL_LOCKS_EXCLUDED(mu_);

  const std::string coordinator_;
  const double timeout_s_;

  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace downpour::tools

#endif  // DOWNPOUR_TOOLS_CLUSTER_CLIENT_H_
