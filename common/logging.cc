// Logger registry: a fixed set of named loggers sharing one stderr sink.
#include "common/logging.h"

#include <array>

#include "absl/strings/str_cat.h"
#include "spdlog/sinks/stdout_sinks.h"

namespace downpour {
namespace {

constexpr Logger kLoggers[] = {
    Logger::kServer, Logger::kWorker, Logger::kCoordinator, Logger::kRpc,
    Logger::kGpu,    Logger::kTool,   Logger::kServe};
constexpr size_t kNumLoggers = sizeof(kLoggers) / sizeof(kLoggers[0]);

using Registry = std::array<std::shared_ptr<spdlog::logger>, kNumLoggers>;

Registry& TheRegistry() {
  static Registry* registry = [] {
    auto* r = new Registry;
    auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    for (Logger id : kLoggers) {
      auto logger = std::make_shared<spdlog::logger>(LoggerName(id), sink);
      logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%L%$ [%n] %v");
      (*r)[static_cast<size_t>(id)] = logger;
    }
    return r;
  }();
  return *registry;
}

}  // namespace

const char* LoggerName(Logger logger) {
  switch (logger) {
    case Logger::kServer:
      return "server";
    case Logger::kWorker:
      return "worker";
    case Logger::kCoordinator:
      return "coordinator";
    case Logger::kRpc:
      return "rpc";
    case Logger::kGpu:
      return "gpu";
    case Logger::kTool:
      return "tool";
    case Logger::kServe:
      return "serve";
  }
  return "tool";  // not reached: the switch covers every Logger
}

absl::Status InitLogging(const std::string& prefix, const std::string& level) {
  spdlog::level::level_enum lvl = spdlog::level::from_str(level);
  if (spdlog::level::to_string_view(lvl) != level && level != "warn") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown log level '", level,
                     "'; allowed: trace, debug, info, warn, error"));
  }
  for (auto& logger : TheRegistry()) {
    logger->set_level(lvl);
    logger->flush_on(spdlog::level::info);
  }
  SetLogPrefix(prefix);
  return absl::OkStatus();
}

void SetLogPrefix(const std::string& prefix) {
  const std::string who = prefix.empty() ? "" : absl::StrCat(prefix, " ");
  for (auto& logger : TheRegistry()) {
    logger->set_pattern(
        absl::StrCat("%Y-%m-%d %H:%M:%S.%e %^%L%$ [", who, "%n] %v"));
  }
}

spdlog::logger* Log(Logger component) {
  return TheRegistry()[static_cast<size_t>(component)].get();
}

}  // namespace downpour
