// ps_server: one shard of the parameter server, or a standby for any shard.
#include <signal.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "rpc/accept_watch.h"
#include "rpc/daemon.h"
#include "server/ps_node.h"

ABSL_FLAG(std::string, listen, "",
          "host:port to serve on (overrides cluster.ps[index], or "
          "cluster.standby_ps[index] with --standby; port 0 = any)");
ABSL_FLAG(
    bool, standby, false,
    "run as spare number --index of cluster.standby_ps: serve no shard until "
    "the coordinator hands over a dead one");

ABSL_FLAG(bool, join, false,
          "join the running job as a new shard (no --index; give --listen): "
          "the coordinator gives it the next shard index, and psctl add-ps "
          "moves buckets to it");

ABSL_FLAG(bool, spare, false,
          "a spare standby for a running job (no --index; give --listen): the "
          "coordinator names it the backup of a shard without one (psctl "
          "add-standby waits until it is in sync)");

namespace {

// The node's options from the flags and config; exits 2 for --join without
// --listen or with --standby.
downpour::server::PsNode::Options NodeOptions(downpour::DaemonSetup setup) {
  using namespace downpour;
  server::PsNode::Options options;
  options.standby = absl::GetFlag(FLAGS_standby);
  options.join = absl::GetFlag(FLAGS_join);
  if (options.join &&
      (options.standby || absl::GetFlag(FLAGS_listen).empty())) {
    Die("ps",
        "--join starts a new shard of a running job: give --listen HOST:PORT "
        "(where psctl add-ps will look for it), without --standby",
        kExitConfig);
  }
  options.spare = absl::GetFlag(FLAGS_spare);
  if (options.spare && (options.standby || options.join ||
                        absl::GetFlag(FLAGS_listen).empty())) {
    Die("ps",
        "--spare starts a standby for a running job: give --listen HOST:PORT "
        "(where psctl add-standby will look for it), without --standby or "
        "--join",
        kExitConfig);
  }
  options.standby |= options.spare;
  options.index = options.spare ? 0 : setup.index;
  options.listen = absl::GetFlag(FLAGS_listen);
  if (options.listen.empty() && !options.standby && !options.join &&
      setup.index >= static_cast<int>(setup.config.cluster.ps.size())) {
    Die("ps",
        absl::StrCat(
            "--index ", setup.index, " but ", setup.config.path, " lists ",
            setup.config.cluster.ps.size(),
            " ps in cluster.ps: a shard that joined the job (ps_server "
            "--join) restarts with --index N and --listen HOST:PORT"),
        kExitConfig);
  }
  if (options.listen.empty()) {
    options.listen = options.standby
                         ? setup.config.cluster.standby_ps[setup.index]
                         : setup.config.cluster.ps[setup.index];
  }
  options.advertise = setup.advertise;
  options.config = std::move(setup.config);
  return options;
}

// A ps that joined ends with its job, as on SIGTERM: the launcher stops
// only the ps it started (docs/OPERATIONS.md, "Growing and shrinking the ps
// set"). Checks every 0.5 s until `done` is notified.
std::thread WatchForTheJobsEnd(downpour::server::PsNode* node,
                               absl::Notification* done) {
  using namespace downpour;
  return std::thread([node, done] {
    while (!done->WaitForNotificationWithTimeout(absl::Milliseconds(500))) {
      if (!node->Orphaned()) continue;
      SPDLOG_LOGGER_INFO(Log(Logger::kServer),
                         "the job is over and the coordinator has not "
                         "answered since: this ps, which joined the job, "
                         "ends with it");
      kill(getpid(), SIGTERM);
      return;
    }
  });
}

}  // namespace

int main(int argc, char** argv) {
  using namespace downpour;
  const bool join = BoolFlagInArgv(argc, argv, {"join", "spare"});
  DaemonSetup setup = InitDaemon(
      argc, argv,
      [] { return absl::GetFlag(FLAGS_standby) ? "standby" : "ps"; },
      "ps_server --config FILE --index N [--standby] [--listen HOST:PORT], or "
      "ps_server --config FILE --join --listen HOST:PORT: serves one shard of "
      "the parameters, applies pushed gradients, writes checkpoints",
      /*has_index=*/!join);
  server::PsNode::Options options = NodeOptions(std::move(setup));
  const bool joined = server::PsNode::JoinedTheJob(options);
  const std::string who =
      (options.standby ? "standby " : "ps ") + std::to_string(options.index);

  auto node = server::PsNode::Start(std::move(options));
  if (!node.ok()) {
    // 3: a live standby slot taken by another process (a ps whose shard
    // another daemon serves rejoins as a spare instead, in PsNode); 2: the
    // shard cannot be built from the config and checkpoints (a corrupt one),
    // which no restart cures; 1: the rest (address, coordinator), which one
    // may.
    Die(who, std::string(node.status().message()),
        absl::IsAlreadyExists(node.status())  ? kExitReplaced
        : server::IsSetupError(node.status()) ? kExitConfig
                                              : kExitFailure);
  }
  WritePortFile((*node)->port());
  // A listener that died (gRPC stops accepting after running out of file
  // descriptors) ends the ps like SIGTERM, then exits 1 to be restarted.
  AcceptWatch watch(who, (*node)->address(), [] { kill(getpid(), SIGTERM); });
  absl::Notification watched;
  std::thread orphan_watch =
      joined ? WatchForTheJobsEnd(node->get(), &watched) : std::thread();
  const int signal = WaitForShutdownSignal((*node)->ended());
  watched.Notify();
  if (orphan_watch.joinable()) orphan_watch.join();
  if (signal != 0) {
    SPDLOG_LOGGER_INFO(Log(Logger::kServer),
                       "signal {}: final checkpoint and shutdown", signal);
  }
  const absl::Status written = (*node)->Stop();
  if (!written.ok()) {
    SPDLOG_LOGGER_ERROR(Log(Logger::kServer), "final checkpoint failed: {}",
                        std::string(written.message()));
    return 1;
  }
  if (watch.stuck()) return kExitFailure;
  // Ended on its own: another daemon serves its shard now (it was declared
  // dead while stopped or cut off). Started again, it rejoins as a spare.
  return signal == 0 ? kExitReplaced : 0;
}
