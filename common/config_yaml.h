// A config file's text and its one YAML document: the file read with the
// errors a user can act on, and yaml-cpp's parse with its pitfalls guarded.
// Internal to the config loader (common/config.cc).
#ifndef DOWNPOUR_COMMON_CONFIG_YAML_H_
#define DOWNPOUR_COMMON_CONFIG_YAML_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "yaml-cpp/yaml.h"

namespace downpour::config_internal {

// Config files are read up to this size: a cluster file is a few KiB.
inline constexpr size_t kMaxConfigBytes = 1 << 20;

// The text of the config file at `path`. NotFound when it does not exist;
// InvalidArgument when it is a directory, larger than kMaxConfigBytes or holds
// only blank lines, comments and document markers; another read error keeps
// its code ("cannot read config file: ...").
absl::StatusOr<std::string> ReadConfigFile(const std::string& path);

// The first YAML document of `yaml`; `file` names it in messages.
// InvalidArgument "FILE:LINE: malformed YAML: ..." for text yaml-cpp cannot
// parse or that holds no key, and for a second document after '---'. Other
// yaml-cpp exceptions (not ParserException) may escape: the caller catches.
absl::StatusOr<YAML::Node> LoadDocument(const std::string& yaml,
                                        const std::string& file);

}  // namespace downpour::config_internal

#endif  // DOWNPOUR_COMMON_CONFIG_YAML_H_
