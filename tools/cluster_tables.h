// The tables `psctl workers`, `psctl shards` and `psctl watch` print, from what
// the coordinator says (ClusterStatus, placement, model) and what each member's
// own Status service says (rates, latencies, memory). Pure formatting: the
// gRPC calls live in membership/coordinator_client.h and member_probe.h.
#ifndef DOWNPOUR_TOOLS_CLUSTER_TABLES_H_
#define DOWNPOUR_TOOLS_CLUSTER_TABLES_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/coordinator.pb.h"
#include "proto/status.pb.h"

namespace downpour::tools {

// Each member's own Status, entry i for ClusterStatusResponse.members(i); an
// error where the member did not answer.
using MemberStatuses = std::vector<absl::StatusOr<proto::GetStatusResponse>>;

// One row per worker: alive, step, examples/s, loss, test accuracy, staleness
// p50/p99/max (from its heartbeat report), pulls/s, pushes/s, MB/s, p50/p99 of
// its Pull and Push calls (ms), memory, device; then a line per worker whose
// Status did not answer.
std::string FormatWorkersTable(const proto::ClusterStatusResponse& cluster,
                               const MemberStatuses& statuses);

// Updates per second of each block, measured by the caller between two reads
// of the ps block versions.
struct BlockRate {
  uint32_t id = 0;
  int shard = 0;
  uint64_t version = 0;  // updates applied so far
  double updates_per_sec = 0;
};

// One row per ps: alive, blocks, bytes held, pulls/s, pushes/s, applied
// updates/s, MB/s, p50/p99 of the Pull and Push it served (ms), rejected
// pushes, staleness p50/p99/max (its Status), memory. With a sparse model,
// a row per ps of its sparse tables: rows, bytes, bytes a row, non-zero
// weights, rows created (and per second), keys pulled and pushed per second,
// row updates held, admission's pending keys and filtered updates. Then the
// `top` hottest blocks by updates/s (ties: most updates), with tensor and size.
std::string FormatShardsTable(const proto::ClusterStatusResponse& cluster,
                              const MemberStatuses& statuses,
                              const proto::GetPlacementResponse& placement,
                              const proto::DescribeModelResponse& model,
                              std::vector<BlockRate> blocks, int top);

// One screen of `psctl watch`: the job line, cluster totals with sparklines of
// throughput and best accuracy over the history, and a row per member with its
// rates and latency.
std::string FormatWatchFrame(const std::string& coordinator,
                             const proto::ClusterStatusResponse& cluster,
                             const MemberStatuses& statuses,
                             const proto::GetHistoryResponse& history);

// A row of block characters, one per value, scaled between the values' min and
// max ("▁▂▄█"); non-finite values are blanks. At most `width`, the latest kept.
std::string Sparkline(const std::vector<double>& values, int width);

// One member's line of `psctl health`: `health` (grpc.health.v1: "SERVING",
// "NOT_SERVING", ... or why it could not be asked), made
// "DEGRADED (serving, but its last checkpoint failed: ERROR)" when it serves
// but its Status reports a failed checkpoint (last_checkpoint_error). `status`
// may be an error (not asked, no answer): the health alone counts then.
struct MemberHealth {
  std::string text;
  bool answered = false;  // the health check got an answer
  bool serving = false;   // grpc health is SERVING (DEGRADED included)
  bool degraded = false;  // serving, with a failing checkpoint
};
MemberHealth DescribeHealth(
    const absl::StatusOr<std::string>& health,
    const absl::StatusOr<proto::GetStatusResponse>& status);

// The latency entry `name` of a member's Status, or nullptr.
const proto::RpcLatency* FindLatency(const proto::GetStatusResponse& status,
                                     const std::string& name);

}  // namespace downpour::tools

#endif  // DOWNPOUR_TOOLS_CLUSTER_TABLES_H_
