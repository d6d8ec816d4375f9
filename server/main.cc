// ps_server: one shard of the parameter server, or a standby for any shard.
#include <cmath>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/daemon.h"
#include "common/logging.h"
#include "coordinator/member_agent.h"
#include "common/server_util.h"
#include "common/status_service.h"
#include "coordinator/coordinator_client.h"
#include "server/ps_node.h"

ABSL_FLAG(std::string, listen, "",
          "host:port to serve on (overrides cluster.ps[index], or "
          "cluster.standby_ps[index] with --standby; port 0 = any)");
ABSL_FLAG(bool, standby, false,
          "run as spare number --index of cluster.standby_ps: serve no shard until "
          "the coordinator hands over a dead one");

namespace {

using namespace downpour;

proto::MemberReport Report(const Counters& counters) {
  proto::MemberReport report;
  report.set_pulls(counters.Get("pulls"));
  report.set_pushes(counters.Get("pushes"));
  report.set_bytes(counters.Get("bytes_in") + counters.Get("bytes_out"));
  report.set_loss(NAN);
  report.set_accuracy(NAN);
  return report;
}

}  // namespace

int main(int argc, char** argv) {
  DaemonSetup setup = InitDaemon(
      argc, argv, [] { return absl::GetFlag(FLAGS_standby) ? "standby" : "ps"; },
      "ps_server --config FILE --index N [--standby] [--listen HOST:PORT]: serves "
      "one shard of the parameters, applies pushed gradients, writes checkpoints",
      /*has_index=*/true);
  const Config& config = setup.config;
  const int index = setup.index;
  const bool standby = absl::GetFlag(FLAGS_standby);
  Counters counters;
  auto node = server::PsNode::Create({config, index, standby, &counters});
  if (!node.ok()) Die((standby ? "standby " : "ps ") + std::to_string(index),
                      std::string(node.status().message()), 1);
  const std::string who = (*node)->name();

  StatusService status(standby ? "standby" : "ps", index, &counters,
                       [&](proto::GetStatusResponse* r) {
                         r->set_device("cpu");
                         (*r->mutable_counters())["blocks"] = (*node)->num_blocks();
                         (*r->mutable_counters())["placement_epoch"] = (*node)->epoch();
                       });
  const std::string listen =
      !absl::GetFlag(FLAGS_listen).empty() ? absl::GetFlag(FLAGS_listen)
      : standby                           ? config.cluster.standby_ps[index]
                                          : config.cluster.ps[index];
  auto server = StartServer(listen, {(*node)->service(), &status}, who);
  if (!server.ok()) Die(who, std::string(server.status().message()), 1);
  status.set_address(server->address);
  WritePortFile(server->port);
  const std::string advertised = AdvertisedAddress(server->address, setup.advertise);
  SPDLOG_LOGGER_INFO(Log(Logger::kServer), "{}: serving on {} (registered as {})", who,
                     server->address, advertised);

  coordinator::CoordinatorClient client(config.cluster.coordinator, config.rpc, who);
  auto registrar = [&] { return (*node)->Register(&client, advertised); };
  absl::Status registered = registrar();
  if (!registered.ok()) Die(who, std::string(registered.message()), 1);

  MemberAgent* agent_ptr = nullptr;
  MemberAgent agent(
      &client, standby ? "standby" : "ps", index, advertised,
      config.heartbeat.interval_s, registrar, [&] { return Report(counters); },
      [&](const proto::HeartbeatResponse& response) {
        auto [role, as] = (*node)->OnHeartbeat(&client, response);
        agent_ptr->SetIdentity(role, as);
      });
  agent_ptr = &agent;
  agent.Start();

  absl::Notification stopping;
  std::thread checkpointer([&] {
    if (config.checkpoint.interval_s <= 0) return;
    while (!stopping.WaitForNotificationWithTimeout(
        absl::Seconds(config.checkpoint.interval_s))) {
      absl::Status written = (*node)->Checkpoint();
      if (!written.ok()) {
        SPDLOG_LOGGER_ERROR(Log(Logger::kServer), "checkpoint failed: {}",
                            std::string(written.message()));
      }
    }
  });

  const int signal = WaitForShutdownSignal((*node)->replaced());
  if (signal != 0) {
    SPDLOG_LOGGER_INFO(Log(Logger::kServer), "signal {}: final checkpoint and shutdown", signal);
  }
  stopping.Notify();
  checkpointer.join();
  server->server->Shutdown(DeadlineIn(2));
  agent.Stop();
  absl::Status written = (*node)->Checkpoint();  // nothing when replaced
  if (!written.ok()) {
    SPDLOG_LOGGER_ERROR(Log(Logger::kServer), "final checkpoint failed: {}",
                        std::string(written.message()));
    return 1;
  }
  return 0;
}
