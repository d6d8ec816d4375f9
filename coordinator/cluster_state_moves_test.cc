// ClusterState and live bucket moves: MoveBuckets, the moves in the ps
// heartbeats, the switch raising the placement epoch, rollbacks when a ps
// dies or restarts or the coordinator restarts, and the moves in Status.
#include "coordinator/cluster_state.h"
#include "coordinator/cluster_state_test_fixture.h"
#include "gmock/gmock.h"

namespace downpour::coordinator {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ClusterStateMovesTest : public ClusterStateTest {
 protected:
  void SetUp() override {
    ClusterStateTest::SetUp();
    config_.model.type = ModelType::kSparseLinear;
    config_.model.task = Task::kBinary;
    config_.model.sparse_buckets = 8;
    Restart();
    RegisterPs(0, "127.0.0.1:1");
    RegisterPs(1, "127.0.0.1:2");
  }

  // Moves buckets to shard `to`; returns the first move's id.
  uint64_t Move(std::vector<uint32_t> buckets, int to) {
    proto::MoveBucketsRequest request;
    for (uint32_t b : buckets) request.add_buckets(b);
    request.set_to_shard(to);
    auto response = state_->MoveBuckets(request);
    EXPECT_THAT(response, IsOk());
    if (!response.ok() || response->started_size() == 0) return 0;
    return response->started(0).id();
  }

  // Ps `index` heartbeats with its report on move `id`.
  proto::HeartbeatResponse Report(int index, uint64_t id, int64_t rows,
                                  bool caught_up, bool done) {
    proto::HeartbeatRequest request = PsBeat(index, "", 0);
    proto::BucketMoveProgress* p =
        request.mutable_report()->add_move_progress();
    p->set_id(id);
    p->set_rows_copied(rows);
    p->set_caught_up(caught_up);
    p->set_done(done);
    auto response = Heartbeat(request);
    EXPECT_THAT(response, IsOk());
    return response.ok() ? *response : proto::HeartbeatResponse();
  }

  std::vector<std::string> Phases() {
    std::vector<std::string> phases;
    const proto::ClusterStatusResponse status = state_->Status();
    for (const proto::BucketMove& m : status.bucket_moves()) {
      phases.push_back(m.phase());
    }
    return phases;
  }
};

// A move still copying when the job ends rolls back (else it stays open,
// and its rows sit at the destination in the final checkpoints), and no
// move starts once the job is over.
TEST_F(ClusterStateMovesTest, AMoveCopyingWhenTheJobEndsRollsBack) {
  const int workers = static_cast<int>(config_.cluster.workers.size());
  for (int w = 0; w < workers; ++w) RegisterWorker(w);
  ASSERT_NE(Move({0, 2}, 1), 0u);
  EXPECT_THAT(Phases(), ElementsAre("copy"));
  for (int w = 0; w < workers; ++w) {
    proto::HeartbeatRequest done;
    done.set_role("worker");
    done.set_index(w);
    done.mutable_report()->set_finished(true);
    ASSERT_THAT(Heartbeat(done), IsOk());
  }
  ASSERT_TRUE(state_->Status().stop());
  EXPECT_THAT(Phases(), ElementsAre("rolled back"));
  EXPECT_THAT(state_->Status().bucket_moves(0).reason(),
              HasSubstr("the job ended during the copy"));
  proto::MoveBucketsRequest late;
  late.add_buckets(4);
  late.set_to_shard(1);
  EXPECT_THAT(state_->MoveBuckets(late),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("the job is over")));
}

