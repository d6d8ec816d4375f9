// BucketMoves: validation of a move, its phases, rollbacks, the saved state
// and balance plans.
#include "coordinator/bucket_moves.h"

#include <algorithm>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::coordinator {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

google::protobuf::RepeatedPtrField<proto::BucketMoveProgress> Report(
    uint64_t id, int64_t rows, bool caught_up, bool done) {
  google::protobuf::RepeatedPtrField<proto::BucketMoveProgress> reports;
  proto::BucketMoveProgress* p = reports.Add();
  p->set_id(id);
  p->set_rows_copied(rows);
  p->set_caught_up(caught_up);
  p->set_done(done);
  return reports;
}

TEST(BucketMovesTest, OwnersStartAsBucketModuloShards) {
  BucketMoves moves(6, 2);
  EXPECT_THAT(moves.owners(), ElementsAre(0, 1, 0, 1, 0, 1));
  EXPECT_EQ(moves.CountOn(0), 3);
}

TEST(BucketMovesTest, StartRefusesBadRequestsAndChangesNothing) {
  BucketMoves moves(8, 2);
  struct Case {
    std::vector<uint32_t> buckets;
    int to;
    absl::StatusCode code;
    const char* says;
  } cases[] = {
      {{},
       1,
       absl::StatusCode::kInvalidArgument,
       "no buckets and no blocks named"},
      {{8}, 1, absl::StatusCode::kInvalidArgument, "bucket 8 does not exist"},
      {{0}, 2, absl::StatusCode::kInvalidArgument, "shard 2 does not exist"},
      {{0}, -1, absl::StatusCode::kInvalidArgument, "shard -1 does not exist"},
      {{0, 0}, 1, absl::StatusCode::kInvalidArgument, "named twice"},
      {{0, 1},
       1,
       absl::StatusCode::kFailedPrecondition,
       "bucket 1 is on shard 1 already"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(moves.Start(c.buckets, c.to, "test", 0).status(),
                StatusIs(c.code, HasSubstr(c.says)));
  }
  EXPECT_TRUE(moves.moves().empty());
  BucketMoves none(0, 2);
  EXPECT_THAT(none.Start({0}, 1, "test", 0).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("no sparse tables")));
}

TEST(BucketMovesTest, BucketsOfSeveralSourcesAreOneMovePerSource) {
  BucketMoves moves(9, 3);
  auto started = moves.Start({0, 1, 3, 4}, 2, "test", 1.5);
  ASSERT_THAT(started.status(), IsOk());
  ASSERT_EQ(started->size(), 2u);
  EXPECT_EQ((*started)[0].from_shard(), 0);
  EXPECT_THAT((*started)[0].buckets(), ElementsAre(0, 3));
  EXPECT_EQ((*started)[1].from_shard(), 1);
  EXPECT_THAT((*started)[1].buckets(), ElementsAre(1, 4));
  EXPECT_EQ((*started)[0].phase(), "copy");
  EXPECT_EQ((*started)[0].started_seconds(), 1.5);
  EXPECT_EQ((*started)[0].switched_seconds(), -1);
  EXPECT_EQ(moves.MovesOf(2, /*in=*/true).size(), 2u);
  EXPECT_EQ(moves.MovesOf(0, /*in=*/false).size(), 1u);
  // A bucket in a move in progress cannot be moved again.
  EXPECT_THAT(moves.Start({3}, 1, "test", 2).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("bucket 3 is in bucket move 1")));
}

TEST(BucketMovesTest, CaughtUpSwitchesTheOwnersAndDoneEndsTheMove) {
  BucketMoves moves(4, 2);
  auto started = moves.Start({0, 2}, 1, "test", 0);
  ASSERT_THAT(started.status(), IsOk());
  const uint64_t id = (*started)[0].id();
  // Progress without caught_up: rows counted, owners unchanged.
  BucketMoves::Changes c =
      moves.Progress(1, Report(id, 10, false, false), 5, 1);
  EXPECT_EQ(c.switched, 0);
  EXPECT_TRUE(c.changed);
  EXPECT_THAT(moves.owners(), ElementsAre(0, 1, 0, 1));
  // A report from another shard than the destination is ignored.
  c = moves.Progress(0, Report(id, 20, true, false), 5, 2);
  EXPECT_FALSE(c.changed);
  // Done before the switch does not end it.
  c = moves.Progress(1, Report(id, 10, false, true), 5, 2);
  EXPECT_EQ(moves.moves()[0].phase(), "copy");
  c = moves.Progress(1, Report(id, 30, true, false), 5, 3);
  EXPECT_EQ(c.switched, 1);
  EXPECT_THAT(moves.owners(), ElementsAre(1, 1, 1, 1));
  EXPECT_EQ(moves.moves()[0].phase(), "switched");
  EXPECT_EQ(moves.moves()[0].switch_epoch(), 5u);
  EXPECT_EQ(moves.moves()[0].switched_seconds(), 3);
  EXPECT_EQ(moves.moves()[0].rows_copied(), 30);
  c = moves.Progress(1, Report(id, 31, true, true), 6, 4);
  EXPECT_EQ(c.switched, 0);
  EXPECT_EQ(moves.moves()[0].phase(), "done");
  EXPECT_EQ(moves.moves()[0].ended_seconds(), 4);
  EXPECT_TRUE(moves.MovesOf(1, /*in=*/true).empty());
  EXPECT_TRUE(moves.MovesOf(0, /*in=*/false).empty());
}

