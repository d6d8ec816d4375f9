// Replacing a small file atomically: after a crash the file holds either the old
// or the new contents, never a mix.
#ifndef DOWNPOUR_COMMON_ATOMIC_FILE_H_
#define DOWNPOUR_COMMON_ATOMIC_FILE_H_

#include <string>

#include "absl/status/status.h"

namespace downpour {

// Writes `contents` to path + ".tmp.<pid>", fsyncs it, renames it over `path` and
// fsyncs the directory. Creates missing parent folders. Errors name the path and
// the errno text.
absl::Status WriteFileAtomically(const std::string& path, const std::string& contents);

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_ATOMIC_FILE_H_
