// Which shard owns each sparse hash bucket, and the live moves of buckets
// between shards (issue 43; docs/OPERATIONS.md, "Growing and shrinking the ps
// set"). A part of ShardPlacement, called under ClusterState's lock.
//
// A move's phases (proto::BucketMove): "copy" (the destination copies the
// rows from the source while pushes go on there), "switched" (the destination
// reported caught_up: the owners change and the placement epoch rises),
// "done" (the destination serves the switch epoch) or "rolled back" (a
// "copy" move whose source or destination died or restarted, or whose
// coordinator restarted: the owners are unchanged). A "switched" move never
// rolls back: it continues with whoever serves the two shards until done.
//
//   BucketMoves moves(1024, 2);              // bucket b on shard b % 2
//   moves.Start({0, 2}, 1, "psctl", now);    // one move from shard 0
//   moves.Progress(1, reports, epoch + 1, now);  // a destination's heartbeat
//
// Every requested move starts at once (no queue): a plan from Plan makes one
// move per (source, destination) pair, and the ps copies the moves into it
// one after another or together as it likes.
#ifndef DOWNPOUR_COORDINATOR_BUCKET_MOVES_H_
#define DOWNPOUR_COORDINATOR_BUCKET_MOVES_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/repeated_field.h"
#include "proto/coordinator.pb.h"
#include "proto/coordinator_state.pb.h"

namespace downpour::coordinator {

// Single-threaded: ShardPlacement calls it under ClusterState's lock.
class BucketMoves {
 public:
  // How many ended moves are kept (ClusterStatusResponse.bucket_moves).
  static constexpr size_t kEndedKept = 16;

  // The phases, as BucketMove.phase spells them.
  static constexpr char kCopy[] = "copy";
  static constexpr char kSwitched[] = "switched";
  static constexpr char kDone[] = "done";
  static constexpr char kRolledBack[] = "rolled back";

  // What Progress changed.
  struct Changes {
    int switched = 0;      // moves that switched (the caller raises the epoch)
    bool changed = false;  // anything to save (a phase or rows_copied)
    // The moves that switched, as they are now: the caller moves their
    // dense blocks in the placement.
    std::vector<proto::BucketMove> switched_moves;
  };

  // A balance plan's move: `buckets` and dense `blocks` (ascending) from
  // `from` to `to`.
  struct Planned {
    int from = -1;
    int to = -1;
    std::vector<uint32_t> buckets;
    std::vector<uint32_t> blocks;
  };

  // The dense blocks as the placement holds them: entry id, the shard of
  // block id (-1: none yet) and its floats.
  struct Blocks {
    std::vector<int> owners;
    std::vector<int64_t> floats;
  };

  // `buckets` hash buckets (0: a model without sparse tables, nothing can
  // move) over `shards` shards, bucket b on shard b % shards.
  BucketMoves(uint32_t buckets, int shards);

  BucketMoves(const BucketMoves&) = delete;
  BucketMoves& operator=(const BucketMoves&) = delete;

  uint32_t buckets() const { return static_cast<uint32_t>(owners_.size()); }
  int shards() const { return shards_; }
  // Entry b: the shard bucket b's keys go to now.
  const std::vector<int>& owners() const { return owners_; }
  // How many buckets `shard` owns.
  int CountOn(int shard) const;
  // The moves, in progress and the kept ended ones, in the order started.
  const std::vector<proto::BucketMove>& moves() const { return moves_; }
  bool InProgress(const proto::BucketMove& move) const;

  // A shard was added to the running job (psctl add-ps): it owns nothing.
  void AddShard() { ++shards_; }

  // Starts moves of `buckets` and of dense blocks `block_ids` (of
  // `blocks`, the placement's) to shard `to_shard`, one per source shard,
  // each in phase "copy", `reason` recorded, `now` its started_seconds.
  // Nothing starts on an error: InvalidArgument for no buckets and no
  // blocks, a bucket outside [0, buckets()) or a block outside the model, one
  // named twice, or a to_shard that is not a shard; FailedPrecondition for
  // buckets of a model without sparse tables, a bucket or block `to_shard`
  // holds already, or one in a move in progress (named with it).
  absl::StatusOr<std::vector<proto::BucketMove>> Start(
      const std::vector<uint32_t>& buckets, int to_shard,
      const std::string& reason, double now,
      const std::vector<uint32_t>& block_ids = {}, const Blocks& blocks = {});

