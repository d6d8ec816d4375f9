// The fixture of the fault tests (tests/fault_test.cc, tests/bucket_move_test
// .cc): a job of real coordinator, ps, standby and worker processes on
// loopback, started, killed, stopped and restarted, and what a client can
// observe of it (ClusterStatus, Status counters, Checksums).
#ifndef DOWNPOUR_TESTS_FAULT_FIXTURE_H_
#define DOWNPOUR_TESTS_FAULT_FIXTURE_H_

#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <regex>
#include <string>
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

namespace downpour {

inline constexpr absl::Duration kLong = absl::Seconds(120);

class FaultJobTest : public testing::DaemonJobTest {
 protected:
  void SetUp() override { dir_ = testing::TestDir(); }

  // Writes the job's config: `ps` shards, `standbys`, `workers`, a training run
  // long enough (tens of seconds) to kill things in the middle of it.
  void WriteConfig(int ps, int standbys, int workers, int epochs = 120) {
    std::string data;
    if (testing::MnistDir().empty()) {
      data =
          "data:\n  source: synthetic\n  train_examples: 3000\n  "
          "test_examples: 500\n";
    } else {
      data =
          absl::StrCat("data:\n  source: mnist\n  path: ", testing::MnistDir(),
                       "\n  train_examples: 3000\n  test_examples: 500\n");
    }
    WriteJob(ps, standbys, workers,
             absl::StrCat(data, "model:\n  layers: [", kMnistDim,
                          ", 256, 128, ", kMnistClasses,
                          "]\n  block_size: 65536\n"
                          "optimizer:\n  type: adam\n  learning_rate: 0.001\n"
                          "training:\n  batch_size: 64\n  epochs: ",
                          epochs,
                          "\n  eval_every_steps: 50\n"
                          "checkpoint:\n  dir: ",
                          dir_, "/ckpt\n  interval_s: 0.5\n"));
  }

  // The same job shape with a sparse_linear model (FTRL) on LIBSVM files of
  // 64-bit ids (testing::WriteSparseLibsvm).
  void WriteSparseConfig(int ps, int standbys, int workers, int epochs) {
    testing::WriteSparseLibsvm(dir_ + "/train.svm", 4000, 1);
    testing::WriteSparseLibsvm(dir_ + "/test.svm", 500, 2);
    WriteJob(ps, standbys, workers,
             absl::StrCat("data:\n  source: libsvm\n  path: ", dir_,
                          "/train.svm\n  test_path: ", dir_,
                          "/test.svm\n"
                          "model:\n  type: sparse_linear\n  task: binary\n  "
                          "sparse_buckets: 32\n"
                          "optimizer:\n  type: ftrl\n  learning_rate: 0.2\n  "
                          "l1: 0.5\n  l2: 1\n"
                          "training:\n  batch_size: 32\n  epochs: ",
                          epochs, "\n  eval_every_steps: 50\n",
                          sparse_training_, "checkpoint:\n  dir: ", dir_,
                          "/ckpt\n  interval_s: 0.5\n"));
  }

  void ExpectKilledSparsePrimaryLosesNothing() {
    ASSERT_NO_FATAL_FAILURE(StartReplicatedJobAndTrain(/*sparse=*/true, 300));
    EXPECT_GT(testing::LiveCounter(ShardAddress(1), "sparse_rows"), 0);
    ASSERT_NO_FATAL_FAILURE(KillPrimaryAndExpectTakeOverFromReplica(1));
    ExpectWorkersFinish(2, 0.7);
    ExpectNoAcknowledgedRowUpdateLost(2);
  }

  // Once the job is over: the row updates the ps hold (sparse_row_updates of
  // each of `shards`) are exactly those the workers had acknowledged, and the
  // cluster counts no loss.
  void ExpectNoAcknowledgedRowUpdateLost(int shards) {
    EXPECT_TRUE(WaitUntil([&] { return Status().acked_loss_final(); },
                          absl::Seconds(30)));
    const auto status = Status();
    uint64_t acknowledged = 0;
    for (const auto& m : status.members()) {
      if (m.role() == "worker") acknowledged += m.report().sparse_row_updates();
    }
    EXPECT_GT(acknowledged, 0u);
    double held = 0;
    for (int shard = 0; shard < shards; ++shard) {
      const double updates =
          testing::LiveCounter(ShardAddress(shard), "sparse_row_updates");
      EXPECT_GT(updates, 0) << "shard " << shard;
      held += updates;
    }
    EXPECT_EQ(static_cast<uint64_t>(held), acknowledged)
        << "row updates held by the ps against those the workers had "
           "acknowledged";
    EXPECT_EQ(status.acked_pushes_lost(), 0u);
    EXPECT_EQ(status.updates_lost(), 0u);
  }

