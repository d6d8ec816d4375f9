#include "common/config.h"
namespace downpour {
absl::StatusOr<Config> LoadConfig(const std::string&) { return Config(); }
absl::StatusOr<Config> ParseConfig(const std::string&, const std::string&) { return Config(); }
absl::Status ValidateConfig(const Config&) { return absl::OkStatus(); }
}
