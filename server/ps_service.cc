// Each handler: call the shard, convert the status, finish.
#include "server/ps_service.h"

#include "common/grpc_status.h"
#include "common/logging.h"

namespace downpour::server {
namespace {

grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* context,
                                 const absl::Status& status, const char* op) {
  if (!status.ok() && !absl::IsUnavailable(status) &&
      !absl::IsFailedPrecondition(status)) {
    // Bad requests are the client's problem, but an operator wants to see them.
    SPDLOG_LOGGER_WARN(Log("rpc"), "{} from {} rejected: {}", op,
                       context->peer(), std::string(status.message()));
  }
  auto* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* PsService::Pull(grpc::CallbackServerContext* context,
                                          const proto::PullRequest* request,
                                          proto::PullResponse* response) {
  return Finish(context, shard_->Pull(*request, response), "pull");
}

grpc::ServerUnaryReactor* PsService::Push(grpc::CallbackServerContext* context,
                                          const proto::PushRequest* request,
                                          proto::PushResponse* response) {
  return Finish(context, shard_->Push(*request, response), "push");
}

grpc::ServerUnaryReactor* PsService::Checksums(
    grpc::CallbackServerContext* context, const proto::ChecksumRequest*,
    proto::ChecksumResponse* response) {
  *response = shard_->Checksums();
  return Finish(context, absl::OkStatus(), "checksums");
}

}  // namespace downpour::server
