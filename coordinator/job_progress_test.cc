// JobProgress: when the job stops (a confirmed claim of the target, or every
// worker finished) and the clock a joining worker starts at.
#include "coordinator/job_progress.h"

#include "common/testing/fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::coordinator {
namespace {

using ::testing::HasSubstr;

Config TwoWorkers() {
  Config config;
  config.cluster.ps = {"127.0.0.1:1"};
  config.cluster.workers = {"127.0.0.1:2", "127.0.0.1:3"};
  config.training.target_accuracy = 0.9;
  return config;
}

class JobProgressTest : public ::testing::Test {
 protected:
  JobProgressTest() {
    for (auto* group : {&members_.ps(), &members_.workers()}) {
      for (Member& m : *group) {
        members_.Admit(m, "");
        members_.Touch(m);
      }
    }
    for (int i = 0; i < 2; ++i) parts_.Claim(members_.workers(), i);
  }

  // Worker `w` evaluated (its `evaluations`th time) at `accuracy`; the ps
  // holds its pushes.
  void Evaluate(int w, double accuracy, uint64_t evaluations) {
    Member& worker = members_.workers()[w];
    worker.report.set_accuracy(accuracy);
    worker.report.set_evaluations(evaluations);
    proto::WorkerIncarnation* from = members_.ps()[0].report.add_applied_from();
    from->set_worker(w);
    from->set_incarnation(worker.incarnation);
  }

  Config config_ = TwoWorkers();
  FakeClock clock_;
  Membership members_{config_.cluster, &clock_, clock_.Now()};
  DataPartTable parts_{2};
  JobProgress progress_{config_, &clock_, clock_.Now()};
};

TEST_F(JobProgressTest, OneClaimIsConfirmedByAnotherWorker) {
  Evaluate(0, 0.95, 1);
  EXPECT_FALSE(progress_.MaybeStop(members_, parts_));  // worker 1 evaluates
  proto::ClusterStatusResponse status;
  progress_.AddStatus(&status);
  EXPECT_EQ(status.target_reached_by(), 0);
  Evaluate(1, 0.92, 1);
  EXPECT_TRUE(progress_.MaybeStop(members_, parts_));
  EXPECT_THAT(progress_.stop_reason(),
              HasSubstr("worker 0 reached test accuracy 0.9500 >= target "
                        "0.9000 at step 0 (confirmed by worker 1)"));
  EXPECT_FALSE(progress_.MaybeStop(members_, parts_));  // stopped already
}

TEST_F(JobProgressTest, ALoneClaimantConfirmsItselfWithItsNextEvaluation) {
  members_.workers()[1].report.set_finished(true);
  Evaluate(0, 0.95, 1);
  EXPECT_FALSE(progress_.MaybeStop(members_, parts_));
  Evaluate(0, 0.96, 2);
  EXPECT_TRUE(progress_.MaybeStop(members_, parts_));
  EXPECT_THAT(progress_.stop_reason(),
              HasSubstr("(confirmed by its next evaluation)"));
}

TEST_F(JobProgressTest, AClaimWithoutAppliedPushesDoesNotCount) {
  members_.workers()[1].report.set_finished(true);
  Member& w = members_.workers()[0];
  w.report.set_accuracy(0.99);
  w.report.set_evaluations(1);
  EXPECT_FALSE(progress_.MaybeStop(members_, parts_));
  w.report.set_evaluations(2);
  EXPECT_FALSE(progress_.MaybeStop(members_, parts_));
}

TEST_F(JobProgressTest, StopsWhenEveryWorkerFinishedOrLeftItsParts) {
  members_.workers()[0].report.set_finished(true);
  EXPECT_FALSE(progress_.MaybeStop(members_, parts_));
  members_.workers()[1].alive = false;  // dead, still holding its part
  EXPECT_FALSE(progress_.MaybeStop(members_, parts_));
  members_.workers()[0].alive = true;
  members_.workers()[0].report.set_finished(false);
  parts_.HandOff(members_.workers(), 1);
  members_.workers()[0].report.set_finished(true);
  EXPECT_TRUE(progress_.MaybeStop(members_, parts_));
  EXPECT_EQ(progress_.stop_reason(), "every worker finished its steps");

  proto::CoordinatorState state;
  progress_.SaveTo(&state);
  JobProgress restored(config_, &clock_, clock_.Now());
  restored.Restore(state);
  EXPECT_TRUE(restored.stopped());
}

TEST_F(JobProgressTest, AJoiningWorkerStartsAtTheSlowestTrainingClock) {
  members_.workers()[0].report.set_clock(7);
  members_.workers()[1].report.set_clock(4);
  EXPECT_EQ(JobProgress::StartClock(members_.workers(), 0), 4u);
  EXPECT_EQ(JobProgress::StartClock(members_.workers(), 1), 7u);
  members_.workers()[0].report.set_finished(true);
  EXPECT_EQ(JobProgress::StartClock(members_.workers(), 1), 0u);
}

}  // namespace
}  // namespace downpour::coordinator