TEST(BucketMovesTest, ACopyRollsBackWhenEitherShardGoesASwitchedOneGoesOn) {
  for (int gone : {0, 1}) {
    BucketMoves moves(4, 3);
    ASSERT_THAT(moves.Start({0}, 1, "test", 0).status(), IsOk());  // copy
    ASSERT_THAT(moves.Start({2}, 1, "test", 0).status(), IsOk());  // switched
    moves.Progress(1, Report(2, 5, true, false), 7, 1);
    EXPECT_EQ(moves.ShardGone(gone, "ps X at h:1 died", 2), 1);
    EXPECT_EQ(moves.moves()[0].phase(), "rolled back");
    EXPECT_EQ(moves.moves()[0].reason(), "ps X at h:1 died");
    EXPECT_EQ(moves.moves()[0].ended_seconds(), 2);
    EXPECT_EQ(moves.moves()[1].phase(), "switched");
    EXPECT_EQ(moves.owners()[0], 0) << "owners unchanged by a rollback";
    EXPECT_EQ(moves.owners()[2], 1);
    // The switched move is still sent to the destination and the source.
    EXPECT_EQ(moves.MovesOf(1, /*in=*/true).size(), 1u);
    EXPECT_EQ(moves.MovesOf(2, /*in=*/false).size(), 1u);
  }
  BucketMoves moves(4, 3);
  ASSERT_THAT(moves.Start({0}, 1, "test", 0).status(), IsOk());
  EXPECT_EQ(moves.ShardGone(2, "ps 2 died", 1), 0) << "not its shards";
}

TEST(BucketMovesTest, RestoreRollsBackCopiesAndContinuesSwitchedMoves) {
  BucketMoves before(4, 2);
  ASSERT_THAT(before.Start({0}, 1, "a", 0).status(), IsOk());
  ASSERT_THAT(before.Start({2}, 1, "b", 0).status(), IsOk());
  before.Progress(1, Report(2, 9, true, false), 3, 1);
  proto::CoordinatorState state;
  before.SaveTo(&state);
  EXPECT_THAT(state.bucket_owners(), ElementsAre(0, 1, 1, 1));
  ASSERT_EQ(state.bucket_moves_size(), 2);

  BucketMoves after(4, 2);
  after.Restore(state, 10);
  EXPECT_THAT(after.owners(), ElementsAre(0, 1, 1, 1));
  EXPECT_EQ(after.moves()[0].phase(), "rolled back");
  EXPECT_EQ(after.moves()[0].reason(),
            "the coordinator restarted during the copy");
  EXPECT_EQ(after.moves()[1].phase(), "switched");
  EXPECT_EQ(after.moves()[1].switch_epoch(), 3u);
  // New moves get new ids.
  auto next = after.Start({0}, 1, "c", 11);
  ASSERT_THAT(next.status(), IsOk());
  EXPECT_EQ((*next)[0].id(), 3u);
}

TEST(BucketMovesTest, UnmovedOwnersAreNotSaved) {
  BucketMoves moves(4, 2);
  proto::CoordinatorState state;
  moves.SaveTo(&state);
  EXPECT_EQ(state.bucket_owners_size(), 0);
}

TEST(BucketMovesTest, KeepsTheLastEndedMoves) {
  BucketMoves moves(64, 2);
  for (uint32_t b = 0; b < 40; b += 2) {
    ASSERT_THAT(moves.Start({b}, 1, "t", 0).status(), IsOk());
    moves.ShardGone(1, "gone", 1);
  }
  ASSERT_THAT(moves.Start({40}, 1, "t", 0).status(), IsOk());
  EXPECT_EQ(moves.moves().size(), BucketMoves::kEndedKept + 1);
  EXPECT_EQ(moves.moves().back().phase(), "copy");
  EXPECT_EQ(moves.moves().front().buckets(0), 8u) << "the oldest went first";
}

