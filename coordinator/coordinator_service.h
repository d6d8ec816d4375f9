// gRPC adapter for the Coordinator service: decodes, calls ClusterState,
// encodes.
#ifndef DOWNPOUR_COORDINATOR_COORDINATOR_SERVICE_H_
#define DOWNPOUR_COORDINATOR_COORDINATOR_SERVICE_H_

#include <optional>

#include "common/model_spec.h"
#include "coordinator/cluster_state.h"
#include "coordinator/metrics_history.h"
#include "proto/coordinator.grpc.pb.h"

namespace downpour::coordinator {

// Thread-safe (ClusterState and MetricsHistory are). Owns neither. GetHistory
// is Unavailable without a history, DescribeModel without a model.
class CoordinatorService final : public proto::Coordinator::CallbackService {
 public:
  // Logs the summary lines of refusal bursts whose interval ended (refused
  // requests are logged throttled, common/log_throttle.h); the coordinator
  // calls it periodically. Thread-safe.
  static void FlushRefusalLog();

  explicit CoordinatorService(ClusterState* state,
                              const MetricsHistory* history = nullptr,
                              const ModelSpec* model = nullptr);

  grpc::ServerUnaryReactor* RegisterServer(
      grpc::CallbackServerContext* context,
      const proto::RegisterServerRequest* request,
      proto::RegisterServerResponse* response) override;
  grpc::ServerUnaryReactor* RegisterWorker(
      grpc::CallbackServerContext* context,
      const proto::RegisterWorkerRequest* request,
      proto::RegisterWorkerResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(
      grpc::CallbackServerContext* context,
      const proto::HeartbeatRequest* request,
      proto::HeartbeatResponse* response) override;
  grpc::ServerUnaryReactor* GetPlacement(
      grpc::CallbackServerContext* context,
      const proto::GetPlacementRequest* request,
      proto::GetPlacementResponse* response) override;
  grpc::ServerUnaryReactor* ClusterStatus(
      grpc::CallbackServerContext* context,
      const proto::ClusterStatusRequest* request,
      proto::ClusterStatusResponse* response) override;
  grpc::ServerUnaryReactor* GetHistory(
      grpc::CallbackServerContext* context,
      const proto::GetHistoryRequest* request,
      proto::GetHistoryResponse* response) override;
  grpc::ServerUnaryReactor* DescribeModel(
      grpc::CallbackServerContext* context,
      const proto::DescribeModelRequest* request,
      proto::DescribeModelResponse* response) override;
  // Admin only under security tokens (rpc/security.cc Authorize).
  grpc::ServerUnaryReactor* MoveBuckets(
      grpc::CallbackServerContext* context,
      const proto::MoveBucketsRequest* request,
      proto::MoveBucketsResponse* response) override;
  // Admin only under security tokens (psctl drain-worker).
  grpc::ServerUnaryReactor* DrainWorker(
      grpc::CallbackServerContext* context,
      const proto::DrainWorkerRequest* request,
      proto::DrainWorkerResponse* response) override;

 private:
  ClusterState* const state_;
  const MetricsHistory* const history_;
  std::optional<proto::DescribeModelResponse>
      model_;  // constant after construction
};

// The model's blocks as DescribeModel reports them.
proto::DescribeModelResponse ModelDescription(const ModelSpec& model);

}  // namespace downpour::coordinator

#endif  // DOWNPOUR_COORDINATOR_COORDINATOR_SERVICE_H_
