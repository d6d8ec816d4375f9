// Workers join and leave a running job (issue 43, item 3): a worker started
// with `ps_worker --join` takes a free slot of cluster.max_workers and data
// parts from the workers that hold the most, and `psctl drain-worker N` hands
// a worker's parts to the others before it exits. Real coordinator, ps and
// worker processes on loopback; the checks are what a client can observe
// (ClusterStatus, Status counters, Checksums), and that nothing acknowledged
// is lost or applied twice across the changes.
#include <algorithm>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/poll.h"
#include "coordinator/cluster_state.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon_harness.h"
#include "tests/fault_fixture.h"

namespace downpour {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class WorkerJoinTest : public FaultJobTest {
 protected:
  // Room for one worker more than the two listed (3 slots, 3 data parts).
  void AllowJoins(int max_workers) {
    std::string yaml = testing::ReadText(config_);
    yaml = std::regex_replace(
        yaml, std::regex("  workers: "),
        absl::StrCat("  max_workers: ", max_workers, "\n  workers: "));
    config_ = testing::WriteConfig("job.yaml", yaml);
  }

  // Starts `ps_worker --join` as daemon "worker-<expected>".
  void StartJoiningWorker(int expected) {
    Start(absl::StrCat("worker-", expected), "worker/ps_worker",
          {"--join", "--listen", "127.0.0.1:0", "--coordinator", coordinator_});
  }

  const proto::MemberStatus* Worker(const proto::ClusterStatusResponse& status,
                                    int index) {
    return coordinator::FindMember(status, "worker", index);
  }

  // `psctl drain-worker N`: its output; EXPECTs exit 0.
  std::string DrainWithPsctl(int index) {
    const std::string log = absl::StrCat(dir_, "/drain-", index, ".log");
    const int status =
        testing::RunToEnd({testing::BinDir() + "/tools/psctl", "drain-worker",
                           absl::StrCat(index), "--coordinator", coordinator_},
                          log);
    const std::string output = testing::ReadText(log);
    EXPECT_EQ(status, 0) << output;
    std::printf("%s", output.c_str());
    return output;
  }

  // Worker `joined` joined with part 2 and trains; worker 0 gave it up.
  void ExpectJoinedWithPartTwo(int joined, uint64_t step) {
    ASSERT_TRUE(WaitUntil([&] {
      const auto status = Status();
      const auto* m = Worker(status, joined);
      return m != nullptr && m->joined() && m->report().step() >= step;
    })) << "worker "
        << joined << " never joined and trained";
    EXPECT_THAT(WorkerParts(joined), ElementsAre(2));
    EXPECT_TRUE(WaitUntil([&] { return WorkerParts(0) == std::vector{0}; },
                          absl::Seconds(30)))
        << "worker 0 kept the part it handed over";
  }

  // Workers 0 and 1 train; worker 2 joins with part 2, worker 0 is drained,
  // and workers 1 and 2 finish (exit 0).
  void JoinDrainAndFinish() {
    StartWorker(0);
    StartWorker(1);
    // Both registered and training (a slow start of worker 1 leaves part 1
    // without a holder until it registers).
    ASSERT_TRUE(
        WaitUntil([&] { return WorkerAtStep(0, 20) && WorkerAtStep(1, 20); }));
    EXPECT_THAT(WorkerParts(0), ElementsAre(0, 2));
    EXPECT_THAT(WorkerParts(1), ElementsAre(1));
    StartJoiningWorker(2);
    ASSERT_NO_FATAL_FAILURE(ExpectJoinedWithPartTwo(2, 20));
    ASSERT_NO_FATAL_FAILURE(DrainWorkerZero());
    for (int w : {1, 2}) {
      const std::optional<int> exited =
          daemons_[absl::StrCat("worker-", w)]->Wait(kLong);
      ASSERT_TRUE(exited.has_value()) << "worker " << w << " still running";
      EXPECT_EQ(*exited, 0);
    }
    // The drained worker left within a heartbeat or two: under load that is
    // hundreds of steps, but far short of the job's end, which worker 1
    // (that trained from the start to the end) shows. A worker that ignored
    // the drain trains to about the end as well.
    const uint64_t end = Worker(Status(), 1)->report().step();
    ASSERT_GT(end, drain_.at_drain);
    EXPECT_LT(drain_.at_exit, drain_.at_drain + (end - drain_.at_drain) / 3)
        << "the drained worker trained on: " << drain_.at_drain
        << " steps at the drain, " << drain_.at_exit << " at its end, " << end
        << " for worker 1 at the job's end";
  }

  // Worker 0's steps when it was drained and when it exited.
  struct {
    uint64_t at_drain = 0;
    uint64_t at_exit = 0;
  } drain_;