// Applies a plan as if every move switched.
void Apply(BucketMoves& moves, const std::vector<BucketMoves::Planned>& plan,
           uint64_t* epoch) {
  for (const BucketMoves::Planned& p : plan) {
    auto started = moves.Start(p.buckets, p.to, "balance", 0);
    ASSERT_THAT(started.status(), IsOk());
    ASSERT_EQ(started->size(), 1u);
    EXPECT_EQ((*started)[0].from_shard(), p.from);
    moves.Progress(p.to, Report((*started)[0].id(), 1, true, false), ++*epoch,
                   1);
    moves.Progress(p.to, Report((*started)[0].id(), 1, true, true), *epoch, 2);
  }
}

TEST(BucketMovesTest, PlanEvensTheBucketsOverANewShardWithin10Percent) {
  for (uint32_t buckets : {1024u, 1000u, 97u}) {
    BucketMoves moves(buckets, 2);
    moves.AddShard();
    auto plan = moves.Plan({true, true, true}, -1);
    ASSERT_THAT(plan.status(), IsOk());
    uint64_t epoch = 1;
    Apply(moves, *plan, &epoch);
    const double even = buckets / 3.0;
    for (int s = 0; s < 3; ++s) {
      EXPECT_NEAR(moves.CountOn(s), even, 0.1 * even)
          << buckets << " buckets, shard " << s;
      EXPECT_LE(std::abs(moves.CountOn(s) - even), 1.0);
    }
    // Every move goes to the new shard: one per source.
    for (const BucketMoves::Planned& p : *plan) EXPECT_EQ(p.to, 2);
    EXPECT_EQ(plan->size(), 2u);
    auto again = moves.Plan({true, true, true}, -1);
    ASSERT_THAT(again.status(), IsOk());
    EXPECT_TRUE(again->empty()) << "even already";
  }
}

TEST(BucketMovesTest, PlanDrainsAShardAndSkipsDeadOnes) {
  BucketMoves moves(100, 3);
  auto plan = moves.Plan({true, true, true}, 1);
  ASSERT_THAT(plan.status(), IsOk());
  uint64_t epoch = 1;
  Apply(moves, *plan, &epoch);
  EXPECT_EQ(moves.CountOn(1), 0);
  EXPECT_EQ(moves.CountOn(0), 50);
  EXPECT_EQ(moves.CountOn(2), 50);
  EXPECT_THAT(moves.Plan({false, true, false}, 1).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("no live shard")));
}

TEST(BucketMovesTest, PlanCountsMovesInProgressWhereTheyGo) {
  BucketMoves moves(12, 2);
  moves.AddShard();
  ASSERT_THAT(moves.Start({0, 2}, 2, "t", 0).status(), IsOk());
  auto plan = moves.Plan({true, true, true}, -1);
  ASSERT_THAT(plan.status(), IsOk());
  int to_new = 0;
  for (const BucketMoves::Planned& p : *plan) {
    EXPECT_EQ(p.to, 2);
    for (uint32_t b : p.buckets) EXPECT_TRUE(b != 0 && b != 2) << b;
    to_new += static_cast<int>(p.buckets.size());
  }
  EXPECT_EQ(to_new, 2) << "4 each: 2 more besides the 2 on their way";
}

// Dense blocks 0-5 of 100, 100, 50, 50, 10 and 10 floats: 0, 2 and 4 on
// shard 0, the others on shard 1.
BucketMoves::Blocks SixBlocks() {
  return {{0, 1, 0, 1, 0, 1}, {100, 100, 50, 50, 10, 10}};
}

TEST(BucketMovesTest, BlocksMoveWithTheBucketsOneMovePerSource) {
  BucketMoves moves(4, 3);  // buckets 0, 3 on shard 0, 1 on 1, 2 on 2
  auto started = moves.Start({1}, 2, "test", 0, {4, 0, 3}, SixBlocks());
  ASSERT_THAT(started.status(), IsOk());
  ASSERT_EQ(started->size(), 2u);
  EXPECT_EQ((*started)[0].from_shard(), 0);
  EXPECT_THAT((*started)[0].buckets(), ElementsAre());
  EXPECT_THAT((*started)[0].blocks(), ElementsAre(0, 4));
  EXPECT_EQ((*started)[1].from_shard(), 1);
  EXPECT_THAT((*started)[1].buckets(), ElementsAre(1));
  EXPECT_THAT((*started)[1].blocks(), ElementsAre(3));
  // A block in a move in progress cannot be moved again.
  EXPECT_THAT(moves.Start({}, 1, "test", 1, {0}, SixBlocks()).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("dense block 0 is in bucket move 1")));
  // The switch hands the blocks to the caller, which moves them in the
  // placement.
  const BucketMoves::Changes changes =
      moves.Progress(2, Report((*started)[0].id(), 0, true, false), 5, 2);
  EXPECT_EQ(changes.switched, 1);
  ASSERT_EQ(changes.switched_moves.size(), 1u);
  EXPECT_THAT(changes.switched_moves[0].blocks(), ElementsAre(0, 4));
  EXPECT_EQ(changes.switched_moves[0].switch_epoch(), 5u);
}

