// Reading a config file and the one YAML document it holds.
#include "common/config_yaml.h"

#include <filesystem>
#include <optional>
#include <sstream>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/config_field.h"
#include "common/file_util.h"
#include "yaml-cpp/eventhandler.h"

namespace downpour::config_internal {
namespace {

// Counts the documents of a YAML stream and notes where the second one's
// content starts. YAML::LoadAll cannot be used for that: yaml-cpp 0.7 loops
// forever, allocating, on a stream that starts with ',' (jbeder/yaml-cpp
// issues 1040, PR 1319; found by tools/fuzz/config_fuzzer), so the caller
// stops after two documents.
class DocumentCounter : public YAML::EventHandler {
 public:
  int documents = 0;
  bool first_content = false;
  std::optional<YAML::Mark> second_content;

  void OnDocumentStart(const YAML::Mark&) override { ++documents; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override {
    Content(mark);
  }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Content(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&,
                       YAML::anchor_t, YAML::EmitterStyle::value) override {
    Content(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Content(mark);
  }
  void OnMapEnd() override {}

 private:
  void Content(const YAML::Mark& mark) {
    if (documents == 1) first_content = true;
    if (documents == 2 && !second_content.has_value()) second_content = mark;
  }
};

// True when `text` holds no YAML content: only blank lines, comments and
// document markers.
bool IsBlank(const std::string& text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#' || line == "---" || line == "...") {
      continue;
    }
    return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::string> ReadConfigFile(const std::string& path) {
  std::error_code error;
  const std::filesystem::file_status status =
      std::filesystem::status(path, error);
  if (status.type() == std::filesystem::file_type::not_found) {
    return absl::NotFoundError(
        absl::StrCat("config file '", path,
                     "' not found: check the path given to --config"));
  }
  if (std::filesystem::is_directory(status)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config path '", path, "' is a directory: --config takes a YAML file"));
  }
  absl::StatusOr<std::string> text = ReadFile(path, kMaxConfigBytes);
  if (absl::IsResourceExhausted(text.status())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config file '", path, "' is larger than ", kMaxConfigBytes,
        " bytes (1 MiB): --config takes a YAML cluster file such as "
        "deploy/configs/mnist_local.yaml"));
  }
  if (!text.ok()) {
    return absl::Status(
        text.status().code(),
        absl::StrCat("cannot read config file: ", text.status().message()));
  }
  if (IsBlank(*text)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path,
                     ": config file is empty (only whitespace or comments): a "
                     "cluster file needs at least its cluster section; see "
                     "deploy/configs/mnist_local.yaml and docs/CONFIG.md"));
  }
  return text;
}

absl::StatusOr<YAML::Node> LoadDocument(const std::string& yaml,
                                        const std::string& file) {
  YAML::Node root;
  DocumentCounter counter;
  try {
    std::istringstream in(yaml);
    YAML::Parser parser(in);
    for (int i = 0; i < 2 && parser.HandleNextDocument(counter); ++i) {
    }
    root = YAML::Load(yaml);  // the first document
  } catch (const YAML::ParserException& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(file, e.mark), ": malformed YAML: ", e.msg));
  }
  // yaml-cpp reads a stream that starts with ',' as empty documents: text
  // beyond comments and markers that yields no content is malformed.
  if (!counter.first_content) {
    std::istringstream lines(yaml);
    std::string line;
    for (int number = 1; std::getline(lines, line); ++number) {
      const absl::string_view text = absl::StripAsciiWhitespace(line);
      if (text.empty() || text[0] == '#' || text == "---" || text == "...") {
        continue;
      }
      return absl::InvalidArgumentError(absl::StrCat(
          file, ":", number, ": malformed YAML: '", text.substr(0, 40),
          "' holds no key: a config is a mapping of sections (cluster:, "
          "model:, ...)"));
    }
  }
  if (counter.second_content.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(file, *counter.second_content),
        ": expected one YAML document, found a second after '---'"));
  }
  return root;
}

}  // namespace downpour::config_internal
