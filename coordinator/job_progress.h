// How far the job is: whether and why it stopped (a confirmed claim of
// training.target, or every worker finished), when a report first met the
// target, and the clock a joining worker starts at. A part of ClusterState,
// which calls it under its lock after each change of the members.
//
//   JobProgress progress(config, clock, start);
//   if (progress.MaybeStop(members, parts)) ...  // stopped just now: save
//   response.set_stop(progress.stopped());
#ifndef DOWNPOUR_COORDINATOR_JOB_PROGRESS_H_
#define DOWNPOUR_COORDINATOR_JOB_PROGRESS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/clock.h"
#include "common/config.h"
#include "coordinator/data_part_table.h"
#include "coordinator/membership.h"
#include "proto/coordinator.pb.h"
#include "proto/coordinator_state.pb.h"

namespace downpour::coordinator {

// Single-threaded: ClusterState calls it under its lock.
class JobProgress {
 public:
  // The job's target is `config`'s (TargetOf). `clock` is not owned; `start`
  // is uptime zero.
  JobProgress(const Config& config, Clock* clock, absl::Time start);

  JobProgress(const JobProgress&) = delete;
  JobProgress& operator=(const JobProgress&) = delete;

  bool stopped() const { return stop_; }
  const std::string& stop_reason() const { return stop_reason_; }

  // The clock a worker joining the pack starts at (ssp): the smallest clock
  // of the other workers still training (0 when none).
  static uint64_t StartClock(const std::vector<Member>& workers, int joining);

  // Decides whether the job is over; true when it stopped it just now. A
  // worker's claim to have reached training.target counts once a ps holds
  // pushes of its process (PushesApplied) and is confirmed by a second
  // evaluation: another counting claim's while another worker still
  // evaluates, else the claimant's own next one. Also notes the first report
  // that met the target.
  bool MaybeStop(const Membership& members, const DataPartTable& parts);

  // The stop and its reason, for a heartbeat reply.
  void AddTo(proto::HeartbeatResponse* response) const;
  // The stop, its reason and when the target was first reached.
  void AddStatus(proto::ClusterStatusResponse* response) const;
  // The job's end is durable: a restarted coordinator stays done.
  void SaveTo(proto::CoordinatorState* state) const;
  void Restore(const proto::CoordinatorState& state);

 private:
  // What one pass over the workers found (MaybeStop).
  struct Scan {
    std::vector<const Member*> claims;  // claims of the target that count
    int evaluating = 0;  // workers that may still confirm a claim
    bool any_finished = false;
    bool all_done = true;
  };
  Scan ScanWorkers(const Membership& members, const DataPartTable& parts);
  // Stops the job when a claim is confirmed (Scan.claims).
  void Confirm(const Scan& scan);
  // True when a live ps or standby reports pushes of `worker`'s registered
  // incarnation applied (MemberReport.applied_from).
  static bool PushesApplied(const Membership& members, const Member& worker);

  // Constant after construction.
  const JobTarget target_;
  Clock* const clock_;
  const absl::Time start_;

  // Per worker index, the evaluation that first claimed training.target
  // (MaybeStop): a claim counts once a second evaluation confirms it.
  struct Claim {
    uint64_t incarnation = 0;
    uint64_t evaluations = 0;
  };
  std::map<int, Claim> first_claim_;
  bool stop_ = false;
  std::string stop_reason_;
  // When a report first met the job's target (ClusterStatusResponse
  // .target_reached_*): uptime seconds (-1: not yet), by whom, its value.
  double target_reached_s_ = -1;
  int target_reached_by_ = -1;
  double target_reached_value_ = 0;
};

}  // namespace downpour::coordinator

#endif  // DOWNPOUR_COORDINATOR_JOB_PROGRESS_H_
