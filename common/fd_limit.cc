#include "common/fd_limit.h"

#include <dirent.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace downpour {

std::string RaiseFdLimit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return absl::StrCat("fd limit unknown: ", std::strerror(errno));
  }
  const rlim_t before = limit.rlim_cur;
  if (limit.rlim_cur == limit.rlim_max) {
    return absl::StrCat("fd limit ", before, " (the hard limit)");
  }
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return absl::StrCat("fd limit ", before, " (raising it to ", limit.rlim_max,
                        " failed: ", std::strerror(errno), ")");
  }
  return absl::StrCat("fd limit ", before, " -> ", limit.rlim_cur);
}

uint64_t FdLimit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  return limit.rlim_cur == RLIM_INFINITY ? UINT64_MAX : limit.rlim_cur;
}

uint64_t OpenFdCount() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  uint64_t count = 0;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  closedir(dir);
  return count > 0 ? count - 1 : 0;  // not counting the directory's own fd
}

}  // namespace downpour