TEST_F(ClusterStateMovesTest, TheSwitchRaisesTheEpochAndGivesTheBuckets) {
  const uint64_t id = Move({0, 2}, 1);
  ASSERT_NE(id, 0u);
  EXPECT_EQ(state_->Placement().epoch(), 1u) << "no switch before caught_up";
  // The destination hears of the move with the source's address, the
  // source of the move out.
  proto::HeartbeatResponse to = Report(1, id, 10, false, false);
  ASSERT_EQ(to.moves_in_size(), 1);
  EXPECT_EQ(to.moves_in(0).from_address(), "127.0.0.1:1");
  EXPECT_THAT(to.moves_in(0).buckets(), ElementsAre(0, 2));
  EXPECT_EQ(to.moves_out_size(), 0);
  proto::HeartbeatResponse from = Report(0, 0, 0, false, false);
  ASSERT_EQ(from.moves_out_size(), 1);
  EXPECT_EQ(from.moves_out(0).phase(), "copy");

  to = Report(1, id, 20, /*caught_up=*/true, false);
  const proto::GetPlacementResponse placement = state_->Placement();
  EXPECT_EQ(placement.epoch(), 2u);
  EXPECT_EQ(to.placement_epoch(), 2u);
  ASSERT_EQ(placement.moves_size(), 1) << "the switched move, in progress";
  EXPECT_EQ(placement.moves(0).phase(), "switched");
  EXPECT_EQ(placement.moves(0).from_address(), "127.0.0.1:1");
  EXPECT_THAT(placement.shards(0).buckets(), ElementsAre(4, 6));
  EXPECT_THAT(placement.shards(1).buckets(), ElementsAre(0, 1, 2, 3, 5, 7));
  ASSERT_EQ(to.moves_in_size(), 1);
  EXPECT_EQ(to.moves_in(0).phase(), "switched");
  EXPECT_EQ(to.moves_in(0).switch_epoch(), 2u);

  to = Report(1, id, 21, true, /*done=*/true);
  EXPECT_EQ(to.moves_in_size(), 0);
  EXPECT_EQ(Report(0, 0, 0, false, false).moves_out_size(), 0);
  EXPECT_EQ(state_->Placement().epoch(), 2u);
  EXPECT_EQ(state_->Placement().moves_size(), 0);
  const proto::ClusterStatusResponse status = state_->Status();
  ASSERT_EQ(status.bucket_moves_size(), 1);
  EXPECT_EQ(status.bucket_moves(0).phase(), "done");
  EXPECT_EQ(status.bucket_moves(0).rows_copied(), 21);
}

TEST_F(ClusterStateMovesTest, ACopyRollsBackWhenItsSourceDies) {
  RegisterPs(0, "127.0.0.1:5", /*standby=*/true);
  const uint64_t id = Move({0}, 1);
  Report(1, id, 5, false, false);
  clock_.Advance(absl::Seconds(2));
  Report(1, id, 6, false, false);
  proto::HeartbeatRequest standby = StandbyBeat(0, -1);
  ASSERT_THAT(Heartbeat(standby), IsOk());
  clock_.Advance(absl::Seconds(2));
  EXPECT_GE(state_->CheckLiveness(), 1);  // ps 0 silent: the standby takes it
  const proto::ClusterStatusResponse status = state_->Status();
  ASSERT_EQ(status.bucket_moves_size(), 1);
  EXPECT_EQ(status.bucket_moves(0).phase(), "rolled back");
  EXPECT_THAT(status.bucket_moves(0).reason(),
              HasSubstr("ps 0 at 127.0.0.1:1 died"));
  EXPECT_THAT(state_->Placement().shards(0).buckets(), ElementsAre(0, 2, 4, 6));
}

TEST_F(ClusterStateMovesTest, ACopyRollsBackWhenItsDestinationRestarts) {
  const uint64_t id = Move({0}, 1);
  Report(1, id, 5, false, false);
  RegisterPs(1, "127.0.0.1:9");  // a new process for shard 1
  const proto::ClusterStatusResponse status = state_->Status();
  ASSERT_EQ(status.bucket_moves_size(), 1);
  EXPECT_EQ(status.bucket_moves(0).phase(), "rolled back");
  EXPECT_THAT(status.bucket_moves(0).reason(), HasSubstr("ps 1 restarted"));
  // A late report of the old move changes nothing.
  Report(1, id, 9, true, false);
  EXPECT_THAT(state_->Placement().shards(0).buckets(), ElementsAre(0, 2, 4, 6));
}

TEST_F(ClusterStateMovesTest, ASwitchedMoveGoesOnWithARestartedDestination) {
  const uint64_t id = Move({0}, 1);
  Report(1, id, 5, true, false);  // switched
  RegisterPs(1, "127.0.0.1:9");
  EXPECT_THAT(Phases(), ElementsAre("switched"));
  proto::HeartbeatResponse to = Report(1, 0, 0, false, false);
  ASSERT_EQ(to.moves_in_size(), 1) << "the new process copies again";
  EXPECT_THAT(state_->Placement().shards(1).buckets(),
              ElementsAre(0, 1, 3, 5, 7));
}

