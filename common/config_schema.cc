// Reading a YAML document and overrides against the config's schema, with
// messages that name the file, line, key and what is allowed.
#include "common/config_schema.h"

#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace downpour::config_internal {
namespace {

// --- Messages ---------------------------------------------------------------

std::vector<std::string> SectionNames(const std::vector<Section>& schema) {
  std::vector<std::string> names;
  for (const Section& section : schema) names.push_back(section.name);
  return names;
}

std::vector<std::string> KeyNames(const Section& section) {
  std::vector<std::string> names;
  for (const ConfigField& field : section.fields) names.push_back(field.name());
  return names;
}

// " (did you mean 'X'?)" when `name` looks like a typo of one of `candidates`.
std::string Hint(const std::string& name,
                 const std::vector<std::string>& candidates) {
  const std::string match = ClosestMatch(name, candidates);
  return match.empty() ? "" : absl::StrCat(" (did you mean '", match, "'?)");
}

absl::Status UnknownSection(const std::vector<Section>& schema,
                            const std::string& name) {
  const std::vector<std::string> names = SectionNames(schema);
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown key '", name,
      "'; allowed sections: ", absl::StrJoin(names, ", "), Hint(name, names)));
}

// Keys that were settings once, with what to do now: a config written for an
// older release fails naming the fix rather than as a bare unknown key.
struct RemovedKey {
  const char* key;
  const char* fix;
};
constexpr RemovedKey kRemovedKeys[] = {
    {"rpc.push_window",
     "a worker's pushes in flight have one knob now, "
     "training.max_pushes_in_flight (whole pushes, default 1), and the client "
     "paces each push's requests to a shard itself (8 at a time, as "
     "push_window's default did): delete rpc.push_window, and raise "
     "training.max_pushes_in_flight to keep more pushes in flight"},
};

absl::Status UnknownKey(const std::vector<Section>& schema,
                        const Section& section, const std::string& name) {
  const std::string key = absl::StrCat(section.name, ".", name);
  for (const RemovedKey& removed : kRemovedKeys) {
    if (key == removed.key) {
      return absl::InvalidArgumentError(
          absl::StrCat(key, " is no longer a setting: ", removed.fix));
    }
  }
  const std::vector<std::string> names = KeyNames(section);
  std::string hint = Hint(name, names);
  // The first section that has the key (optimizer.learning_rate before
  // fm.learning_rate).
  bool found = false;
  for (const Section& other : schema) {
    for (const ConfigField& field : other.fields) {
      if (field.name() == name && !found) {
        hint = absl::StrCat(" (did you mean '", field.key, "'?)");
        found = true;
      }
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown key '", section.name, ".", name, "'; allowed keys in '",
      section.name, "': ", absl::StrJoin(names, ", "), hint));
}

// --- Lookup and reading -----------------------------------------------------

const Section* FindSection(const std::vector<Section>& schema,
                           const std::string& name) {
  for (const Section& section : schema) {
    if (section.name == name) return &section;
  }
  return nullptr;
}

const ConfigField* FindField(const Section& section, const std::string& name) {
  for (const ConfigField& field : section.fields) {
    if (field.name() == name) return &field;
  }
  return nullptr;
}

absl::Status ReadField(const ConfigField& field, const YAML::Node& value) {
  absl::Status status = field.read(value);
  return status.ok() ? field.check() : status;
}

// Calls visit(name, value, where) for each entry of `map` in file order, after
// rejecting non-scalar and duplicate keys. `visit` returns a located status.
template <typename Visit>
absl::Status ForEachEntry(const YAML::Node& map, const std::string& file,
                          const std::string& prefix, Visit visit) {
  std::map<std::string, int> first_line;
  for (const auto& entry : map) {
    const YAML::Node& key = entry.first;
    const std::string where = Where(file, key.Mark());
    if (!key.IsScalar()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": keys must be plain names, got ", DescribeValue(key)));
    }
    const auto [it, inserted] =
        first_line.emplace(key.Scalar(), key.Mark().line + 1);
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": duplicate key '", prefix, key.Scalar(),
                       "' (first at line ", it->second, ")"));
    }
    RETURN_IF_ERROR(visit(key.Scalar(), entry.second, where));
  }
  return absl::OkStatus();
}

absl::Status ReadSection(const std::vector<Section>& schema,
                         const Section& section, const YAML::Node& node,
                         const std::string& file, const std::string& where,
                         std::set<std::string>* set_keys) {
  if (node.IsNull()) return absl::OkStatus();  // "training:" alone: defaults
  if (!node.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", section.name, " must be a map of keys (",
                     absl::StrJoin(KeyNames(section), ", "), "), got ",
                     DescribeValue(node)));
  }
  auto read_key = [&](const std::string& name, const YAML::Node& value,
                      const std::string& at) {
    const ConfigField* field = FindField(section, name);
    if (field == nullptr) return Located(at, UnknownKey(schema, section, name));
    set_keys->insert(field->key);
    return Located(at, ReadField(*field, value));
  };
  return ForEachEntry(node, file, section.name + ".", read_key);
}

}  // namespace

absl::Status ReadDocument(const std::vector<Section>& schema,
                          const YAML::Node& root, const std::string& file,
                          std::set<std::string>* set_keys) {
  if (root.IsNull()) return absl::OkStatus();  // empty file: defaults
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(file, root.Mark()), ": the top level must be a map of sections (",
        absl::StrJoin(SectionNames(schema), ", "), "), got ",
        DescribeValue(root)));
  }
  auto read_section = [&](const std::string& name, const YAML::Node& value,
                          const std::string& at) {
    const Section* section = FindSection(schema, name);
    if (section == nullptr) return Located(at, UnknownSection(schema, name));
    return ReadSection(schema, *section, value, file, at, set_keys);
  };
  return ForEachEntry(root, file, "", read_section);
}

absl::Status Assign(const std::vector<Section>& schema,
                    const std::string& assignment,
                    std::set<std::string>* set_keys) {
  const size_t equals = assignment.find('=');
  const size_t dot = assignment.find('.');
  if (equals == std::string::npos || dot == std::string::npos || dot > equals) {
    return absl::InvalidArgumentError(
        "expected section.key=value, e.g. training.steps=100");
  }
  const std::string section_name(
      absl::StripAsciiWhitespace(assignment.substr(0, dot)));
  const std::string key(
      absl::StripAsciiWhitespace(assignment.substr(dot + 1, equals - dot - 1)));
  const Section* section = FindSection(schema, section_name);
  if (section == nullptr) return UnknownSection(schema, section_name);
  const ConfigField* field = FindField(*section, key);
  if (field == nullptr) return UnknownKey(schema, *section, key);
  set_keys->insert(field->key);
  YAML::Node value;
  try {
    value = YAML::Load(assignment.substr(equals + 1));
  } catch (const YAML::ParserException& e) {
    return absl::InvalidArgumentError(absl::StrCat("malformed YAML: ", e.msg));
  }
  return ReadField(*field, value);
}

absl::Status CheckFields(const std::vector<Section>& schema) {
  for (const Section& section : schema) {
    for (const ConfigField& field : section.fields) {
      RETURN_IF_ERROR(field.check());
    }
  }
  return absl::OkStatus();
}

}  // namespace downpour::config_internal
