// ClusterState with workers that join (ps_worker --join, cluster.max_workers)
// and are drained (psctl drain-worker): slots, parts, the state file, the
// job's end, and the default config without max_workers.
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
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::vector<int> Parts(const proto::Partition& partition) {
  return {partition.parts().begin(), partition.parts().end()};
}

// Two ps, two configured workers and (by default) max_workers 4.
class WorkersJoinTest : public ClusterStateTest {
 protected:
  void SetUp() override {
    ClusterStateTest::SetUp();
    UseMaxWorkers(4);
  }

  void UseMaxWorkers(int max_workers) {
    config_.cluster.max_workers = max_workers;
    std::filesystem::remove_all(config_.coordinator.state_dir);
    Restart();
  }

  // A worker started with --join at `address`.
  absl::StatusOr<proto::RegisterWorkerResponse> Join(
      const std::string& address) {
    proto::RegisterWorkerRequest request;
    request.set_join(true);
    request.set_index(0);  // ignored
    request.set_address(address);
    auto response = state_->RegisterWorker(request);
    if (response.ok()) {
      Remember("worker", response->index(), "", response->member_key(),
               response->incarnation());
    }
    return response;
  }

  absl::StatusOr<proto::HeartbeatResponse> WorkerBeat(int index,
                                                      bool finished = false,
                                                      uint64_t clock = 0) {
    proto::HeartbeatRequest request;
    request.set_role("worker");
    request.set_index(index);
    request.mutable_report()->set_finished(finished);
    request.mutable_report()->set_clock(clock);
    return Heartbeat(request);
  }

  proto::MemberStatus WorkerStatus(int index) {
    const proto::ClusterStatusResponse status = state_->Status();
    const proto::MemberStatus* m = FindMember(status, "worker", index);
    EXPECT_NE(m, nullptr) << "worker " << index;
    return m != nullptr ? *m : proto::MemberStatus();
  }

  // The members other than `except` heartbeat past the timeout, then the
  // coordinator judges: `except` is declared dead.
  void OnlyOthersBeat(int except, int workers) {
    clock_.Advance(absl::Seconds(config_.heartbeat.timeout_s + 1));
    for (int i = 0; i < workers; ++i) {
      if (i == except) continue;
      ASSERT_THAT(WorkerBeat(i), IsOk());
    }
    state_->CheckLiveness();
    ASSERT_FALSE(WorkerStatus(except).alive());
  }
};

TEST_F(WorkersJoinTest, JoinersTakeTheNextSlotsAndTheirShareOfTheParts) {
  RegisterPs(0, "127.0.0.1:1");
  RegisterWorker(0);
  RegisterWorker(1);
  EXPECT_THAT(PartsOf(0), ElementsAre(0, 2));  // home parts over 4 slots
  EXPECT_THAT(PartsOf(1), ElementsAre(1, 3));

  auto second = Join("127.0.0.1:10");
  ASSERT_THAT(second, IsOk());
  EXPECT_EQ(second->index(), 2);
  EXPECT_EQ(second->partition().num_parts(), 4);
  EXPECT_THAT(Parts(second->partition()), ElementsAre(2));
  EXPECT_THAT(PartsOf(0), ElementsAre(0));  // told in its next heartbeat

  auto third = Join("127.0.0.1:11");
  ASSERT_THAT(third, IsOk());
  EXPECT_EQ(third->index(), 3);
  EXPECT_THAT(Parts(third->partition()), ElementsAre(3));
  EXPECT_THAT(PartsOf(1), ElementsAre(1));

  auto full = Join("127.0.0.1:12");
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.status().message(), HasSubstr("cluster.max_workers is 4"));
  EXPECT_THAT(full.status().message(), HasSubstr("psctl drain-worker"));

  EXPECT_TRUE(WorkerStatus(3).joined());
  EXPECT_FALSE(WorkerStatus(1).joined());
  // The ps learns the joined workers: whom to wait for, their incarnations.
  auto ps = Heartbeat(PsBeat(0, "127.0.0.1:1", 0));
  ASSERT_THAT(ps, IsOk());
  EXPECT_THAT(ps->active_workers(), ElementsAre(0, 1, 2, 3));
  ASSERT_EQ(ps->worker_incarnations_size(), 4);
  EXPECT_EQ(ps->worker_incarnations(3).incarnation(), third->incarnation());
}

