// Each handler is one call into ClusterState, MetricsHistory or the model.
#include "coordinator/coordinator_service.h"

#include "absl/strings/str_cat.h"
#include "common/log_throttle.h"
#include "common/logging.h"
#include "rpc/grpc_status.h"
#include "rpc/security.h"

namespace downpour::coordinator {
namespace {

// Refused requests are logged here, throttled: a client can send them as
// fast as the network allows (the first few of each kind per 10 s in full,
// the rest counted).
LogThrottle& RefusalLog() {
  static LogThrottle* throttle = new LogThrottle(LogThrottle::Options());
  return *throttle;
}

void LogRefusal(grpc::CallbackServerContext* context, const char* op,
                const absl::Status& status) {
  // UNAVAILABLE and FAILED_PRECONDITION are the protocol's retry signals.
  if (status.ok() || absl::IsUnavailable(status) ||
      absl::IsFailedPrecondition(status)) {
    return;
  }
  RefusalLog().Log(Log(Logger::kCoordinator), spdlog::level::warn,
                   absl::StrCat("coordinator: ", op, " refused (",
                                absl::StatusCodeToString(status.code()), ")"),
                   absl::StrCat(op, " from ", context->peer(),
                                " refused: ", status.message()));
}

template <typename Response>
grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* context,
                                absl::StatusOr<Response> result,
                                Response* response, const char* op = "") {
  auto* reactor = context->DefaultReactor();
  if (result.ok()) *response = *std::move(result);
  if (*op != '\0') LogRefusal(context, op, result.status());
  reactor->Finish(ToGrpcStatus(result.status()));
  return reactor;
}

}  // namespace

void CoordinatorService::FlushRefusalLog() {
  for (const std::string& line : RefusalLog().Flush()) {
    SPDLOG_LOGGER_WARN(Log(Logger::kCoordinator), "{}", line);
  }
}

proto::DescribeModelResponse ModelDescription(const ModelSpec& model) {
  proto::DescribeModelResponse response;
  response.set_num_params(model.num_params());
  response.set_type(ModelTypeName(model.type()));
  for (const TensorSpec& tensor : model.tensors()) {
    proto::TensorInfo* info = response.add_tensors();
    info->set_name(tensor.name);
    for (int64_t d : tensor.shape) info->add_shape(d);
  }
  for (const BlockSpec& block : model.blocks()) {
    proto::BlockInfo* info = response.add_blocks();
    info->set_id(block.id);
    info->set_tensor(model.tensors()[block.tensor].name);
    info->set_floats(block.length);
  }
  return response;
}

CoordinatorService::CoordinatorService(ClusterState* state,
                                       const MetricsHistory* history,
                                       const ModelSpec* model)
    : state_(state), history_(history) {
  if (model != nullptr) model_ = ModelDescription(*model);
}

grpc::ServerUnaryReactor* CoordinatorService::RegisterServer(
    grpc::CallbackServerContext* context,
    const proto::RegisterServerRequest* request,
    proto::RegisterServerResponse* response) {
  // With mutual TLS a ps place is taken with that ps's certificate or a
  // standby's (a standby that took the shard over re-registers for it), a
  // standby slot with that standby's, and a spare (a ps or standby whose
  // shard is served elsewhere) with any ps or standby certificate.
  std::vector<std::string> members;
  if (request->spare() || request->join()) {
    members = {"ps-*", "standby-*"};
  } else if (request->standby()) {
    members = {absl::StrCat("standby-", request->index())};
  } else {
    members = {absl::StrCat("ps-", request->index()), "standby-*"};
  }
  absl::Status member = CheckCallerIsMember(
      context->auth_context().get(), members,
      absl::StrCat("register: ", request->standby() ? "standby " : "ps ",
                   request->index(), "'s place is taken"));
  if (!member.ok()) {
    return Reply(context, absl::StatusOr<proto::RegisterServerResponse>(member),
                 response, "RegisterServer");
  }
  return Reply(context, state_->RegisterServer(*request), response,
               "RegisterServer");
}

