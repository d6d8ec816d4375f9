// psctl drain-worker: the drain, then a bounded wait for the worker to leave.
#include "tools/drain_worker_command.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace downpour::tools {
namespace {

// Whether worker `worker` has left: not alive, or it reported its end.
// NotFound when the status lists no such worker.
absl::StatusOr<bool> Left(const proto::ClusterStatusResponse& status,
                          int worker) {
  for (const proto::MemberStatus& m : status.members()) {
    if (m.role() != "worker" || m.index() != worker) continue;
    return !m.alive() || m.report().finished();
  }
  return absl::NotFoundError(absl::StrCat(
      "worker ", worker, " is no longer in the coordinator's status"));
}

absl::Status WaitUntilLeft(const DrainWorkerCalls& calls, int worker) {
  const absl::Time deadline = absl::Now() + calls.timeout;
  for (;;) {
    absl::StatusOr<proto::ClusterStatusResponse> status = calls.status();
    if (!status.ok()) return status.status();
    absl::StatusOr<bool> left = Left(*status, worker);
    if (!left.ok()) return left.status();
    if (*left) {
      calls.print(absl::StrCat("worker ", worker, " drained: exited"));
      return absl::OkStatus();
    }
    if (absl::Now() >= deadline) break;
    absl::SleepFor(calls.poll);
  }
  return absl::DeadlineExceededError(absl::StrFormat(
      "worker %d drained, but it did not exit within %g s: its data parts "
      "went to the other workers already; stop its process (it trains on "
      "nothing), or wait longer with --wait_s",
      worker, absl::ToDoubleSeconds(calls.timeout)));
}

}  // namespace

absl::Status DrainWorkerCommand(const DrainWorkerCalls& calls, int worker) {
  proto::DrainWorkerRequest request;
  request.set_index(worker);
  absl::StatusOr<proto::DrainWorkerResponse> drained = calls.drain(request);
  if (!drained.ok()) return drained.status();
  for (const proto::PartHandOff& h : drained->handed()) {
    calls.print(absl::StrFormat(
        "data part %d -> worker %d (it reads on from the part's saved "
        "position)",
        h.part(), h.to()));
  }
  calls.print(drained->message());
  return WaitUntilLeft(calls, worker);
}

}  // namespace downpour::tools
