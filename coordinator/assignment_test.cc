#include "coordinator/assignment.h"

#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::coordinator {
namespace {

using ::testing::ElementsAreArray;

WorkerSlot Alive(std::vector<int> parts) { return {true, false, parts}; }
WorkerSlot Dead(std::vector<int> parts) { return {false, false, parts}; }
WorkerSlot Finished(std::vector<int> parts, bool alive = false) {
  return {alive, true, parts};
}

struct ClaimCase {
  std::string name;
  std::vector<WorkerSlot> workers;
  int claimant;
  std::vector<std::vector<int>> want;
};

TEST(ClaimPartsTest, Table) {
  const ClaimCase cases[] = {
      {"first registration", {Dead({}), Dead({})}, 0, {{0}, {}}},
      {"everyone holds their own", {Alive({0}), Alive({1})}, 1, {{0}, {1}}},
      {"own part comes back from the adopter",
       {Alive({0, 1}), Dead({})},
       1,
       {{0}, {1}}},
      {"a dead worker's parts are adopted",
       {Alive({0}), Dead({1, 2}), Alive({})},
       2,
       {{0}, {}, {1, 2}}},
      {"a finished worker's parts stay with it",
       {Alive({0}), Finished({1})},
       0,
       {{0}, {1}}},
      {"old parts of the claimant are dropped, result sorted and unique",
       {Dead({2, 0}), Alive({1}), Dead({2})},
       0,
       {{0, 2}, {1}, {}}},
      {"own part taken back from a dead adopter, the rest adopted",
       {Dead({0, 1}), Dead({})},
       1,
       {{}, {0, 1}}},
  };
  for (const ClaimCase& c : cases) {
    const std::vector<std::vector<int>> got = ClaimParts(c.workers, c.claimant);
    ASSERT_EQ(got.size(), c.want.size()) << c.name;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_THAT(got[i], ElementsAreArray(c.want[i]))
          << c.name << ": worker " << i;
    }
  }
}

// cluster.max_workers 4 over 2 configured workers: worker 0's home parts are
// 0 and 2, worker 1's 1 and 3; a joined worker (2, 3) has none.
TEST(ClaimPartsTest, HomePartsOverTheWorkerSlots) {
  const PartLayout layout{/*configured=*/2, /*num_parts=*/4};
  const ClaimCase cases[] = {
      {"first registration takes every home part",
       {Dead({}), Dead({}), Dead({}), Dead({})},
       0,
       {{0, 2}, {}, {}, {}}},
      {"a home part an alive joiner holds stays there",
       {Dead({}), Alive({1, 3}), Alive({2}), Dead({})},
       0,
       {{0}, {1, 3}, {2}, {}}},
      {"part i comes back from anyone, even an alive joiner",
       {Dead({}), Alive({1, 3}), Alive({0, 2}), Dead({})},
       0,
       {{0}, {1, 3}, {2}, {}}},
      {"a home part a finished worker holds stays there",
       {Finished({0, 3}), Dead({}), Dead({}), Dead({})},
       1,
       {{0, 3}, {1}, {}, {}}},
      {"a home part of a dead unfinished worker is adopted",
       {Alive({0}), Dead({}), Dead({1, 3}), Dead({})},
       1,
       {{0}, {1, 3}, {}, {}}},
      {"a joined worker keeps its parts and adopts a dead worker's",
       {Alive({0, 2}), Dead({1}), Alive({3}), Dead({})},
       2,
       {{0, 2}, {}, {1, 3}, {}}},
  };
  for (const ClaimCase& c : cases) {
    const std::vector<std::vector<int>> got =
        ClaimParts(c.workers, c.claimant, layout);
    ASSERT_EQ(got.size(), c.want.size()) << c.name;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_THAT(got[i], ElementsAreArray(c.want[i]))
          << c.name << ": worker " << i;
    }
  }
}

struct BalanceCase {
  std::string name;
  std::vector<WorkerSlot> workers;
  int joiner;
  std::vector<std::tuple<int, int, int>> want;  // (part, from, to)
};

TEST(BalancePartsTest, Table) {
  const BalanceCase cases[] = {
      {"joiner 2 of 2 workers and 4 slots takes part 2",
       {Alive({0, 2}), Alive({1, 3}), Alive({}), Dead({})},
       2,
       {{2, 0, 2}}},
      {"then joiner 3 takes part 3",
       {Alive({0}), Alive({1, 3}), Alive({2}), Alive({})},
       3,
       {{3, 1, 3}}},
      {"a worker holding 3 parts gives 1, its highest",
       {Alive({0, 4, 5}), Alive({1, 3}), Alive({})},
       2,
       {{5, 0, 2}}},
      {"one worker holding all 4 gives 2",
       {Alive({0, 1, 2, 3}), Alive({})},
       1,
       {{1, 0, 1}, {3, 0, 1}}},
      {"even already: nothing moves",
       {Alive({0}), Alive({1}), Alive({})},
       2,
       {}},
      {"dead and finished workers give nothing",
       {Dead({0, 1, 2}), Finished({3, 4, 5}, /*alive=*/true), Alive({})},
       2,
       {}},
  };
  for (const BalanceCase& c : cases) {
    std::vector<std::tuple<int, int, int>> got;
    for (const PartMove& m : BalanceParts(c.workers, c.joiner)) {
      EXPECT_EQ(m.to, c.joiner) << c.name;
      got.emplace_back(m.part, m.from, m.to);
    }
    EXPECT_THAT(got, ElementsAreArray(c.want)) << c.name;
  }
}

