// The `logging` section: the level names and the keys.
#include "common/config_logging.h"

#include "common/config_field.h"

namespace downpour {
namespace config_internal {
namespace {

// The spellings of logging.level, the first one the name.
constexpr Choice<LogLevel> kLogLevels[] = {{"trace", LogLevel::kTrace},
                                           {"debug", LogLevel::kDebug},
                                           {"info", LogLevel::kInfo},
                                           {"warn", LogLevel::kWarn},
                                           {"error", LogLevel::kError}};

}  // namespace

std::vector<ConfigField> LoggingKeys(LoggingSection* l) {
  return {ChoiceField("logging.level", &l->level, ParseLogLevel, LogLevelName)};
}

}  // namespace config_internal

const char* LogLevelName(LogLevel level) {
  return config_internal::ChoiceName(config_internal::kLogLevels, level);
}
absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name) {
  return config_internal::ParseChoice("logging.level",
                                      config_internal::kLogLevels, name);
}

}  // namespace downpour
