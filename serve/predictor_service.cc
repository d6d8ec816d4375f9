// Each handler: call the ModelServer, convert the status, finish.
#include "serve/predictor_service.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/log_throttle.h"
#include "common/logging.h"
#include "rpc/grpc_status.h"

namespace downpour::serve {
namespace {

// A client can send bad requests as fast as the network allows: the first
// few per 10 s are logged in full, the rest counted.
LogThrottle& RefusalLog() {
  static LogThrottle* throttle = new LogThrottle(LogThrottle::Options());
  return *throttle;
}

}  // namespace

void PredictorService::FlushRefusalLog() {
  for (const std::string& line : RefusalLog().Flush()) {
    SPDLOG_LOGGER_WARN(Log(Logger::kServe), "{}", line);
  }
}

grpc::ServerUnaryReactor* PredictorService::Predict(
    grpc::CallbackServerContext* context, const proto::PredictRequest* request,
    proto::PredictResponse* response) {
  const absl::Status status = server_->Predict(*request, response);
  if (absl::IsInvalidArgument(status)) {
    for (const std::string& line :
         RefusalLog().Record("serve: predict requests refused",
                             absl::StrCat("predict from ", context->peer(),
                                          " refused: ", status.message()))) {
      SPDLOG_LOGGER_WARN(Log(Logger::kServe), "{}", line);
    }
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerUnaryReactor* PredictorService::ServeStatus(
    grpc::CallbackServerContext* context,
    const proto::ServeStatusRequest* /*request*/,
    proto::ServeStatusResponse* response) {
  server_->Status(response);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace downpour::serve
