// Each handler is one call into ClusterState.
#include "coordinator/coordinator_service.h"

#include "common/grpc_status.h"

namespace downpour::coordinator {
namespace {

template <typename Response>
grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* context,
                                absl::StatusOr<Response> result,
                                Response* response) {
  auto* reactor = context->DefaultReactor();
  if (result.ok()) *response = *std::move(result);
  reactor->Finish(ToGrpcStatus(result.status()));
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* CoordinatorService::RegisterServer(
    grpc::CallbackServerContext* context,
    const proto::RegisterServerRequest* request,
    proto::RegisterServerResponse* response) {
  return Reply(context, state_->RegisterServer(*request), response);
}

grpc::ServerUnaryReactor* CoordinatorService::RegisterWorker(
    grpc::CallbackServerContext* context,
    const proto::RegisterWorkerRequest* request,
    proto::RegisterWorkerResponse* response) {
  return Reply(context, state_->RegisterWorker(*request), response);
}

grpc::ServerUnaryReactor* CoordinatorService::Heartbeat(
    grpc::CallbackServerContext* context, const proto::HeartbeatRequest* request,
    proto::HeartbeatResponse* response) {
  return Reply(context, state_->Heartbeat(*request), response);
}

grpc::ServerUnaryReactor* CoordinatorService::GetPlacement(
    grpc::CallbackServerContext* context, const proto::GetPlacementRequest*,
    proto::GetPlacementResponse* response) {
  return Reply(context, absl::StatusOr<proto::GetPlacementResponse>(
                            state_->Placement()),
               response);
}

grpc::ServerUnaryReactor* CoordinatorService::ClusterStatus(
    grpc::CallbackServerContext* context, const proto::ClusterStatusRequest*,
    proto::ClusterStatusResponse* response) {
  return Reply(context, absl::StatusOr<proto::ClusterStatusResponse>(
                            state_->Status()),
               response);
}

}  // namespace downpour::coordinator
