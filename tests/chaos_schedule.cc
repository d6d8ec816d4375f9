// The chaos harness's pure parts (see chaos.h): the seeded schedules of
// faults, their descriptions, and the judgement of a run's invariants.
#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tests/chaos.h"
#include "tests/chaos_sparse.h"

namespace downpour::chaos {
namespace {

const char* KindName(FaultKind kind) {
  switch (kind) {
    case FaultKind::kKill:
      return "kill -9";
    case FaultKind::kStop:
      return "SIGSTOP";
    case FaultKind::kDoubleKill:
      return "double kill";
    case FaultKind::kPrimaryAndBackup:
      return "simultaneous kill -9";
    case FaultKind::kFullDisk:
      return "full disk";
    case FaultKind::kPartition:
      return "cut off";
    case FaultKind::kCrawl:
      return "crawl";
    case FaultKind::kMoveBuckets:
      return "move buckets";
    case FaultKind::kJoinWorker:
      return "ps_worker --join";
    case FaultKind::kDrainWorker:
      return "drain-worker";
  }
  return "?";
}

}  // namespace

std::string Describe(const Fault& fault) {
  std::string what =
      absl::StrFormat("%6.2f s: %s", fault.at_s, KindName(fault.kind));
  switch (fault.kind) {
    case FaultKind::kKill:
    case FaultKind::kStop:
      absl::StrAppend(&what, " ", fault.role);
      if (fault.role != "coordinator") absl::StrAppend(&what, " ", fault.index);
      if (fault.role == "ps") absl::StrAppend(&what, " (the shard's server)");
      if (fault.kind == FaultKind::kStop) {
        absl::StrAppendFormat(&what, " for %.2f s", fault.duration_s);
      }
      break;
    case FaultKind::kDoubleKill:
      absl::StrAppendFormat(&what,
                            " shard %d: its server, then its successor %.2f s "
                            "after the take-over",
                            fault.index, fault.duration_s);
      break;
    case FaultKind::kPrimaryAndBackup:
      absl::StrAppendFormat(&what,
                            " shard %d: its server and its backup #%d at the "
                            "same instant",
                            fault.index, fault.backup + 1);
      break;
    case FaultKind::kFullDisk:
      absl::StrAppendFormat(&what, " under the checkpoints for %.2f s",
                            fault.duration_s);
      break;
    case FaultKind::kPartition:
    case FaultKind::kCrawl:
      absl::StrAppend(&what, " ", fault.role);
      if (fault.role != "coordinator") absl::StrAppend(&what, " ", fault.index);
      absl::StrAppend(&what, fault.role == "ps" ? " (the shard's server's host)"
                                                : "'s host");
      if (fault.kind == FaultKind::kCrawl) {
        absl::StrAppendFormat(&what, ": its link at %.2f Mbit/s",
                              fault.rate_mbit);
      }
      absl::StrAppendFormat(&what, " for %.2f s", fault.duration_s);
      break;
    case FaultKind::kMoveBuckets:
      absl::StrAppendFormat(&what,
                            " to shard %d: %d of shard %d's, from %.0f %% "
                            "along its list",
                            fault.index, fault.bucket_count, 1 - fault.index,
                            100 * fault.bucket_share);
      break;
    case FaultKind::kJoinWorker:
      absl::StrAppend(&what, ": a worker joins");
      break;
    case FaultKind::kDrainWorker:
      absl::StrAppendFormat(&what, " of live worker #%d (modulo those live)",
                            fault.index);
      break;
  }
  return what;
}

namespace {

// Kind `k` of the sparse layouts' own: 0-4 a bucket move, 5-6 a join, 7-8 a
// drain.
void ElasticFault(int k, const Layout& layout,
                  const std::function<double(double, double)>& uniform,
                  const std::function<int(int)>& pick, Fault* f) {
  if (k < 5) {
    f->kind = FaultKind::kMoveBuckets;
    f->index = pick(2);  // the destination; the source is the other shard
    f->bucket_share = uniform(0, 1);
    f->bucket_count = 1 + pick(8);
  } else if (k < 7) {
    f->kind = FaultKind::kJoinWorker;
    f->role = "worker";
    f->index = layout.workers;
  } else {
    f->kind = FaultKind::kDrainWorker;
    f->role = "worker";
    f->index = pick(layout.workers + 1);
  }
}

}  // namespace

std::vector<Fault> MakeSchedule(uint64_t seed, int count, double span_s,
                                const Layout& layout) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 1);
  auto uniform = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  auto pick = [&](int n) {
    return static_cast<int>(std::uniform_int_distribution<int>(0, n - 1)(rng));
  };
  // A daemon of any kind, weighted towards the ones that hold the model.
  auto target = [&](Fault* f) {
    const int r = pick(10);
    if (r < 4) {
      f->role = "ps", f->index = pick(layout.shards);
    } else if (r < 6) {
      f->role = "standby", f->index = pick(layout.standbys);
    } else if (r < 9) {
      f->role = "worker", f->index = pick(layout.workers);
    } else {
      f->role = "coordinator", f->index = 0;
    }
  };
  std::vector<Fault> faults;
  for (int i = 0; i < count; ++i) {
    Fault f;
    f.at_s = uniform(0, span_s);
    // Kinds 0-16 as before network faults existed (a seed's schedule without
    // them is unchanged), then the full disk, then the network.
    // Simultaneous kills last of all.
    // Sparse layouts add bucket moves, and elastic ones joins and drains,
    // after those.
    const int net_kinds = layout.network ? 6 : 0;
    const int old_kinds = 17 + (layout.full_disk ? 3 : 0) + net_kinds +
                          (layout.simultaneous ? 4 : 0);
    const int kind = pick(old_kinds + (layout.sparse ? 5 : 0) +
                          (layout.sparse && layout.elastic_workers ? 4 : 0));
    const int network = kind - 17 - (layout.full_disk ? 3 : 0);
    if (kind >= old_kinds) {
      ElasticFault(kind - old_kinds, layout, uniform, pick, &f);
    } else if (kind < 7) {
      f.kind = FaultKind::kKill;
      target(&f);
    } else if (kind < 13) {
      f.kind = FaultKind::kStop;
      target(&f);
      // Some shorter than the heartbeat timeout (1 s), some longer: a member
      // declared dead that wakes up again.
      f.duration_s = uniform(0.2, 3.0);
    } else if (kind < 17) {
      f.kind = FaultKind::kDoubleKill;
      f.role = "ps";
      f.index = pick(layout.shards);
      f.duration_s = uniform(0.0, 1.0);
    } else if (network < 0) {
      f.kind = FaultKind::kFullDisk;
      f.duration_s = uniform(0.5, 4.0);
    } else if (network >= net_kinds) {
      f.kind = FaultKind::kPrimaryAndBackup;
      f.role = "ps";
      f.index = pick(layout.shards);
      f.backup = pick(2);
    } else if (network < 3) {
      f.kind = FaultKind::kPartition;
      target(&f);
      // Shorter than the heartbeat timeout (1 s), or long enough that the
      // coordinator declares the member dead and it comes back fenced.
      f.duration_s = uniform(0.5, 4.0);
    } else {
      f.kind = FaultKind::kCrawl;
      target(&f);
      // A pull of the model (200 KB) takes 0.5-5 s at these rates, past
      // the job's 1 s RPC deadline at most of them.
      f.rate_mbit = uniform(0.3, 3.0);
      f.duration_s = uniform(1.0, 5.0);
    }
    faults.push_back(f);
  }
  std::sort(faults.begin(), faults.end(),
            [](const Fault& a, const Fault& b) { return a.at_s < b.at_s; });
  return faults;
}

