// libFuzzer target: the YAML config loader (common/config.h) on arbitrary text.
//
// The input is a config file's text. When it holds a line "#--set", the lines
// after it are --set overrides ("section.key=value") and the text before it is
// the file, loaded through LoadConfig from an in-memory file (so the file
// reading path runs too); otherwise the whole input goes to ParseConfig.
//
// Invariants beyond "no crash, no sanitizer report, no huge allocation":
// a config that loads passes ValidateConfig again unchanged (the loader
// validates everything it accepts), its model builds a ModelSpec, and every
// error has a message.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/config.h"
#include "common/logging.h"
#include "common/model_spec.h"

namespace {

void Fail(const char* what, const absl::Status& status) {
  std::fprintf(stderr, "config_fuzzer: %s: %s\n", what,
               status.ToString().c_str());
  std::abort();
}

// LoadConfig on `text` as a file (a memfd, read through /proc/self/fd).
absl::StatusOr<downpour::Config> LoadFromMemory(
    const std::string& text, const std::vector<std::string>& overrides) {
  const int fd = memfd_create("fuzz.yaml", 0);
  if (fd < 0) std::abort();
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
  absl::StatusOr<downpour::Config> config =
      downpour::LoadConfig("/proc/self/fd/" + std::to_string(fd), overrides);
  close(fd);
  return config;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)downpour::InitLogging("fuzz", "off");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<downpour::Config> config;
  const size_t marker = input.find("#--set\n");
  if (marker == std::string::npos) {
    config = downpour::ParseConfig(input, "fuzz.yaml");
  } else {
    std::vector<std::string> overrides =
        absl::StrSplit(input.substr(marker + 7), '\n', absl::SkipEmpty());
    config = LoadFromMemory(input.substr(0, marker),
                            downpour::MergeOverrideFragments(overrides));
  }
  if (!config.ok()) {
    if (config.status().message().empty())
      Fail("error without a message", config.status());
    return 0;
  }
  absl::Status again = downpour::ValidateConfig(*config);
  if (!again.ok()) Fail("a loaded config fails ValidateConfig", again);
  absl::StatusOr<downpour::ModelSpec> spec =
      downpour::ModelSpec::Create(config->model);
  if (!spec.ok()) Fail("a loaded config's model does not build", spec.status());
  return 0;
}
