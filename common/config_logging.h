// The `logging` section of the config: how much every daemon logs.
#ifndef DOWNPOUR_COMMON_CONFIG_LOGGING_H_
#define DOWNPOUR_COMMON_CONFIG_LOGGING_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace downpour {

// logging.level; the name is spdlog's (Name and Parse as config.h describes
// for every choice).
enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError };
const char* LogLevelName(LogLevel level);
absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name);

struct LoggingSection {
  // "trace", "debug", "info", "warn", "error". Default kInfo.
  LogLevel level = LogLevel::kInfo;
};

// Internal to the config loader (common/config.cc).
namespace config_internal {
struct ConfigField;
// The section's keys bound to `logging`, in docs/CONFIG.md's order.
std::vector<ConfigField> LoggingKeys(LoggingSection* logging);
}  // namespace config_internal

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_CONFIG_LOGGING_H_
