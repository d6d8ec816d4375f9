// The calls psctl makes to each member's own endpoints (Status, grpc.health.v1,
// a ps's block versions). Calls to the coordinator's Coordinator service go
// through membership::CoordinatorClient. Every call is a single attempt bounded
// by `timeout_s`.
//
//   MemberProbe probe(/*timeout_s=*/3);
//   absl::StatusOr<std::string> health = probe.Health("127.0.0.1:7001");
#ifndef DOWNPOUR_TOOLS_MEMBER_PROBE_H_
#define DOWNPOUR_TOOLS_MEMBER_PROBE_H_

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
class MemberProbe {
 public:
  explicit MemberProbe(double timeout_s);

  MemberProbe(const MemberProbe&) = delete;
  MemberProbe& operator=(const MemberProbe&) = delete;

  // A member's Status service.
  absl::StatusOr<proto::GetStatusResponse> MemberStatus(
      const std::string& address);
  // Every block a ps holds with its version (its Checksums RPC).
  absl::StatusOr<proto::ChecksumResponse> BlockVersions(
      const std::string& address);
  // The values of `block_ids` a ps holds, pulled as a tool (worker id -1)
  // in float32 under `epoch`.
  absl::StatusOr<proto::PullResponse> Pull(
      const std::string& address, uint64_t epoch,
      const std::vector<uint32_t>& block_ids);
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

  const double timeout_s_;

  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace downpour::tools

#endif  // DOWNPOUR_TOOLS_MEMBER_PROBE_H_
