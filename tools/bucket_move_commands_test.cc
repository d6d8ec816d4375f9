// psctl's bucket move commands against faked coordinator calls: the request
// each makes, its waiting, and how it ends.
#include "tools/bucket_move_commands.h"

#include <deque>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::tools {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

proto::BucketMove Move(uint64_t id, const std::string& phase, int64_t rows) {
  proto::BucketMove m;
  m.set_id(id);
  m.add_buckets(0);
  m.add_buckets(2);
  m.set_from_shard(0);
  m.set_to_shard(1);
  m.set_phase(phase);
  m.set_rows_copied(rows);
  m.set_started_seconds(1);
  m.set_switched_seconds(phase == "switched" || phase == "done" ? 3 : -1);
  m.set_ended_seconds(phase == "done" || phase == "rolled back" ? 4 : -1);
  if (phase == "rolled back") m.set_reason("ps 1 at h:2 died");
  return m;
}

// A coordinator whose status shows `phases` of move 7, one per read (the
// last one repeats).
struct Fake {
  MovesCalls Calls() {
    MovesCalls calls;
    calls.status = [this]() -> absl::StatusOr<proto::ClusterStatusResponse> {
      proto::ClusterStatusResponse status;
      status.set_uptime_seconds(5);
      *status.add_bucket_moves() = Move(7, phases.front(), rows);
      rows += 100;
      if (phases.size() > 1) phases.pop_front();
      for (const auto& [index, address] : ps) {
        proto::MemberStatus* m = status.add_members();
        m->set_role("ps");
        m->set_index(index);
        m->set_address(address);
        m->set_alive(true);
      }
      return status;
    };
    calls.placement = [this]() -> absl::StatusOr<proto::GetPlacementResponse> {
      return placement;
    };
    calls.move = [this](const proto::MoveBucketsRequest& request)
        -> absl::StatusOr<proto::MoveBucketsResponse> {
      requests.push_back(request);
      if (!refusal.ok()) return refusal;
      proto::MoveBucketsResponse response;
      *response.add_started() = Move(7, "copy", 0);
      response.set_plan("move 7: 2 buckets (0,2) from shard 0 to shard 1");
      return response;
    };
    calls.print = [this](const std::string& line) { lines.push_back(line); };
    calls.poll = absl::ZeroDuration();
    return calls;
  }
  std::deque<std::string> phases;
  int64_t rows = 0;
  std::vector<std::pair<int, std::string>> ps;
  proto::GetPlacementResponse placement;
  absl::Status refusal;
  std::vector<proto::MoveBucketsRequest> requests;
  std::vector<std::string> lines;
};

TEST(BucketMoveCommandsTest, MoveBucketsWaitsUntilDoneWithProgressLines) {
  Fake fake;
  fake.phases = {"copy", "copy", "switched", "done"};
  ASSERT_THAT(MoveBucketsCommand(fake.Calls(), "0,2", 1), IsOk());
  ASSERT_EQ(fake.requests.size(), 1u);
  EXPECT_THAT(fake.requests[0].buckets(), ElementsAre(0, 2));
  EXPECT_EQ(fake.requests[0].to_shard(), 1);
  EXPECT_FALSE(fake.requests[0].balance());
  ASSERT_EQ(fake.lines.size(), 5u);  // the plan, then one per change
  EXPECT_THAT(fake.lines[1],
              HasSubstr("move 7 (2 buckets (0,2), shard 0 -> 1): "
                        "copy, 0 rows copied"));
  EXPECT_THAT(fake.lines.back(), HasSubstr("done, 300 rows copied, 3.0 s"));
}

TEST(BucketMoveCommandsTest, ARollbackEndsTheCommandWithItsReason) {
  Fake fake;
  fake.phases = {"copy", "rolled back"};
  EXPECT_THAT(MoveBucketsCommand(fake.Calls(), "0,2", 1),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("rolled back: ps 1 at h:2 died. Shard 0 "
                                 "keeps them")));
}

TEST(BucketMoveCommandsTest, TheWaitIsBounded) {
  Fake fake;
  fake.phases = {"copy"};
  MovesCalls calls = fake.Calls();
  calls.timeout = absl::ZeroDuration();
  EXPECT_THAT(
      MoveBucketsCommand(calls, "0,2", 1),
      StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("psctl moves")));
}

TEST(BucketMoveCommandsTest, BadBucketsAndRefusalsStartNothing) {
  Fake fake;
  EXPECT_THAT(MoveBucketsCommand(fake.Calls(), "0-x", 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("'0-x' is not a bucket or a range")));
  EXPECT_TRUE(fake.requests.empty());
  fake.refusal = absl::FailedPreconditionError("holds 3 dense blocks");
  EXPECT_THAT(DrainPsCommand(fake.Calls(), 0),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("dense blocks")));
}

TEST(BucketMoveCommandsTest, AddPsWaitsForTheJoinedPsThenBalances) {
  Fake fake;
  fake.phases = {"done"};
  MovesCalls calls = fake.Calls();
  calls.timeout = absl::ZeroDuration();
  EXPECT_THAT(
      AddPsCommand(calls, "10.0.0.9:7001"),
      StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("--join")));
  EXPECT_TRUE(fake.requests.empty());
  fake.ps = {{2, "10.0.0.9:7001"}};
  ASSERT_THAT(AddPsCommand(fake.Calls(), "10.0.0.9:7001"), IsOk());
  ASSERT_EQ(fake.requests.size(), 1u);
  EXPECT_TRUE(fake.requests[0].balance());
  EXPECT_EQ(fake.requests[0].drain_shard(), -1);
}

TEST(BucketMoveCommandsTest, DrainEndsWhenTheShardHoldsNoBuckets) {
  Fake fake;
  fake.phases = {"done"};
  fake.placement.add_shards()->set_index(1);
  ASSERT_THAT(DrainPsCommand(fake.Calls(), 1), IsOk());
  EXPECT_EQ(fake.requests[0].drain_shard(), 1);
  EXPECT_THAT(fake.lines.back(), HasSubstr("may be stopped"));
  fake.placement.mutable_shards(0)->add_buckets(5);
  EXPECT_THAT(DrainPsCommand(fake.Calls(), 1),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("still holds 1 buckets")));
}

TEST(BucketMoveCommandsTest, MovesTableShowsShardsAndMoves) {
  proto::GetPlacementResponse placement;
  placement.set_epoch(3);
  proto::ShardInfo* s = placement.add_shards();
  s->set_index(0);
  s->set_address("h:1");
  s->add_buckets(1);
  proto::ClusterStatusResponse status;
  status.set_uptime_seconds(9);
  *status.add_bucket_moves() = Move(4, "switched", 50);
  *status.add_bucket_moves() = Move(3, "rolled back", 5);
  const std::string table = FormatMoves(status, placement);
  EXPECT_THAT(table, HasSubstr("placement epoch 3"));
  EXPECT_THAT(table, HasSubstr("h:1"));
  EXPECT_THAT(table,
              HasSubstr("move 4: shard 0 -> 1, 2 buckets (0,2): switched, 50 "
                        "rows copied, 8.0 s (copy 2.0 s, switched at epoch"));
  EXPECT_THAT(table,
              HasSubstr("rolled back, 5 rows copied, 3.0 s: ps 1 at h:2 died"));
}

}  // namespace
}  // namespace downpour::tools
