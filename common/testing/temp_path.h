// Test files in the test's own temp folder.
#ifndef DOWNPOUR_COMMON_TESTING_TEMP_PATH_H_
#define DOWNPOUR_COMMON_TESTING_TEMP_PATH_H_

#include <cstdlib>
#include <string>

namespace downpour::testing {

// `name` in TEST_TMPDIR (Bazel's per-test folder), or in /tmp outside Bazel.
inline std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

}  // namespace downpour::testing

#endif  // DOWNPOUR_COMMON_TESTING_TEMP_PATH_H_
