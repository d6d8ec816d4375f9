// Named spdlog loggers, one per component, from a fixed list (as Envoy's
// logger ids): a misspelt component does not compile.
//
//   SPDLOG_LOGGER_INFO(downpour::Log(Logger::kServer), "shard {} holds {}
//   blocks", id, n);
#ifndef DOWNPOUR_COMMON_LOGGING_H_
#define DOWNPOUR_COMMON_LOGGING_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "spdlog/spdlog.h"

namespace downpour {

// The components that log; each has a logger of that name ("server", ...).
enum class Logger {
  kServer,       // "server": the ps
  kWorker,       // "worker"
  kCoordinator,  // "coordinator"
  kRpc,          // "rpc": membership and calls between daemons
  kGpu,          // "gpu": the CUDA backend
  kTool,         // "tool": command-line tools
  kServe,        // "serve": the serving daemon (serve/)
};

// The logger's name as it appears in each line: "server", "worker", ...
const char* LoggerName(Logger logger);

// Sets up every logger, all writing to stderr with `prefix` (e.g. "ps 1") in
// each line. InvalidArgument for an unknown level.
absl::Status InitLogging(const std::string& prefix, const std::string& level);

// Sets the prefix of every log line from now on (the level is kept): a
// daemon that joined a job learns its index only once it registered.
void SetLogPrefix(const std::string& prefix);

// The logger for `component`. Works before InitLogging (default level info,
// no prefix).
spdlog::logger* Log(Logger component);

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_LOGGING_H_
