// The primary's side of shard replication (cluster.replication 2 and 3):
// streams every change of its Shard to the shard's backups, standby ps
// (server/replication/replica.h), and tells the push path when a change is
// safe to acknowledge.
//
//   Replicator replicator(shard, options);
//   replicator.SetBackups({"10.0.0.7:7201", "10.0.0.8:7201"});  // coordinator
//   shard->Push(...);                             // applied
//   replicator.WhenReplicated([=](const absl::Status& s) { Reply(s); });
//
// A thread takes consistent cuts of the shard (Shard::CutForReplica: the
// blocks changed since the last cut and every worker's push window, copied at
// one moment) and sends each as Replicate requests to every backup at once
// (in parallel), one cut at a time. A waiter is called once every backup
// named (but those counted dead, below) has acknowledged a cut that holds its
// change. The first cut to a backup, and the first after a failed send, is
// full; a round that sends a full cut to one backup sends it to all (a cut
// takes the shard's changes once, so every backup in sync must get every
// cut). Pushes that arrive while a cut is on the wire go in the next one, so
// under load each cut carries many pushes.
//
// Failures, each backup on its own:
//   - A backup answers Aborted: it serves this shard itself now (it took
//     over), so this primary was replaced. Waiters get Unavailable, nothing
//     more is acknowledged, and options.on_replaced runs once.
//   - A backup cannot be reached: it is retried (with a full cut, after a
//     pause) and waiters wait for it for up to options.give_up_after; after
//     that it counts as dead: waiters are released once the other backups
//     hold their change (at once when none is left), and later pushes are
//     acknowledged without it ("replication_degraded" counts the pushes
//     acknowledged while a backup counts as dead) until a send to it succeeds
//     again or the coordinator names other backups. The coordinator, which
//     sees the same standby miss its heartbeats, assigns another.
//   - No backup (none named, or replication 1): waiters are called at once.
#ifndef DOWNPOUR_SERVER_REPLICATION_REPLICATOR_H_
#define DOWNPOUR_SERVER_REPLICATION_REPLICATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/counters.h"
#include "proto/ps.grpc.pb.h"
#include "server/shard.h"

namespace downpour::server {

// Thread-safe.
class Replicator {
 public:
  struct Options {
    int shard_index = 0;
    // This primary's address, for the backup's messages.
    std::string self_address;
    // Each Replicate call's deadline.
    absl::Duration rpc_timeout = absl::Seconds(5);
    // How long pushes wait for an unreachable backup before it counts as
    // dead (heartbeat.timeout_s: by then the coordinator sees it dead too).
    absl::Duration give_up_after = absl::Seconds(3);
    // Largest Replicate request; a larger cut is sent in several.
    int64_t max_request_bytes = 32 << 20;
    // "replicated_cuts", "replicated_bytes", "replication_failures",
    // "replication_degraded", gauge "replication_lag_ms". Not owned.
    Counters* counters = nullptr;
    // Runs once, on the replicator's thread, when the backup says it took
    // the shard over.
    std::function<void()> on_replaced;
  };

  // `shard` must outlive the replicator.
  Replicator(Shard* shard, Options options);
  Replicator(const Replicator&) = delete;
  Replicator& operator=(const Replicator&) = delete;
  ~Replicator();  // Stop()

  // The backups to stream to (empty: none). A backup newly named starts with
  // a full cut; one named before keeps its state; one no longer named is
  // forgotten (waiters that only waited for it are released).
  void SetBackups(const std::vector<std::string>& addresses)
      ABSL_LOCKS_EXCLUDED(mu_);
  // SetBackups with one backup ("" = none).
  void SetBackup(const std::string& address) ABSL_LOCKS_EXCLUDED(mu_);

  // Calls done(status) once every live backup holds every change the shard
  // had made when this was called: OK, or Unavailable when this primary was
  // replaced or is stopping. Called at once (OK) without a backup. May run on
  // the caller's thread or the replicator's; must not block.
  void WhenReplicated(std::function<void(const absl::Status&)> done)
      ABSL_LOCKS_EXCLUDED(mu_);

  // A backup is named and every one named holds the shard's latest
  // acknowledged cut (none counts as dead).
  bool in_sync() const ABSL_LOCKS_EXCLUDED(mu_);
  // How many of the backups named hold the latest acknowledged cut.
  int backups_in_sync() const ABSL_LOCKS_EXCLUDED(mu_);
  // The first backup named ("" = none), and all of them in order.
  std::string backup() const ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<std::string> backups() const ABSL_LOCKS_EXCLUDED(mu_);

  // Ends the thread; waiters get Unavailable. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  using Waiter = std::pair<uint64_t, std::function<void(const absl::Status&)>>;

  // One backup named by SetBackups and what it holds.
  struct Backup {
    std::string address;
    uint64_t id = 0;  // new each time SetBackups names this address afresh
    bool need_full = true;
    bool in_sync = false;
    bool degraded = false;  // unreachable for give_up_after: counts as dead
    uint64_t acked = 0;     // generation the backup holds
    absl::Time failing_since = absl::InfiniteFuture();
    absl::Time retry_at = absl::InfinitePast();  // after a failed send
  };
  // A backup a round sends to.
  struct Target {
    std::string address;
    uint64_t id = 0;
  };
  // One round of Loop: the backups and what to send them.
  struct Round {
    std::vector<Target> targets;  // empty: nothing to send
    bool full = false;
    uint64_t acked = 0;  // the least any target holds
  };
  // What a round's sends changed: waiters to call with `result`, whether a
  // backup took the shard over (the thread ends).
  struct Settled {
    std::vector<Waiter> done;
    absl::Status result;
    bool replaced = false;
  };

  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  // Waits for work; false when the thread is to end.
  bool AwaitRound(Round* round) ABSL_LOCKS_EXCLUDED(mu_);
  // Records a round's outcome: `sent[i]` for round.targets[i], the cut of
  // `generation`, sent since `started`.
  Settled Settle(const Round& round, const std::vector<absl::Status>& sent,
                 uint64_t generation, absl::Time started)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Settle's cases for one backup: it holds the cut; it took the shard over
  // (Aborted); its copy differs (DataLoss); the send failed otherwise.
  void Synced(Backup* b, uint64_t generation, absl::Duration lag)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Replaced(const absl::Status& sent, Settled* settled)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Mismatched(Backup* b, const absl::Status& sent)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendFailed(Backup* b, const absl::Status& sent, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends one cut to every stub (its updates' gradients are moved into the
  // requests); returns each stub's status.
  std::vector<absl::Status> Send(
      const std::vector<proto::ParameterServer::Stub*>& stubs,
      Shard::ReplicaCut* cut, bool full);
  // Waiters with generation <= `generation` (all when `all`), removed.
  std::vector<Waiter> TakeWaiters(uint64_t generation, bool all)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The generation every live backup holds (UINT64_MAX when none is live).
  uint64_t AckedByAll() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AnyDegraded() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Backup* Find(const std::string& address, uint64_t id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A backup to send to now: its last send did not fail just now.
  bool Ready(const Backup& b, absl::Time now) const {
    return b.retry_at <= now;
  }
  // Work for the thread: stopping, or a backup ready with something to send.
  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How long AwaitRound waits at most: until the next failed backup's retry.
  absl::Duration NextWake(absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Shard* const shard_;
  const Options options_;

  mutable absl::Mutex mu_;
  std::vector<Backup> backups_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  // Refreshed by AwaitRound: HasWork compares retry times against it.
  absl::Time now_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool poked_ ABSL_GUARDED_BY(mu_) = false;
  bool replaced_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_REPLICATION_REPLICATOR_H_
