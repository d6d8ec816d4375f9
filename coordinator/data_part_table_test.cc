// DataPartTable: claims and hand-offs of data parts, the parts each worker's
// status, record and partition carry, and the parts' saved positions.
#include "coordinator/data_part_table.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::SizeIs;

proto::PartPosition Position(int part, int epoch, int segment, int64_t offset,
                             int64_t examples) {
  proto::PartPosition p;
  p.set_part(part);
  p.set_epoch(epoch);
  p.set_segment(segment);
  p.set_offset(offset);
  p.set_examples(examples);
  return p;
}

google::protobuf::RepeatedPtrField<proto::PartPosition> Report(
    std::vector<proto::PartPosition> positions) {
  return {positions.begin(), positions.end()};
}

// "part/epoch/segment/offset/examples" of each position, in order.
std::vector<std::string> Describe(
    const google::protobuf::RepeatedPtrField<proto::PartPosition>& positions) {
  std::vector<std::string> out;
  for (const proto::PartPosition& p : positions) {
    out.push_back(absl::StrCat(p.part(), "/", p.epoch(), "/", p.segment(), "/",
                               p.offset(), "/", p.examples()));
  }
  return out;
}

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

TEST(DataPartTableTest, APartitionCarriesTheReportedPositionsOfItsParts) {
  std::vector<Member> workers = Workers(2);
  DataPartTable parts(2);
  parts.Claim(workers, 0);
  parts.Claim(workers, 1);
  EXPECT_THAT(parts.PartitionOf(0).positions(), IsEmpty());  // from the start
  EXPECT_TRUE(parts.NotePositions(0, Report({Position(0, 0, 1, 4096, 70)})));
  EXPECT_THAT(Describe(parts.PartitionOf(0).positions()),
              ElementsAre("0/0/1/4096/70"));
  EXPECT_THAT(parts.PartitionOf(1).positions(), IsEmpty());
  // The same position again (a worker that registered again) changes nothing.
  EXPECT_FALSE(parts.NotePositions(0, Report({Position(0, 0, 1, 4096, 70)})));
  EXPECT_TRUE(parts.NotePositions(0, Report({Position(0, 1, 0, -1, 0)})));
  EXPECT_THAT(Describe(parts.PartitionOf(0).positions()),
              ElementsAre("0/1/0/-1/0"));
}

TEST(DataPartTableTest, IgnoresPositionsOfPartsNotHeldMalformedOrGoingBack) {
  std::vector<Member> workers = Workers(2);
  DataPartTable parts(2);
  parts.Claim(workers, 0);
  parts.Claim(workers, 1);
  ASSERT_TRUE(parts.NotePositions(1, Report({Position(1, 1, 2, 800, 90)})));
  const struct {
    const char* what;
    proto::PartPosition position;
  } kIgnored[] = {
      {"another worker's part", Position(0, 0, 0, 10, 1)},
      {"no part of the job", Position(7, 0, 0, 10, 1)},
      {"a negative offset below -1", Position(1, 2, 0, -2, 0)},
      {"a negative segment", Position(1, 2, -1, 0, 0)},
      {"an earlier epoch", Position(1, 0, 9, 9000, 900)},
      {"an earlier segment", Position(1, 1, 1, 9000, 900)},
      {"an earlier offset", Position(1, 1, 2, 799, 90)},
  };
  for (const auto& c : kIgnored) {
    EXPECT_FALSE(parts.NotePositions(1, Report({c.position}))) << c.what;
  }
  EXPECT_THAT(parts.PartitionOf(0).positions(), IsEmpty());
  EXPECT_THAT(Describe(parts.PartitionOf(1).positions()),
              ElementsAre("1/1/2/800/90"));
}

TEST(DataPartTableTest, ADeadWorkersPartMovesWithItsPosition) {
  std::vector<Member> workers = Workers(3);
  DataPartTable parts(3);
  for (int i = 0; i < 3; ++i) parts.Claim(workers, i);
  ASSERT_TRUE(parts.NotePositions(1, Report({Position(1, 0, 3, 123, 45)})));
  workers[1].alive = false;
  parts.HandOff(workers, 1);
  const int adopter = parts.parts(0).size() == 2 ? 0 : 2;
  EXPECT_THAT(Describe(parts.PartitionOf(adopter).positions()),
              ElementsAre("1/0/3/123/45"));
  // The adopter goes on from there; the dead worker's late report is stale.
  EXPECT_TRUE(
      parts.NotePositions(adopter, Report({Position(1, 0, 3, 500, 50)})));
  EXPECT_FALSE(parts.NotePositions(1, Report({Position(1, 0, 4, 0, 60)})));
  workers[1].alive = true;
  parts.Claim(workers, 1);  // it registers again and takes its part back
  EXPECT_THAT(Describe(parts.PartitionOf(1).positions()),
              ElementsAre("1/0/3/500/50"));
}