  // A destination's heartbeat: its reports on the moves into `shard`
  // (reports on other moves are ignored). A "copy" move reported caught_up
  // switches: its buckets go to the destination and switch_epoch is
  // `next_epoch` (the caller makes that the placement epoch when
  // switched > 0). A "switched" move reported done ends. Each is logged.
  Changes Progress(
      int shard,
      const google::protobuf::RepeatedPtrField<proto::BucketMoveProgress>&
          reports,
      uint64_t next_epoch, double now);

  // Shard `shard`'s process died, restarted or was taken over (`why` says
  // which, e.g. "ps 1 at host:2 died"): its moves in "copy" roll back with
  // that reason (logged); "switched" ones go on. Returns how many rolled back.
  int ShardGone(int shard, const std::string& why, double now);

  // The moves into (`in`) or out of `shard` that are in progress.
  std::vector<proto::BucketMove> MovesOf(int shard, bool in) const;

  // The moves that even the buckets per shard among the `live` shards
  // (entry s: shard s may hold buckets; `drain_shard` >= 0 holds none): each
  // ends with floor or ceil of buckets / live shards. Buckets in a move in
  // progress count where they go and are not moved again. Keys hash
  // uniformly to buckets, so even buckets are even rows and push load within
  // the hash's spread. The dense `blocks` are evened by floats: every block
  // of `drain_shard` goes to the live shard holding the fewest floats, then
  // blocks move from the shard holding the most floats to the one holding
  // the fewest while one (the largest that fits) narrows the gap.
  // FailedPrecondition when no shard may hold buckets.
  absl::StatusOr<std::vector<Planned>> Plan(const std::vector<bool>& live,
                                            int drain_shard,
                                            const Blocks& blocks = {}) const;

  // Ended moves beyond kEndedKept are forgotten, oldest first.
  void Trim();

  // The owners (when any bucket left its first shard) and the moves.
  void SaveTo(proto::CoordinatorState* state) const;
  // The saved owners and moves, after a coordinator restart: "copy" moves
  // roll back ("the coordinator restarted during the copy"), "switched" ones
  // continue. Owners of another size than buckets() are ignored (logged).
  void Restore(const proto::CoordinatorState& state, double now);

 private:
  proto::BucketMove* Find(uint64_t id);
  // FailedPrecondition when any of `buckets` or `blocks` is in a move in
  // progress.
  absl::Status CheckFree(const std::vector<uint32_t>& buckets,
                         const std::vector<uint32_t>& blocks) const;
  // Plan's dense part: the block moves, by (from, to), into *moves.
  void PlanBlocks(const std::vector<int>& takers, int drain_shard,
                  const Blocks& blocks,
                  std::map<std::pair<int, int>, Planned>* moves) const;
  void End(proto::BucketMove& move, const char* phase, double now);
  // The owners once every move in progress has switched.
  std::vector<int> Projected() const;
  // The same for the blocks of `blocks`.
  std::vector<int> ProjectedBlocks(const Blocks& blocks) const;

  std::vector<int> owners_;  // entry b: bucket b's shard
  int shards_;
  std::vector<proto::BucketMove> moves_;
  uint64_t next_id_ = 1;
};

// "0-99,200" as a list of buckets (ascending, each once); InvalidArgument
// naming the bad part.
absl::StatusOr<std::vector<uint32_t>> ParseBucketList(const std::string& text);
// The reverse: "0-99,200".
std::string FormatBucketList(const std::vector<uint32_t>& buckets);
// What `move` moves: "21 buckets (0-20)", "2 dense blocks (3,4)", or both
// joined by "and".
std::string DescribeMoved(const proto::BucketMove& move);

}  // namespace downpour::coordinator

#endif  // DOWNPOUR_COORDINATOR_BUCKET_MOVES_H_
