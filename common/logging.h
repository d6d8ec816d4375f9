// Named spdlog loggers, one per component, created once.
//
//   SPDLOG_LOGGER_INFO(downpour::Log("server"), "shard {} holds {} blocks", id, n);
#ifndef DOWNPOUR_COMMON_LOGGING_H_
#define DOWNPOUR_COMMON_LOGGING_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "spdlog/spdlog.h"

namespace downpour {

// Sets up the loggers ("server", "worker", "coordinator", "rpc", "gpu", "tool"),
// all writing to stderr with `prefix` (e.g. "ps 1") in each line.
// InvalidArgument for an unknown level.
absl::Status InitLogging(const std::string& prefix, const std::string& level);

// The logger for `component`; one of the names above. Works before InitLogging
// (default level info, no prefix).
spdlog::logger* Log(const std::string& component);

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_LOGGING_H_