// cluster.max_workers 4 over 2 configured workers.
TEST(DataPartTableTest, HomePartsOverTheSlotsThenJoinersTakeTheirShare) {
  std::vector<Member> workers = Workers(2);
  DataPartTable parts(/*configured=*/2, /*slots=*/4);
  parts.Claim(workers, 0);
  parts.Claim(workers, 1);
  EXPECT_THAT(parts.parts(0), ElementsAre(0, 2));
  EXPECT_THAT(parts.parts(1), ElementsAre(1, 3));
  EXPECT_EQ(parts.PartitionOf(0).num_parts(), 4);
  ASSERT_TRUE(parts.NotePositions(0, Report({Position(2, 1, 4, 77, 9)})));
  workers.push_back(Workers(3)[2]);
  parts.Join(workers, 2);
  EXPECT_THAT(parts.parts(0), ElementsAre(0));
  EXPECT_THAT(parts.parts(2), ElementsAre(2));
  // The part's saved position went with it; the donor's late report of it
  // is stale.
  EXPECT_THAT(Describe(parts.PartitionOf(2).positions()),
              ElementsAre("2/1/4/77/9"));
  EXPECT_FALSE(parts.NotePositions(0, Report({Position(2, 1, 5, 0, 20)})));
  workers.push_back(Workers(4)[3]);
  parts.Join(workers, 3);
  EXPECT_THAT(parts.parts(1), ElementsAre(1));
  EXPECT_THAT(parts.parts(3), ElementsAre(3));
}

TEST(DataPartTableTest, ADrainedWorkersPartsGoToTheOthersFewestFirst) {
  std::vector<Member> workers = Workers(3);
  DataPartTable parts(/*configured=*/3, /*slots=*/6);
  for (int i = 0; i < 3; ++i) parts.Claim(workers, i);
  ASSERT_THAT(parts.parts(1), ElementsAre(1, 4));
  ASSERT_TRUE(parts.NotePositions(1, Report({Position(4, 0, 2, 10, 5)})));
  const std::vector<PartMove> moves = parts.Drain(workers, 1);
  ASSERT_THAT(moves, SizeIs(2));
  EXPECT_EQ(moves[0].part, 1);
  EXPECT_EQ(moves[0].to, 0);
  EXPECT_EQ(moves[1].part, 4);
  EXPECT_EQ(moves[1].to, 2);
  EXPECT_THAT(parts.parts(1), IsEmpty());
  EXPECT_THAT(parts.parts(0), ElementsAre(0, 3, 1));
  EXPECT_THAT(parts.parts(2), ElementsAre(2, 5, 4));
  EXPECT_THAT(Describe(parts.PartitionOf(2).positions()),
              ElementsAre("4/0/2/10/5"));
  // Nobody alive to take them: they stay.
  workers[1].drained = true;
  workers[2].alive = false;
  EXPECT_THAT(parts.Drain(workers, 0), IsEmpty());
  EXPECT_THAT(parts.parts(0), ElementsAre(0, 3, 1));
}

TEST(DataPartTableTest, SavesAndRestoresThePositions) {
  std::vector<Member> workers = Workers(2);
  DataPartTable parts(2);
  parts.Claim(workers, 0);
  parts.Claim(workers, 1);
  ASSERT_TRUE(parts.NotePositions(0, Report({Position(0, 2, 1, 64, 5)})));
  ASSERT_TRUE(parts.NotePositions(1, Report({Position(1, 1, 0, -1, 0)})));
  proto::CoordinatorState state;
  for (int i = 0; i < 2; ++i) {
    proto::MemberRecord* r = state.add_members();
    r->set_role("worker");
    r->set_index(i);
    r->set_registered(true);
  }
  parts.SaveTo(&state);
  EXPECT_THAT(state.part_positions(), SizeIs(2));
  *state.add_part_positions() = Position(5, 0, 0, 0, 0);  // not of this job

  DataPartTable restored(2);
  restored.Restore(state);
  EXPECT_THAT(Describe(restored.PartitionOf(0).positions()),
              ElementsAre("0/2/1/64/5"));
  EXPECT_THAT(Describe(restored.PartitionOf(1).positions()),
              ElementsAre("1/1/0/-1/0"));
  proto::CoordinatorState again;
  restored.SaveTo(&again);
  EXPECT_THAT(again.part_positions(), SizeIs(2));
}

}  // namespace
}  // namespace downpour::coordinator
