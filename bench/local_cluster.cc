// LocalCluster: the wiring of coordinator/main.cc and server/main.cc, in one
// process, without heartbeats, checkpoints or signal handling.
#include "bench/local_cluster.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/ps_service.h"

namespace downpour::bench {

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(
    Config config, ServiceFactory factory) {
  if (factory == nullptr) {
    factory = [](server::Shard* shard) -> std::unique_ptr<grpc::Service> {
      return std::make_unique<server::PsService>(shard);
    };
  }
  config.checkpoint.dir = "";
  config.coordinator.state_dir = "";  // a benchmark keeps nothing between runs
  config.checkpoint.interval_s = 0;
  std::unique_ptr<LocalCluster> c(new LocalCluster);
  const int num_shards = static_cast<int>(config.cluster.ps.size());
  for (int i = 0; i < num_shards; ++i) {
    c->counters_.push_back(std::make_unique<Counters>());
    ASSIGN_OR_RETURN(
        std::unique_ptr<server::Shard> shard,
        server::Shard::Create(config, i, c->counters_.back().get()));
    c->ps_services_.push_back(factory(shard.get()));
    c->shards_.push_back(std::move(shard));
    ASSIGN_OR_RETURN(StartedServer started,
                     StartServer("127.0.0.1:0", {c->ps_services_.back().get()},
                                 absl::StrCat("ps ", i)));
    config.cluster.ps[i] = started.address;
    c->ps_servers_.push_back(std::move(started));
  }
  config.cluster.coordinator = "127.0.0.1:0";
  ASSIGN_OR_RETURN(c->state_, coordinator::ClusterState::Create({config}));
  c->coordinator_service_ =
      std::make_unique<coordinator::CoordinatorService>(c->state_.get());
  ASSIGN_OR_RETURN(c->coordinator_server_,
                   StartServer("127.0.0.1:0", {c->coordinator_service_.get()},
                               "coordinator"));
  config.cluster.coordinator = c->coordinator_server_.address;
  c->client_ = std::make_unique<membership::CoordinatorClient>(
      config.cluster.coordinator, config.rpc, "bench");
  for (int i = 0; i < num_shards; ++i) {
    RETURN_IF_ERROR(
        c->client_->RegisterServer(i, config.cluster.ps[i]).status());
  }
  ASSIGN_OR_RETURN(proto::GetPlacementResponse placement,
                   c->client_->WaitForPlacement(1));
  for (const proto::ShardInfo& info : placement.shards()) {
    const std::vector<uint32_t> ids(info.block_ids().begin(),
                                    info.block_ids().end());
    RETURN_IF_ERROR(c->shards_[info.index()]->Assign(placement.epoch(), ids));
  }
  c->config_ = std::move(config);
  return c;
}

LocalCluster::~LocalCluster() {
  client_.reset();
  if (coordinator_server_.server != nullptr) {
    coordinator_server_.server->Shutdown(DeadlineIn(1));
  }
  for (StartedServer& s : ps_servers_) s.server->Shutdown(DeadlineIn(1));
}

}  // namespace downpour::bench