TEST_F(ClusterStateMovesTest, ARestartedCoordinatorRollsBackCopiesOnly) {
  const uint64_t copying = Move({0}, 1);
  const uint64_t switched = Move({2}, 1);
  Report(1, switched, 7, true, false);
  ASSERT_NE(copying, 0u);
  Restart();
  const proto::ClusterStatusResponse status = state_->Status();
  ASSERT_EQ(status.bucket_moves_size(), 2);
  EXPECT_EQ(status.bucket_moves(0).phase(), "switched");  // in progress first
  EXPECT_EQ(status.bucket_moves(1).phase(), "rolled back");
  EXPECT_EQ(status.bucket_moves(1).reason(),
            "the coordinator restarted during the copy");
  EXPECT_THAT(state_->Placement().shards(1).buckets(),
              ElementsAre(1, 2, 3, 5, 7));
}

TEST_F(ClusterStateMovesTest, MoveBucketsRefusesWhatCannotMove) {
  proto::MoveBucketsRequest request;
  request.add_buckets(1);
  request.set_to_shard(1);
  EXPECT_THAT(state_->MoveBuckets(request).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("bucket 1 is on shard 1 already")));
  request.clear_buckets();
  request.add_blocks(0);  // the bias, on shard 0
  request.set_to_shard(0);
  EXPECT_THAT(state_->MoveBuckets(request).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("dense block 0 is on shard 0 already")));
  EXPECT_TRUE(state_->Status().bucket_moves().empty());
}

// Dense blocks move with the buckets: a drain takes them along, and the
// switch gives them to the destination in the placement.
TEST_F(ClusterStateMovesTest, ADrainTakesTheDenseBlocksAlong) {
  proto::MoveBucketsRequest request;
  request.set_balance(true);
  request.set_drain_shard(0);
  auto started = state_->MoveBuckets(request);
  ASSERT_THAT(started, IsOk());
  ASSERT_EQ(started->started_size(), 1);
  const proto::BucketMove& move = started->started(0);
  EXPECT_THAT(move.buckets(), ElementsAre(0, 2, 4, 6));
  EXPECT_THAT(move.blocks(), ElementsAre(0));
  EXPECT_THAT(started->plan(), HasSubstr("1 dense blocks (0)"));
  proto::HeartbeatResponse to = Report(1, move.id(), 0, false, false);
  ASSERT_EQ(to.moves_in_size(), 1);
  EXPECT_THAT(to.moves_in(0).blocks(), ElementsAre(0));
  EXPECT_THAT(state_->Placement().shards(0).block_ids(), ElementsAre(0))
      << "the blocks stay until the switch";
  Report(1, move.id(), 0, true, false);  // caught up: switched
  const proto::GetPlacementResponse placement = state_->Placement();
  EXPECT_THAT(placement.shards(0).block_ids(), ElementsAre());
  EXPECT_THAT(placement.shards(1).block_ids(), ElementsAre(0));
  EXPECT_THAT(placement.shards(0).buckets(), ElementsAre());
  // A restarted coordinator keeps the switched placement.
  Restart();
  EXPECT_THAT(state_->Placement().shards(1).block_ids(), ElementsAre(0));
}

// Under bsp (per-block rounds on the ps) dense blocks stay: a drain of a
// shard holding some is refused, naming why, and nothing starts.
TEST_F(ClusterStateMovesTest, BspKeepsTheDenseBlocksWhereTheyAre) {
  config_.training.consistency = ConsistencyMode::kBsp;
  Restart();
  RegisterPs(0, "127.0.0.1:1");
  RegisterPs(1, "127.0.0.1:2");
  proto::MoveBucketsRequest request;
  request.set_balance(true);
  request.set_drain_shard(0);
  EXPECT_THAT(state_->MoveBuckets(request).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("training.consistency ssp and bsp")));
  EXPECT_TRUE(state_->Status().bucket_moves().empty());
}

