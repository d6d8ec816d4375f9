// psctl drain-worker against faked coordinator calls: what it prints, its
// wait for the worker to leave, and how each error ends it.
#include "tools/drain_worker_command.h"

#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::tools {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A coordinator that drains as told and shows worker 2 alive and unfinished
// for `reads_alive` status reads, then gone.
struct Fake {
  DrainWorkerCalls Calls() {
    DrainWorkerCalls calls;
    calls.drain = [this](const proto::DrainWorkerRequest& request)
        -> absl::StatusOr<proto::DrainWorkerResponse> {
      asked = request.index();
      if (!refusal.ok()) return refusal;
      proto::DrainWorkerResponse response;
      proto::PartHandOff* h = response.add_handed();
      h->set_part(2);
      h->set_to(0);
      h = response.add_handed();
      h->set_part(5);
      h->set_to(1);
      response.set_message("worker 2 drained: part 2 to worker 0, ...");
      return response;
    };
    calls.status = [this]() -> absl::StatusOr<proto::ClusterStatusResponse> {
      proto::ClusterStatusResponse status;
      proto::MemberStatus* w = status.add_members();
      w->set_role("worker");
      w->set_index(2);
      w->set_drained(true);
      w->set_alive(reads++ < reads_alive);
      return status;
    };
    calls.print = [this](const std::string& line) { lines.push_back(line); };
    calls.poll = absl::ZeroDuration();
    calls.timeout = absl::Seconds(5);
    return calls;
  }

  absl::Status refusal;
  int reads_alive = 2;
  int reads = 0;
  int asked = -1;
  std::vector<std::string> lines;
};

TEST(DrainWorkerCommandTest, PrintsEachPartHandedThenWaitsForTheExit) {
  Fake fake;
  ASSERT_THAT(DrainWorkerCommand(fake.Calls(), 2), IsOk());
  EXPECT_EQ(fake.asked, 2);
  EXPECT_EQ(fake.reads, 3);
  EXPECT_THAT(
      fake.lines,
      ElementsAre("data part 2 -> worker 0 (it reads on from the part's saved "
                  "position)",
                  "data part 5 -> worker 1 (it reads on from the part's saved "
                  "position)",
                  "worker 2 drained: part 2 to worker 0, ...",
                  "worker 2 drained: exited"));
}

TEST(DrainWorkerCommandTest, ARefusalIsPrintedAsTheCoordinatorSaidIt) {
  Fake fake;
  fake.refusal = absl::FailedPreconditionError(
      "drain-worker: worker 2 is the last one training: its parts would "
      "wait; stop the job instead");
  EXPECT_THAT(DrainWorkerCommand(fake.Calls(), 2),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("the last one training")));
  EXPECT_TRUE(fake.lines.empty());
  EXPECT_EQ(fake.reads, 0);  // no wait after a refusal
}

TEST(DrainWorkerCommandTest, AWorkerThatDoesNotExitInTimeIsAnError) {
  Fake fake;
  fake.reads_alive = 1 << 30;
  DrainWorkerCalls calls = fake.Calls();
  calls.timeout = absl::Milliseconds(50);
  calls.poll = absl::Milliseconds(5);
  EXPECT_THAT(DrainWorkerCommand(calls, 2),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("worker 2 drained, but it did not exit "
                                 "within 0.05 s")));
}

TEST(DrainWorkerCommandTest, AWorkerReportingItsEndCountsAsExited) {
  Fake fake;
  fake.reads_alive = 1 << 30;
  DrainWorkerCalls calls = fake.Calls();
  auto status = calls.status;
  calls.status = [status]() -> absl::StatusOr<proto::ClusterStatusResponse> {
    absl::StatusOr<proto::ClusterStatusResponse> s = status();
    s->mutable_members(0)->mutable_report()->set_finished(true);
    return s;
  };
  ASSERT_THAT(DrainWorkerCommand(calls, 2), IsOk());
  EXPECT_EQ(fake.lines.back(), "worker 2 drained: exited");
}

TEST(DrainWorkerCommandTest, AStatusReadThatFailsEndsTheWait) {
  Fake fake;
  DrainWorkerCalls calls = fake.Calls();
  calls.status = []() -> absl::StatusOr<proto::ClusterStatusResponse> {
    return absl::UnavailableError("cannot reach the coordinator at h:1");
  };
  EXPECT_THAT(DrainWorkerCommand(calls, 2),
              StatusIs(absl::StatusCode::kUnavailable));
}

}  // namespace
}  // namespace downpour::tools
