// The primary's side of shard replication (cluster.replication 2): streams
// every change of its Shard to the shard's backup, a standby ps
// (server/replication/replica.h), and tells the push path when a change is safe
// to acknowledge.
//
//   Replicator replicator(shard, options);
//   replicator.SetBackup("10.0.0.7:7201");        // from the coordinator
//   shard->Push(...);                             // applied
//   replicator.WhenReplicated([=](const absl::Status& s) { Reply(s); });
//
// A thread takes consistent cuts of the shard (Shard::CutForReplica: the
// blocks changed since the last cut and every worker's push window, copied at
// one moment) and sends each as Replicate requests, one cut at a time. A
// waiter is called once a cut that holds its change has been acknowledged by
// the backup. The first cut to a backup, and the first after a failed send,
// is full. Pushes that arrive while a cut is on the wire go in the next one,
// so under load each cut carries many pushes.
//
// Failures:
//   - The backup answers Aborted: it serves this shard itself now (it took
//     over), so this primary was replaced. Waiters get Unavailable, nothing
//     more is acknowledged, and options.on_replaced runs once.
//   - The backup cannot be reached: waiters wait (and the cut is retried) for
//     up to options.give_up_after; after that the backup counts as dead, the
//     waiters are released with OK and later pushes are acknowledged without
//     a backup ("replication_degraded" counts them) until a send succeeds
//     again or the coordinator names another backup. The coordinator, which
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

  // The backup to stream to ("" = none). A new address starts with a full
  // cut.
  void SetBackup(const std::string& address) ABSL_LOCKS_EXCLUDED(mu_);

  // Calls done(status) once the backup holds every change the shard had made
  // when this was called: OK, or Unavailable when this primary was replaced
  // or is stopping. Called at once (OK) without a backup. May run on the
  // caller's thread or the replicator's; must not block.
  void WhenReplicated(std::function<void(const absl::Status&)> done)
      ABSL_LOCKS_EXCLUDED(mu_);

  // A backup is named and holds the shard's latest acknowledged cut.
  bool in_sync() const ABSL_LOCKS_EXCLUDED(mu_);
  std::string backup() const ABSL_LOCKS_EXCLUDED(mu_);

  // Ends the thread; waiters get Unavailable. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  using Waiter = std::pair<uint64_t, std::function<void(const absl::Status&)>>;

  // One round of Loop: the backup and what to send it.
  struct Round {
    std::string address;  // "" = no backup: nothing to send
    bool full = false;
    uint64_t version = 0;  // backup_version_
    uint64_t acked = 0;    // acked_
  };
  // What a round's send changed: waiters to call with `result`, whether the
  // backup took the shard over (the thread ends) or the send failed (a pause
  // before the next round).
  struct Settled {
    std::vector<Waiter> done;
    absl::Status result;
    bool replaced = false;
    bool failed = false;
  };

  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  // Waits for work (after a pause when the last send `failed`); false when
  // the thread is to end.
  bool AwaitRound(bool failed, Round* round) ABSL_LOCKS_EXCLUDED(mu_);
  // Records a round's outcome: the cut of `generation`, sent since `started`.
  Settled Settle(const Round& round, const absl::Status& sent,
                 uint64_t generation, absl::Time started)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Settle's cases: the backup holds the cut; it took the shard over
  // (Aborted); its copy differs (DataLoss); the send failed otherwise.
  void Synced(const std::string& address, uint64_t generation,
              absl::Duration lag, Settled* settled)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Replaced(const absl::Status& sent, Settled* settled)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Mismatched(const absl::Status& sent) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendFailed(const std::string& address, const absl::Status& sent,
                  absl::Time now, Settled* settled)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends one cut (its updates' gradients are moved into the requests);
  // returns the status of the send.
  absl::Status Send(proto::ParameterServer::Stub* stub, Shard::ReplicaCut* cut,
                    bool full);
  // Waiters with generation <= `generation` (all when `all`), removed.
  std::vector<Waiter> TakeWaiters(uint64_t generation, bool all)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || (!backup_.empty() && (poked_ || need_full_));
  }

  Shard* const shard_;
  const Options options_;

  mutable absl::Mutex mu_;
  std::string backup_ ABSL_GUARDED_BY(mu_);
  uint64_t backup_version_ ABSL_GUARDED_BY(mu_) = 0;  // bumped per SetBackup
  bool need_full_ ABSL_GUARDED_BY(mu_) = true;
  bool poked_ ABSL_GUARDED_BY(mu_) = false;
  bool in_sync_ ABSL_GUARDED_BY(mu_) = false;
  bool degraded_ ABSL_GUARDED_BY(mu_) = false;
  bool replaced_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t acked_ ABSL_GUARDED_BY(mu_) = 0;  // generation the backup holds
  absl::Time failing_since_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  std::vector<Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_REPLICATION_REPLICATOR_H_
