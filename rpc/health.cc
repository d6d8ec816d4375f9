// Readiness and liveness over gRPC's default health service.
#include "rpc/health.h"

#include "grpcpp/health_check_service_interface.h"

namespace downpour {

void SetReady(grpc::Server* server, bool ready) {
  if (server == nullptr) return;
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  if (health == nullptr) return;
  // Both are ignored once Shutdown() below has run.
  health->SetServingStatus(kLivenessService, true);
  health->SetServingStatus("", ready);
}

void SetShuttingDown(grpc::Server* server) {
  if (server == nullptr) return;
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  // Every name NOT_SERVING, and later changes ignored (gRPC's own
  // Server::Shutdown does the same, but only once it stops accepting).
  if (health != nullptr) health->Shutdown();
}

}  // namespace downpour