  // More lines of the sparse job's training section (WriteSparseConfig).
  std::string sparse_training_;

  void WriteJob(int ps, int standbys, int workers, const std::string& body) {
    std::string yaml = testing::LoopbackConfig(ps, workers, body);
    // Short RPC deadlines, so that a stopped peer shows up as failed calls.
    yaml =
        std::regex_replace(yaml, std::regex("deadline_s: 5"), "deadline_s: 1");
    if (standbys > 0) {
      std::string list = "[127.0.0.1:0";
      for (int i = 1; i < standbys; ++i) list += ", 127.0.0.1:0";
      yaml = std::regex_replace(yaml, std::regex("  workers: "),
                                "  standby_ps: " + list + "]\n  workers: ");
    }
    config_ = testing::WriteConfig("job.yaml", yaml);
  }

  void StartCoordinator(const std::string& listen = "127.0.0.1:0") {
    const std::string port_file = dir_ + "/coordinator.port";
    std::filesystem::remove(port_file);
    Subprocess& c = Start("coordinator", "coordinator/coordinator",
                          {"--listen", listen, "--port_file", port_file,
                           "--set", "heartbeat.timeout_s=1"});
    auto address = testing::WaitForPort(c, port_file);
    ASSERT_TRUE(address.ok()) << address.status();
    coordinator_ = *address;
  }

  void StartPs(int index, bool standby = false) {
    std::vector<std::string> args = {"--index", absl::StrCat(index),
                                     "--coordinator", coordinator_};
    if (standby) args.push_back("--standby");
    Start(absl::StrCat(standby ? "standby-" : "ps-", index), "server/ps_server",
          args);
  }

  void StartWorker(int index) {
    Start(absl::StrCat("worker-", index), "worker/ps_worker",
          {"--index", absl::StrCat(index), "--coordinator", coordinator_});
  }

  proto::ClusterStatusResponse Status() {
    RpcSection rpc;
    rpc.deadline_s = 2;
    membership::CoordinatorClient client(coordinator_, rpc, "test");
    auto status = client.ClusterStatus();
    return status.ok() ? *status : proto::ClusterStatusResponse();
  }

  // Polls `done` every 50 ms for up to `timeout`; false if it never held.
  bool WaitUntil(const std::function<bool()>& done,
                 absl::Duration timeout = kLong) {
    return ::downpour::testing::WaitUntil(done, timeout,
                                          absl::Milliseconds(50));
  }

  bool WorkerAtStep(int index, uint64_t step) {
    const auto status = Status();
    const auto* m = coordinator::FindMember(status, "worker", index);
    return m != nullptr && m->report().step() >= step;
  }

  // The data parts the coordinator has given worker `index` now.
  std::vector<int> WorkerParts(int index) {
    const auto status = Status();
    const auto* m = coordinator::FindMember(status, "worker", index);
    if (m == nullptr) return {};
    return {m->parts().begin(), m->parts().end()};
  }

  // The daemon's address as registered with the coordinator ("" if unknown).
  std::string Address(const std::string& role, int index) {
    const auto status = Status();
    const auto* m = coordinator::FindMember(status, role, index);
    return m == nullptr ? "" : m->address();
  }

  static double Counter(const std::string& address, const std::string& name) {
    return testing::StatusCounter(address, name);
  }

