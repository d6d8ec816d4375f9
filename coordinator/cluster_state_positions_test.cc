// ClusterState with streaming workers: the positions they report come back in
// their partitions, move with a dead worker's part, and survive a restart.
#include <string>
#include <vector>

#include "coordinator/cluster_state.h"
#include "coordinator/cluster_state_test_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::coordinator {
namespace {

using ::downpour::testing::IsOk;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

proto::PartPosition Position(int part, int64_t offset, int64_t examples) {
  proto::PartPosition p;
  p.set_part(part);
  p.set_epoch(1);
  p.set_segment(0);
  p.set_offset(offset);
  p.set_examples(examples);
  return p;
}

// "part@offset" of each position, in order.
std::vector<std::string> Describe(const proto::Partition& partition) {
  std::vector<std::string> out;
  for (const proto::PartPosition& p : partition.positions()) {
    out.push_back(absl::StrCat(p.part(), "@", p.offset()));
  }
  return out;
}

class PositionsTest : public ClusterStateTest {
 protected:
  // Worker `index` heartbeats, reporting `positions`; returns its partition.
  proto::Partition Report(int index,
                          const std::vector<proto::PartPosition>& positions) {
    proto::HeartbeatRequest request;
    request.set_role("worker");
    request.set_index(index);
    for (const proto::PartPosition& p : positions) {
      *request.mutable_report()->add_positions() = p;
    }
    auto response = Heartbeat(request);
    EXPECT_THAT(response, IsOk());
    return response.ok() ? response->partition() : proto::Partition();
  }

  // Worker `index` registers (a new process); returns its partition.
  proto::Partition Register(int index) {
    proto::RegisterWorkerRequest request;
    request.set_index(index);
    auto response = RegisterWorkerCall(request);
    EXPECT_THAT(response, IsOk());
    return response.ok() ? response->partition() : proto::Partition();
  }
};

TEST_F(PositionsTest, AReportedPositionComesBackAfterRegisteringAndARestart) {
  EXPECT_THAT(Register(0).positions(), IsEmpty());  // from the start
  Register(1);
  EXPECT_THAT(Describe(Report(0, {Position(0, 4096, 40)})),
              ElementsAre("0@4096"));
  EXPECT_THAT(Describe(Report(0, {})), ElementsAre("0@4096"));
  EXPECT_THAT(Describe(Register(0)), ElementsAre("0@4096"));
  Restart();  // the coordinator (or the launcher with --resume) restarts
  EXPECT_THAT(Describe(Register(0)), ElementsAre("0@4096"));
  EXPECT_THAT(Register(1).positions(), IsEmpty());
}

TEST_F(PositionsTest, ADeadWorkersPartIsAdoptedFromItsLastPosition) {
  Register(0);
  Register(1);
  Report(1, {Position(1, 777, 7)});
  clock_.Advance(absl::Seconds(2));
  Report(0, {Position(0, 100, 1)});  // worker 1 falls silent
  clock_.Advance(absl::Seconds(2));
  ASSERT_EQ(state_->CheckLiveness(), 1);
  const proto::Partition adopted = Report(0, {});
  EXPECT_THAT(adopted.parts(), ElementsAre(0, 1));
  EXPECT_THAT(Describe(adopted), ElementsAre("0@100", "1@777"));
}

TEST_F(PositionsTest, APositionOfAPartTheWorkerDoesNotHoldIsIgnored) {
  Register(0);
  Register(1);
  EXPECT_THAT(Report(0, {Position(1, 9999, 99)}).positions(), IsEmpty());
  EXPECT_THAT(Report(1, {}).positions(), IsEmpty());
}

// The coordinator saves as it stops: the positions the workers sent as
// they stopped are kept though the throttle had not let them through.
TEST_F(PositionsTest, SaveNowKeepsThePositionsTheThrottleHeldBack) {
  Register(0);
  Report(0, {Position(0, 10, 1)});  // saved
  clock_.Advance(absl::Seconds(config_.heartbeat.interval_s / 2));
  Report(0, {Position(0, 20, 2)});  // not yet
  state_->SaveNow();
  Restart();
  EXPECT_THAT(Describe(Register(0)), ElementsAre("0@20"));
}

TEST_F(PositionsTest, PositionsAloneAreSavedOncePerHeartbeatInterval) {
  Register(0);
  Report(0, {Position(0, 10, 1)});  // saved
  clock_.Advance(absl::Seconds(config_.heartbeat.interval_s / 2));
  Report(0, {Position(0, 20, 2)});  // not yet
  Restart();
  EXPECT_THAT(Describe(Register(0)), ElementsAre("0@10"));
  clock_.Advance(absl::Seconds(config_.heartbeat.interval_s));
  Report(0, {Position(0, 30, 3)});
  Restart();
  EXPECT_THAT(Describe(Register(0)), ElementsAre("0@30"));
}

}  // namespace
}  // namespace downpour::coordinator
