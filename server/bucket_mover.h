// A ps's side of live bucket moves (docs/OPERATIONS.md, "Moving buckets"),
// as the coordinator's heartbeats and placement describe them
// (proto/coordinator.proto BucketMove):
//   - into this shard, phase "copy": a thread of its own copies the rows
//     from the source in passes (server/bucket_transfer.h), each pass only
//     what changed since the last, and reports caught_up once a pass is
//     small; the coordinator then switches the placement;
//   - into this shard, phase "switched": before the ps serves the switch's
//     epoch, FinishSwitched takes the last pass (the source, serving that
//     epoch, no longer changes the rows) and the move's dense blocks whole
//     (CopyBlocks), and reports done; a move of blocks only has no copy
//     passes before the switch;
//   - after any move into or out of this shard ends (done or rolled back),
//     the rows of buckets the shard neither holds nor moves are dropped, and
//     the copies of dense blocks it moved away are released.
//
//   BucketMover mover(shard, 1);            // shard 1's
//   mover.Update(response.moves_in(), response.moves_out());  // heartbeat
//   report.mutable_move_progress() = mover.Progress();
//   RETURN_IF_ERROR(mover.FinishSwitched(placement, should_stop)); // then
//   serve
//
// Thread-safe.
#ifndef DOWNPOUR_SERVER_BUCKET_MOVER_H_
#define DOWNPOUR_SERVER_BUCKET_MOVER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "proto/coordinator.pb.h"
#include "server/bucket_transfer.h"
#include "server/shard.h"

namespace downpour::server {

class BucketMover {
 public:
  using Moves = google::protobuf::RepeatedPtrField<proto::BucketMove>;

  // `shard` (shard `index`) must outlive the mover.
  BucketMover(Shard* shard, int index);
  BucketMover(const BucketMover&) = delete;
  BucketMover& operator=(const BucketMover&) = delete;
  ~BucketMover();  // joins the copy thread

  // A heartbeat's moves into and out of this shard (in progress). Starts the
  // copy of new "copy" moves; forgets ended ones, then drops the rows no
  // move and no placement bucket holds any more.
  void Update(const Moves& in, const Moves& out) ABSL_LOCKS_EXCLUDED(mu_);
  // The moves into this shard as the heartbeat reports them.
  std::vector<proto::BucketMoveProgress> Progress() const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Before the ps serves `placement`: the last pass of every "switched" move
  // into this shard whose switch_epoch it reaches, from the source's address
  // in `placement` (retried while the source has not reached the epoch, up
  // to `give_up_after`, or until `should_stop`). The error of the last try
  // when it does not complete: the ps must not serve the epoch then.
  absl::Status FinishSwitched(const proto::GetPlacementResponse& placement,
                              absl::Duration give_up_after,
                              const std::function<bool()>& should_stop)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Move {
    proto::BucketMove spec;
    std::unique_ptr<IncomingMove> copy;
    int64_t evicted_at_start = 0;
    bool caught_up = false;
    bool done = false;
    bool busy = false;  // a pass runs (its copy is used outside the lock)
    std::string error;
  };

  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  // One pass of `move` from `address` (at_epoch: the last one); imports
  // each chunk.
  absl::Status Pass(IncomingMove* move, const std::string& address,
                    uint64_t at_epoch) const;
  // FinishSwitched's last pass of `m` (its rows into `copy`, then its
  // dense blocks) from the source at `address`, retried while the source has
  // not reached the switch epoch, up to `give_up_after` or `should_stop`.
  absl::Status LastPass(const proto::BucketMove& m, IncomingMove* copy,
                        const std::string& address,
                        absl::Duration give_up_after,
                        const std::function<bool()>& should_stop);
  // The last pass of `move`'s dense blocks from the source at `address`
  // (it answers once it serves the switch epoch), imported into the shard.
  absl::Status PassBlocks(const proto::BucketMove& move,
                          const std::string& address) const;
  // The rows of buckets neither held nor in `keep_moves` dropped, logged.
  void Sweep(const Moves& in, const Moves& out);

  Shard* const shard_;
  const int index_;

  mutable absl::Mutex mu_;
  std::map<uint64_t, Move> moves_ ABSL_GUARDED_BY(mu_);  // into this shard
  std::set<uint64_t> seen_ ABSL_GUARDED_BY(mu_);  // moves in or out, last heard
  bool swept_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_BUCKET_MOVER_H_
