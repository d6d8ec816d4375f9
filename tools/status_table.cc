// Fixed-width status table.
#include "tools/status_table.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace downpour::tools {
namespace {

std::string OrDash(double value, int precision) {
  if (std::isnan(value)) return "-";
  return absl::StrFormat("%.*f", precision, value);
}

// "worker 0 data: 1.20 GB of 4.00 GB read (30 %)" for each worker that
// streams its data (MemberReport.data_bytes_*).
std::string FormatDataRead(const proto::ClusterStatusResponse& status) {
  std::string out;
  for (const proto::MemberStatus& m : status.members()) {
    const proto::MemberReport& r = m.report();
    if (m.role() != "worker" || r.data_bytes_total() <= 0) continue;
    absl::StrAppendFormat(
        &out, "worker %d data: %s of %s read (%d %%)\n", m.index(),
        FormatBytes(r.data_bytes_read()), FormatBytes(r.data_bytes_total()),
        static_cast<int>(std::min<int64_t>(
            100, 100 * r.data_bytes_read() / r.data_bytes_total())));
  }
  return out;
}

}  // namespace

double TestFigure(const proto::MemberReport& report) {
  const auto rmse = report.metrics().find("rmse");
  return rmse != report.metrics().end() ? rmse->second : report.accuracy();
}

std::string FormatBytes(double bytes) {
  if (bytes < 1e3) return absl::StrFormat("%.0f B", bytes);
  if (bytes < 1e6) return absl::StrFormat("%.1f kB", bytes / 1e3);
  if (bytes < 1e9) return absl::StrFormat("%.1f MB", bytes / 1e6);
  return absl::StrFormat("%.2f GB", bytes / 1e9);
}

std::string FormatWorkerChanges(const proto::ClusterStatusResponse& status) {
  std::string out;
  for (const proto::MemberStatus& m : status.members()) {
    if (m.role() != "worker") continue;
    if (m.joined()) {
      absl::StrAppendFormat(
          &out, "worker %d joined the running job (ps_worker --join)\n",
          m.index());
    }
    if (m.drained()) {
      absl::StrAppendFormat(
          &out,
          "worker %d drained (psctl drain-worker): its data parts went to the "
          "other workers; %s\n",
          m.index(),
          !m.alive() || m.report().finished() ? "it left"
                                              : "it is ending its step");
    }
  }
  return out;
}

std::string FormatStatusTable(const proto::ClusterStatusResponse& status) {
  std::string out = absl::StrFormat(
      "placement epoch %d, coordinator up %.0f s%s\n", status.placement_epoch(),
      status.uptime_seconds(),
      status.stop() ? absl::StrCat(", job done: ", status.stop_reason()) : "");
  absl::StrAppendFormat(
      &out, "%-7s %3s  %-21s %-5s %8s %8s %9s %8s %8s %9s %6s %8s %7s\n",
      "ROLE", "IDX", "ADDRESS", "ALIVE", "LAST-HB", "STEP", "EX/S", "PULLS",
      "PUSHES", "BYTES", "STALE", "LOSS", "TEST");
  for (const proto::MemberStatus& m : status.members()) {
    const proto::MemberReport& r = m.report();
    const bool worker = m.role() == "worker";
    // A drained worker that stopped heartbeating left as told: not a death.
    const std::string alive = !m.registered()               ? "never"
                              : m.alive()                   ? "yes"
                              : r.finished() || m.drained() ? "done"
                                                            : "DEAD";
    const std::string last =
        m.registered() ? absl::StrFormat("%.1fs", m.seconds_since_heartbeat())
                       : "-";
    absl::StrAppendFormat(
        &out, "%-7s %3d  %-21s %-5s %8s %8s %9s %8d %8d %9s %6s %8s %7s\n",
        m.role(), m.index(), m.address(), alive, last,
        worker ? absl::StrCat(r.step()) : "-",
        worker ? absl::StrFormat("%.0f", r.examples_per_sec()) : "-", r.pulls(),
        r.pushes(), FormatBytes(r.bytes()), OrDash(r.mean_staleness(), 2),
        worker ? OrDash(r.loss(), 4) : "-",
        worker ? OrDash(TestFigure(r), 4) : "-");
  }
  for (const proto::MemberStatus& m : status.members()) {
    const double streak = m.report().duplicate_push_streak_s();
    if (m.role() != "worker" || !m.alive() || streak < 3) continue;
    absl::StrAppendFormat(
        &out,
        "worker %d: every push of the last %.0f s was answered as a duplicate, "
        "so none was applied: never normal (another process pushing as this "
        "worker? docs/SECURITY.md)\n",
        m.index(), streak);
  }
  absl::StrAppend(&out, FormatWorkerChanges(status), FormatDataRead(status),
                  FormatBackups(status));
  return out;
}

namespace {

// "standby 1 at h:2" or, with several backups, "standbys 1 at h:2 and 3 at
// h:4 (1 of 2 in sync)".
std::string FormatShardBackups(const proto::ShardReplication& r) {
  if (r.backup_standbys_size() <= 1) {
    return absl::StrCat("standby ", r.backup_standby(), " at ",
                        r.backup_address());
  }
  std::vector<std::string> each;
  for (int i = 0; i < r.backup_standbys_size(); ++i) {
    each.push_back(
        absl::StrCat(r.backup_standbys(i), " at ", r.backup_addresses(i)));
  }
  std::string out = absl::StrCat("standbys ", absl::StrJoin(each, " and "));
  if (!r.in_sync()) {
    absl::StrAppend(&out, " (", r.backups_in_sync(), " of ",
                    r.backup_standbys_size(), " in sync)");
  }
  return out;
}

}  // namespace

std::string FormatBackups(const proto::ClusterStatusResponse& status) {
  std::string out;
  if (status.replication_factor() >= 2) {
    absl::StrAppendFormat(&out, "shard backups (cluster.replication %d):\n",
                          status.replication_factor());
    for (const proto::ShardReplication& r : status.shard_replication()) {
      std::string backup =
          r.backup_standby() < 0
              ? "NONE (no standby free: losing this ps loses the pushes since "
                "its last checkpoint)"
              : absl::StrCat(FormatShardBackups(r),
                             r.in_sync() ? ", in sync" : ", syncing");
      // (A coordinator before replication 3 names one, in backup_standby.)
      const int named = std::max(r.backup_standbys_size(), 1);
      if (r.backup_standby() >= 0 && named < status.replication_factor() - 1) {
        absl::StrAppend(&backup, " (", named, " of ",
                        status.replication_factor() - 1,
                        " backups: no standby free)");
      }
      absl::StrAppendFormat(&out, "  shard %d: %s; %.1f s unreplicated%s\n",
                            r.shard(), backup, r.unreplicated_seconds(),
                            r.unreplicated_since() >= 0 ? " so far" : "");
    }
  }
  if (status.recoveries_size() > 0) {
    std::map<int, uint64_t> per_shard;
    for (const proto::ShardRecovery& r : status.recoveries()) {
      per_shard[r.shard()] += r.acked_pushes_lost();
    }
    std::vector<std::string> shards;
    for (const auto& [shard, lost] : per_shard) {
      shards.push_back(absl::StrCat("shard ", shard, ": ", lost));
    }
    absl::StrAppendFormat(
        &out, "acknowledged pushes lost in %d recoveries: %s%d (%s)\n",
        status.recoveries_size(), status.acked_loss_final() ? "" : "at least ",
        status.acked_pushes_lost(), absl::StrJoin(shards, ", "));
  }
  return out;
}

}  // namespace downpour::tools
