// Logger registry: a fixed set of named loggers sharing one stderr sink.
#include "common/logging.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "spdlog/sinks/stdout_sinks.h"

namespace downpour {
namespace {

constexpr const char* kComponents[] = {"server", "worker", "coordinator",
                                       "rpc",    "gpu",    "tool"};

struct Registry {
  std::map<std::string, std::shared_ptr<spdlog::logger>> loggers;
};

Registry& TheRegistry() {
  static Registry* registry = [] {
    auto* r = new Registry;
    auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    for (const char* name : kComponents) {
      auto logger = std::make_shared<spdlog::logger>(name, sink);
      logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%L%$ [%n] %v");
      r->loggers[name] = logger;
    }
    return r;
  }();
  return *registry;
}

}  // namespace

absl::Status InitLogging(const std::string& prefix, const std::string& level) {
  spdlog::level::level_enum lvl = spdlog::level::from_str(level);
  if (spdlog::level::to_string_view(lvl) != level && level != "warn") {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown log level '", level,
        "'; allowed: trace, debug, info, warn, error"));
  }
  const std::string who = prefix.empty() ? "" : absl::StrCat(prefix, " ");
  for (auto& [name, logger] : TheRegistry().loggers) {
    logger->set_level(lvl);
    logger->set_pattern(
        absl::StrCat("%Y-%m-%d %H:%M:%S.%e %^%L%$ [", who, "%n] %v"));
    logger->flush_on(spdlog::level::info);
  }
  return absl::OkStatus();
}

spdlog::logger* Log(const std::string& component) {
  auto& loggers = TheRegistry().loggers;
  auto it = loggers.find(component);
  if (it == loggers.end()) it = loggers.find("tool");
  return it->second.get();
}

}  // namespace downpour
