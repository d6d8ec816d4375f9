// psctl move-buckets, add-ps, drain-ps and moves.
#include "tools/bucket_move_commands.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "coordinator/bucket_moves.h"

namespace downpour::tools {
namespace {

using coordinator::DescribeMoved;
using coordinator::ParseBucketList;

bool Ended(const proto::BucketMove& m) {
  return m.phase() == "done" || m.phase() == "rolled back";
}

// "copy, 1234 rows, 2.5 s" and the like, as of coordinator uptime `now`.
std::string Progress(const proto::BucketMove& m, double now) {
  const double end = m.ended_seconds() >= 0 ? m.ended_seconds() : now;
  std::string text =
      absl::StrFormat("%s, %d rows copied, %.1f s", m.phase(), m.rows_copied(),
                      end - m.started_seconds());
  if (m.switched_seconds() >= 0) {
    absl::StrAppendFormat(&text, " (copy %.1f s, switched at epoch %d)",
                          m.switched_seconds() - m.started_seconds(),
                          m.switch_epoch());
  }
  if (m.phase() == "rolled back") absl::StrAppend(&text, ": ", m.reason());
  return text;
}

// Starts the moves of `request` and waits for them.
absl::Status StartAndWait(const MovesCalls& calls,
                          const proto::MoveBucketsRequest& request) {
  absl::StatusOr<proto::MoveBucketsResponse> started = calls.move(request);
  if (!started.ok()) return started.status();
  calls.print(started->plan());
  return WaitForMoves(calls, *started);
}

// The buckets and dense blocks the placement gives `shard`.
int HeldBy(const proto::GetPlacementResponse& placement, int shard) {
  for (const proto::ShardInfo& s : placement.shards()) {
    if (s.index() == shard) return s.buckets_size() + s.block_ids_size();
  }
  return 0;
}

}  // namespace

absl::Status WaitForMoves(const MovesCalls& calls,
                          const proto::MoveBucketsResponse& started) {
  std::set<uint64_t> waiting;
  for (const proto::BucketMove& m : started.started()) waiting.insert(m.id());
  std::map<uint64_t, std::string> said;
  const absl::Time deadline = absl::Now() + calls.timeout;
  while (!waiting.empty()) {
    absl::StatusOr<proto::ClusterStatusResponse> status = calls.status();
    if (!status.ok()) return status.status();
    for (const proto::BucketMove& m : status->bucket_moves()) {
      if (waiting.count(m.id()) == 0) continue;
      const std::string line = absl::StrFormat(
          "move %d (%s, shard %d -> %d): %s", m.id(), DescribeMoved(m),
          m.from_shard(), m.to_shard(), Progress(m, status->uptime_seconds()));
      // Times tick on every read: a line when the phase or rows change.
      const std::string key = absl::StrCat(m.phase(), "/", m.rows_copied());
      if (said[m.id()] != key) calls.print(line);
      said[m.id()] = key;
      if (m.phase() == "rolled back") {
        return absl::AbortedError(absl::StrCat(
            "move ", m.id(), " of ", DescribeMoved(m), " from shard ",
            m.from_shard(), " to shard ", m.to_shard(),
            " rolled back: ", m.reason(), ". Shard ", m.from_shard(),
            " keeps them; run the command again once the shards are up "
            "(psctl status)"));
      }
      if (Ended(m)) waiting.erase(m.id());
    }
    if (waiting.empty()) break;
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "the bucket moves ", absl::StrJoin(waiting, ", "),
          " have not ended after ", absl::FormatDuration(calls.timeout),
          "; they go on: watch them with psctl moves (or wait longer with "
          "--wait_s)"));
    }
    absl::SleepFor(calls.poll);
  }
  return absl::OkStatus();
}

absl::Status MoveBucketsCommand(const MovesCalls& calls,
                                const std::string& buckets, int to,
                                const std::string& blocks) {
  proto::MoveBucketsRequest request;
  if (!buckets.empty()) {
    absl::StatusOr<std::vector<uint32_t>> list = ParseBucketList(buckets);
    if (!list.ok()) return list.status();
    for (uint32_t b : *list) request.add_buckets(b);
  }
  if (!blocks.empty()) {
    absl::StatusOr<std::vector<uint32_t>> list = ParseBucketList(blocks);
    if (!list.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--blocks: ", list.status().message(), " (block ids, e.g. 0-3,7)"));
    }
    for (uint32_t b : *list) request.add_blocks(b);
  }
  request.set_to_shard(to);
  request.set_drain_shard(-1);
  return StartAndWait(calls, request);
}

absl::Status AddPsCommand(const MovesCalls& calls, const std::string& address) {
  const absl::Time deadline = absl::Now() + calls.timeout;
  int shard = -1;
  bool waited = false;
  while (shard < 0) {
    absl::StatusOr<proto::ClusterStatusResponse> status = calls.status();
    if (!status.ok()) return status.status();
    for (const proto::MemberStatus& m : status->members()) {
      if (m.role() == "ps" && m.address() == address && m.alive()) {
        shard = m.index();
      }
    }
    if (shard >= 0) break;
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no ps registered from ", address, " within ",
          absl::FormatDuration(calls.timeout),
          ": start it with ps_server --config FILE --join --listen ", address,
          " (and --advertise when it listens on another address), then run "
          "add-ps again"));
    }
    if (!waited) {
      calls.print(absl::StrCat("waiting for a ps started with --join at ",
                               address, " to register"));
    }
    waited = true;
    absl::SleepFor(calls.poll);
  }
  calls.print(absl::StrCat("ps at ", address, " serves shard ", shard,
                           ": moving buckets until the shards are even"));
  proto::MoveBucketsRequest request;
  request.set_balance(true);
  request.set_drain_shard(-1);
  return StartAndWait(calls, request);
}