struct HandOffCase {
  std::string name;
  std::vector<WorkerSlot> workers;
  int dead;
  std::vector<std::pair<int, int>> want;  // (part, to)
};

TEST(HandOffPartsTest, Table) {
  const HandOffCase cases[] = {
      {"one taker", {Alive({0}), Dead({1})}, 1, {{1, 0}}},
      {"fewest parts first, lowest index on a tie",
       {Alive({0, 5}), Alive({1}), Dead({2, 3, 4}), Alive({6})},
       2,
       {{2, 1}, {3, 3}, {4, 0}}},
      {"finished workers take nothing",
       {Finished({0}, /*alive=*/true), Alive({1, 4}), Dead({2})},
       2,
       {{2, 1}}},
      {"dead workers take nothing", {Dead({0}), Dead({1})}, 1, {}},
      {"a finished worker hands nothing off",
       {Alive({0}), Finished({1})},
       1,
       {}},
      {"nothing to hand off", {Alive({0}), Dead({})}, 1, {}},
      {"the dead worker itself is no taker even if marked alive",
       {Alive({0})},
       0,
       {}},
  };
  for (const HandOffCase& c : cases) {
    std::vector<std::pair<int, int>> got;
    for (const PartMove& m : HandOffParts(c.workers, c.dead)) {
      got.emplace_back(m.part, m.to);
    }
    EXPECT_THAT(got, ElementsAreArray(c.want)) << c.name;
  }
}

TEST(PickStandbyTest, Table) {
  const struct {
    std::string name;
    std::vector<StandbySlot> standbys;
    int want;
  } cases[] = {
      {"none configured", {}, -1},
      {"the first idle alive one",
       {{false, -1}, {true, 0}, {true, -1}, {true, -1}},
       2},
      {"all busy", {{true, 0}, {true, 1}}, -1},
      {"all dead", {{false, -1}}, -1},
      {"the shard's in-sync backup before an idle one",
       {{true, -1}, {true, -1, 1, false}, {true, -1, 3, true}},
       2},
      {"an idle one before another shard's backup",
       {{true, -1, 1, true}, {true, -1}},
       1},
      {"another shard's backup when none is idle",
       {{false, -1}, {true, -1, 1, true}},
       1},
      {"the shard's backup not in sync, when nothing else",
       {{true, 0}, {true, -1, 3, false}},
       1},
      {"the shard's backup not yet reported in sync before an idle one",
       {{true, -1}, {true, -1, 3, false}},
       1},
      {"a dead backup is not picked", {{false, -1, 3, true}}, -1},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(PickStandby(c.standbys, /*shard=*/3), c.want) << c.name;
  }
}

TEST(PickBackupTest, TheFirstAliveStandbyThatDoesNothing) {
  EXPECT_EQ(PickBackup({}, 0, "a"), -1);
  EXPECT_EQ(
      PickBackup({{false, -1}, {true, 0}, {true, -1, 2, true}, {true, -1}}, 0,
                 "a"),
      3);
  EXPECT_EQ(PickBackup({{true, 1}, {true, -1, 0, false}}, 0, "a"), -1);
}

TEST(PickBackupTest, TheShardsFormerServerFirstAndNeverTheShardItself) {
  const std::vector<StandbySlot> standbys = {
      {true, -1, -1, false, "h:1"},      // free
      {true, -1, -1, false, "h:2", 1},   // a spare that served shard 1
      {true, -1, -1, false, "h:3", 0}};  // a spare that served shard 0
  EXPECT_EQ(PickBackup(standbys, 1, "h:9"), 1);
  EXPECT_EQ(PickBackup(standbys, 0, "h:9"), 2);
  EXPECT_EQ(PickBackup(standbys, 2, "h:9"), 0);
  // A restarted process at the shard's own address is never its backup.
  EXPECT_EQ(PickBackup(standbys, 1, "h:2"), 0);
  EXPECT_EQ(PickBackup({{true, -1, -1, false, "h:1"}}, 0, "h:1"), -1);
}

}  // namespace
}  // namespace downpour::coordinator