  // Drains worker 0 with psctl; it exits 0, and its part goes on elsewhere.
  void DrainWorkerZero() {
    drain_.at_drain = Worker(Status(), 0)->report().step();
    const std::string output = DrainWithPsctl(0);
    EXPECT_THAT(output, HasSubstr("part 0 to worker"));
    const std::optional<int> exited =
        daemons_["worker-0"]->Wait(absl::Seconds(60));
    ASSERT_TRUE(exited.has_value()) << "the drained worker did not exit";
    EXPECT_EQ(*exited, 0) << daemons_["worker-0"]->LogTail(20);
    const auto status = Status();
    const auto* drained = Worker(status, 0);
    ASSERT_NE(drained, nullptr);
    EXPECT_TRUE(drained->drained());
    EXPECT_TRUE(drained->parts().empty());
    drain_.at_exit = drained->report().step();  // judged at the job's end
    // Started again (a supervisor restarts what exits): it is told it was
    // drained and exits 0 at once, rather than failing over and over.
    Subprocess& again = Start("worker-0-again", "worker/ps_worker",
                              {"--index", "0", "--coordinator", coordinator_});
    const std::optional<int> again_exit = again.Wait(absl::Seconds(60));
    ASSERT_TRUE(again_exit.has_value()) << "a drained worker started again";
    EXPECT_EQ(*again_exit, 0) << again.LogTail(10);
    EXPECT_TRUE(Worker(Status(), 0)->drained());
    std::vector<int> held;
    for (int w : {1, 2}) {
      for (int part : WorkerParts(w)) held.push_back(part);
    }
    std::sort(held.begin(), held.end());
    EXPECT_THAT(held, ElementsAre(0, 1, 2)) << "every part has a holder";
  }
};

// A dense job: 2 workers listed, max_workers 3. A third joins and takes part 2
// from worker 0 (which held parts 0 and 2); then worker 0 is drained and its
// part 0 goes to another worker. Every acknowledged push is in the model once.
TEST_F(WorkerJoinTest, AJoinedWorkerTrainsAndADrainedOneHandsItsPartsBack) {
  WriteConfig(/*ps=*/1, /*standbys=*/0, /*workers=*/2, /*epochs=*/150);
  AllowJoins(3);
  StartCoordinator();
  StartPs(0);
  ASSERT_NO_FATAL_FAILURE(JoinDrainAndFinish());
  const auto status = Status();
  for (int w : {1, 2}) {
    EXPECT_TRUE(Worker(status, w)->report().finished()) << "worker " << w;
    EXPECT_GT(Worker(status, w)->report().accuracy(), 0.7) << "worker " << w;
  }
  // Pushes of all three workers (the drained one's included) against the
  // block versions: none lost, none applied twice.
  const std::map<int, uint64_t> lost = ExpectReportedLossIsCounted(1);
  EXPECT_EQ(lost.at(0), 0u);
}

// A sparse job that streams its data: the joined worker reads part 2 on from
// the position worker 0 reported, and the drained worker's part moves with
// its position. Row updates held = row updates acknowledged.
TEST_F(WorkerJoinTest, StreamedPartsMoveWithTheirPositions) {
  WriteSparseConfig(/*ps=*/2, /*standbys=*/0, /*workers=*/2, /*epochs=*/60);
  std::string yaml = testing::ReadText(config_);
  yaml = std::regex_replace(
      yaml, std::regex("  source: libsvm\n"),
      "  source: libsvm\n  stream: true\n  classes: [-1, +1]\n");
  config_ = testing::WriteConfig("job.yaml", yaml);
  AllowJoins(3);
  StartCoordinator();
  StartPs(0);
  StartPs(1);
  ASSERT_NO_FATAL_FAILURE(JoinDrainAndFinish());
  ExpectNoAcknowledgedRowUpdateLost(2);
}

// No slot left: a worker that joins beyond cluster.max_workers is refused
// with the reason, and exits non-zero; the job goes on.
TEST_F(WorkerJoinTest, AJoinBeyondMaxWorkersIsRefused) {
  WriteConfig(/*ps=*/1, /*standbys=*/0, /*workers=*/2, /*epochs=*/20);
  StartCoordinator();
  StartPs(0);
  StartWorker(0);
  StartWorker(1);
  ASSERT_TRUE(WaitUntil([&] { return WorkerAtStep(0, 5); }));
  StartJoiningWorker(2);
  Subprocess& joiner = *daemons_["worker-2"];
  const std::optional<int> exited = joiner.Wait(absl::Seconds(60));
  ASSERT_TRUE(exited.has_value()) << "the refused worker did not exit";
  EXPECT_NE(*exited, 0);
  EXPECT_EQ(Worker(Status(), 2), nullptr);
  ExpectWorkersFinish(2, 0.5);
}

}  // namespace
}  // namespace downpour
