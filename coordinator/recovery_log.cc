// The take-overs and restarts of shards, and what each lost.
#include "coordinator/recovery_log.h"

#include <utility>

#include "common/logging.h"

namespace downpour::coordinator {
namespace {

spdlog::logger* L() { return Log(Logger::kCoordinator); }

}  // namespace

void RecoveryLog::Record(int shard, const std::string& from,
                         const std::string& to, const std::string& source,
                         uint64_t before, std::optional<uint64_t> after) {
  proto::ShardRecovery r;
  r.set_shard(shard);
  r.set_time_seconds(absl::ToDoubleSeconds(clock_->Now() - start_));
  r.set_from_address(from);
  r.set_to_address(to);
  r.set_source(source);
  r.set_applied_before(before);
  r.set_backup_in_sync_seconds(-1);
  // Acknowledged only once the backup held them: nothing to lose.
  r.set_loss_final(source == "replica");
  if (after.has_value()) {
    r.set_applied_after(*after);
    r.set_lost(before > *after ? before - *after : 0);
    r.set_settled(true);
    NoteRecount(&r);
    if (before > 0 && *after == 0) {
      SPDLOG_LOGGER_ERROR(
          L(),
          "shard {} restarted at {} from INITIAL VALUES, but it held {} "
          "updates: all of them are lost. Was its checkpoint deleted, or "
          "checkpoint.dir changed? Stop the job and restore the checkpoint "
          "to keep them",
          shard, to, before);
    } else if (r.lost() > 0) {
      SPDLOG_LOGGER_WARN(L(),
                         "shard {} restarted at {}: {} updates before, {} "
                         "after: {} lost",
                         shard, to, before, *after, r.lost());
    }
  }
  recoveries_.push_back(std::move(r));
}

bool RecoveryLog::SettleApplied(int shard, const std::string& address,
                                uint64_t applied_total) {
  bool settled = false;
  for (proto::ShardRecovery& r : recoveries_) {
    if (r.shard() != shard || r.settled() || r.to_address() != address) {
      continue;
    }
    // The shard's new server says what it holds: what the change lost.
    r.set_applied_after(applied_total);
    r.set_lost(r.applied_before() > applied_total
                   ? r.applied_before() - applied_total
                   : 0);
    r.set_settled(true);
    NoteRecount(&r);
    // Block updates, not pushes: the acknowledged pushes lost are what
    // SettleAckedLoss logs and the summary reports.
    SPDLOG_LOGGER_WARN(L(),
                       "shard {} now at {} ({}): it holds {} block updates, "
                       "{} fewer than last reported; the acknowledged pushes "
                       "it lost are counted as the workers push on",
                       r.shard(), r.to_address(), r.source(), r.applied_after(),
                       r.lost());
    settled = true;
  }
  return settled;
}

bool RecoveryLog::SettleAckedLoss(const Member& ps, bool final) {
  for (auto r = recoveries_.rbegin(); r != recoveries_.rend(); ++r) {
    if (r->shard() != ps.index) continue;
    // Only the shard's latest change, while its new server reports.
    if (r->to_address() != ps.address) return false;
    const bool became_final =
        final && !r->loss_final() &&
        (r->source() == "replica" || !worker_pushes_uncountable_);
    const uint64_t reported =
        ps.report.acked_pushes_lost() + (final ? ps.report.push_holes() : 0);
    const uint64_t lost = reported > r->acked_pushes_recounted()
                              ? reported - r->acked_pushes_recounted()
                              : 0;
    if (lost != r->acked_pushes_lost() || became_final) {
      if (lost > r->acked_pushes_lost() || became_final) {
        SPDLOG_LOGGER_WARN(L(),
                           "shard {} at {}: {} acknowledged pushes lost in its "
                           "{} from {}{}",
                           ps.index, ps.address, lost, r->source(),
                           r->from_address(),
                           became_final ? " (final)"
                           : final      ? " (at least: a worker process that "
                                          "pushed was lost)"
                                        : " so far");
      }
      r->set_acked_pushes_lost(lost);
    }
    // Exact only while every worker process that pushed either pushes on or
    // finished (worker_pushes_uncountable_); from a replica nothing is lost.
    if (final) {
      r->set_loss_final(r->source() == "replica" ||
                        !worker_pushes_uncountable_);
    }
    return became_final;
  }
  return false;
}

void RecoveryLog::NoteRecount(proto::ShardRecovery* r) const {
  if (r->source() == "replica") return;
  // The changes before r: all of them, or those before r's place in the log.
  size_t end = recoveries_.size();
  if (!recoveries_.empty() && r >= &recoveries_.front() &&
      r <= &recoveries_.back()) {
    end = static_cast<size_t>(r - &recoveries_.front());
  }
  for (size_t i = end; i-- > 0;) {
    const proto::ShardRecovery& prev = recoveries_[i];
    if (prev.shard() != r->shard()) continue;
    // The shard's change before this one restored the same checkpoint: what
    // its server counted lost, this one's counts again.
    if (prev.settled() && prev.source() != "replica" &&
        prev.applied_after() == r->applied_after()) {
      r->set_acked_pushes_recounted(prev.acked_pushes_lost() +
                                    prev.acked_pushes_recounted());
    }
    return;
  }
}

void RecoveryLog::NoteBackupInSync(int shard) {
  const absl::Time now = clock_->Now();
  for (proto::ShardRecovery& r : recoveries_) {
    if (r.shard() != shard || r.backup_in_sync_seconds() >= 0) continue;
    r.set_backup_in_sync_seconds(absl::ToDoubleSeconds(now - start_));
    SPDLOG_LOGGER_INFO(L(),
                       "shard {} has an in-sync backup again {:.2f} s "
                       "after its {} from {}",
                       shard, r.backup_in_sync_seconds() - r.time_seconds(),
                       r.source() == "restart" ? "restart" : "take-over",
                       r.from_address());
  }
}

void RecoveryLog::NoteWorkerProcessLost(int worker, uint64_t pushed) {
  if (worker_pushes_uncountable_) return;
  worker_pushes_uncountable_ = true;
  SPDLOG_LOGGER_WARN(
      L(),
      "worker {}: a new process replaces one that had not finished ({} "
      "pushes acknowledged): pushes of that process a shard loses in a "
      "recovery from its checkpoint cannot all be counted (it never "
      "pushes again), so from now on such losses are reported as lower "
      "bounds",
      worker, pushed);
}

void RecoveryLog::AddStatus(proto::ClusterStatusResponse* response) const {
  uint64_t lost = 0, acked_lost = 0;
  bool final = true;
  for (const proto::ShardRecovery& r : recoveries_) {
    *response->add_recoveries() = r;
    lost += r.lost();
    acked_lost += r.acked_pushes_lost();
    final = final && r.loss_final();
  }
  response->set_updates_lost(lost);
  response->set_acked_pushes_lost(acked_lost);
  response->set_acked_loss_final(final);
}

void RecoveryLog::SaveTo(proto::CoordinatorState* state) const {
  state->set_worker_pushes_uncountable(worker_pushes_uncountable_);
  for (const proto::ShardRecovery& r : recoveries_)
    *state->add_recoveries() = r;
}

void RecoveryLog::Restore(const proto::CoordinatorState& state) {
  recoveries_.assign(state.recoveries().begin(), state.recoveries().end());
  worker_pushes_uncountable_ = state.worker_pushes_uncountable();
}

}  // namespace downpour::coordinator
