// Two faults on one shard at the same instant, with real daemons: the shard's
// primary and one of its backups are SIGKILLed one right after the other
// while two workers train. With cluster.replication 3 the other backup held
// every acknowledged push, takes the shard over and nothing is lost; with
// replication 2 (the same test) the shard's only backup died with it, so it
// comes back from its checkpoint and the pushes acknowledged since are lost
// (and reported exactly). Asserts on ClusterStatus, Status counters and the
// ps's Checksums, never on log text.
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/mnist.h"
#include "common/subprocess.h"
#include "common/testing/poll.h"
#include "coordinator/test_cluster.h"
#include "gtest/gtest.h"
#include "membership/coordinator_client.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/server_util.h"
#include "tests/daemon_harness.h"

namespace downpour {
namespace {

constexpr absl::Duration kLong = absl::Seconds(120);
constexpr int kStandbys = 3;  // two backups and a free one

// The parameter: cluster.replication.
class DoubleFaultTest : public testing::DaemonJobTest,
                        public ::testing::WithParamInterface<int> {
 protected:
  void SetUp() override { dir_ = testing::TestDir(); }

  // 1 ps, kStandbys standbys, 2 workers on the MNIST MLP (synthetic data
  // without MNIST). A shard that comes back from a checkpoint (every 5 s)
  // loses what it acknowledged since.
  void WriteJob() {
    const std::string data =
        testing::MnistDir().empty()
            ? std::string("data:\n  source: synthetic\n")
            : absl::StrCat("data:\n  source: mnist\n  path: ",
                           testing::MnistDir(), "\n");
    std::string yaml = testing::LoopbackConfig(
        1, 2,
        absl::StrCat(data,
                     "  train_examples: 3000\n  test_examples: 500\n"
                     "model:\n  layers: [",
                     kMnistDim, ", 128, ", kMnistClasses,
                     "]\n  block_size: 65536\n"
                     "optimizer:\n  type: adam\n  learning_rate: 0.001\n"
                     "training:\n  batch_size: 64\n  epochs: 60\n"
                     "  eval_every_steps: 50\n"
                     "checkpoint:\n  dir: ",
                     dir_, "/ckpt\n  interval_s: 5\n"));
    yaml =
        std::regex_replace(yaml, std::regex("deadline_s: 5"), "deadline_s: 1");
    std::string list = "[127.0.0.1:0";
    for (int i = 1; i < kStandbys; ++i) list += ", 127.0.0.1:0";
    yaml = std::regex_replace(
        yaml, std::regex("  workers: "),
        absl::StrCat("  standby_ps: ", list, "]\n  replication: ", GetParam(),
                     "\n  workers: "));
    config_ = testing::WriteConfig("job.yaml", yaml);
  }

  void StartCoordinator() {
    const std::string port_file = dir_ + "/coordinator.port";
    std::filesystem::remove(port_file);
    Subprocess& c = Start("coordinator", "coordinator/coordinator",
                          {"--listen", "127.0.0.1:0", "--port_file", port_file,
                           "--set", "heartbeat.timeout_s=1"});
    auto address = testing::WaitForPort(c, port_file);
    ASSERT_TRUE(address.ok()) << address.status();
    coordinator_ = *address;
  }

  void StartPs(const std::string& name, int index, bool standby) {
    std::vector<std::string> args = {"--index", absl::StrCat(index),
                                     "--coordinator", coordinator_};
    if (standby) args.push_back("--standby");
    Start(name, "server/ps_server", args);
  }

  proto::ClusterStatusResponse Status() {
    RpcSection rpc;
    rpc.deadline_s = 2;
    membership::CoordinatorClient client(coordinator_, rpc, "test");
    auto status = client.ClusterStatus();
    return status.ok() ? *status : proto::ClusterStatusResponse();
  }

  bool WaitUntil(const std::function<bool()>& done,
                 absl::Duration timeout = kLong) {
    return testing::WaitUntil(done, timeout, absl::Milliseconds(50));
  }

  // Shard 0's replication as the coordinator reports it (empty: none yet).
  proto::ShardReplication Replication() {
    const auto status = Status();
    return status.shard_replication_size() > 0 ? status.shard_replication(0)
                                               : proto::ShardReplication();
  }

  std::string ShardAddress() {
    const auto status = Status();
    const auto* m = coordinator::FindMember(status, "ps", 0);
    return m == nullptr ? "" : m->address();
  }

  bool WorkersAtStep(uint64_t step) {
    const auto status = Status();
    for (int i = 0; i < 2; ++i) {
      const auto* m = coordinator::FindMember(status, "worker", i);
      if (m == nullptr || m->report().step() < step) return false;
    }
    return true;
  }

  // Every block's version (the shard's updates, one per acknowledged whole
  // push) against the pushes the workers had acknowledged: their difference
  // is the pushes the shard lost. Checks the cluster reports that figure.
  uint64_t ExpectReportedLossIsCounted() {
    EXPECT_TRUE(WaitUntil([&] { return Status().acked_loss_final(); },
                          absl::Seconds(30)))
        << "the loss figure never became final";
    const auto status = Status();
    uint64_t pushes = 0;
    for (const auto& m : status.members()) {
      if (m.role() == "worker") pushes += m.report().pushes();
    }
    auto stub = proto::ParameterServer::NewStub(MakeChannel(ShardAddress()));
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(5));
    proto::ChecksumResponse sums;
    EXPECT_TRUE(
        stub->Checksums(&context, proto::ChecksumRequest(), &sums).ok());
    if (sums.blocks_size() == 0) {
      ADD_FAILURE() << "no blocks";
      return 0;
    }
    const uint64_t version = sums.blocks(0).version();
    EXPECT_LE(version, pushes) << "a push applied twice";
    const uint64_t lost = pushes - version;
    EXPECT_EQ(status.acked_pushes_lost(), lost)
        << "the cluster reports " << status.acked_pushes_lost()
        << " acknowledged pushes lost; the final model misses " << lost;
    return lost;
  }

