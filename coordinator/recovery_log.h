// Every take-over and restart of a shard (a proto::ShardRecovery each, oldest
// first): the updates and acknowledged pushes each lost, whether that figure
// is final, and when the shard had an in-sync backup again. A part of
// ClusterState, which calls it under its lock.
//
//   RecoveryLog log(clock, start);
//   log.Record(0, "old:1", "new:2", "checkpoint", /*before=*/120,
//   std::nullopt); log.SettleApplied(0, "new:2", /*applied_total=*/100);  // 20
//   lost
#ifndef DOWNPOUR_COORDINATOR_RECOVERY_LOG_H_
#define DOWNPOUR_COORDINATOR_RECOVERY_LOG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/membership.h"
#include "proto/coordinator.pb.h"
#include "proto/coordinator_state.pb.h"

namespace downpour::coordinator {

// Single-threaded: ClusterState calls it under its lock.
class RecoveryLog {
 public:
  // `clock` is not owned; `start` is uptime zero.
  RecoveryLog(Clock* clock, absl::Time start) : clock_(clock), start_(start) {}

  RecoveryLog(const RecoveryLog&) = delete;
  RecoveryLog& operator=(const RecoveryLog&) = delete;

  const std::vector<proto::ShardRecovery>& recoveries() const {
    return recoveries_;
  }
  bool worker_pushes_uncountable() const { return worker_pushes_uncountable_; }

  // Records shard `shard` served by someone new (`source`: "restart",
  // "replica" or "checkpoint"), which held `before` updates; `after` set when
  // already known (a restart reports it), else SettleApplied settles it.
  // Logs a restart that lost updates (an ERROR when it lost them all).
  void Record(int shard, const std::string& from, const std::string& to,
              const std::string& source, uint64_t before,
              std::optional<uint64_t> after);
  // Shard `shard`'s server at `address` reports `applied_total` updates:
  // settles what its unsettled recoveries to `address` lost (each logged).
  // True when any was settled.
  bool SettleApplied(int shard, const std::string& address,
                     uint64_t applied_total);
  // The acknowledged pushes shard `ps`'s current server reports lost
  // (MemberReport.acked_pushes_lost, plus its push holes when `final`), onto
  // its latest recovery; true when that made the figure final (a change to
  // save).
  bool SettleAckedLoss(const Member& ps, bool final);
  // Shard `shard` has an in-sync backup: stamps its recoveries still waiting
  // for one with the time (logged).
  void NoteBackupInSync(int shard);
  // Worker `worker`'s process, which had `pushed` pushes acknowledged, was
  // replaced before it finished: from now on a recovery from a checkpoint
  // cannot count all the pushes it lost (logged once).
  void NoteWorkerProcessLost(int worker, uint64_t pushed);

  // Every recovery and the totals of what they lost.
  void AddStatus(proto::ClusterStatusResponse* response) const;
  void SaveTo(proto::CoordinatorState* state) const;
  void Restore(const proto::CoordinatorState& state);

 private:
  // Recovery `r` (settled) restored the same checkpoint as the shard's
  // change before it: sets what that one counted, which r's server counts
  // again (ShardRecovery.acked_pushes_recounted).
  void NoteRecount(proto::ShardRecovery* r) const;

  // Constant after construction.
  Clock* const clock_;
  const absl::Time start_;

  std::vector<proto::ShardRecovery> recoveries_;
  // A worker process that had pushes acknowledged was replaced by a new one
  // before it finished (killed, crashed). A shard recovered from a checkpoint
  // counts lost pushes from the gaps in each worker process's sequences as
  // that process pushes on; a process that never pushes again leaves no gap
  // to see, so from then on every such count is a lower bound ("at least"):
  // loss_final stays false for recoveries not from a replica.
  bool worker_pushes_uncountable_ = false;
};

}  // namespace downpour::coordinator

#endif  // DOWNPOUR_COORDINATOR_RECOVERY_LOG_H_
