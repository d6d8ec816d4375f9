// ps_server: one shard of the parameter server.
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/daemon.h"
#include "common/logging.h"
#include "common/member_agent.h"
#include "common/server_util.h"
#include "common/status_service.h"
#include "coordinator/coordinator_client.h"
#include "server/ps_service.h"
#include "server/shard.h"

ABSL_FLAG(std::string, listen, "",
          "host:port to serve on (overrides cluster.ps[index]; port 0 = any)");

namespace {

using namespace downpour;

// Fetches the placement and serves this shard's part of it.
void ApplyPlacement(coordinator::CoordinatorClient* client, server::Shard* shard,
                    int index, uint64_t epoch) {
  absl::StatusOr<proto::GetPlacementResponse> placement =
      client->WaitForPlacement(epoch);
  if (!placement.ok()) {
    SPDLOG_LOGGER_WARN(Log("server"), "{}", std::string(placement.status().message()));
    return;
  }
  std::vector<uint32_t> ids;
  for (const proto::ShardInfo& info : placement->shards()) {
    if (info.index() == index) ids.assign(info.block_ids().begin(), info.block_ids().end());
  }
  absl::Status assigned = shard->Assign(placement->epoch(), ids);
  if (!assigned.ok()) {
    Die(absl::StrCat("ps ", index), std::string(assigned.message()), 1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  DaemonSetup setup = InitDaemon(
      argc, argv, "ps",
      "ps_server --config FILE --index N [--listen HOST:PORT]: serves one shard "
      "of the parameters, applies pushed gradients, writes checkpoints",
      /*has_index=*/true);
  const Config& config = setup.config;
  const int index = setup.index;
  const std::string who = absl::StrCat("ps ", index);
  Counters counters;
  auto shard = server::Shard::Create(config, index, &counters);
  if (!shard.ok()) Die(who, std::string(shard.status().message()), 1);

  server::PsService service(shard->get());
  StatusService status("ps", index, &counters, [&](proto::GetStatusResponse* r) {
    r->set_device("cpu");
    (*r->mutable_counters())["blocks"] = (*shard)->num_blocks();
    (*r->mutable_counters())["placement_epoch"] = (*shard)->epoch();
  });
  const std::string listen = absl::GetFlag(FLAGS_listen).empty()
                                 ? config.cluster.ps[index]
                                 : absl::GetFlag(FLAGS_listen);
  auto server = StartServer(listen, {&service, &status}, who);
  if (!server.ok()) Die(who, std::string(server.status().message()), 1);
  status.set_address(server->address);
  WritePortFile(server->port);
  SPDLOG_LOGGER_INFO(Log("server"), "serving on {}", server->address);

  coordinator::CoordinatorClient client(config.cluster.coordinator, config.rpc, who);
  auto registrar = [&]() -> absl::Status {
    auto response = client.RegisterServer(index, server->address);
    if (!response.ok()) return response.status();
    if (response->placement_epoch() > (*shard)->epoch()) {
      ApplyPlacement(&client, shard->get(), index, response->placement_epoch());
    }
    return absl::OkStatus();
  };
  absl::Status registered = registrar();
  if (!registered.ok()) Die(who, std::string(registered.message()), 1);

  MemberAgent agent(
      &client, "ps", index, config.heartbeat.interval_s, registrar,
      [&] {
        proto::MemberReport report;
        report.set_pulls(counters.Get("pulls"));
        report.set_pushes(counters.Get("pushes"));
        report.set_bytes(counters.Get("bytes_in") + counters.Get("bytes_out"));
        report.set_loss(NAN);
        report.set_accuracy(NAN);
        return report;
      },
      [&](const proto::HeartbeatResponse& response) {
        if (response.placement_epoch() > (*shard)->epoch()) {
          ApplyPlacement(&client, shard->get(), index, response.placement_epoch());
        }
      });
  agent.Start();

  absl::Notification stopping;
  std::thread checkpointer([&] {
    if (config.checkpoint.interval_s <= 0) return;
    while (!stopping.WaitForNotificationWithTimeout(
        absl::Seconds(config.checkpoint.interval_s))) {
      if ((*shard)->epoch() == 0) continue;
      absl::Status written = (*shard)->WriteCheckpoint();
      if (!written.ok()) {
        SPDLOG_LOGGER_ERROR(Log("server"), "checkpoint failed: {}",
                            std::string(written.message()));
      }
    }
  });

  const int signal = WaitForShutdownSignal();
  SPDLOG_LOGGER_INFO(Log("server"), "signal {}: final checkpoint and shutdown", signal);
  stopping.Notify();
  checkpointer.join();
  server->server->Shutdown(DeadlineIn(2));
  agent.Stop();
  int code = 0;
  if ((*shard)->epoch() > 0) {
    absl::Status written = (*shard)->WriteCheckpoint();
    if (!written.ok()) {
      SPDLOG_LOGGER_ERROR(Log("server"), "final checkpoint failed: {}",
                          std::string(written.message()));
      code = 1;
    }
  }
  return code;
}