  // Waits for every worker to exit and checks they ended well.
  void ExpectWorkersFinish(int workers, double min_accuracy) {
    for (int i = 0; i < workers; ++i) {
      Subprocess& w = *daemons_[absl::StrCat("worker-", i)];
      const std::optional<int> status = w.Wait(kLong);
      ASSERT_TRUE(status.has_value()) << w.name() << " still running";
      EXPECT_EQ(*status, 0) << w.LogTail(20);
    }
    const auto status = Status();
    for (int i = 0; i < workers; ++i) {
      const auto* m = coordinator::FindMember(status, "worker", i);
      ASSERT_NE(m, nullptr);
      EXPECT_TRUE(m->report().finished()) << "worker " << i;
      EXPECT_GT(m->report().accuracy(), min_accuracy) << "worker " << i;
    }
  }

  // The coordinator's placement now (empty when it does not answer).
  proto::GetPlacementResponse Placement() {
    RpcSection rpc;
    rpc.deadline_s = 2;
    membership::CoordinatorClient client(coordinator_, rpc, "test");
    absl::StatusOr<proto::GetPlacementResponse> placement =
        client.GetPlacement();
    return placement.ok() ? *placement : proto::GetPlacementResponse();
  }

  // Shard `shard` as the placement describes it now (empty when not listed).
  proto::ShardInfo ShardInfoOf(int shard) {
    const proto::GetPlacementResponse placement = Placement();
    for (const proto::ShardInfo& info : placement.shards()) {
      if (info.index() == shard) return info;
    }
    return proto::ShardInfo();
  }

  // Bucket move `id`'s phase as ClusterStatus shows it ("" when not listed).
  std::string PhaseOf(uint64_t id) {
    const proto::ClusterStatusResponse status = Status();
    for (const proto::BucketMove& m : status.bucket_moves()) {
      if (m.id() == id) return m.phase();
    }
    return "";
  }

  std::string ShardAddress(int shard) {
    const proto::ClusterStatusResponse status = Status();
    for (const auto& m : status.members()) {
      if (m.role() == "ps" && m.index() == shard) return m.address();
    }
    return "";
  }

  // Block versions summed (updates applied) and the checksums, from a live ps.
  std::string Checksums(const std::string& address,
                        uint64_t* versions = nullptr) {
    auto stub = proto::ParameterServer::NewStub(MakeChannel(address));
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(5));
    proto::ChecksumResponse response;
    if (!stub->Checksums(&context, proto::ChecksumRequest(), &response).ok())
      return "";
    if (versions != nullptr) {
      *versions = 0;
      for (const auto& b : response.blocks()) *versions += b.version();
    }
    return response.DebugString();
  }

  // 2 ps, a standby each, 2 workers (the MNIST job, or with `sparse` the
  // sparse_linear one); returns once every shard has an in-sync backup and
  // both workers are past step `step`.
  void StartReplicatedJobAndTrain(bool sparse = false, uint64_t step = 150) {
    if (sparse) {
      WriteSparseConfig(2, 2, 2, /*epochs=*/100);
    } else {
      WriteConfig(2, 2, 2, /*epochs=*/150);
    }
    StartCoordinator();
    StartPs(0);
    StartPs(1);
    StartPs(0, /*standby=*/true);
    StartPs(1, /*standby=*/true);
    StartWorker(0);
    StartWorker(1);
    ASSERT_TRUE(
        WaitUntil([&] { return AllShardsBackedUp(2); }, absl::Seconds(60)))
        << "the shards never got an in-sync backup";
    ASSERT_TRUE(WaitUntil(
        [&] { return WorkerAtStep(0, step) && WorkerAtStep(1, step); }));
  }

  // SIGKILLs the primary of `shard` (daemon "ps-<shard>") and waits for its
  // backup to take over; the take-over is accounted for as from the replica,
  // with nothing lost.
  void KillPrimaryAndExpectTakeOverFromReplica(int shard) {
    const std::string old_address = ShardAddress(shard);
    daemons_[absl::StrCat("ps-", shard)]->Signal(SIGKILL);
    ASSERT_TRUE(WaitUntil(
        [&] {
          const std::string now = ShardAddress(shard);
          return !now.empty() && now != old_address;
        },
        absl::Seconds(30)))
        << "no standby took over";
    ASSERT_TRUE(WaitUntil(
        [&] {
          const auto status = Status();
          return status.recoveries_size() == 1 &&
                 status.recoveries(0).settled();
        },
        absl::Seconds(30)));
    const auto status = Status();
    EXPECT_EQ(status.recoveries(0).source(), "replica");
    EXPECT_EQ(status.recoveries(0).shard(), shard);
    EXPECT_GT(status.recoveries(0).applied_before(), 0u);
    EXPECT_EQ(status.recoveries(0).lost(), 0u);
    EXPECT_EQ(status.updates_lost(), 0u);
    EXPECT_EQ(Counter(ShardAddress(shard), "takeovers_from_replica"), 1);
  }

