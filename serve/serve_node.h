// The serving daemon as a handle: a ModelServer behind a gRPC server
// (Predictor, Status, grpc.health.v1), reloading its file in the background.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<ServeNode> node,
//   ServeNode::Start(options)); WritePortFile(node->port());
//   WaitForShutdownSignal();
//   node->Stop();
//
// Health: readiness ("") is NOT_SERVING until a snapshot is loaded, then
// SERVING (a snapshot once loaded keeps serving, whatever later files hold);
// liveness (kLivenessService) SERVING from start; everything NOT_SERVING
// once Stop begins.
#ifndef DOWNPOUR_SERVE_SERVE_NODE_H_
#define DOWNPOUR_SERVE_SERVE_NODE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "serve/model_server.h"

namespace downpour::serve {

// Thread-safe.
class ServeNode {
 public:
  struct Options {
    // What to serve and how (model_path required).
    ModelServer::Options server;
    // host:port to bind (port 0 = ephemeral).
    std::string listen = "127.0.0.1:7300";
  };

  // Loads the model (ModelServer::Create: a missing file is waited for, an
  // invalid one is its error), binds `listen` (Unavailable when in use) and
  // starts the reload thread. Nothing is left running on error.
  static absl::StatusOr<std::unique_ptr<ServeNode>> Start(Options options);

  ServeNode(const ServeNode&) = delete;
  ServeNode& operator=(const ServeNode&) = delete;
  // Stop()s if not stopped.
  ~ServeNode();

  // The bound port and host:port.
  int port() const;
  std::string address() const;
  ModelServer& model_server();

  // Readiness NOT_SERVING, stops the reload thread, then shuts the gRPC
  // server down (calls in flight get 2 s). Idempotent.
  void Stop();

 private:
  class Impl;
  explicit ServeNode(std::unique_ptr<Impl> impl);

  const std::unique_ptr<Impl> impl_;
};

}  // namespace downpour::serve

#endif  // DOWNPOUR_SERVE_SERVE_NODE_H_
