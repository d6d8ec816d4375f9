// gRPC adapter for the Predictor service (proto/serve.proto): forwards each
// call to a ModelServer and converts its Status.
#ifndef DOWNPOUR_SERVE_PREDICTOR_SERVICE_H_
#define DOWNPOUR_SERVE_PREDICTOR_SERVICE_H_

#include "proto/serve.grpc.pb.h"
#include "serve/model_server.h"

namespace downpour::serve {

// Thread-safe. Does not own the server. Handlers run on gRPC's threads and
// never block: a prediction is a few hash lookups per key.
class PredictorService final : public proto::Predictor::CallbackService {
 public:
  // REQUIRES: `server` outlives the service.
  explicit PredictorService(ModelServer* server) : server_(server) {}

  grpc::ServerUnaryReactor* Predict(grpc::CallbackServerContext* context,
                                    const proto::PredictRequest* request,
                                    proto::PredictResponse* response) override;
  grpc::ServerUnaryReactor* ServeStatus(
      grpc::CallbackServerContext* context,
      const proto::ServeStatusRequest* request,
      proto::ServeStatusResponse* response) override;

  // Logs the summary lines of refusal bursts whose interval ended (refused
  // requests are logged throttled, common/log_throttle.h). Thread-safe.
  static void FlushRefusalLog();

 private:
  ModelServer* const server_;
};

}  // namespace downpour::serve

#endif  // DOWNPOUR_SERVE_PREDICTOR_SERVICE_H_
