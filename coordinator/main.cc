// coordinator: membership, heartbeats and placement for a Downpour cluster.
#include <thread>

#include "absl/flags/flag.h"
#include "absl/synchronization/notification.h"
#include "common/daemon.h"
#include "common/logging.h"
#include "common/model_spec.h"
#include "common/server_util.h"
#include "common/status_service.h"
#include "coordinator/cluster_state.h"
#include "coordinator/coordinator_service.h"
#include "coordinator/metrics_history.h"

ABSL_FLAG(std::string, listen, "",
          "host:port to serve on (overrides cluster.coordinator; port 0 = any)");

namespace {

std::vector<std::string> Overrides() {
  std::vector<std::string> overrides;
  if (!absl::GetFlag(FLAGS_listen).empty()) {
    overrides.push_back("cluster.coordinator=" + absl::GetFlag(FLAGS_listen));
  }
  return overrides;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace downpour;
  DaemonSetup setup = InitDaemon(
      argc, argv, "coordinator",
      "coordinator --config FILE [--listen HOST:PORT]: tracks ps and workers, "
      "publishes the placement map, detects dead members",
      /*has_index=*/false, Overrides);
  auto state = coordinator::ClusterState::Create({setup.config});
  if (!state.ok()) Die("coordinator", std::string(state.status().message()), 2);
  // Monitoring: the bounded history behind `psctl plot` and `psctl watch`.
  const absl::StatusOr<ModelSpec> model = ModelSpec::Create(setup.config.model);
  coordinator::MetricsHistory history({setup.config.coordinator.history_size,
                                       setup.config.coordinator.history_interval_s});
  coordinator::CoordinatorService service(state->get(), &history,
                                          model.ok() ? &*model : nullptr);
  Counters counters;
  StatusService status("coordinator", 0, &counters);
  auto server = StartServer(setup.config.cluster.coordinator,
                            {&service, &status}, "coordinator");
  if (!server.ok()) Die("coordinator", std::string(server.status().message()), 1);
  status.set_address(server->address);
  WritePortFile(server->port);
  SPDLOG_LOGGER_INFO(Log(Logger::kCoordinator), "serving on {} ({} ps, {} workers expected)",
                     server->address, setup.config.cluster.ps.size(),
                     setup.config.cluster.workers.size());

  absl::Notification stopping;
  std::thread liveness([&] {
    const absl::Duration period =
        absl::Seconds(setup.config.heartbeat.interval_s / 2);
    while (!stopping.WaitForNotificationWithTimeout(period)) {
      (*state)->CheckLiveness();
    }
  });
  coordinator::HistorySampler sampler(
      &history, [&] { return (*state)->Status(); },
      absl::Seconds(setup.config.coordinator.history_interval_s));
  const int signal = WaitForShutdownSignal();
  SPDLOG_LOGGER_INFO(Log(Logger::kCoordinator), "signal {}: shutting down", signal);
  stopping.Notify();
  liveness.join();
  server->server->Shutdown(DeadlineIn(2));
  return 0;
}