namespace {

// Where the standby at `address` stands: -1 not registered, 0 registered
// and no backup yet, 1 backing up `*shard`, 2 in sync; `*unbacked`: a shard
// has no in-sync backup.
int StandbyState(const proto::ClusterStatusResponse& status,
                 const std::string& address, int* shard, bool* unbacked) {
  int state = -1;
  for (const proto::MemberStatus& m : status.members()) {
    if (m.role() == "standby" && m.address() == address && m.alive()) state = 0;
  }
  *unbacked = false;
  for (const proto::ShardReplication& r : status.shard_replication()) {
    *unbacked |= r.backup_standby() < 0 || !r.in_sync();
    if (state >= 0 && r.backup_address() == address) {
      *shard = r.shard();
      state = std::max(state, r.in_sync() ? 2 : 1);
    }
  }
  return state;
}

}  // namespace

absl::Status AddStandbyCommand(const MovesCalls& calls,
                               const std::string& address) {
  const absl::Time start = absl::Now();
  int said = -2;
  for (;;) {
    absl::StatusOr<proto::ClusterStatusResponse> status = calls.status();
    if (!status.ok()) return status.status();
    int shard = -1;
    bool unbacked = false;
    const int state = StandbyState(*status, address, &shard, &unbacked);
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    if (state == 2) {
      calls.print(absl::StrFormat(
          "standby at %s holds an in-sync copy of shard %d, %.2f s after "
          "add-standby started",
          address, shard, seconds));
      return absl::OkStatus();
    }
    if (state == 0 && !unbacked) {
      calls.print(absl::StrCat("standby at ", address,
                               " registered; every shard has a backup, so it "
                               "waits as a spare for the next failure"));
      return absl::OkStatus();
    }
    if (state != said) {
      calls.print(state < 0 ? absl::StrCat("waiting for a standby started "
                                           "with --spare at ",
                                           address, " to register")
                  : state == 0
                      ? absl::StrCat("standby at ", address,
                                     " registered; waiting to be named a "
                                     "backup")
                      : absl::StrCat("standby at ", address, " backs up shard ",
                                     shard,
                                     "; waiting for its copy to be in sync"));
      said = state;
    }
    if (absl::Now() - start >= calls.timeout) {
      return absl::DeadlineExceededError(absl::StrCat(
          "the standby at ", address, " was not in sync within ",
          absl::FormatDuration(calls.timeout),
          state < 0 ? ": start it with ps_server --config FILE --spare "
                      "--listen ADDRESS (and --advertise when it listens on "
                      "another address)"
                    : ": see psctl status and the standby's log"));
    }
    absl::SleepFor(calls.poll);
  }
}

absl::Status DrainPsCommand(const MovesCalls& calls, int shard) {
  proto::MoveBucketsRequest request;
  request.set_balance(true);
  request.set_drain_shard(shard);
  if (absl::Status moved = StartAndWait(calls, request); !moved.ok()) {
    return moved;
  }
  absl::StatusOr<proto::GetPlacementResponse> placement = calls.placement();
  if (!placement.ok()) return placement.status();
  const int left = HeldBy(*placement, shard);
  if (left > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shard ", shard, " still holds ", left,
        " buckets and dense blocks (a move was started meanwhile?): run "
        "drain-ps again"));
  }
  calls.print(absl::StrCat(
      "shard ", shard,
      " holds no buckets and no dense blocks now: its ps may be stopped"));
  return absl::OkStatus();
}

std::string FormatMoves(const proto::ClusterStatusResponse& status,
                        const proto::GetPlacementResponse& placement) {
  std::string out = absl::StrFormat("placement epoch %d\n", placement.epoch());
  absl::StrAppendFormat(&out, "%-6s %-22s %8s %7s\n", "shard", "address",
                        "buckets", "blocks");
  for (const proto::ShardInfo& s : placement.shards()) {
    absl::StrAppendFormat(&out, "%-6d %-22s %8d %7d\n", s.index(), s.address(),
                          s.buckets_size(), s.block_ids_size());
  }
  if (status.bucket_moves().empty()) return out + "no bucket moves\n";
  absl::StrAppend(&out,
                  "\nbucket moves (in progress first, then the last "
                  "ended):\n");
  for (const proto::BucketMove& m : status.bucket_moves()) {
    absl::StrAppendFormat(&out, "move %d: shard %d -> %d, %s: %s\n", m.id(),
                          m.from_shard(), m.to_shard(), DescribeMoved(m),
                          Progress(m, status.uptime_seconds()));
  }
  return out;
}

}  // namespace downpour::tools
