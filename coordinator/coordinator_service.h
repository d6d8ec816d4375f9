// gRPC adapter for the Coordinator service: decodes, calls ClusterState, encodes.
#ifndef DOWNPOUR_COORDINATOR_COORDINATOR_SERVICE_H_
#define DOWNPOUR_COORDINATOR_COORDINATOR_SERVICE_H_

#include "coordinator/cluster_state.h"
#include "proto/coordinator.grpc.pb.h"

namespace downpour::coordinator {

// Thread-safe (ClusterState is). Does not own the state.
class CoordinatorService final : public proto::Coordinator::CallbackService {
 public:
  explicit CoordinatorService(ClusterState* state) : state_(state) {}

  grpc::ServerUnaryReactor* RegisterServer(
      grpc::CallbackServerContext* context,
      const proto::RegisterServerRequest* request,
      proto::RegisterServerResponse* response) override;
  grpc::ServerUnaryReactor* RegisterWorker(
      grpc::CallbackServerContext* context,
      const proto::RegisterWorkerRequest* request,
      proto::RegisterWorkerResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
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

 private:
  ClusterState* const state_;
};

}  // namespace downpour::coordinator

#endif  // DOWNPOUR_COORDINATOR_COORDINATOR_SERVICE_H_
