// The chaos harness (tests/chaos.h): its schedules and its judgement of a
// run, then the short schedule against a real cluster under the launcher: an
// undisturbed run, and seeded runs of faults that must keep every invariant.
// The long schedule (50 seeds) is bench/chaos, run by hand.
#include "tests/chaos.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/chaos_gtest.h"
#include "tests/daemon_harness.h"

namespace downpour::chaos {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(ChaosScheduleTest, SimultaneousKillsComeOnlyWithTheirLayout) {
  Layout plain, simultaneous;
  simultaneous.simultaneous = true;
  int drawn = 0;
  std::set<int> backups;
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    for (const Fault& f : MakeSchedule(seed, 6, 10, plain)) {
      EXPECT_NE(f.kind, FaultKind::kPrimaryAndBackup);
    }
    for (const Fault& f : MakeSchedule(seed, 6, 10, simultaneous)) {
      if (f.kind != FaultKind::kPrimaryAndBackup) continue;
      ++drawn;
      backups.insert(f.backup);
      EXPECT_EQ(f.role, "ps");
      EXPECT_THAT(Describe(f), HasSubstr("its server and its backup #"));
    }
  }
  EXPECT_GT(drawn, 0);
  EXPECT_THAT(backups, ElementsAre(0, 1));
}

TEST(ChaosScheduleTest, ASeedGivesOneScheduleAndSeedsCoverEveryFault) {
  const Layout layout;
  std::vector<std::string> a, b;
  for (const Fault& f : MakeSchedule(7, 8, 10, layout))
    a.push_back(Describe(f));
  for (const Fault& f : MakeSchedule(7, 8, 10, layout))
    b.push_back(Describe(f));
  EXPECT_EQ(a, b);
  std::vector<std::string> c;
  for (const Fault& f : MakeSchedule(8, 8, 10, layout))
    c.push_back(Describe(f));
  EXPECT_NE(a, c);
  std::set<FaultKind> kinds;
  std::set<std::string> roles;
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    double last = 0;
    for (const Fault& f : MakeSchedule(seed, 6, 10, layout)) {
      EXPECT_GE(f.at_s, last);
      EXPECT_LT(f.at_s, 10);
      last = f.at_s;
      kinds.insert(f.kind);
      if (!f.role.empty()) roles.insert(f.role);
    }
  }
  EXPECT_EQ(kinds.size(), 4u);
  EXPECT_THAT(roles, ElementsAre("coordinator", "ps", "standby", "worker"));
  Layout no_disk;
  no_disk.full_disk = false;
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    for (const Fault& f : MakeSchedule(seed, 6, 10, no_disk)) {
      EXPECT_NE(f.kind, FaultKind::kFullDisk);
    }
  }
}

TEST(ChaosScheduleTest, ElasticFaultsComeOnlyWithSparseLayouts) {
  Layout dense, sparse, elastic;
  sparse.sparse = true;
  elastic.sparse = elastic.elastic_workers = true;
  std::set<FaultKind> drawn;
  std::set<int> counts;
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    for (const Fault& f : MakeSchedule(seed, 6, 10, dense)) {
      EXPECT_LT(f.kind, FaultKind::kMoveBuckets) << Describe(f);
    }
    for (const Fault& f : MakeSchedule(seed, 6, 10, sparse)) {
      EXPECT_LE(f.kind, FaultKind::kMoveBuckets) << Describe(f);
      if (f.kind != FaultKind::kMoveBuckets) continue;
      drawn.insert(f.kind);
      counts.insert(f.bucket_count);
      EXPECT_GE(f.bucket_share, 0);
      EXPECT_LT(f.bucket_share, 1);
      EXPECT_THAT(Describe(f), HasSubstr("move buckets to shard "));
    }
    for (const Fault& f : MakeSchedule(seed, 6, 10, elastic)) {
      drawn.insert(f.kind);
      if (f.kind == FaultKind::kDrainWorker) {
        EXPECT_THAT(Describe(f), HasSubstr("drain-worker of live worker #"));
      }
    }
  }
  EXPECT_TRUE(drawn.count(FaultKind::kMoveBuckets));
  EXPECT_TRUE(drawn.count(FaultKind::kJoinWorker));
  EXPECT_TRUE(drawn.count(FaultKind::kDrainWorker));
  EXPECT_EQ(*counts.begin(), 1);
  EXPECT_EQ(*counts.rbegin(), 8);
  // One seed, one schedule, in the sparse layouts too.
  auto describe = [](uint64_t seed, const Layout& layout) {
    std::vector<std::string> lines;
    for (const Fault& f : MakeSchedule(seed, 8, 10, layout)) {
      lines.push_back(Describe(f));
    }
    return lines;
  };
  EXPECT_EQ(describe(5, elastic), describe(5, elastic));
  EXPECT_EQ(describe(5, sparse), describe(5, sparse));
  EXPECT_NE(describe(5, sparse), describe(6, sparse));
}

