// ps_worker: one Downpour SGD worker (worker/worker_node.h does the work).
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "rpc/daemon.h"
#include "worker/worker_node.h"

ABSL_FLAG(std::string, listen, "",
          "host:port of this worker's Status endpoint (overrides "
          "cluster.workers[index]; port 0 = any)");
ABSL_FLAG(bool, join, false,
          "join the running job as a worker not in cluster.workers (no "
          "--index; give --listen): the coordinator gives it a free slot of "
          "cluster.max_workers and data parts from the workers holding the "
          "most; psctl drain-worker N hands them back");
ABSL_FLAG(std::string, data_path, "", "data folder (overrides data.path)");
ABSL_FLAG(std::string, device, "",
          "compute backend: auto, cpu, cuda or simulated (overrides "
          "compute.device)");
ABSL_FLAG(int, gpu, -1,
          "which GPU a cuda worker uses (overrides compute.gpu; -1 keeps it)");

namespace {

using namespace downpour;

std::vector<std::string> Overrides() {
  std::vector<std::string> overrides;
  if (!absl::GetFlag(FLAGS_data_path).empty()) {
    overrides.push_back("data.path=" + absl::GetFlag(FLAGS_data_path));
  }
  if (!absl::GetFlag(FLAGS_device).empty()) {
    overrides.push_back("compute.device=" + absl::GetFlag(FLAGS_device));
  }
  if (absl::GetFlag(FLAGS_gpu) != -1) {
    overrides.push_back(absl::StrCat("compute.gpu=", absl::GetFlag(FLAGS_gpu)));
  }
  return overrides;
}

}  // namespace

int main(int argc, char** argv) {
  const bool join = BoolFlagInArgv(argc, argv, {"join"});
  DaemonSetup setup = InitDaemon(
      argc, argv, "worker",
      "ps_worker --config FILE --index N, or ps_worker --config FILE --join "
      "--listen HOST:PORT: trains on its data parts with asynchronous "
      "Downpour SGD against the ps shards",
      /*has_index=*/!join, Overrides);
  const std::string who =
      join ? std::string("worker") : absl::StrCat("worker ", setup.index);
  worker::WorkerNode::Options options;
  options.config = std::move(setup.config);
  options.index = join ? -1 : setup.index;
  options.join = join;
  options.listen = absl::GetFlag(FLAGS_listen);
  if (join && options.listen.empty()) {
    Die(who,
        "--join starts a worker the config does not list: give --listen "
        "HOST:PORT (its Status endpoint; port 0 = any)",
        kExitConfig);
  }
  options.advertise = setup.advertise;
  auto node = worker::WorkerNode::Start(std::move(options));
  if (!node.ok() && worker::IsDrained(node.status())) {
    // Done, not failed: a supervisor that restarted it stops here.
    SPDLOG_LOGGER_INFO(Log(Logger::kWorker), "{}",
                       std::string(node.status().message()));
    return 0;
  }
  if (!node.ok()) {
    // 2: the config, model, data or backend; 1: the cluster (listen, register).
    Die(who, std::string(node.status().message()),
        worker::IsSetupError(node.status()) ? 2 : 1);
  }
  WritePortFile((*node)->port());
  const int signal = WaitForShutdownSignal((*node)->ended());
  if (signal != 0) {
    SPDLOG_LOGGER_INFO(Log(Logger::kWorker),
                       "signal {}: pushing what is owed and stopping", signal);
  }
  const absl::Status result = (*node)->Stop();
  if (!result.ok() && (*node)->drained()) {
    // Drained: a push it could not finish was not acknowledged, and its
    // examples are read again where the part went. Done, not failed.
    SPDLOG_LOGGER_WARN(Log(Logger::kWorker), "drained; while stopping: {}",
                       std::string(result.message()));
    return 0;
  }
  if (!result.ok()) {
    SPDLOG_LOGGER_ERROR(Log(Logger::kWorker), "{}",
                        std::string(result.message()));
    // 2: bad data found while streaming; 1: the cluster.
    return worker::IsSetupError(result) ? 2 : 1;
  }
  return 0;
}