TEST(BucketMovesTest, StartRefusesBadBlocksAndChangesNothing) {
  BucketMoves moves(0, 2);  // a dense model: blocks only
  struct Case {
    std::vector<uint32_t> blocks;
    absl::StatusCode code;
    const char* says;
  } cases[] = {
      {{6}, absl::StatusCode::kInvalidArgument, "dense block 6 does not exist"},
      {{0, 0}, absl::StatusCode::kInvalidArgument, "named twice"},
      {{0, 1},
       absl::StatusCode::kFailedPrecondition,
       "dense block 1 is on shard 1 already"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(moves.Start({}, 1, "test", 0, c.blocks, SixBlocks()).status(),
                StatusIs(c.code, HasSubstr(c.says)));
  }
  EXPECT_TRUE(moves.moves().empty());
  EXPECT_THAT(moves.Start({}, 1, "test", 0, {0, 2}, SixBlocks()), IsOk());
}

// The floats per shard after `plan`, from `floats`.
std::vector<int64_t> FloatsAfter(const std::vector<BucketMoves::Planned>& plan,
                                 std::vector<int64_t> floats) {
  for (const BucketMoves::Planned& p : plan) {
    EXPECT_THAT(p.buckets, ElementsAre());
    for (uint32_t b : p.blocks) {
      floats[p.from] -= SixBlocks().floats[b];
      floats[p.to] += SixBlocks().floats[b];
    }
  }
  return floats;
}

TEST(BucketMovesTest, PlanDrainsEveryBlockAndEvensTheFloats) {
  BucketMoves moves(0, 3);
  // Drain shard 0 (160 floats) onto shard 1 (160) and the empty shard 2:
  // the largest block to the lightest shard first.
  auto plan = moves.Plan({true, true, true}, 0, SixBlocks());
  ASSERT_THAT(plan.status(), IsOk());
  EXPECT_THAT(FloatsAfter(*plan, {160, 160, 0}), ElementsAre(0, 160, 160));
  // Growing 2 shards to 3: blocks go from the heaviest shard to the lightest
  // until no single move narrows the gap (within the smallest block).
  auto grow = moves.Plan({true, true, true}, -1, SixBlocks());
  ASSERT_THAT(grow.status(), IsOk());
  EXPECT_THAT(FloatsAfter(*grow, {160, 160, 0}), ElementsAre(110, 110, 100));
  // Blocks in a move in progress count where they go.
  ASSERT_THAT(moves.Start({}, 2, "test", 0, {0}, SixBlocks()), IsOk());
  auto rest = moves.Plan({true, true, true}, -1, SixBlocks());
  ASSERT_THAT(rest.status(), IsOk());
  for (const BucketMoves::Planned& p : *rest) {
    EXPECT_THAT(p.blocks, ::testing::Not(::testing::Contains(0u)));
  }
  EXPECT_THAT(FloatsAfter(*rest, {60, 160, 100}), ElementsAre(110, 110, 100));
}

TEST(BucketListTest, ParsesAndFormatsRanges) {
  auto list = ParseBucketList("0-3,7,5-5");
  ASSERT_THAT(list.status(), IsOk());
  EXPECT_THAT(*list, ElementsAre(0, 1, 2, 3, 5, 7));
  EXPECT_EQ(FormatBucketList(*list), "0-3,5,7");
  for (const char* bad :
       {"", "a", "3-1", "1-2-3", "1,,2", "-1", "0-99999999"}) {
    EXPECT_THAT(ParseBucketList(bad).status(),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("is not a bucket or a range")))
        << bad;
  }
}

// A move's description stays one readable line: a long list is cut around
// "...", a short one is whole.
TEST(BucketListTest, DescriptionsShortenLongLists) {
  proto::BucketMove move;
  for (uint32_t b = 685; b <= 1023; b += 2) move.add_buckets(b);
  EXPECT_EQ(DescribeMoved(move), "170 buckets (685,687,689,691,...,1021,1023)");
  proto::BucketMove few;
  for (uint32_t b : {1, 3, 4, 5, 9}) few.add_buckets(b);
  few.add_blocks(2);
  EXPECT_EQ(DescribeMoved(few), "5 buckets (1,3-5,9) and 1 dense blocks (2)");
}

}  // namespace
}  // namespace downpour::coordinator