TEST_F(WorkersJoinTest, AJoinerStartsAtTheSlowestClockJoinedWorkersIncluded) {
  RegisterWorker(0);
  RegisterWorker(1);
  ASSERT_THAT(WorkerBeat(0, false, 5), IsOk());
  ASSERT_THAT(WorkerBeat(1, false, 7), IsOk());
  auto joined = Join("127.0.0.1:10");
  ASSERT_THAT(joined, IsOk());
  EXPECT_EQ(joined->start_clock(), 5u);
  ASSERT_THAT(WorkerBeat(2, false, 3), IsOk());
  auto next = Join("127.0.0.1:11");
  ASSERT_THAT(next, IsOk());
  EXPECT_EQ(next->start_clock(), 3u);
}

TEST_F(WorkersJoinTest, AJoinedSlotSurvivesACoordinatorRestart) {
  RegisterWorker(0);
  RegisterWorker(1);
  auto joined = Join("127.0.0.1:10");
  ASSERT_THAT(joined, IsOk());
  Restart();
  const proto::MemberStatus restored = WorkerStatus(2);
  EXPECT_TRUE(restored.joined());
  EXPECT_TRUE(restored.registered());
  EXPECT_EQ(restored.address(), "127.0.0.1:10");
  EXPECT_THAT(PartsOf(2), ElementsAre(2));
  // Its process registers again with its index (join false): accepted.
  proto::RegisterWorkerRequest again;
  again.set_index(2);
  again.set_address("127.0.0.1:10");
  again.set_member_key(joined->member_key());
  auto response = state_->RegisterWorker(again);
  ASSERT_THAT(response, IsOk());
  EXPECT_EQ(response->index(), 2);
  EXPECT_EQ(response->incarnation(), joined->incarnation());
  EXPECT_THAT(Parts(response->partition()), ElementsAre(2));
  // The next join gets slot 3, not 2 again.
  auto next = Join("127.0.0.1:11");
  ASSERT_THAT(next, IsOk());
  EXPECT_EQ(next->index(), 3);
}

TEST_F(WorkersJoinTest, ARestartedJoinedWorkerTakesItsShareAgain) {
  RegisterWorker(0);
  RegisterWorker(1);
  auto joined = Join("127.0.0.1:10");
  ASSERT_THAT(joined, IsOk());
  OnlyOthersBeat(2, 2);  // it died: part 2 went to a living worker
  EXPECT_THAT(PartsOf(0), ElementsAre(0, 2));
  proto::RegisterWorkerRequest again;  // its new process, join false
  again.set_index(2);
  again.set_address("127.0.0.1:10");
  auto response = state_->RegisterWorker(again);
  ASSERT_THAT(response, IsOk());
  EXPECT_EQ(response->index(), 2);
  EXPECT_NE(response->incarnation(), joined->incarnation());
  EXPECT_THAT(Parts(response->partition()), ElementsAre(2));
  EXPECT_THAT(PartsOf(0), ElementsAre(0));
}

