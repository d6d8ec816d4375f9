// Builds the serving daemon's parts in order (model, server, reload thread)
// and tears them down in reverse.
#include "serve/serve_node.h"

#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/counters.h"
#include "common/logging.h"
#include "rpc/health.h"
#include "rpc/server_util.h"
#include "rpc/status_service.h"
#include "serve/predictor_service.h"

namespace downpour::serve {

class ServeNode::Impl {
 public:
  explicit Impl(std::unique_ptr<ModelServer> model)
      : model_(std::move(model)),
        predictor_(model_.get()),
        status_("serve", 0, &counters_) {}

  absl::Status Serve(const std::string& listen) {
    absl::StatusOr<StartedServer> server =
        StartServer(listen, {&predictor_, &status_}, "serve");
    if (!server.ok()) return server.status();
    server_ = *std::move(server);
    status_.set_address(server_.address);
    grpc::Server* grpc_server = server_.server.get();
    // Readiness follows the first snapshot; the reload thread starts only
    // now, so no load can slip between this line and its callback.
    SetReady(grpc_server, model_->current() != nullptr);
    model_->StartReloading([grpc_server] { SetReady(grpc_server, true); },
                           &PredictorService::FlushRefusalLog);
    const std::shared_ptr<const Snapshot> snapshot = model_->current();
    SPDLOG_LOGGER_INFO(Log(Logger::kServe), "serving {} on {}: {}",
                       model_->options().model_path, server_.address,
                       snapshot != nullptr
                           ? "snapshot 1 loaded (SERVING)"
                           : "waiting for the file (NOT_SERVING)");
    return absl::OkStatus();
  }

  void Stop() ABSL_LOCKS_EXCLUDED(stop_mu_) {
    absl::MutexLock lock(&stop_mu_);
    if (stopped_) return;
    stopped_ = true;
    SetShuttingDown(server_.server.get());
    model_->StopReloading();
    if (server_.server != nullptr) server_.server->Shutdown(DeadlineIn(2));
    PredictorService::FlushRefusalLog();
  }

  const StartedServer& server() const { return server_; }
  ModelServer& model() { return *model_; }

 private:
  // Constant after Serve.
  const std::unique_ptr<ModelServer> model_;
  Counters counters_;
  PredictorService predictor_;
  StatusService status_;
  StartedServer server_;

  absl::Mutex stop_mu_;
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;
};

absl::StatusOr<std::unique_ptr<ServeNode>> ServeNode::Start(Options options) {
  absl::StatusOr<std::unique_ptr<ModelServer>> model =
      ModelServer::Create(std::move(options.server));
  if (!model.ok()) return model.status();
  auto impl = std::make_unique<Impl>(*std::move(model));
  if (absl::Status served = impl->Serve(options.listen); !served.ok()) {
    return served;
  }
  return std::unique_ptr<ServeNode>(new ServeNode(std::move(impl)));
}

ServeNode::ServeNode(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ServeNode::~ServeNode() { Stop(); }

int ServeNode::port() const { return impl_->server().port; }

std::string ServeNode::address() const { return impl_->server().address; }

ModelServer& ServeNode::model_server() { return impl_->model(); }

void ServeNode::Stop() { impl_->Stop(); }

}  // namespace downpour::serve
