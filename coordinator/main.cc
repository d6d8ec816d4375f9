// coordinator: membership, heartbeats and placement for a Downpour cluster.
#include <signal.h>
#include <unistd.h>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "common/logging.h"
#include "coordinator/coordinator_node.h"
#include "rpc/accept_watch.h"
#include "rpc/daemon.h"

ABSL_FLAG(
    std::string, listen, "",
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
  coordinator::CoordinatorNode::Options options;
  options.config = setup.config;
  options.listen = setup.config.cluster.coordinator;
  auto node = coordinator::CoordinatorNode::Start(std::move(options));
  if (!node.ok()) {
    // Exit 1: the address could not be served; 2: the model or saved state.
    Die("coordinator", std::string(node.status().message()),
        absl::IsUnavailable(node.status()) ? 1 : 2);
  }
  WritePortFile((*node)->port());
  // A listener that died (gRPC stops accepting after running out of file
  // descriptors) ends the coordinator like SIGTERM, then exits 1 to be
  // restarted (its state file brings the cluster back).
  AcceptWatch watch("coordinator", (*node)->address(),
                    [] { kill(getpid(), SIGTERM); });
  const int signal = WaitForShutdownSignal((*node)->ended());
  SPDLOG_LOGGER_INFO(Log(Logger::kCoordinator), "signal {}: shutting down",
                     signal);
  const bool stopped = (*node)->Stop().ok();
  return stopped && !watch.stuck() ? 0 : 1;
}
