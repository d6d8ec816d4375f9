// The process's file descriptors: each gRPC connection holds one, so a daemon
// whose limit is low (1024 is a common soft default) runs out under many
// clients and cannot accept more.
#ifndef DOWNPOUR_COMMON_FD_LIMIT_H_
#define DOWNPOUR_COMMON_FD_LIMIT_H_

#include <cstdint>
#include <string>

namespace downpour {

// Raises the soft RLIMIT_NOFILE to the hard limit (what an unprivileged
// process may). Returns what it did, for the startup log: "fd limit 1024 ->
// 524288" or "fd limit 524288 (the hard limit)" or why it could not.
std::string RaiseFdLimit();

// The soft RLIMIT_NOFILE now; 0 when unknown.
uint64_t FdLimit();

// Descriptors open now (entries of /proc/self/fd); 0 when unknown.
uint64_t OpenFdCount();

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_FD_LIMIT_H_