// The schedules the layouts without sparse faults gave before those
// existed (Describe() of seeds 1-3, recorded from the build before them).
TEST(ChaosScheduleTest, OldLayoutsKeepTheirSchedules) {
  Layout plain, network, simultaneous;
  network.network = true;
  simultaneous.simultaneous = true;
  std::vector<std::string> lines;
  for (const Layout* layout : {&plain, &network, &simultaneous}) {
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      for (const Fault& f : MakeSchedule(seed, 4, 10, *layout)) {
        lines.push_back(Describe(f));
      }
    }
  }
  const std::vector<std::string> before = {
      "  0.34 s: double kill shard 0: its server, then its successor 0.81 s "
      "after the take-over",
      "  2.61 s: SIGSTOP ps 1 (the shard's server) for 1.67 s",
      "  7.83 s: kill -9 worker 1",
      "  9.93 s: kill -9 ps 1 (the shard's server)",
      "  0.23 s: kill -9 coordinator",
      "  0.49 s: double kill shard 0: its server, then its successor 0.83 s "
      "after the take-over",
      "  1.58 s: double kill shard 0: its server, then its successor 0.10 s "
      "after the take-over",
      "  2.44 s: kill -9 worker 1",
      "  0.12 s: kill -9 ps 0 (the shard's server)",
      "  0.90 s: double kill shard 0: its server, then its successor 0.44 s "
      "after the take-over",
      "  5.91 s: SIGSTOP worker 0 for 1.29 s",
      "  9.39 s: full disk under the checkpoints for 1.11 s",
      "  0.34 s: cut off standby 1's host for 1.41 s",
      "  4.09 s: kill -9 worker 1",
      "  7.83 s: kill -9 worker 1",
      "  9.93 s: kill -9 ps 1 (the shard's server)",
      "  0.49 s: full disk under the checkpoints for 1.63 s",
      "  1.01 s: kill -9 ps 1 (the shard's server)",
      "  8.31 s: kill -9 ps 1 (the shard's server)",
      "  9.22 s: kill -9 worker 0",
      "  0.17 s: kill -9 ps 0 (the shard's server)",
      "  3.88 s: crawl coordinator's host: its link at 0.77 Mbit/s for 1.05 s",
      "  5.91 s: double kill shard 1: its server, then its successor 0.15 s "
      "after the take-over",
      "  6.56 s: kill -9 standby 0",
      "  0.34 s: simultaneous kill -9 shard 0: its server and its backup #2 at "
      "the same instant",
      "  2.61 s: SIGSTOP ps 1 (the shard's server) for 1.67 s",
      "  7.83 s: kill -9 worker 1",
      "  9.93 s: kill -9 ps 1 (the shard's server)",
      "  0.49 s: full disk under the checkpoints for 1.63 s",
      "  1.01 s: kill -9 ps 1 (the shard's server)",
      "  8.31 s: kill -9 ps 1 (the shard's server)",
      "  9.22 s: kill -9 worker 0",
      "  0.12 s: kill -9 ps 0 (the shard's server)",
      "  0.90 s: double kill shard 0: its server, then its successor 0.44 s "
      "after the take-over",
      "  3.88 s: simultaneous kill -9 shard 1: its server and its backup #1 at "
      "the same instant",
      "  5.91 s: double kill shard 1: its server, then its successor 0.15 s "
      "after the take-over"};
  EXPECT_EQ(lines, before);
}

// A run that kept every invariant: 2 shards, 1000 acknowledged pushes, shard
// 1 taken over from its backup.
Observed Clean() {
  Observed o;
  o.ended = true;
  o.exit_status = 0;
  o.outcome = "succeeded";
  o.accuracy = 0.90;
  o.acked_pushes = 1000;
  o.versions = {{0, {1000, 1000}}, {1, {1000, 1000, 1000}}};
  o.lost_per_shard = {{0, 0}, {1, 0}};
  o.recovery_sources = {{1, {"replica"}}};
  return o;
}

