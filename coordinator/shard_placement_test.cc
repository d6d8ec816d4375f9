// ShardPlacement: the placement epoch, take-overs by standbys, backups and the
// placement's state.
#include "coordinator/shard_placement.h"

#include <utility>

#include "common/testing/fake_clock.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::coordinator {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;

Config TwoShardsOneStandby() {
  Config config;
  config.cluster.ps = {"127.0.0.1:1", "127.0.0.1:2"};
  config.cluster.workers = {"127.0.0.1:3"};
  config.cluster.standby_ps = {"127.0.0.1:4"};
  config.cluster.replication = 2;
  return config;
}

class ShardPlacementTest : public ::testing::Test {
 protected:
  explicit ShardPlacementTest(Config config = TwoShardsOneStandby())
      : config_(std::move(config)) {}
  void Register(Member& m) {
    members_.Admit(m, "");
    members_.Touch(m);
  }
  void PlaceAll() {
    for (Member& ps : members_.ps()) Register(ps);
    placement_.MaybePlace();
  }

  Config config_ = TwoShardsOneStandby();
  FakeClock clock_;
  Membership members_{config_.cluster, &clock_, clock_.Now()};
  RecoveryLog recoveries_{&clock_, clock_.Now()};
  ShardPlacement placement_{config_,   *ModelSpec::Create(config_.model),
                            &clock_,   clock_.Now(),
                            &members_, &recoveries_};
};

TEST_F(ShardPlacementTest, PlacesOnceEveryPsRegistered) {
  Register(members_.ps()[0]);
  placement_.MaybePlace();
  EXPECT_EQ(placement_.epoch(), 0u);
  EXPECT_THAT(placement_.Describe().waiting_for(),
              HasSubstr("ps 1 (127.0.0.1:2)"));
  Register(members_.ps()[1]);
  placement_.MaybePlace();
  EXPECT_EQ(placement_.epoch(), 1u);
  const proto::GetPlacementResponse map = placement_.Describe();
  ASSERT_EQ(map.shards_size(), 2);
  EXPECT_GT(map.shards(0).block_ids_size() + map.shards(1).block_ids_size(), 0);
}

TEST_F(ShardPlacementTest, AFreeStandbyBacksUpAShardAndTakesItOver) {
  PlaceAll();
  Member& standby = members_.standby()[0];
  Register(standby);
  placement_.AssignBackups();
  EXPECT_EQ(standby.replica_of, 0);
  EXPECT_EQ(placement_.BackupOf(members_.ps()[0]), 0);
  proto::HeartbeatResponse reply;
  placement_.AddTo(members_.ps()[0], &reply);
  EXPECT_EQ(reply.backup_address(), "127.0.0.1:4");

  Member& dead = members_.ps()[0];
  dead.alive = false;
  placement_.ReplaceShard(dead);
  EXPECT_EQ(placement_.epoch(), 2u);
  EXPECT_EQ(standby.serving_index, 0);
  EXPECT_EQ(standby.replica_of, -1);
  EXPECT_EQ(dead.address, "127.0.0.1:4");
  EXPECT_EQ(dead.key, standby.key);  // the standby speaks for the shard
  EXPECT_TRUE(dead.alive);
  ASSERT_EQ(recoveries_.recoveries().size(), 1u);
  EXPECT_EQ(recoveries_.recoveries()[0].source(), "checkpoint");  // not in sync
}

TEST_F(ShardPlacementTest, ADeadShardWithoutAFreeStandbyWaits) {
  PlaceAll();
  placement_.ReplaceShard(members_.ps()[1]);
  EXPECT_EQ(placement_.epoch(), 1u);
  EXPECT_TRUE(recoveries_.recoveries().empty());
}

TEST_F(ShardPlacementTest, ARestartRaisesTheEpochAndRecordsWhatItLost) {
  PlaceAll();
  Member& ps = members_.ps()[1];
  ps.applied_total = 30;
  placement_.ShardRestarted(ps, ps.address, /*new_or_dead=*/true, 25);
  EXPECT_EQ(placement_.epoch(), 2u);
  EXPECT_EQ(ps.applied_total, 25u);
  ASSERT_EQ(recoveries_.recoveries().size(), 1u);
  EXPECT_EQ(recoveries_.recoveries()[0].lost(), 5u);
}

TEST_F(ShardPlacementTest, CountsTheTimeWithoutAnInSyncBackup) {
  PlaceAll();
  placement_.AssignBackups();  // no standby registered: shards count at once
  clock_.Advance(absl::Seconds(4));
  proto::ClusterStatusResponse status;
  placement_.AddStatus(clock_.Now(), &status);
  EXPECT_EQ(status.replication_factor(), 2);
  ASSERT_EQ(status.shard_replication_size(), 2);
  EXPECT_EQ(status.shard_replication(0).unreplicated_seconds(), 4);
  EXPECT_FALSE(status.shard_replication(0).in_sync());
}