TEST_F(WorkersJoinTest, ADrainedWorkerIsFinishedAndTheJobEndsWithTheOthers) {
  RegisterWorker(0);
  RegisterWorker(1);
  ASSERT_THAT(Join("127.0.0.1:10"), IsOk());
  ASSERT_THAT(PartsOf(2), ElementsAre(2));
  ASSERT_TRUE(state_->DrainWorker(2).ok());
  // Worker 0 held the fewest parts: it reads part 2 on.
  EXPECT_THAT(PartsOf(0), ElementsAre(0, 2));
  // Its own heartbeat (finished false) does not undo the drain.
  auto beat = WorkerBeat(2);
  ASSERT_THAT(beat, IsOk());
  EXPECT_TRUE(beat->drained());
  EXPECT_THAT(Parts(beat->partition()), IsEmpty());
  EXPECT_TRUE(WorkerStatus(2).drained());
  // Its status shows what it said; then that it ended (psctl drain-worker
  // waits for that, or for its death).
  EXPECT_FALSE(WorkerStatus(2).report().finished());
  ASSERT_THAT(WorkerBeat(2, true), IsOk());
  EXPECT_TRUE(WorkerStatus(2).report().finished());
  EXPECT_FALSE(WorkerBeat(0)->drained());

  // Its death moves nothing and is no outage.
  OnlyOthersBeat(2, 2);
  EXPECT_THAT(PartsOf(0), ElementsAre(0, 2));
  const proto::ClusterStatusResponse status = state_->Status();
  for (const proto::MemberOutage& o : status.outages()) {
    EXPECT_NE(o.role(), "worker") << o.index();
  }
  ASSERT_THAT(WorkerBeat(0, true), IsOk());
  EXPECT_FALSE(state_->Status().stop());
  auto last = WorkerBeat(1, true);
  ASSERT_THAT(last, IsOk());
  EXPECT_TRUE(last->stop());
  EXPECT_THAT(last->stop_reason(), HasSubstr("every worker finished"));
}