  // Every shard's primary reports an in-sync backup.
  bool AllShardsBackedUp(int shards) {
    const auto status = Status();
    for (int shard = 0; shard < shards; ++shard) {
      const auto* m = coordinator::FindMember(status, "ps", shard);
      if (m == nullptr || !m->report().replicated()) return false;
    }
    return true;
  }

  // The daemons_ name of the configured standby serving `shard` now ("" when
  // a ps or a spare serves it).
  std::string DaemonServing(int shard) {
    const auto status = Status();
    const auto* ps = coordinator::FindMember(status, "ps", shard);
    if (ps == nullptr) return "";
    for (const auto& m : status.members()) {
      if (m.role() == "standby" && m.serving_index() == shard && !m.spare() &&
          m.address() == ps->address()) {
        return absl::StrCat("standby-", m.index());
      }
    }
    return "";
  }

  // Kills daemon `name` with SIGKILL, reaps it and starts it again with the
  // same flags, as the launcher does.
  void KillAndRestart(const std::string& name, int index, bool standby,
                      bool restart = true) {
    daemons_[name]->Signal(SIGKILL);
    ASSERT_TRUE(daemons_[name]->Wait(absl::Seconds(10)).has_value());
    daemons_.erase(name);
    if (restart) StartPs(index, standby);
  }

  // Counted the other way: each whole push the workers had acknowledged
  // updates every block once, so a shard's block versions fall short of the
  // acknowledged pushes by exactly the pushes it lost. Checks that the
  // cluster's final figure (ClusterStatus recoveries, in pushes) equals that
  // count for every shard, and returns the counts.
  std::map<int, uint64_t> ExpectReportedLossIsCounted(int shards) {
    std::map<int, uint64_t> counted;
    // The ps report their holes once told that the job is over.
    EXPECT_TRUE(WaitUntil([&] { return Status().acked_loss_final(); },
                          absl::Seconds(30)))
        << "the loss figure never became final";
    const auto status = Status();
    uint64_t pushes = 0;
    for (const auto& m : status.members()) {
      if (m.role() == "worker") pushes += m.report().pushes();
    }
    EXPECT_GT(pushes, 0u);
    std::map<int, uint64_t> reported;
    for (const auto& r : status.recoveries()) {
      reported[r.shard()] += r.acked_pushes_lost();
    }
    uint64_t total = 0;
    for (int shard = 0; shard < shards; ++shard) {
      auto stub =
          proto::ParameterServer::NewStub(MakeChannel(ShardAddress(shard)));
      grpc::ClientContext context;
      context.set_deadline(DeadlineIn(5));
      proto::ChecksumResponse sums;
      EXPECT_TRUE(
          stub->Checksums(&context, proto::ChecksumRequest(), &sums).ok());
      EXPECT_GT(sums.blocks_size(), 0);
      if (sums.blocks_size() == 0) continue;
      const uint64_t version = sums.blocks(0).version();
      for (const auto& b : sums.blocks()) {
        EXPECT_EQ(b.version(), version)
            << "shard " << shard << " block " << b.block_id();
      }
      EXPECT_LE(version, pushes)
          << "shard " << shard << " applied a push twice";
      counted[shard] = pushes - version;
      total += counted[shard];
      EXPECT_EQ(reported[shard], counted[shard])
          << "shard " << shard << ": the cluster reports " << reported[shard]
          << " acknowledged pushes lost; the final model "
          << "misses " << counted[shard];
    }
    EXPECT_EQ(status.acked_pushes_lost(), total);
    return counted;
  }

  std::string dir_, coordinator_;
};

}  // namespace downpour

#endif  // DOWNPOUR_TESTS_FAULT_FIXTURE_H_
