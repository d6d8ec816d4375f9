// psctl's commands that move sparse hash buckets between ps while a job
// trains (docs/OPERATIONS.md, "Growing and shrinking the ps set"):
//
//   psctl move-buckets --to 2 --buckets 0-99,200
//   psctl add-ps 10.0.0.9:7001     # a ps started with --join there
//   psctl drain-ps 2
//   psctl moves
//
// Each starts its moves at the coordinator (MoveBuckets), then waits,
// bounded, printing a line whenever a move's phase or rows change, until every
// move it started is done; a rolled-back move, an unreachable coordinator or
// the wait running out ends it with an error that says what to do.
// Plain C++ over three calls (MovesCalls), so that tests fake them.
#ifndef DOWNPOUR_TOOLS_BUCKET_MOVE_COMMANDS_H_
#define DOWNPOUR_TOOLS_BUCKET_MOVE_COMMANDS_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/coordinator.pb.h"

namespace downpour::tools {

// The coordinator calls the commands make (membership::CoordinatorClient's).
struct MovesCalls {
  std::function<absl::StatusOr<proto::ClusterStatusResponse>()> status;
  std::function<absl::StatusOr<proto::GetPlacementResponse>()> placement;
  std::function<absl::StatusOr<proto::MoveBucketsResponse>(
      const proto::MoveBucketsRequest&)>
      move;
  // Where progress lines go (one line each, no newline).
  std::function<void(const std::string&)> print;
  // How long to wait for the moves (and for add-ps's ps to register), and
  // between two reads of the coordinator's status.
  absl::Duration timeout = absl::Minutes(10);
  absl::Duration poll = absl::Seconds(1);
};

// psctl move-buckets: `buckets` ("0-99,200") and dense `blocks` ("3,4";
// either may be empty) to shard `to`.
absl::Status MoveBucketsCommand(const MovesCalls& calls,
                                const std::string& buckets, int to,
                                const std::string& blocks = "");
// psctl add-ps: waits for a ps that registered with --join from `address`,
// then balances the buckets over every shard.
absl::Status AddPsCommand(const MovesCalls& calls, const std::string& address);
// psctl add-standby: waits for a standby started with --spare at `address`
// to register and, where a shard has no backup, to hold an in-sync copy of
// it; prints how long that took (OK too when every shard is backed up: it
// then waits as a spare).
absl::Status AddStandbyCommand(const MovesCalls& calls,
                               const std::string& address);
// psctl drain-ps: moves every bucket off shard `shard` (refused when it holds
// dense blocks), waits until it holds none, and says it may be stopped.
absl::Status DrainPsCommand(const MovesCalls& calls, int shard);

// Waits until every move of `started` has ended: OK when all are done;
// Aborted naming the move and its reason when one rolled back;
// DeadlineExceeded after calls.timeout (the moves go on).
absl::Status WaitForMoves(const MovesCalls& calls,
                          const proto::MoveBucketsResponse& started);

// psctl moves: each shard's bucket count, then the moves (in progress, then
// the last ended ones) with phase, rows copied and how long each phase took.
std::string FormatMoves(const proto::ClusterStatusResponse& status,
                        const proto::GetPlacementResponse& placement);

}  // namespace downpour::tools

#endif  // DOWNPOUR_TOOLS_BUCKET_MOVE_COMMANDS_H_