std::vector<std::string> CheckInvariants(const Observed& o,
                                         const Judge& judge) {
  std::vector<std::string> v;
  if (!o.ended) {
    v.push_back(absl::StrFormat("hang: the launcher had not ended after %.0f s",
                                o.seconds));
  }
  for (const std::string& daemon : o.left_behind) {
    v.push_back(absl::StrCat("left behind: ", daemon, " still runs"));
  }
  if (!o.ended) return v;
  if (o.outcome.empty()) {
    v.push_back(
        absl::StrCat("no summary.json (exit status ", o.exit_status, ")"));
    return v;
  }
  if (o.interrupted) v.push_back("the run says it was interrupted");
  const bool succeeded = absl::StartsWith(o.outcome, "succeeded");
  if (!succeeded) {
    if (o.failure.empty()) {
      v.push_back(absl::StrCat("outcome \"", o.outcome, "\" without a reason"));
    }
    if (o.exit_status == 0) {
      v.push_back(
          absl::StrCat("outcome \"", o.outcome, "\" but exit status 0"));
    }
    return v;  // a loud failure: nothing more to hold it to
  }
  if (o.exit_status != 0) {
    v.push_back(absl::StrCat("outcome \"", o.outcome, "\" but exit status ",
                             o.exit_status));
  }
  if (!(o.accuracy >= judge.reference_accuracy - judge.tolerance)) {
    v.push_back(absl::StrFormat(
        "\"%s\" on a ruined model: accuracy %.4f, undisturbed %.4f "
        "(tolerance %.3f)",
        o.outcome, o.accuracy, judge.reference_accuracy, judge.tolerance));
  }
  if (o.sparse) internal::CheckSparseInvariants(o, &v);
  if (!o.checkpoint_error.empty()) {
    v.push_back(
        absl::StrCat("final checkpoints unreadable: ", o.checkpoint_error));
    return v;
  }
  const uint64_t acked = o.acked_pushes;
  const uint64_t slack = o.acked_slack;
  for (const auto& [shard, versions] : o.versions) {
    if (versions.empty()) continue;
    const uint64_t held = versions[0];
    for (uint64_t x : versions) {
      if (x != held) {
        v.push_back(absl::StrCat("shard ", shard,
                                 ": blocks at different versions (", held,
                                 " and ", x, "): a push applied in part"));
        break;
      }
    }
    auto it = o.lost_per_shard.find(shard);
    const uint64_t reported = it == o.lost_per_shard.end() ? 0 : it->second;
    if (held > acked + slack) {
      v.push_back(absl::StrCat("shard ", shard, ": holds ", held,
                               " updates per block, more than the ", acked,
                               " acknowledged pushes (+", slack,
                               " allowed for ended worker processes): a "
                               "push applied twice"));
    }
    // A loss the summary gives as "at least" (a worker process that had
    // pushed was killed: its pushes lost with the shard leave no gap to
    // count) may fall short; an exact one may not.
    if (held + reported < acked && o.loss_exact) {
      v.push_back(
          absl::StrCat("shard ", shard, ": ", acked - held,
                       " acknowledged pushes missing from the final model, ",
                       reported, " reported lost"));
    }
    if (reported > 0) {
      const auto& sources = o.recovery_sources.count(shard)
                                ? o.recovery_sources.at(shard)
                                : std::vector<std::string>();
      // "checkpoint": a standby loaded it; "restart": the shard's ps came
      // back from it. (The new server counts a loss when the workers' next
      // pushes reach it, which may be a later recovery's: so per shard.)
      if (std::find_if(sources.begin(), sources.end(),
                       [](const std::string& s) { return s != "replica"; }) ==
          sources.end()) {
        v.push_back(absl::StrCat("shard ", shard, ": ", reported,
                                 " acknowledged pushes lost although every "
                                 "recovery came from a backup"));
      }
    }
  }
  if (o.versions.empty()) v.push_back("no shard's final checkpoint was found");
  return v;
}

}  // namespace downpour::chaos