TEST_F(ShardPlacementTest, StateRoundTripsAndAnotherShardCountIsRefused) {
  PlaceAll();
  proto::CoordinatorState state;
  members_.SaveTo(&state);
  placement_.SaveTo(&state);
  EXPECT_EQ(state.placement_epoch(), 1u);
  EXPECT_EQ(state.placement_size(), 2);

  Membership members(config_.cluster, &clock_, clock_.Now());
  RecoveryLog recoveries(&clock_, clock_.Now());
  ShardPlacement restored(config_, *ModelSpec::Create(config_.model), &clock_,
                          clock_.Now(), &members, &recoveries);
  EXPECT_THAT(restored.Restore(state, "/s"), IsOk());
  EXPECT_EQ(restored.epoch(), 1u);

  state.add_placement();
  ShardPlacement other(config_, *ModelSpec::Create(config_.model), &clock_,
                       clock_.Now(), &members, &recoveries);
  EXPECT_THAT(other.Restore(state, "/s"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("coordinator state '/s' has 3 shards but the "
                                 "config has 2 ps")));
}

// cluster.replication 3: one shard, two backups and a spare standby.
Config OneShardThreeStandbys() {
  Config config;
  config.cluster.ps = {"127.0.0.1:1"};
  config.cluster.workers = {"127.0.0.1:3"};
  config.cluster.standby_ps = {"127.0.0.1:4", "127.0.0.1:5", "127.0.0.1:6"};
  config.cluster.replication = 3;
  return config;
}

class ThreeCopiesTest : public ShardPlacementTest {
 protected:
  ThreeCopiesTest() : ShardPlacementTest(OneShardThreeStandbys()) {
    PlaceAll();
    // Two standbys register: both back the shard up.
    Register(members_.standby()[0]);
    Register(members_.standby()[1]);
    placement_.AssignBackups();
  }
  // Standby `i` reports a full copy of shard 0 holding `applied` updates.
  void Holds(int i, uint64_t applied) {
    Member& s = members_.standby()[i];
    s.report.set_has_replica(true);
    s.report.set_replica_shard(0);
    s.report.set_replica_applied_total(applied);
  }
};

TEST_F(ThreeCopiesTest, NamesTwoBackupsAndTellsThePrimaryBoth) {
  Member& ps = members_.ps()[0];
  EXPECT_THAT(placement_.BackupsOf(ps), ::testing::ElementsAre(0, 1));
  proto::HeartbeatResponse reply;
  placement_.AddTo(ps, &reply);
  EXPECT_THAT(reply.backup_addresses(),
              ::testing::ElementsAre("127.0.0.1:4", "127.0.0.1:5"));
  // Replication 2's fields name the first.
  EXPECT_EQ(reply.backup_address(), "127.0.0.1:4");
  EXPECT_EQ(reply.backup_standby(), 0);
  // A third standby stays free: the shard has its two.
  Register(members_.standby()[2]);
  placement_.AssignBackups();
  EXPECT_EQ(members_.standby()[2].replica_of, -1);
  proto::ClusterStatusResponse status;
  placement_.AddStatus(clock_.Now(), &status);
  ASSERT_EQ(status.shard_replication_size(), 1);
  EXPECT_THAT(status.shard_replication(0).backup_standbys(),
              ::testing::ElementsAre(0, 1));
}

TEST_F(ThreeCopiesTest, PromotesTheBackupHoldingTheMostAndTheOtherFollows) {
  Register(members_.standby()[2]);
  Holds(0, 10);
  Holds(1, 20);
  Member& ps = members_.ps()[0];
  ps.alive = false;
  placement_.ReplaceShard(ps);
  EXPECT_EQ(members_.standby()[1].serving_index, 0);
  EXPECT_EQ(members_.standby()[0].replica_of, 0);  // still a backup
  EXPECT_EQ(ps.address, "127.0.0.1:5");
  ASSERT_EQ(recoveries_.recoveries().size(), 1u);
  EXPECT_EQ(recoveries_.recoveries()[0].source(), "replica");
  // The free standby becomes the second backup; the new primary is told of
  // both, the one that followed it first.
  placement_.AssignBackups();
  EXPECT_EQ(members_.standby()[2].replica_of, 0);
  proto::HeartbeatResponse reply;
  placement_.AddTo(ps, &reply);
  EXPECT_THAT(reply.backup_addresses(),
              ::testing::ElementsAre("127.0.0.1:4", "127.0.0.1:6"));
}

TEST_F(ThreeCopiesTest, ABackupThatDiedWithThePrimaryIsNotPromoted) {
  Holds(0, 10);
  Holds(1, 20);  // holds more, but went quiet with the primary
  clock_.Advance(absl::Seconds(config_.heartbeat.timeout_s));
  members_.Touch(members_.standby()[0]);
  Member& ps = members_.ps()[0];
  ps.alive = false;
  placement_.ReplaceShard(ps);
  EXPECT_EQ(members_.standby()[0].serving_index, 0);
  EXPECT_EQ(members_.standby()[1].serving_index, -1);
  EXPECT_EQ(recoveries_.recoveries()[0].source(), "replica");
}

}  // namespace
}  // namespace downpour::coordinator
