// DataPartTable: claims and hand-offs of data parts, and the parts each
// worker's status, record and partition carry.
#include "coordinator/data_part_table.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<Member> Workers(int n) {
  std::vector<Member> workers;
  for (int i = 0; i < n; ++i) {
    Member w;
    w.role = MemberRole::kWorker;
    w.index = i;
    w.alive = true;
    w.registered = true;
    workers.push_back(w);
  }
  return workers;
}

TEST(DataPartTableTest, EachWorkerClaimsItsOwnPart) {
  std::vector<Member> workers = Workers(3);
  DataPartTable parts(3);
  for (int i = 0; i < 3; ++i) parts.Claim(workers, i);
  EXPECT_THAT(parts.parts(0), ElementsAre(0));
  EXPECT_THAT(parts.parts(2), ElementsAre(2));
  const proto::Partition p = parts.PartitionOf(1);
  EXPECT_EQ(p.part(), 1);
  EXPECT_EQ(p.num_parts(), 3);
  EXPECT_THAT(p.parts(), ElementsAre(1));
}

TEST(DataPartTableTest, ADeadWorkersPartsGoToTheLivingAndComeBack) {
  std::vector<Member> workers = Workers(3);
  DataPartTable parts(3);
  for (int i = 0; i < 3; ++i) parts.Claim(workers, i);
  workers[1].alive = false;
  parts.HandOff(workers, 1);
  EXPECT_THAT(parts.parts(1), IsEmpty());
  EXPECT_THAT(parts.parts(0), ElementsAre(0, 1));
  workers[1].alive = true;
  parts.Claim(workers, 1);  // it registers again: its part comes back
  EXPECT_THAT(parts.parts(0), ElementsAre(0));
  EXPECT_THAT(parts.parts(1), ElementsAre(1));
}

TEST(DataPartTableTest, PartsWaitWhenNoWorkerLivesAndAFinishedWorkerKeepsThem) {
  std::vector<Member> workers = Workers(2);
  DataPartTable parts(2);
  parts.Claim(workers, 0);
  parts.Claim(workers, 1);
  workers[0].alive = workers[1].alive = false;
  parts.HandOff(workers, 0);
  EXPECT_THAT(parts.parts(0), ElementsAre(0));  // waits for a worker
  workers[1].report.set_finished(true);
  parts.HandOff(workers, 1);
  EXPECT_THAT(parts.parts(1), ElementsAre(1));
}

TEST(DataPartTableTest, SavesAndRestoresTheWorkersParts) {
  std::vector<Member> workers = Workers(2);
  DataPartTable parts(2);
  parts.Claim(workers, 0);
  parts.Claim(workers, 1);
  proto::CoordinatorState state;
  for (const char* role : {"ps", "worker", "worker"}) {
    proto::MemberRecord* r = state.add_members();
    r->set_role(role);
    r->set_index(state.members_size() == 3 ? 1 : 0);
    r->set_registered(true);
  }
  parts.SaveTo(&state);
  EXPECT_THAT(state.members(0).parts(), IsEmpty());  // a ps holds no part
  EXPECT_THAT(state.members(1).parts(), ElementsAre(0));
  EXPECT_THAT(state.members(2).parts(), ElementsAre(1));

  DataPartTable restored(2);
  restored.Restore(state);
  EXPECT_THAT(restored.parts(1), ElementsAre(1));
  google::protobuf::RepeatedPtrField<proto::MemberStatus> status;
  status.Add()->set_role("worker");
  restored.AddTo(&status);
  EXPECT_THAT(status[0].parts(), ElementsAre(0));
}

}  // namespace
}  // namespace downpour::coordinator
