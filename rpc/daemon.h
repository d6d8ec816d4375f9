// What every daemon's main does before and after serving: parse the shared
// flags, load the config (exit status 2 on any config error), set up logging,
// write the bound port for launchers and tests, and wait for SIGTERM / SIGINT.
//
// Shared flags: --config FILE, --index N, --set section.key=value (repeatable),
// --log_level, --port_file FILE, --exit_reason_file FILE (Die writes its
// message there). Role-specific flags map onto --set overrides.
#ifndef DOWNPOUR_RPC_DAEMON_H_
#define DOWNPOUR_RPC_DAEMON_H_

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "common/config.h"
#include "common/exit_codes.h"  // kExitFailure, kExitConfig, kExitReplaced

namespace downpour {

struct DaemonSetup {
  Config config;
  int index = 0;
  // --advertise: the address to register with the coordinator ("" = derive it
  // from the bound address; see AdvertisedAddress).
  std::string advertise;
};

// Parses argv (absl flags, common/parse_flags.h: a bad flag value exits 2,
// --help 0; --help describes them), blocks SIGTERM/SIGINT in this
// and every later thread (WaitForShutdownSignal picks them up), loads and
// validates the config with `extra_overrides` appended to --set, and sets up
// logging with the prefix "<role> <index>". On a bad flag or config it prints
// the error and exits with status 2. `usage` is the first line of --help.
DaemonSetup InitDaemon(int argc, char** argv, const std::string& role,
                       const std::string& usage, bool has_index,
                       std::vector<std::string> (*extra_overrides)() = nullptr);

// The same, for a daemon whose role depends on its flags (ps_server --standby):
// `role` is called once the flags are parsed.
DaemonSetup InitDaemon(int argc, char** argv,
                       const std::function<std::string()>& role,
                       const std::string& usage, bool has_index,
                       std::vector<std::string> (*extra_overrides)() = nullptr);

// Whether argv holds one of the boolean flags `names` set (--NAME, -NAME or
// --NAME=true), before the flags are parsed: a daemon that joins a running
// job (--join) takes no --index.
bool BoolFlagInArgv(int argc, char** argv,
                    std::initializer_list<const char*> names);

// Writes `port` to the --port_file path when one was given, so a launcher or
// test that asked for port 0 learns the bound port. The write is atomic and
// durable (WriteFileAtomically: the file holds the whole number or is absent).
// When it fails the daemon cannot be found by whoever waits on the file, so
// this exits with status 1 (Die): "<role> <index>: --port_file PATH: write port
// file: ...".
void WritePortFile(int port);

// The same for an explicit path ("" = do nothing), returning the error instead
// of exiting; messages name the path and the errno text.
absl::Status WritePortFileTo(const std::string& path, int port);

// The address this daemon registers with the coordinator, given the one it is
// bound to: `advertise` (HOST:PORT, from --advertise) when set (port 0 = the
// bound port); otherwise
// the bound address, except that a wildcard host (0.0.0.0, [::]) is replaced by
// this machine's host name, which peers can resolve.
std::string AdvertisedAddress(const std::string& bound, std::string advertise);

// Blocks until SIGTERM or SIGINT arrives (returns the signal number) or, when
// `done` is given, until it is notified (returns 0). Until a daemon calls it
// (while it starts: waiting for the coordinator, loading a checkpoint), a
// SIGTERM/SIGINT ends the daemon at once with status 0 and the line
// "<role> <index>: signal 15 (Terminated) while starting: stopping before
// serving (nothing to flush)".
int WaitForShutdownSignal(absl::Notification* done = nullptr);

// Prints "<role>: <message>" to stderr and exits with `code`. When `code` is
// not 0 and --exit_reason_file was given, first writes `message` there
// (WriteExitReasonTo), so that a launcher can report why the daemon gave up
// without reading its log; a failed write is one more line on stderr.
[[noreturn]] void Die(const std::string& role, const std::string& message,
                      int code);

// Writes "<message>\n" to `path` ("" = do nothing) atomically
// (WriteFileAtomically: the reader sees the whole message or no file).
// Errors name the path and the errno text.
absl::Status WriteExitReasonTo(const std::string& path,
                               const std::string& message);

}  // namespace downpour

#endif  // DOWNPOUR_RPC_DAEMON_H_
