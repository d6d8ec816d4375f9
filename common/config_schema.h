// The config's schema: its sections, each a name and the keys it holds, and
// how a YAML document or a "section.key=value" override is read against it.
// It knows no section: common/config.cc lists them, each from its file
// (common/config_<section>.h). Internal to the config loader.
//
//   std::vector<Section> schema = {{"heartbeat", HeartbeatKeys(&c.heartbeat)}};
//   absl::Status s = ReadDocument(schema, root, "cfg.yaml", &set_keys);
//   // "cfg.yaml:3: unknown key 'heartbeat.intervl_s'; allowed keys in ..."
#ifndef DOWNPOUR_COMMON_CONFIG_SCHEMA_H_
#define DOWNPOUR_COMMON_CONFIG_SCHEMA_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/config_field.h"
#include "yaml-cpp/yaml.h"

namespace downpour::config_internal {

// One top-level key and the keys it holds, bound to a config struct (see
// ConfigField for the lifetime).
struct Section {
  std::string name;
  std::vector<ConfigField> fields;
};

// Reads every entry of `root` (the file's one document) into the fields of
// `schema`, in file order, inserting each key read ("checkpoint.dir") into
// *set_keys. A null root or section reads nothing (defaults). InvalidArgument
// "FILE:LINE: ..." for a top level or section that is not a map, a key that
// is not a plain name, a duplicate key, an unknown section or key (listing
// the allowed ones, with a hint for a likely typo or a removed setting), or
// a value its field refuses. May throw YAML::Exception.
absl::Status ReadDocument(const std::vector<Section>& schema,
                          const YAML::Node& root, const std::string& file,
                          std::set<std::string>* set_keys);

// Applies one override, "section.key=value" with the value in YAML syntax,
// inserting the key into *set_keys. InvalidArgument without a place (the
// caller names the assignment): not of that shape, an unknown section or key,
// malformed YAML or a value the field refuses.
absl::Status Assign(const std::vector<Section>& schema,
                    const std::string& assignment,
                    std::set<std::string>* set_keys);

// Every field's check(), section by section in schema order: the first error.
absl::Status CheckFields(const std::vector<Section>& schema);

}  // namespace downpour::config_internal

#endif  // DOWNPOUR_COMMON_CONFIG_SCHEMA_H_
