// The chaos harness with network faults: the launcher's cluster with every
// daemon on a host of its own (network namespaces on a virtual switch, the
// launcher's --ssh mode), an undisturbed run, then a fixed schedule of
// partitions and crawls (a shard's server cut off past the heartbeat
// timeout, so a standby takes the shard over while the old server lives on;
// a worker's and the coordinator's links; a crawling server and worker) and
// a seeded one. Every run must keep the invariants of tests/chaos.h.
//
// Needs root, `ip` and `tc` (iproute2); skips with a message where network
// namespaces cannot be made. Its namespaces are deleted at the end.
#include <cstdio>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/chaos.h"
#include "tests/chaos_gtest.h"
#include "tests/daemon_harness.h"
#include "tests/netns_lab.h"

namespace downpour::chaos {
namespace {

Fault Net(double at_s, FaultKind kind, const std::string& role, int index,
          double duration_s, double rate_mbit = 0) {
  Fault f;
  f.at_s = at_s;
  f.kind = kind;
  f.role = role;
  f.index = index;
  f.duration_s = duration_s;
  f.rate_mbit = rate_mbit;
  return f;
}

TEST(ChaosNetTest, PartitionsAndCrawlsKeepEveryInvariant) {
  NetnsLab lab(testing::TestDir(), "dpch");
  // Before any thread: the whole test process moves into the lab's "ctl".
  if (const std::string why = SetUpLab(&lab); !why.empty()) {
    GTEST_SKIP() << "no network namespaces here: " << why;
  }
  Options options = SuiteOptions();
  options.full_disk = false;  // tests:chaos_test has the full disk
  options.lab = &lab;
  Harness harness(options);
  Judge judge;
  double seconds = 0;
  ASSERT_NO_FATAL_FAILURE(RunUndisturbed(
      harness, "undisturbed, over the lab's network", &judge, &seconds));

  const double span = 0.6 * seconds;
  // Seed 1000 is the fixed schedule; seed 3 a drawn one with network faults.
  const std::vector<Fault> fixed = {
      // Past the 1 s heartbeat timeout: a standby takes shard 0 over while
      // its old server lives on, cut off, and comes back to a fenced shard.
      Net(0.0, FaultKind::kPartition, "ps", 0, 2.5),
      Net(0.3 * span, FaultKind::kCrawl, "worker", 1, 2.0, 0.5),
      Net(0.5 * span, FaultKind::kPartition, "coordinator", 0, 1.5),
      Net(0.7 * span, FaultKind::kCrawl, "ps", 1, 2.0, 1.0),
  };
  Layout layout;
  layout.full_disk = false;
  layout.network = true;
  for (const auto& [seed, faults] :
       std::vector<std::pair<uint64_t, std::vector<Fault>>>{
           {1000, fixed}, {3, MakeSchedule(3, 4, span, layout)}}) {
    // The fixed schedule kills nobody: it must lose nothing.
    RunSeed(harness, seed, faults, judge, span, /*lossless=*/seed == 1000);
  }
}

}  // namespace
}  // namespace downpour::chaos