TEST_F(ClusterStateMovesTest, BalanceOnEvenShardsMovesNothing) {
  proto::MoveBucketsRequest request;
  request.set_balance(true);
  request.set_drain_shard(-1);
  auto response = state_->MoveBuckets(request);
  ASSERT_THAT(response, IsOk());
  EXPECT_EQ(response->started_size(), 0);
  EXPECT_THAT(response->plan(), HasSubstr("nothing to move"));
}

TEST_F(ClusterStateMovesTest, NothingMovesBeforePlacement) {
  config_.coordinator.state_dir.clear();  // start fresh
  Restart();
  proto::MoveBucketsRequest request;
  request.add_buckets(0);
  request.set_to_shard(1);
  EXPECT_THAT(state_->MoveBuckets(request).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("placement is not made yet")));
}

// psctl add-ps's coordinator side: a ps started with --join.
proto::RegisterServerRequest JoinRequest(const std::string& address) {
  proto::RegisterServerRequest request;
  request.set_join(true);
  request.set_index(-1);
  request.set_address(address);
  return request;
}

TEST_F(ClusterStateMovesTest, AJoinedPsGetsTheNextShardAndBalanceFillsIt) {
  auto joined = RegisterServer(JoinRequest("127.0.0.1:7"));
  ASSERT_THAT(joined, IsOk());
  EXPECT_EQ(joined->shard_index(), 2);
  EXPECT_EQ(joined->placement_epoch(), 2u);
  keys_["ps:2"] = joined->member_key();  // the fixture keyed it by index -1
  proto::GetPlacementResponse placement = state_->Placement();
  ASSERT_EQ(placement.shards_size(), 3);
  EXPECT_EQ(placement.shards(2).address(), "127.0.0.1:7");
  EXPECT_EQ(placement.shards(2).block_ids_size(), 0);
  EXPECT_EQ(placement.shards(2).buckets_size(), 0);
  ASSERT_THAT(Heartbeat(PsBeat(2, "127.0.0.1:7", 0)), IsOk());

  proto::MoveBucketsRequest balance;
  balance.set_balance(true);
  balance.set_drain_shard(-1);
  auto started = state_->MoveBuckets(balance);
  ASSERT_THAT(started, IsOk());
  ASSERT_EQ(started->started_size(), 2);  // one from each old shard
  for (const proto::BucketMove& m : started->started()) {
    EXPECT_EQ(m.to_shard(), 2);
    Report(2, m.id(), 1, true, false);
    Report(2, m.id(), 1, true, true);
  }
  placement = state_->Placement();
  EXPECT_EQ(placement.shards(0).buckets_size(), 3);
  EXPECT_EQ(placement.shards(1).buckets_size(), 3);
  EXPECT_EQ(placement.shards(2).buckets_size(), 2);

  // drain-ps: the joined shard holds no dense blocks, so it can be emptied.
  proto::MoveBucketsRequest drain = balance;
  drain.set_drain_shard(2);
  started = state_->MoveBuckets(drain);
  ASSERT_THAT(started, IsOk());
  ASSERT_GT(started->started_size(), 0);
  for (const proto::BucketMove& m : started->started()) {
    EXPECT_EQ(m.from_shard(), 2);
    Report(m.to_shard(), m.id(), 1, true, false);
    Report(m.to_shard(), m.id(), 1, true, true);
  }
  EXPECT_EQ(state_->Placement().shards(2).buckets_size(), 0);
}

TEST_F(ClusterStateMovesTest, AJoinedPsIsSavedAndKeepsItsIndex) {
  ASSERT_THAT(RegisterServer(JoinRequest("127.0.0.1:7")), IsOk());
  Restart();
  const proto::GetPlacementResponse placement = state_->Placement();
  ASSERT_EQ(placement.shards_size(), 3);
  EXPECT_EQ(placement.shards(2).address(), "127.0.0.1:7");
  // The same ps joining again from its address gets its shard back.
  auto again = RegisterServer(JoinRequest("127.0.0.1:7"));
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->shard_index(), 2);
  EXPECT_EQ(state_->Placement().shards_size(), 3);
}

TEST_F(ClusterStateMovesTest, NoPsJoinsBeforePlacement) {
  config_.coordinator.state_dir.clear();
  Restart();
  EXPECT_THAT(state_->RegisterServer(JoinRequest("127.0.0.1:7")).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("no placement yet")));
}

}  // namespace
}  // namespace downpour::coordinator