TEST_F(WorkersJoinTest, DrainRefusesWhatItCannotDo) {
  RegisterWorker(0);
  RegisterWorker(1);
  ASSERT_THAT(Join("127.0.0.1:10"), IsOk());
  auto unknown = state_->DrainWorker(3);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(),
              HasSubstr("valid indices are 0 to 2"));
  ASSERT_TRUE(state_->DrainWorker(2).ok());
  auto again = state_->DrainWorker(2);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status().message(), HasSubstr("drained already"));
  ASSERT_THAT(WorkerBeat(1, true), IsOk());
  auto finished = state_->DrainWorker(1);
  EXPECT_EQ(finished.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(finished.status().message(), HasSubstr("already finished"));
  auto last = state_->DrainWorker(0);
  EXPECT_EQ(last.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(last.status().message(),
              HasSubstr("worker 0 is the last one training: its parts would "
                        "wait; stop the job instead"));
  EXPECT_THAT(PartsOf(0), ElementsAre(0, 2));  // nothing changed
  // A drained worker that registers again without --join (restarted by its
  // supervisor) is told it was drained, and given no parts.
  proto::RegisterWorkerRequest back;
  back.set_index(2);
  back.set_address("127.0.0.1:10");
  auto told = state_->RegisterWorker(back);
  ASSERT_THAT(told, IsOk());
  EXPECT_TRUE(told->drained());
  EXPECT_EQ(told->partition().parts_size(), 0);
  EXPECT_TRUE(WorkerStatus(2).drained());
}

TEST_F(WorkersJoinTest, TheDrainListsEachPartHandedAndIsSaved) {
  RegisterWorker(0);
  RegisterWorker(1);
  auto drained = state_->DrainWorker(1);
  ASSERT_THAT(drained, IsOk());
  ASSERT_EQ(drained->handed_size(), 2);
  EXPECT_EQ(drained->handed(0).part(), 1);
  EXPECT_EQ(drained->handed(0).to(), 0);
  EXPECT_EQ(drained->handed(1).part(), 3);
  EXPECT_THAT(drained->message(),
              HasSubstr("part 1 to worker 0, part 3 to worker 0"));
  Restart();
  EXPECT_TRUE(WorkerStatus(1).drained());
  EXPECT_THAT(PartsOf(0), ElementsAre(0, 2, 1, 3));
  EXPECT_TRUE(WorkerBeat(1)->drained());
  // Still finished for the job after the restart: worker 0 ends it.
  auto last = WorkerBeat(0, true);
  ASSERT_THAT(last, IsOk());
  EXPECT_TRUE(last->stop());
}

// Chaos seed 46: the coordinator was killed after worker 0 was drained, and
// the summary said worker 0 pushed nothing. The last reports of drained and
// finished workers are saved.
TEST_F(WorkersJoinTest, AFinishedOrDrainedWorkersReportSurvivesARestart) {
  RegisterWorker(0);
  RegisterWorker(1);
  ASSERT_THAT(state_->DrainWorker(0), IsOk());
  proto::HeartbeatRequest last;
  last.set_role("worker");
  last.set_index(0);
  last.mutable_report()->set_step(580);
  last.mutable_report()->set_pushes(580);
  last.mutable_report()->set_sparse_row_updates(123456);
  ASSERT_THAT(Heartbeat(last), IsOk());
  last.set_index(1);
  last.mutable_report()->set_pushes(2586);
  last.mutable_report()->set_finished(true);
  ASSERT_THAT(Heartbeat(last), IsOk());
  Restart();
  const proto::MemberStatus drained = WorkerStatus(0);
  EXPECT_TRUE(drained.drained());
  EXPECT_EQ(drained.report().step(), 580u);
  EXPECT_EQ(drained.report().pushes(), 580u);
  EXPECT_EQ(drained.report().sparse_row_updates(), 123456u);
  EXPECT_EQ(WorkerStatus(1).report().pushes(), 2586u);
}

TEST_F(WorkersJoinTest, ADrainedSlotIsReusedByAJoinOnceItsProcessIsGone) {
  RegisterWorker(0);
  RegisterWorker(1);
  auto first = Join("127.0.0.1:10");
  ASSERT_THAT(first, IsOk());
  ASSERT_TRUE(state_->DrainWorker(2).ok());
  // Slot 2's drained process still runs: the next joiner gets slot 3.
  auto next = Join("127.0.0.1:11");
  ASSERT_THAT(next, IsOk());
  EXPECT_EQ(next->index(), 3);
  const std::string old_key = first->member_key();
  OnlyOthersBeat(2, 4);
  auto reused = Join("127.0.0.1:12");
  ASSERT_THAT(reused, IsOk());
  EXPECT_EQ(reused->index(), 2);
  EXPECT_NE(reused->incarnation(), first->incarnation());
  EXPECT_FALSE(reused->partition().parts().empty());
  const proto::MemberStatus fresh = WorkerStatus(2);
  EXPECT_FALSE(fresh.drained());
  EXPECT_TRUE(fresh.joined());
  EXPECT_FALSE(fresh.report().finished());
  EXPECT_EQ(fresh.address(), "127.0.0.1:12");
  // The drained process, should it come back, stands down.
  proto::HeartbeatRequest stale;
  stale.set_role("worker");
  stale.set_index(2);
  stale.set_member_key(old_key);
  auto replaced = state_->Heartbeat(stale);
  ASSERT_THAT(replaced, IsOk());
  EXPECT_TRUE(replaced->replaced());
}

TEST_F(WorkersJoinTest, WithoutMaxWorkersNoWorkerJoinsAndPartsAreAsBefore) {
  UseMaxWorkers(0);
  RegisterWorker(0);
  RegisterWorker(1);
  EXPECT_THAT(PartsOf(0), ElementsAre(0));
  EXPECT_THAT(PartsOf(1), ElementsAre(1));
  auto join = Join("127.0.0.1:10");
  EXPECT_EQ(join.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(join.status().message(), HasSubstr("cluster.max_workers is 0"));
  proto::RegisterWorkerRequest beyond;
  beyond.set_index(2);
  beyond.set_address("127.0.0.1:10");
  EXPECT_EQ(state_->RegisterWorker(beyond).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto response = WorkerBeat(0);
  ASSERT_THAT(response, IsOk());
  EXPECT_EQ(response->partition().num_parts(), 2);
  EXPECT_FALSE(response->drained());
  EXPECT_FALSE(WorkerStatus(0).joined());
}

}  // namespace
}  // namespace downpour::coordinator