  std::string dir_, coordinator_;
};

TEST_P(DoubleFaultTest, PrimaryAndABackupKilledAtOnce) {
  const int replication = GetParam();
  WriteJob();
  ASSERT_NO_FATAL_FAILURE(StartCoordinator());
  StartPs("ps-0", 0, /*standby=*/false);
  for (int i = 0; i < kStandbys; ++i) {
    StartPs(absl::StrCat("standby-", i), i, /*standby=*/true);
  }
  Start("worker-0", "worker/ps_worker",
        {"--index", "0", "--coordinator", coordinator_});
  Start("worker-1", "worker/ps_worker",
        {"--index", "1", "--coordinator", coordinator_});
  // Every backup named (replication - 1) holds the primary's cuts.
  ASSERT_TRUE(WaitUntil(
      [&] {
        const proto::ShardReplication r = Replication();
        return r.in_sync() && r.backup_standbys_size() == replication - 1;
      },
      absl::Seconds(60)))
      << "shard 0 never got its " << replication - 1 << " in-sync backup(s)";
  ASSERT_TRUE(WaitUntil([&] { return WorkersAtStep(100); }));
  const proto::ShardReplication before = Replication();
  const int dying = before.backup_standbys(0);
  const std::string first = ShardAddress();
  // The same instant: no wait between the two signals.
  daemons_["ps-0"]->Signal(SIGKILL);
  daemons_[absl::StrCat("standby-", dying)]->Signal(SIGKILL);
  // With replication 2 the dead backup, the only one holding a replica, may
  // be handed the shard first (it is not judged dead yet); the shard then
  // moves once more, to the free standby.
  ASSERT_TRUE(WaitUntil(
      [&] {
        const auto status = Status();
        const int n = status.recoveries_size();
        return n >= 1 && status.recoveries(n - 1).settled() &&
               ShardAddress() != first;
      },
      absl::Seconds(60)))
      << "nobody took shard 0 over";
  const auto status = Status();
  if (replication == 3) {
    // The surviving backup took over from its replica, at once: the one
    // that died was not handed the shard.
    ASSERT_EQ(status.recoveries_size(), 1);
    EXPECT_EQ(status.recoveries(0).source(), "replica");
    EXPECT_EQ(status.recoveries(0).lost(), 0u);
    // Redundancy returns: the free standby and the follower back it up.
    EXPECT_TRUE(WaitUntil(
        [&] {
          const proto::ShardReplication r = Replication();
          return r.in_sync() && r.backup_standbys_size() >= 1;
        },
        absl::Seconds(60)))
        << "shard 0 never got an in-sync backup again";
  } else {
    EXPECT_EQ(status.recoveries(status.recoveries_size() - 1).source(),
              "checkpoint");
  }
  for (const char* w : {"worker-0", "worker-1"}) {
    const std::optional<int> exit = daemons_[w]->Wait(kLong);
    ASSERT_TRUE(exit.has_value()) << w << " still running";
    EXPECT_EQ(*exit, 0) << daemons_[w]->LogTail(20);
  }
  const uint64_t lost = ExpectReportedLossIsCounted();
  if (replication == 3) {
    EXPECT_EQ(lost, 0u) << "replication 3 lost acknowledged pushes";
  } else {
    EXPECT_GT(lost, 0u) << "replication 2 was expected to lose the pushes "
                           "acknowledged since the last checkpoint";
  }
  std::printf(
      "replication %d, primary and a backup killed at once: %llu "
      "acknowledged pushes lost (reported %llu)\n",
      replication, static_cast<unsigned long long>(lost),
      static_cast<unsigned long long>(Status().acked_pushes_lost()));
}

INSTANTIATE_TEST_SUITE_P(Replication, DoubleFaultTest, ::testing::Values(3, 2),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrCat("Replication", info.param);
                         });

}  // namespace
}  // namespace downpour
