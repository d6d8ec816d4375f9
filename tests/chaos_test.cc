// The chaos harness (tests/chaos.h): its schedules and its judgement of a
// run, then the short schedule against a real cluster under the launcher: an
// undisturbed run, and seeded runs of faults that must keep every invariant.
// The long schedule (50 seeds) is bench/chaos, run by hand.
#include "tests/chaos.h"

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

}  // namespace
}  // namespace downpour::chaos