TEST(ChaosInvariantsTest, EachBrokenInvariantIsNamed) {
  Judge judge;
  judge.reference_accuracy = 0.91;
  EXPECT_THAT(CheckInvariants(Clean(), judge), IsEmpty());
  auto broken = [&](const Observed& o) {
    return absl::StrJoin(CheckInvariants(o, judge), "\n");
  };
  Observed o = Clean();
  o.ended = false;
  o.seconds = 240;
  EXPECT_THAT(broken(o),
              HasSubstr("hang: the launcher had not ended after 240 s"));
  o = Clean();
  o.left_behind = {"ps 1 (pid 77)"};
  EXPECT_THAT(broken(o), HasSubstr("left behind: ps 1 (pid 77) still runs"));
  o = Clean();
  o.accuracy = 0.5;
  EXPECT_THAT(broken(o), HasSubstr("on a ruined model: accuracy 0.5000"));
  o = Clean();
  o.versions[1] = {1000, 999, 1000};
  EXPECT_THAT(broken(o), HasSubstr("shard 1: blocks at different versions"));
  o = Clean();
  o.versions[0] = {1001, 1001};
  EXPECT_THAT(broken(o), HasSubstr("shard 0: holds 1001 updates per block"));
  // An ended worker process's pushes in flight are allowed for.
  o.acked_slack = 2;
  EXPECT_THAT(CheckInvariants(o, judge), IsEmpty());
  o = Clean();
  o.versions[1] = {990, 990, 990};
  EXPECT_THAT(broken(o), HasSubstr("shard 1: 10 acknowledged pushes missing "
                                   "from the final model, 0 reported lost"));
  // A loss the summary gives as a lower bound may fall short.
  o.loss_exact = false;
  EXPECT_THAT(CheckInvariants(o, judge), IsEmpty());
  o.loss_exact = true;
  // Reported, but the shard always had a backup.
  o.lost_per_shard[1] = 10;
  EXPECT_THAT(broken(o),
              HasSubstr("shard 1: 10 acknowledged pushes lost "
                        "although every recovery came from a backup"));
  // Reported, from a checkpoint (a standby's, or the ps's own restart): a
  // loss the rules allow.
  o.recovery_sources[1].push_back("restart");
  EXPECT_THAT(CheckInvariants(o, judge), IsEmpty());
  o.recovery_sources[1].back() = "checkpoint";
  EXPECT_THAT(CheckInvariants(o, judge), IsEmpty());
  o = Clean();
  o.outcome = "failed: ps 1 gave up";
  o.exit_status = 1;
  o.failure = "ps 1 gave up";
  o.accuracy = 0.1;
  EXPECT_THAT(CheckInvariants(o, judge), IsEmpty());  // loud: allowed
  o.exit_status = 0;
  EXPECT_THAT(broken(o), HasSubstr("but exit status 0"));
  o = Clean();
  o.outcome.clear();
  EXPECT_THAT(broken(o), HasSubstr("no summary.json"));
}

// A sparse run that kept every invariant: 5000 row updates acknowledged and
// held, 32 buckets split between the shards, one move done, one rolled back.
Observed CleanSparse() {
  Observed o = Clean();
  o.sparse = true;
  o.acked_row_updates = o.held_row_updates = 5000;
  o.sparse_buckets = 32;
  o.placement_read = true;
  for (uint32_t b = 0; b < 32; ++b) o.buckets[b < 20 ? 0 : 1].push_back(b);
  o.moves = {"move 1 (buckets 16-19, shard 1 -> 0): done",
             "move 2 (buckets 3, shard 0 -> 1): rolled back: the source died"};
  return o;
}

