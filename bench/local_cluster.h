// An in-process Downpour cluster for benchmarks: a coordinator (ClusterState +
// CoordinatorService) and one Shard per config.cluster.ps entry, each behind a
// gRPC server on its own ephemeral 127.0.0.1 port (real TCP loopback sockets),
// registered and placed through the coordinator as the daemons do.
//
//   absl::StatusOr<std::unique_ptr<LocalCluster>> cluster =
//       LocalCluster::Start(config);
//   worker::GrpcPsClient ps(spec, (*cluster)->coordinator_client(), ...);
#ifndef DOWNPOUR_BENCH_LOCAL_CLUSTER_H_
#define DOWNPOUR_BENCH_LOCAL_CLUSTER_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config.h"
#include "common/counters.h"
#include "coordinator/cluster_state.h"
#include "coordinator/coordinator_service.h"
#include "grpcpp/grpcpp.h"
#include "membership/coordinator_client.h"
#include "rpc/server_util.h"
#include "server/shard.h"

namespace downpour::bench {

// Owns every server; Shutdown happens in the destructor. Not thread-safe to
// create or destroy; the servers themselves serve from gRPC's threads.
class LocalCluster {
 public:
  // Builds the ParameterServer service for a shard; the default is PsService.
  using ServiceFactory =
      std::function<std::unique_ptr<grpc::Service>(server::Shard*)>;

  // Starts len(config.cluster.ps) shards (their listen addresses are replaced
  // by 127.0.0.1:0) and the coordinator, and waits until every shard serves
  // the placement. Checkpoints are switched off.
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(
      Config config, ServiceFactory factory = nullptr);

  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;
  ~LocalCluster();

  // A client of the coordinator, for GrpcPsClient.
  membership::CoordinatorClient* coordinator_client() { return client_.get(); }
  const Config& config() const { return config_; }
  // Shard i's ParameterServer service (a server::PsService by default).
  grpc::Service* ps_service(int i) { return ps_services_[i].get(); }
  // Shard i itself (in-process callers: moves, direct pushes).
  server::Shard* shard(int i) { return shards_[i].get(); }
  // The address shard i serves on.
  const std::string& ps_address(int i) const { return ps_servers_[i].address; }

 private:
  LocalCluster() = default;

  Config config_;
  std::vector<std::unique_ptr<Counters>> counters_;
  std::vector<std::unique_ptr<server::Shard>> shards_;
  std::vector<std::unique_ptr<grpc::Service>> ps_services_;
  std::vector<StartedServer> ps_servers_;
  std::unique_ptr<coordinator::ClusterState> state_;
  std::unique_ptr<coordinator::CoordinatorService> coordinator_service_;
  StartedServer coordinator_server_;
  std::unique_ptr<membership::CoordinatorClient> client_;
};

}  // namespace downpour::bench

#endif  // DOWNPOUR_BENCH_LOCAL_CLUSTER_H_
