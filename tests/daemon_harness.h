// Test helpers that start the real daemons (from the test's runfiles) on
// loopback with ephemeral ports, each with a log in the test's temp dir.
#ifndef DOWNPOUR_TESTS_DAEMON_HARNESS_H_
#define DOWNPOUR_TESTS_DAEMON_HARNESS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/subprocess.h"
#include "common/testing/http_client.h"
#include "gtest/gtest.h"
#include "proto/status.pb.h"

namespace downpour::testing {

// A fresh folder under TEST_TMPDIR named after the running test.
std::string TestDir();

// Folder holding server/ps_server, worker/ps_worker, coordinator/coordinator.
std::string BinDir();

// Writes `yaml` to <TestDir()>/<name> and returns the path.
std::string WriteConfig(const std::string& name, const std::string& yaml);

// A config text for a cluster on 127.0.0.1 with ephemeral ports, heartbeats
// every 0.2 s and members declared dead after `heartbeat_timeout_s` of
// silence; `extra` (more top-level sections) is appended.
std::string LoopbackConfig(int num_ps, int num_workers,
                           const std::string& extra,
                           double heartbeat_timeout_s = 2);

// The MNIST folder given by DOWNPOUR_MNIST_DIR (set by tests/run_all.sh), or
// "".
std::string MnistDir();

// Starts `binary` (e.g. "server/ps_server") with `args`; log at
// TestDir()/<name>.log.
absl::StatusOr<std::unique_ptr<Subprocess>> StartDaemon(
    const std::string& name, const std::string& binary,
    std::vector<std::string> args);

// Waits for the daemon's --port_file; returns "127.0.0.1:<port>".
absl::StatusOr<std::string> WaitForPort(Subprocess& daemon,
                                        const std::string& port_file);

// Counter `name` from the Status service at `address`; -1 when it cannot be
// asked (2 s deadline) or has not counted anything yet.
double StatusCounter(const std::string& address, const std::string& name);

// The same of a daemon that is expected to be up: a Status call that fails
// (its deadline passed on a loaded machine) is asked again until `patience`
// has passed. For single reads compared with EXPECT_*; -1 only when the
// daemon never answered or has no such counter.
double LiveCounter(const std::string& address, const std::string& name,
                   absl::Duration patience = absl::Seconds(20));

// The whole Status (proto/status.proto) of the daemon at `address`: asked
// again (2 s deadline a call) until it answers or `patience` has passed.
absl::StatusOr<proto::GetStatusResponse> DaemonStatus(
    const std::string& address, absl::Duration patience = absl::Seconds(20));

// HttpGet, UrlEncode: common/testing/http_client.h (included).

// Runs `argv` (a tool: psctl, predict, python3) to its end within 120 s;
// its exit status (-1 when it did not start or end), stdout and stderr in
// the file `log`.
int RunToEnd(const std::vector<std::string>& argv, const std::string& log);
// The whole text of the file at `path` ("" when it cannot be read).
std::string ReadText(const std::string& path);
// The number after "name " (its last occurrence) in a tool's output, or NaN.
double Figure(const std::string& text, const std::string& name);

// Writes a LIBSVM file of `rows` examples over 64-bit feature ids: 30
// features each from 3000 ids spread over the whole uint64 range (the same
// ids in every file); the label is +1 when the example holds more
// "positive" ids (a third of them) than 10.
void WriteSparseLibsvm(const std::string& path, int rows, uint64_t seed);

// A fixture for tests that run a job of daemon processes, all started with
// the same --config. TearDown resumes any it left stopped (SIGSTOP) and kills
// what is still running.
class DaemonJobTest : public ::testing::Test {
 protected:
  void TearDown() override;

  // Starts `binary` as `name` with "--config config_" before `args`, and
  // keeps it in daemons_.
  Subprocess& Start(const std::string& name, const std::string& binary,
                    std::vector<std::string> args);

  std::string config_;  // the job's YAML file
  std::map<std::string, std::unique_ptr<Subprocess>> daemons_;
};

}  // namespace downpour::testing

#endif  // DOWNPOUR_TESTS_DAEMON_HARNESS_H_