TEST(ChaosInvariantsTest, EachBrokenSparseInvariantIsNamed) {
  Judge judge;
  judge.reference_accuracy = 0.91;
  EXPECT_THAT(CheckInvariants(CleanSparse(), judge), IsEmpty());
  auto broken = [&](const Observed& o) {
    return absl::StrJoin(CheckInvariants(o, judge), "\n");
  };
  // One row update more than acknowledged: applied twice.
  Observed o = CleanSparse();
  o.held_row_updates = 5001;
  EXPECT_THAT(broken(o), HasSubstr("the final checkpoints hold 5001 row "
                                   "updates, more than the 5000"));
  // Unless an ended worker process may have had it applied.
  o.acked_row_slack = 1;
  EXPECT_THAT(CheckInvariants(o, judge), IsEmpty());
  // One fewer: lost, and not reported.
  o = CleanSparse();
  o.held_row_updates = 4999;
  EXPECT_THAT(broken(o), HasSubstr("1 acknowledged row updates missing"));
  o.acked_pushes_lost = 3;  // a shard back from a checkpoint: allowed
  EXPECT_THAT(CheckInvariants(o, judge), IsEmpty());
  // A bucket owned twice, and one owned by none.
  o = CleanSparse();
  o.buckets[1].push_back(4);
  EXPECT_THAT(broken(o), HasSubstr("bucket 4 owned by shards 0 and 1"));
  o = CleanSparse();
  o.buckets[0].erase(o.buckets[0].begin() + 5, o.buckets[0].begin() + 8);
  EXPECT_THAT(broken(o), HasSubstr("buckets 5-7 owned by no shard"));
  o = CleanSparse();
  o.placement_read = false;
  EXPECT_THAT(broken(o), HasSubstr("no placement was read"));
  // A move still copying after the job ended.
  o = CleanSparse();
  o.open_moves = {"move 3 (buckets 8-9, shard 0 -> 1): copy"};
  EXPECT_THAT(broken(o), HasSubstr("move 3 (buckets 8-9, shard 0 -> 1): copy "
                                   "left open after the job ended"));
  // A worker's final report never read.
  o = CleanSparse();
  o.rows_unread = {1};
  EXPECT_THAT(broken(o), HasSubstr("worker 1's final report was never read"));
  // Judged only where the run succeeded.
  o.outcome = "failed: ps 1 gave up";
  o.failure = "ps 1 gave up";
  o.exit_status = 1;
  EXPECT_THAT(CheckInvariants(o, judge), IsEmpty());
}

// The short schedule: the undisturbed run, then two seeds of four faults
// each against the launcher's cluster. Each run's faults and any broken
// invariant are printed with the seed (replay: bench/chaos --seeds=N
// --faults=4 --span_s=S); then, with cluster.replication 3, a shard's
// primary and one of its backups killed at the same instant.
TEST(ChaosRunTest, ShortScheduleKeepsEveryInvariant) {
  Options options = SuiteOptions();
  options.full_disk = CanMountTmpfs().empty();
  if (!options.full_disk) {
    std::printf("chaos_test: no full-disk faults: %s\n",
                CanMountTmpfs().c_str());
  }
  Harness harness(options);
  Judge judge;
  double seconds = 0;
  ASSERT_NO_FATAL_FAILURE(
      RunUndisturbed(harness, "undisturbed", &judge, &seconds));
  Layout layout;
  layout.full_disk = options.full_disk;
  const double span = 0.6 * seconds;
  for (uint64_t seed : {1, 2}) {
    RunSeed(harness, seed, MakeSchedule(seed, 4, span, layout), judge, span);
  }
  // cluster.replication 3: shard 1's primary and a backup killed in the same
  // instant lose nothing (the same job, so held to the same accuracy).
  options.replication = 3;
  Harness three(options);
  Fault both;
  both.at_s = 0.3 * span;
  both.kind = FaultKind::kPrimaryAndBackup;
  both.role = "ps";
  both.index = 1;
  RunSeed(three, 3, {both}, judge, span, /*lossless=*/true);
}

// The sparse job's short schedule: its undisturbed run, then two seeds of
// three random faults (moves among them) and two bucket moves of their own,
// one each way, that interleave with them. Replay a seed: bench/chaos
// --sparse --seeds=N --faults=3 --span_s=S (without the two added moves).
TEST(ChaosRunTest, SparseShortScheduleWithMovesKeepsEveryInvariant) {
  Options options = SuiteOptions();
  options.sparse = true;
  options.epochs = 2;
  options.full_disk = CanMountTmpfs().empty();
  Harness harness(options);
  Judge judge;
  double seconds = 0;
  ASSERT_NO_FATAL_FAILURE(
      RunUndisturbed(harness, "sparse undisturbed", &judge, &seconds));
  Layout layout;
  layout.full_disk = options.full_disk;
  layout.sparse = true;
  const double span = 0.6 * seconds;
  for (uint64_t seed : {1, 2}) {
    std::vector<Fault> faults = MakeSchedule(seed, 3, span, layout);
    for (int to : {1, 0}) {
      Fault move;
      move.at_s = (to == 1 ? 0.15 : 0.45) * span;
      move.kind = FaultKind::kMoveBuckets;
      move.index = to;
      move.bucket_share = 0.25 * static_cast<double>(seed);
      move.bucket_count = 4;
      faults.push_back(move);
    }
    std::sort(faults.begin(), faults.end(),
              [](const Fault& a, const Fault& b) { return a.at_s < b.at_s; });
    RunSeed(harness, seed, faults, judge, span);
  }
}

}  // namespace
}  // namespace downpour::chaos
