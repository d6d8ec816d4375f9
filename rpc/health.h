// What a daemon's grpc.health.v1 service says, on top of gRPC's default health
// service (rpc/server_util.h enables it; it answers SERVING from start).
//
//   ASSIGN_OR_RETURN(server_, StartServer(...));
//   SetReady(server_.server.get(), false);  // a ps until it holds its blocks
//   ...
//   SetReady(server_.server.get(), true);
//   ...
//   SetShuttingDown(server_.server.get());  // first thing in Stop()
//
// Two names are answered: "" (the whole server) is readiness: SERVING only
// while the daemon does its job (a ps once it is registered and holds its
// blocks); kLivenessService stays SERVING from start until shutdown begins,
// for probes that should restart a daemon only when it is wedged, not while
// it waits for the coordinator.
#ifndef DOWNPOUR_RPC_HEALTH_H_
#define DOWNPOUR_RPC_HEALTH_H_

#include "grpcpp/server.h"

namespace downpour {

// The health service name that reports liveness (see above).
inline constexpr char kLivenessService[] = "downpour.liveness";

// Readiness: "" SERVING when `ready`, NOT_SERVING otherwise;
// kLivenessService SERVING. No-op after SetShuttingDown or when `server` is
// null. Thread-safe.
void SetReady(grpc::Server* server, bool ready);

// Every name NOT_SERVING, for good (later SetReady calls are ignored): call
// it first when a daemon starts to shut down, before it stops accepting
// connections, so that load balancers and probes stop sending work.
// Thread-safe.
void SetShuttingDown(grpc::Server* server);

}  // namespace downpour

#endif  // DOWNPOUR_RPC_HEALTH_H_