grpc::ServerUnaryReactor* CoordinatorService::RegisterWorker(
    grpc::CallbackServerContext* context,
    const proto::RegisterWorkerRequest* request,
    proto::RegisterWorkerResponse* response) {
  // With mutual TLS a worker slot is taken only with that slot's
  // certificate: a worker token alone does not let one worker take another's
  // place (or a free one) and speak for it.
  if (request->join() && TransportIsMutual()) {
    // Its slot is known only once it registers, and the ps take its pushes
    // only with that slot's certificate.
    return Reply(
        context,
        absl::StatusOr<proto::RegisterWorkerResponse>(
            absl::PermissionDeniedError(
                "register: ps_worker --join is not possible under mutual TLS: "
                "a worker pushes only with its own slot's certificate "
                "(downpour-worker-N), and a joining worker's slot is known "
                "only once it registers. List the worker in cluster.workers "
                "and start it with --index N and that certificate")),
        response, "RegisterWorker");
  }
  absl::Status member = CheckCallerIsMember(
      context->auth_context().get(),
      {absl::StrCat("worker-", request->index())},
      absl::StrCat("register: worker ", request->index(), "'s place is taken"));
  if (!member.ok()) {
    return Reply(context, absl::StatusOr<proto::RegisterWorkerResponse>(member),
                 response, "RegisterWorker");
  }
  return Reply(context, state_->RegisterWorker(*request), response,
               "RegisterWorker");
}

grpc::ServerUnaryReactor* CoordinatorService::Heartbeat(
    grpc::CallbackServerContext* context,
    const proto::HeartbeatRequest* request,
    proto::HeartbeatResponse* response) {
  return Reply(context, state_->Heartbeat(*request), response, "Heartbeat");
}

grpc::ServerUnaryReactor* CoordinatorService::GetPlacement(
    grpc::CallbackServerContext* context, const proto::GetPlacementRequest*,
    proto::GetPlacementResponse* response) {
  return Reply(context,
               absl::StatusOr<proto::GetPlacementResponse>(state_->Placement()),
               response);
}

grpc::ServerUnaryReactor* CoordinatorService::ClusterStatus(
    grpc::CallbackServerContext* context, const proto::ClusterStatusRequest*,
    proto::ClusterStatusResponse* response) {
  return Reply(context,
               absl::StatusOr<proto::ClusterStatusResponse>(state_->Status()),
               response);
}

grpc::ServerUnaryReactor* CoordinatorService::GetHistory(
    grpc::CallbackServerContext* context,
    const proto::GetHistoryRequest* request,
    proto::GetHistoryResponse* response) {
  if (history_ == nullptr) {
    return Reply<proto::GetHistoryResponse>(
        context, absl::UnavailableError("this coordinator keeps no history"),
        response);
  }
  const proto::ClusterStatusResponse now = state_->Status();
  return Reply(context,
               absl::StatusOr<proto::GetHistoryResponse>(
                   history_->Get(request->since_seconds(), &now)),
               response);
}

grpc::ServerUnaryReactor* CoordinatorService::DescribeModel(
    grpc::CallbackServerContext* context, const proto::DescribeModelRequest*,
    proto::DescribeModelResponse* response) {
  if (!model_.has_value()) {
    return Reply<proto::DescribeModelResponse>(
        context, absl::UnavailableError("this coordinator has no model"),
        response);
  }
  return Reply(context, absl::StatusOr<proto::DescribeModelResponse>(*model_),
               response);
}

grpc::ServerUnaryReactor* CoordinatorService::MoveBuckets(
    grpc::CallbackServerContext* context,
    const proto::MoveBucketsRequest* request,
    proto::MoveBucketsResponse* response) {
  return Reply(context, state_->MoveBuckets(*request), response, "MoveBuckets");
}

grpc::ServerUnaryReactor* CoordinatorService::DrainWorker(
    grpc::CallbackServerContext* context,
    const proto::DrainWorkerRequest* request,
    proto::DrainWorkerResponse* response) {
  return Reply(context, state_->DrainWorker(request->index()), response,
               "DrainWorker");
}

}  // namespace downpour::coordinator
