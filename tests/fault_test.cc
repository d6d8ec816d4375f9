// Fault tests: real coordinator, ps and worker processes on loopback, killed
// with SIGKILL, stopped with SIGSTOP, restarted. Each asserts what a user cares
// about: the job finishes with the accuracy reached, the failure was seen and
// handled, and no acknowledged update was lost across a clean shutdown and
// restart. They assert on what a client can observe (the coordinator's
// ClusterStatus, each daemon's Status counters, the ps's Checksums and
// checkpoints), never on log text.
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <regex>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/exit_codes.h"
#include "common/file_util.h"
#include "common/mnist.h"
#include "common/subprocess.h"
#include "common/testing/poll.h"
#include "coordinator/cluster_state.h"
#include "coordinator/test_cluster.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "membership/coordinator_client.h"
#include "proto/ps.grpc.pb.h"
#include "proto/status.grpc.pb.h"
#include "rpc/server_util.h"
#include "server/checkpoint.h"
#include "tests/daemon_harness.h"
#include "tests/fault_fixture.h"

namespace downpour {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class FaultTest : public FaultJobTest {};

TEST_F(FaultTest, DeadWorkersPartGoesToTheOthersAndComesBackOnRejoin) {
  WriteConfig(1, 0, 2);
  StartCoordinator();
  StartPs(0);
  StartWorker(0);
  StartWorker(1);
  ASSERT_TRUE(WaitUntil([&] { return WorkerAtStep(1, 200); }));
  daemons_["worker-1"]->Signal(SIGKILL);
  ASSERT_TRUE(WaitUntil(
      [&] {
        const auto status = Status();
        const auto* m = coordinator::FindMember(status, "worker", 1);
        return m != nullptr && !m->alive();
      },
      absl::Seconds(20)))
      << "the coordinator never noticed";
  ASSERT_TRUE(WaitUntil(
      [&] {
        return WorkerParts(0) == std::vector<int>{0, 1};
      },
      absl::Seconds(20)))
      << "worker 1's part did not go to worker 0";
  // Restarted with the same index, worker 1 gets its part back.
  daemons_.erase("worker-1");
  StartWorker(1);
  ASSERT_TRUE(WaitUntil([&] { return WorkerParts(0) == std::vector<int>{0}; },
                        absl::Seconds(30)));
  EXPECT_THAT(WorkerParts(1), ElementsAre(1));
  {
    const auto status = Status();
    const auto* rejoined = coordinator::FindMember(status, "worker", 1);
    ASSERT_NE(rejoined, nullptr);
    EXPECT_TRUE(rejoined->registered() && rejoined->alive());
  }
  ExpectWorkersFinish(2, 0.8);
  EXPECT_THAT(Status().stop_reason(), HasSubstr("every worker finished"));

  // Clean shutdown and restart of the ps loses nothing acknowledged.
  const std::string before = Checksums(ShardAddress(0));
  ASSERT_FALSE(before.empty());
  EXPECT_EQ(daemons_["ps-0"]->Stop(absl::Seconds(10)), 0);
  daemons_.erase("ps-0");
  StartPs(0);
  ASSERT_TRUE(WaitUntil([&] { return Checksums(ShardAddress(0)) == before; },
                        absl::Seconds(30)))
      << "parameters after restart differ from those before shutdown";
}

TEST_F(FaultTest, KilledShardIsTakenOverByAStandbyFromItsCheckpoint) {
  WriteConfig(2, 1, 2, /*epochs=*/150);
  StartCoordinator();
  StartPs(0);
  StartPs(1);
  StartPs(0, /*standby=*/true);
  StartWorker(0);
  StartWorker(1);
  ASSERT_TRUE(
      WaitUntil([&] { return WorkerAtStep(0, 150) && WorkerAtStep(1, 150); }));
  const std::string old_address = ShardAddress(1);
  ASSERT_FALSE(old_address.empty());
  uint64_t applied = 0;
  Checksums(old_address, &applied);
  daemons_["ps-1"]->Signal(SIGKILL);
  const absl::Time killed = absl::Now();
  ASSERT_TRUE(WaitUntil(
      [&] {
        const std::string now = ShardAddress(1);
        return !now.empty() && now != old_address;
      },
      absl::Seconds(30)))
      << "no standby took over";
  const double takeover_s = absl::ToDoubleSeconds(absl::Now() - killed);
  EXPECT_GE(Status().placement_epoch(), 2u);
  const std::string new_address = ShardAddress(1);
  ASSERT_TRUE(WaitUntil([&] { return Counter(new_address, "takeovers") == 1; },
                        absl::Seconds(10)))
      << "the ps now serving shard 1 at " << new_address
      << " did not take it over";
  // The workers' retries hit the dead address until the new placement; each
  // adds the time it could not reach the shard to its outage_seconds.
  double outage = -1;
  ASSERT_TRUE(WaitUntil(
      [&] {
        for (int i = 0; i < 2; ++i) {
          outage =
              std::max(outage, Counter(Address("worker", i), "outage_seconds"));
        }
        return outage > 0;
      },
      absl::Seconds(30)))
      << "workers should have seen the shard unreachable";
  auto checkpoint = server::ReadNewestCheckpoint(dir_ + "/ckpt", 1);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  uint64_t saved = 0;
  for (const auto& b : checkpoint->blocks) saved += b.version;
  // Half the model went back to its last checkpoint; the rest of the run has to
  // make that up, so the bar is a little lower than elsewhere.
  ExpectWorkersFinish(2, 0.7);
  // What the take-over lost, in pushes, as the cluster reports it, is what
  // the final model misses.
  const std::map<int, uint64_t> lost = ExpectReportedLossIsCounted(2);
  EXPECT_EQ(lost.at(0), 0u);
  // The figures the issue asks for, printed for the record
  // (docs/OPERATIONS.md).
  std::printf(
      "ps failover: %llu updates applied before the kill, %llu in the "
      "checkpoint the standby loaded (up to %lld lost; interval 0.5 s); "
      "new placement %.2f s after the kill; a worker could not reach the "
      "shard for %.2f s in all\n",
      static_cast<unsigned long long>(applied),
      static_cast<unsigned long long>(saved),
      static_cast<long long>(applied) - static_cast<long long>(saved),
      takeover_s, outage);
  std::printf(
      "ps failover from a checkpoint: %llu acknowledged pushes of shard "
      "1 lost, reported exactly\n",
      static_cast<unsigned long long>(lost.at(1)));
  EXPECT_GT(saved, 0u);
}

// cluster.replication 2 (the default) with a standby per shard: each primary
// streams to its backup and acknowledges a push only once the backup has it,
// so a SIGKILLed primary loses nothing: at the end every block has been
// updated exactly once per push the workers had acknowledged.
TEST_F(FaultTest, KilledPrimaryIsTakenOverByItsBackupWithNothingLost) {
  ASSERT_NO_FATAL_FAILURE(StartReplicatedJobAndTrain());
  ASSERT_NO_FATAL_FAILURE(KillPrimaryAndExpectTakeOverFromReplica(1));
  ExpectWorkersFinish(2, 0.8);
  // Counted the other way: every block of both shards is at the version
  // equal to the pushes the workers had acknowledged.
  const std::map<int, uint64_t> lost = ExpectReportedLossIsCounted(2);
  EXPECT_EQ(lost.at(0), 0u);
  EXPECT_EQ(lost.at(1), 0u);
}

// Sparse rows replicate as blocks do (issue 21): the backup of a SIGKILLed
// primary takes over holding every acknowledged row update. Counted per row
// version: at the end the ps hold exactly the row updates (one per key per
// push) that the workers had acknowledged, none lost and none applied twice.
TEST_F(FaultTest, KilledSparsePrimaryLosesNoAcknowledgedRowUpdate) {
  ExpectKilledSparsePrimaryLosesNothing();
}

// The same with the rows prefetched and two pushes in flight
// (training.fetch overlap): a push in flight at the kill is acknowledged
// once, by the backup, or retried; none is counted twice or lost.
TEST_F(FaultTest, KilledSparsePrimaryLosesNothingWithPushesInFlight) {
  sparse_training_ = "  fetch: overlap\n  max_pushes_in_flight: 2\n";
  ExpectKilledSparsePrimaryLosesNothing();
}

// A second fault: the primary is killed and restarted at once (as the
// launcher does); its backup takes over, and the restarted ps, whose shard
// is served elsewhere now, rejoins as a spare and becomes the shard's backup.
// Once it is in sync, the shard's new server is killed too: the spare takes
// over from its replica, and nothing acknowledged is lost.
TEST_F(FaultTest, RestartedPsRejoinsAsABackupSoASecondKillLosesNothing) {
  ASSERT_NO_FATAL_FAILURE(StartReplicatedJobAndTrain());
  const std::string first = ShardAddress(1);
  const absl::Time killed = absl::Now();
  KillAndRestart("ps-1", 1, /*standby=*/false);
  // The backup serves shard 1; the restarted ps is a spare backing it up.
  ASSERT_TRUE(WaitUntil(
      [&] {
        const auto status = Status();
        const auto* ps = coordinator::FindMember(status, "ps", 1);
        if (ps == nullptr || ps->address() == first) return false;
        for (const auto& r : status.shard_replication()) {
          if (r.shard() != 1 || !r.in_sync()) continue;
          const auto* backup =
              coordinator::FindMember(status, "standby", r.backup_standby());
          return backup != nullptr && backup->spare() &&
                 backup->former_shard() == 1;
        }
        return false;
      },
      absl::Seconds(30)))
      << "the restarted ps never became shard 1's backup";
  const double to_backup = absl::ToDoubleSeconds(absl::Now() - killed);
  // Shard 1's backup (whichever standby the coordinator named) serves it.
  const std::string successor = DaemonServing(1);
  ASSERT_FALSE(successor.empty());
  const int successor_index = successor.back() - '0';
  const std::string second = ShardAddress(1);
  KillAndRestart(successor, successor_index, /*standby=*/true);
  ASSERT_TRUE(WaitUntil(
      [&] {
        const auto status = Status();
        return status.recoveries_size() == 2 &&
               coordinator::FindMember(status, "ps", 1)->address() != second;
      },
      absl::Seconds(30)))
      << "nobody took shard 1 over the second time";
  {
    const auto status = Status();
    EXPECT_EQ(status.recoveries(0).source(), "replica");
    EXPECT_EQ(status.recoveries(1).source(), "replica");
    EXPECT_GE(status.recoveries(0).backup_in_sync_seconds(),
              status.recoveries(0).time_seconds());
  }
  ExpectWorkersFinish(2, 0.8);
  const std::map<int, uint64_t> lost = ExpectReportedLossIsCounted(2);
  EXPECT_EQ(lost.at(0), 0u);
  EXPECT_EQ(lost.at(1), 0u);
  std::printf(
      "double kill: shard 1 had an in-sync backup again %.2f s after "
      "the first kill (as seen by polling); 0 acknowledged pushes "
      "lost over 2 take-overs\n",
      to_backup);
}

// Two kills in quick succession, with no spare to back the shard up in
// between: the second take-over comes from the checkpoint (the other shard's
// backup serves it, so that shard runs without a backup, which psctl shows),
// and the loss the cluster reports, in pushes, is exactly what the final
// model misses.
TEST_F(FaultTest, QuickSecondKillReportsTheExactLoss) {
  ASSERT_NO_FATAL_FAILURE(StartReplicatedJobAndTrain());
  const std::string first = ShardAddress(1);
  KillAndRestart("ps-1", 1, /*standby=*/false, /*restart=*/false);
  ASSERT_TRUE(WaitUntil(
      [&] {
        const std::string now = ShardAddress(1);
        return !now.empty() && now != first;
      },
      absl::Seconds(30)));
  const std::string second = ShardAddress(1);
  const std::string successor = DaemonServing(1);
  ASSERT_FALSE(successor.empty());
  const int successor_index = successor.back() - '0';
  const std::string other = absl::StrCat("standby-", 1 - successor_index);
  // Some pushes acknowledged by the successor alone.
  const double applied = Counter(second, "pushes");
  ASSERT_TRUE(
      WaitUntil([&] { return Counter(second, "pushes") > applied + 20; },
                absl::Seconds(30)));
  KillAndRestart(successor, 1, /*standby=*/true, /*restart=*/false);
  ASSERT_TRUE(WaitUntil(
      [&] {
        const std::string now = ShardAddress(1);
        return !now.empty() && now != second && DaemonServing(1) == other;
      },
      absl::Seconds(30)))
      << other << " (shard 0's backup) did not take shard 1 over";
  // Shard 0's backup serves shard 1 now: shard 0 has none, and says so.
  {
    const std::string psctl = testing::BinDir() + "/tools/psctl";
    FILE* out =
        popen((psctl + " status --coordinator " + coordinator_).c_str(), "r");
    ASSERT_NE(out, nullptr);
    std::string text;
    char buffer[4096];
    for (size_t n; (n = fread(buffer, 1, sizeof(buffer), out)) > 0;)
      text.append(buffer, n);
    EXPECT_EQ(pclose(out), 0) << text;
    EXPECT_THAT(text, HasSubstr("shard 0: NONE")) << text;
  }
  // Both come back, as the launcher would restart them: as spares.
  StartPs(1);
  StartPs(successor_index, /*standby=*/true);
  ASSERT_TRUE(
      WaitUntil([&] { return AllShardsBackedUp(2); }, absl::Seconds(60)))
      << "redundancy was not restored";
  ExpectWorkersFinish(2, 0.7);
  const std::map<int, uint64_t> lost = ExpectReportedLossIsCounted(2);
  EXPECT_EQ(lost.at(0), 0u);
  const auto status = Status();
  ASSERT_EQ(status.recoveries_size(), 2);
  EXPECT_EQ(status.recoveries(1).source(), "checkpoint");
  std::printf(
      "quick double kill: %llu acknowledged pushes of shard 1 lost, "
      "reported %llu\n",
      static_cast<unsigned long long>(lost.at(1)),
      static_cast<unsigned long long>(status.acked_pushes_lost()));
}

// A coordinator that stalls (SIGSTOP) for longer than the heartbeat timeout
// wakes up and gives everyone a fresh grace period instead of declaring the
// whole cluster dead and failing a healthy ps over.
TEST_F(FaultTest, StalledCoordinatorFailsNobodyOver) {
  WriteConfig(2, 1, 1, /*epochs=*/100);
  StartCoordinator();
  StartPs(0);
  StartPs(1);
  StartPs(0, /*standby=*/true);
  StartWorker(0);
  ASSERT_TRUE(WaitUntil([&] { return WorkerAtStep(0, 100); }));
  const auto before = Status();
  const std::string worker = Address("worker", 0);
  daemons_["coordinator"]->Signal(SIGSTOP);
  // The fault: a pause three times the coordinator's heartbeat timeout.
  absl::SleepFor(absl::Seconds(3));
  const double steps = Counter(worker, "step");
  daemons_["coordinator"]->Signal(SIGCONT);
  ASSERT_TRUE(WaitUntil([&] { return WorkerAtStep(0, steps + 20); },
                        absl::Seconds(30)));
  const auto after = Status();
  EXPECT_EQ(after.placement_epoch(), before.placement_epoch())
      << "a shard moved because the coordinator slept";
  EXPECT_EQ(after.recoveries_size(), 0);
  for (const auto& m : after.members()) {
    EXPECT_TRUE(m.alive()) << m.role() << " " << m.index();
    if (m.role() == "standby") {
      EXPECT_EQ(m.serving_index(), -1);
    }
  }
}

// A second ps started with the index of a live one does not take the shard:
// it rejoins as a spare standby (at its own address), the shard stays where
// it is, and nothing is lost.
TEST_F(FaultTest, SecondPsForALiveShardBecomesASpare) {
  WriteConfig(1, 0, 1, /*epochs=*/60);
  StartCoordinator();
  StartPs(0);
  StartWorker(0);
  ASSERT_TRUE(WaitUntil([&] { return WorkerAtStep(0, 50); }));
  const auto before = Status();
  const std::string serving = ShardAddress(0);
  Subprocess& second = Start("ps-0-again", "server/ps_server",
                             {"--index", "0", "--coordinator", coordinator_});
  ASSERT_TRUE(WaitUntil(
      [&] {
        const auto status = Status();
        const auto* spare = coordinator::FindMember(status, "standby", 0);
        return spare != nullptr && spare->alive() && spare->spare() &&
               spare->former_shard() == 0 && spare->address() != serving;
      },
      absl::Seconds(30)))
      << second.LogTail(10);
  EXPECT_FALSE(second.Poll().has_value()) << "the spare should keep running";
  EXPECT_EQ(ShardAddress(0), serving);
  EXPECT_EQ(Status().placement_epoch(), before.placement_epoch());
  EXPECT_EQ(Status().recoveries_size(), 0);
  ExpectWorkersFinish(1, 0.8);
}

TEST_F(FaultTest, HungShardIsReplacedAndStandsDownWhenItWakes) {
  WriteConfig(1, 1, 1);
  StartCoordinator();
  StartPs(0);
  StartPs(0, /*standby=*/true);
  StartWorker(0);
  ASSERT_TRUE(WaitUntil([&] { return WorkerAtStep(0, 200); }));
  const std::string old_address = ShardAddress(0);
  ASSERT_FALSE(old_address.empty());
  daemons_["ps-0"]->Signal(SIGSTOP);
  ASSERT_TRUE(WaitUntil(
      [&] {
        const std::string now = ShardAddress(0);
        return !now.empty() && now != old_address;
      },
      absl::Seconds(30)));
  daemons_["ps-0"]->Signal(SIGCONT);
  // The woken ps learns it was replaced and exits without overwriting the
  // standby's checkpoint with its stale parameters; its status says so, and
  // a restart with the same flags makes it a spare.
  const std::optional<int> status = daemons_["ps-0"]->Wait(absl::Seconds(30));
  ASSERT_TRUE(status.has_value()) << "the replaced ps kept running";
  EXPECT_EQ(*status, kExitReplaced);
  ExpectWorkersFinish(1, 0.8);
}

TEST_F(FaultTest, StoppedShardWithoutStandbyComesBackCleanly) {
  WriteConfig(1, 0, 1);
  StartCoordinator();
  StartPs(0);
  StartWorker(0);
  ASSERT_TRUE(WaitUntil([&] { return WorkerAtStep(0, 200); }));
  daemons_["ps-0"]->Signal(SIGSTOP);
  ASSERT_TRUE(WaitUntil(
      [&] {
        const auto status = Status();
        const auto* m = coordinator::FindMember(status, "ps", 0);
        return m != nullptr && !m->alive();
      },
      absl::Seconds(20)));
  const std::string worker = Address("worker", 0);
  ASSERT_TRUE(WaitUntil([&] { return Counter(worker, "rpc_retries") > 0; },
                        absl::Seconds(20)))
      << "the worker's calls to the stopped ps should time out and be retried";
  daemons_["ps-0"]->Signal(SIGCONT);
  ASSERT_TRUE(WaitUntil(
      [&] {
        const auto status = Status();
        const auto* m = coordinator::FindMember(status, "ps", 0);
        return m != nullptr && m->alive();
      },
      absl::Seconds(20)))
      << "the coordinator should see ps 0 alive again";
  ASSERT_TRUE(WaitUntil([&] { return Counter(worker, "outage_seconds") > 0; },
                        absl::Seconds(20)))
      << "the worker should reach the ps again and count the outage";
  ExpectWorkersFinish(1, 0.8);
  EXPECT_FALSE(daemons_["ps-0"]->Poll().has_value()) << "ps should still serve";
}

TEST_F(FaultTest, CoordinatorRestartKeepsTheJobGoing) {
  // Long enough that the workers are still training when it comes back.
  WriteConfig(1, 0, 2, /*epochs=*/300);
  StartCoordinator();
  StartPs(0);
  StartWorker(0);
  StartWorker(1);
  ASSERT_TRUE(
      WaitUntil([&] { return WorkerAtStep(0, 100) && WorkerAtStep(1, 100); }));
  const auto before = Status();
  ASSERT_NE(coordinator::FindMember(before, "worker", 0), nullptr);
  const std::string worker =
      coordinator::FindMember(before, "worker", 0)->address();
  ASSERT_TRUE(std::filesystem::exists(
      coordinator::StateFilePath(dir_ + "/coordinator")))
      << "the coordinator should have saved its state";
  daemons_["coordinator"]->Signal(SIGKILL);
  daemons_["coordinator"]->Wait(absl::Seconds(5));
  // The worker's own step, from its Status service, now that no coordinator
  // collects reports.
  const double steps_before = Counter(worker, "step");
  ASSERT_GE(steps_before, 100);
  // Workers and ps carry on without it.
  ASSERT_TRUE(
      WaitUntil([&] { return Counter(worker, "step") > steps_before + 20; },
                absl::Seconds(30)))
      << "worker 0 stopped training without the coordinator";
  const std::string port = coordinator_.substr(coordinator_.rfind(':') + 1);
  daemons_.erase("coordinator");
  StartCoordinator("127.0.0.1:" + port);
  // Restored from its state file: the members are known before any of them
  // has had time to register again, and the placement is the one before.
  {
    const auto restored = Status();
    EXPECT_EQ(restored.placement_epoch(), before.placement_epoch());
    for (const auto& [role, index] : std::vector<std::pair<std::string, int>>{
             {"ps", 0}, {"worker", 0}, {"worker", 1}}) {
      const auto* m = coordinator::FindMember(restored, role, index);
      ASSERT_NE(m, nullptr);
      EXPECT_TRUE(m->registered()) << role << " " << index << " not restored";
    }
  }
  // The worker's heartbeats reach the new coordinator: a report from after the
  // outage arrives.
  ASSERT_TRUE(WaitUntil([&] { return WorkerAtStep(0, steps_before + 1); },
                        absl::Seconds(30)))
      << "worker 0 never reported to the restarted coordinator";
  ExpectWorkersFinish(2, 0.8);
}

// Backpressure across processes: while the only ps is stopped, the worker's
// compute waits for its push instead of running ahead, and when the ps comes
// back no step's gradient has been lost: the worker pushed every step and the
// ps applied every push the worker counted.
TEST_F(FaultTest, StoppedShardMakesTheWorkerWaitAndNoStepIsLost) {
  WriteConfig(1, 0, 1, /*epochs=*/60);
  StartCoordinator();
  StartPs(0);
  StartWorker(0);
  ASSERT_TRUE(WaitUntil([&] { return WorkerAtStep(0, 200); }));
  const std::string worker = Address("worker", 0);
  ASSERT_FALSE(worker.empty());
  daemons_["ps-0"]->Signal(SIGSTOP);
  // The worker stalls: its step count stays put over several reads.
  double last_step = -1;
  int unchanged = 0;
  ASSERT_TRUE(WaitUntil(
      [&] {
        const double step = Counter(worker, "step");
        unchanged = step == last_step ? unchanged + 1 : 0;
        last_step = step;
        return unchanged >= 10;  // no step for 0.5 s: compute is waiting
      },
      absl::Seconds(20)))
      << "the worker kept computing with its ps stopped";
  // One push in flight (n_push 1, max_pushes_in_flight 1) and at most one step
  // summed behind it: compute did not run ahead of what the ps acknowledged.
  EXPECT_LE(Counter(worker, "step") - Counter(worker, "pushed_steps"), 2);
  EXPECT_GT(Counter(worker, "share_wait_push"), 0);
  daemons_["ps-0"]->Signal(SIGCONT);
  ExpectWorkersFinish(1, 0.8);
  const auto status = Status();
  const auto* m = coordinator::FindMember(status, "worker", 0);
  ASSERT_NE(m, nullptr);
  // n_push is 1: every computed step went out in its own push...
  EXPECT_EQ(m->report().pushes(), m->report().step());
  // ...the ps applied each exactly once (retries after the stop are
  // acknowledged as duplicates, not applied again)...
  EXPECT_EQ(Counter(ShardAddress(0), "pushes"), m->report().pushes());
  // ...and the examples reported are the ones applied.
  EXPECT_EQ(m->report().examples(), m->report().step() * 64);
}

TEST_F(FaultTest, SigtermedWorkerPushesWhatItOwesAndExitsZero) {
  WriteConfig(1, 0, 1);
  StartCoordinator();
  StartPs(0);
  StartWorker(0);
  ASSERT_TRUE(WaitUntil([&] { return WorkerAtStep(0, 100); }));
  daemons_["worker-0"]->Signal(SIGTERM);
  const std::optional<int> status =
      daemons_["worker-0"]->Wait(absl::Seconds(30));
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, 0) << daemons_["worker-0"]->LogTail(10);
  // Its last heartbeat carries its final figures: it finished (flushed, pulled
  // and evaluated), and every push it counted reached the ps.
  const auto final_status = Status();
  const auto* m = coordinator::FindMember(final_status, "worker", 0);
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->report().finished());
  EXPECT_GT(m->report().pushes(), 0u);
  EXPECT_EQ(Counter(ShardAddress(0), "pushes"), m->report().pushes());
}

}  // namespace
}  // namespace downpour
