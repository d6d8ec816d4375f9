// What the config loader's tests share: parsing a YAML text as a file named
// cfg.yaml, writing a temporary config file, and a table of YAML texts that
// must each fail with a message.
#ifndef DOWNPOUR_COMMON_CONFIG_TEST_UTIL_H_
#define DOWNPOUR_COMMON_CONFIG_TEST_UTIL_H_

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour {
namespace config_testing {

inline absl::StatusOr<Config> Parse(const std::string& yaml) {
  return ParseConfig(yaml, "cfg.yaml");
}

// Writes `text` to a file under TEST_TMPDIR and returns its path.
inline std::string WriteTempFile(const std::string& name,
                                 const std::string& text) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path =
      std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// A case whose YAML must fail with InvalidArgument and a message containing
// `error`.
struct BadCase {
  std::string yaml;
  std::string error;
};

inline void ExpectAllFail(const std::vector<BadCase>& cases) {
  for (const BadCase& c : cases) {
    EXPECT_THAT(Parse(c.yaml), ::downpour::testing::StatusIs(
                                   absl::StatusCode::kInvalidArgument,
                                   ::testing::HasSubstr(c.error)))
        << "YAML:\n"
        << c.yaml;
  }
}

}  // namespace config_testing
}  // namespace downpour

#endif  // DOWNPOUR_COMMON_CONFIG_TEST_UTIL_H_
