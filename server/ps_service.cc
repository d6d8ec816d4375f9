// Each handler: call the shard, convert the status, finish.
#include "server/ps_service.h"

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/grpc_status.h"
#include "common/logging.h"

namespace downpour::server {
namespace {

grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* context,
                                 const absl::Status& status, const char* op) {
  if (!status.ok() && !absl::IsUnavailable(status) &&
      !absl::IsFailedPrecondition(status)) {
    // Bad requests are the client's problem, but an operator wants to see them.
    SPDLOG_LOGGER_WARN(Log(Logger::kRpc), "{} from {} rejected: {}", op,
                       context->peer(), std::string(status.message()));
  }
  auto* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

const absl::Status& NoShard() {
  static const absl::Status* status = new absl::Status(absl::UnavailableError(
      "this ps serves no shard (a standby, or replaced): re-read the placement"));
  return *status;
}

}  // namespace

grpc::ServerUnaryReactor* PsService::Pull(grpc::CallbackServerContext* context,
                                          const proto::PullRequest* request,
                                          proto::PullResponse* response) {
  Shard* shard = shard_.load();
  return Finish(context, shard ? shard->Pull(*request, response) : NoShard(), "pull");
}

grpc::ServerUnaryReactor* PsService::Push(grpc::CallbackServerContext* context,
                                          const proto::PushRequest* request,
                                          proto::PushResponse* response) {
  Shard* shard = shard_.load();
  // A held push (ssp/bsp) gives up shortly before the caller's deadline.
  const absl::Time deadline = absl::FromChrono(context->deadline());
  return Finish(context,
                shard ? shard->Push(*request, response, deadline) : NoShard(),
                "push");
}

grpc::ServerUnaryReactor* PsService::Checksums(
    grpc::CallbackServerContext* context, const proto::ChecksumRequest*,
    proto::ChecksumResponse* response) {
  Shard* shard = shard_.load();
  if (shard != nullptr) *response = shard->Checksums();
  return Finish(context, shard ? absl::OkStatus() : NoShard(), "checksums");
}

}  // namespace downpour::server
