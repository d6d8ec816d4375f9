// psctl: command-line client for a running Downpour cluster.
//
//   psctl status --coordinator 127.0.0.1:7000
//   psctl status --config deploy/configs/mnist_local.yaml
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "common/config.h"
#include "coordinator/coordinator_client.h"
#include "tools/status_table.h"

ABSL_FLAG(std::string, coordinator, "",
          "coordinator host:port (default: cluster.coordinator of --config)");
ABSL_FLAG(std::string, config, "", "cluster YAML file to read the coordinator address from");
ABSL_FLAG(double, timeout_s, 3, "how long to wait for the coordinator's answer");

namespace {

constexpr char kUsage[] =
    "psctl COMMAND [flags]\n\n"
    "Commands:\n"
    "  status   table of every ps and worker: alive, last heartbeat, step,\n"
    "           examples/s, pulls, pushes, bytes, staleness, loss, accuracy\n\n"
    "Give the coordinator with --coordinator HOST:PORT or --config FILE.";

int Status() {
  std::string address = absl::GetFlag(FLAGS_coordinator);
  if (address.empty() && !absl::GetFlag(FLAGS_config).empty()) {
    auto config = downpour::LoadConfig(absl::GetFlag(FLAGS_config));
    if (!config.ok()) {
      std::fprintf(stderr, "psctl: %s\n", std::string(config.status().message()).c_str());
      return 2;
    }
    address = config->cluster.coordinator;
  }
  if (address.empty()) {
    std::fprintf(stderr, "psctl: give --coordinator HOST:PORT or --config FILE\n");
    return 2;
  }
  downpour::RpcSection rpc;
  rpc.deadline_s = absl::GetFlag(FLAGS_timeout_s);
  downpour::coordinator::CoordinatorClient client(address, rpc, "psctl");
  auto status = client.ClusterStatus();
  if (!status.ok()) {
    std::fprintf(stderr,
                 "psctl: cannot reach the coordinator at %s: %s\n"
                 "Is the cluster running? Check the address (--coordinator) and "
                 "the coordinator's log.\n",
                 address.c_str(), std::string(status.status().message()).c_str());
    return 1;
  }
  std::fputs(downpour::tools::FormatStatusTable(*status).c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::FlagsUsageConfig usage_config;
  usage_config.contains_help_flags = [](absl::string_view f) {
    return !absl::StrContains(f, "absl/");
  };
  usage_config.contains_helpshort_flags = usage_config.contains_help_flags;
  absl::SetFlagsUsageConfig(usage_config);
  absl::SetProgramUsageMessage(kUsage);
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() != 2) {
    std::fprintf(stderr, "%s\n", kUsage);
    return 2;
  }
  const std::string command = args[1];
  if (command == "status") return Status();
  std::fprintf(stderr, "psctl: unknown command '%s'\n\n%s\n", command.c_str(), kUsage);
  return 2;
}
