// Renders the coordinator's ClusterStatus as the table `psctl status` prints.
#ifndef DOWNPOUR_TOOLS_STATUS_TABLE_H_
#define DOWNPOUR_TOOLS_STATUS_TABLE_H_

#include <string>

#include "proto/coordinator.pb.h"

namespace downpour::tools {

// One header line, then one line per member: role, index, address, alive,
// seconds since the last heartbeat, step, examples/s, pulls, pushes, bytes,
// mean staleness, loss and TestFigure ("-" where unknown). Below it, each
// worker that streams its data: "worker 0 data: 1.20 GB of 4.00 GB read
// (30 %)" (bytes of its parts over all epochs), then FormatBackups. A
// drained worker that stopped heartbeating is "done", not "DEAD".
std::string FormatStatusTable(const proto::ClusterStatusResponse& status);

// The lines under the table for workers that joined or were drained:
// "worker 2 joined the running job (ps_worker --join)", "worker 1 drained
// (psctl drain-worker): its data parts went to the other workers; it left"
// (or "it is ending its step" while it still heartbeats unfinished).
std::string FormatWorkerChanges(const proto::ClusterStatusResponse& status);

// The lines under the table: each shard's backup ("NONE" when it has none)
// and its seconds without one, when cluster.replication is 2; the
// acknowledged pushes lost per shard, when a shard was recovered.
std::string FormatBackups(const proto::ClusterStatusResponse& status);

// The figure the tables' TEST column shows for a worker: its test rmse when
// it reports regression metrics, else its test accuracy (NaN when unknown).
double TestFigure(const proto::MemberReport& report);

// Human-readable byte count: "512 B", "3.4 MB", "1.2 GB".
std::string FormatBytes(double bytes);

}  // namespace downpour::tools

#endif  // DOWNPOUR_TOOLS_STATUS_TABLE_H_
