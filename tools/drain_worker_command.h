// psctl drain-worker: hands a worker's data parts to the other workers and
// waits until it has left (docs/OPERATIONS.md, "Workers that join and leave"):
//
//   $ psctl drain-worker 2
//   data part 2 -> worker 0 (it reads on from the part's saved position)
//   worker 2 drained: part 2 to worker 0 (each from its saved position); ...
//   worker 2 drained: exited
//
// Plain C++ over two coordinator calls (DrainWorkerCalls), so that tests fake
// them.
#ifndef DOWNPOUR_TOOLS_DRAIN_WORKER_COMMAND_H_
#define DOWNPOUR_TOOLS_DRAIN_WORKER_COMMAND_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/coordinator.pb.h"

namespace downpour::tools {

// The coordinator calls drain-worker makes (membership::CoordinatorClient's).
struct DrainWorkerCalls {
  std::function<absl::StatusOr<proto::DrainWorkerResponse>(
      const proto::DrainWorkerRequest&)>
      drain;
  std::function<absl::StatusOr<proto::ClusterStatusResponse>()> status;
  // Where lines go (one line each, no newline).
  std::function<void(const std::string&)> print;
  // How long to wait for the worker to leave (psctl --wait_s, default 60 s),
  // and between two reads of the coordinator's status.
  absl::Duration timeout = absl::Seconds(60);
  absl::Duration poll = absl::Seconds(1);
};

// Drains worker `worker`: prints each part handed and to whom, and the
// coordinator's message; then waits until the worker is no longer alive or
// reports it finished ("worker 2 drained: exited"). Errors: the coordinator's
// refusal as it said it (nothing was drained); DeadlineExceeded when the
// worker still runs after calls.timeout (its parts moved all the same: stop
// its process); a status read that fails while waiting.
absl::Status DrainWorkerCommand(const DrainWorkerCalls& calls, int worker);

}  // namespace downpour::tools

#endif  // DOWNPOUR_TOOLS_DRAIN_WORKER_COMMAND_H_
