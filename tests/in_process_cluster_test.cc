// Whole clusters in one process (tests/in_process_cluster.h): they train to
// the end on synthetic data, and a standby takes over a stopped shard. They
// assert on what a client observes: the coordinator's ClusterStatus, each ps's
// Status counters and Checksums.
#include "tests/in_process_cluster.h"

#include <functional>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/config.h"
#include "common/testing/poll.h"
#include "common/testing/status_matchers.h"
#include "coordinator/test_cluster.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/ps.grpc.pb.h"
#include "proto/status.grpc.pb.h"
#include "rpc/server_util.h"
#include "tests/daemon_harness.h"

namespace downpour::testing {
namespace {

using ::downpour::testing::IsOk;
using ::testing::HasSubstr;

constexpr absl::Duration kDeadline = absl::Seconds(60);

// A small job on synthetic digits: `ps` shards, `standbys`, `workers`.
Config SmallJob(int ps, int standbys, int workers, int epochs) {
  std::string yaml = LoopbackConfig(
      ps, workers,
      absl::StrCat("data:\n  source: synthetic\n  train_examples: 1000\n"
                   "  test_examples: 200\n"
                   "model:\n  layers: [784, 32, 10]\n  block_size: 16384\n"
                   "optimizer:\n  type: sgd\n  learning_rate: 0.05\n"
                   "training:\n  batch_size: 32\n  epochs: ",
                   epochs,
                   "\n  eval_every_steps: 50\n"
                   "compute:\n  device: cpu\n"
                   "checkpoint:\n  dir: ",
                   TestDir(), "/ckpt\n  interval_s: 0.5\n"));
  if (standbys > 0) {
    std::string list = "  standby_ps: [127.0.0.1:0";
    for (int i = 1; i < standbys; ++i) list += ", 127.0.0.1:0";
    const size_t at = yaml.find("  workers: ");
    yaml.insert(at, list + "]\n");
  }
  absl::StatusOr<Config> config = ParseConfig(yaml, "in_process.yaml");
  EXPECT_THAT(config, IsOk());
  return config.ok() ? *config : Config();
}

// The ps's Status counters ("pushes", "applied_updates", ...).
std::map<std::string, double> PsCounters(const std::string& address) {
  auto stub = proto::Status::NewStub(MakeChannel(address));
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(5));
  proto::GetStatusResponse response;
  EXPECT_TRUE(
      stub->GetStatus(&context, proto::GetStatusRequest(), &response).ok());
  return {response.counters().begin(), response.counters().end()};
}

proto::ChecksumResponse Checksums(const std::string& address) {
  auto stub = proto::ParameterServer::NewStub(MakeChannel(address));
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(5));
  proto::ChecksumResponse response;
  EXPECT_TRUE(
      stub->Checksums(&context, proto::ChecksumRequest(), &response).ok());
  return response;
}

// Polls `done` every 20 ms until it holds or `timeout` passes.
bool WaitUntil(const std::function<bool()>& done, absl::Duration timeout) {
  return ::downpour::testing::WaitUntil(done, timeout, absl::Milliseconds(20));
}

class InProcessClusterTest
    : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(InProcessClusterTest, TrainsToTheEndAndEveryPushIsApplied) {
  const auto [num_ps, num_workers] = GetParam();
  absl::StatusOr<std::unique_ptr<InProcessCluster>> started =
      InProcessCluster::Start(SmallJob(num_ps, 0, num_workers, /*epochs=*/2));
  ASSERT_THAT(started, IsOk());
  InProcessCluster& cluster = **started;
  ASSERT_EQ(cluster.num_ps(), num_ps);
  ASSERT_EQ(cluster.num_workers(), num_workers);

  ASSERT_THAT(cluster.WaitForWorkersToEnd(kDeadline), IsOk());
  for (int i = 0; i < num_workers; ++i) {
    EXPECT_THAT(cluster.worker(i).Stop(), IsOk()) << "worker " << i;
  }

  // Each worker's final heartbeat (sent by Stop) told the coordinator.
  absl::StatusOr<proto::ClusterStatusResponse> status = cluster.ClusterStatus();
  ASSERT_THAT(status, IsOk());
  EXPECT_TRUE(status->stop());
  EXPECT_THAT(status->stop_reason(), HasSubstr("every worker finished"));
  uint64_t worker_pushes = 0;
  for (int i = 0; i < num_workers; ++i) {
    const proto::MemberStatus* w =
        coordinator::FindMember(*status, "worker", i);
    ASSERT_NE(w, nullptr) << "worker " << i;
    EXPECT_TRUE(w->report().finished()) << "worker " << i;
    // 1000 examples split over the workers, 32 a step, 2 epochs.
    const int examples = 1000 / num_workers;
    EXPECT_EQ(w->report().step(), 2 * ((examples + 31) / 32)) << "worker " << i;
    // Every step's gradient was acknowledged (n_push 1): no step is lost.
    EXPECT_EQ(w->report().pushes(), w->report().step()) << "worker " << i;
    worker_pushes += w->report().pushes();
  }

  // A worker counts whole pushes, each sent to every shard; a ps counts the
  // requests it applied (not the duplicates of a retry). A shard's blocks fit
  // one request here, so they agree once multiplied by the shards, and each
  // block was updated once per push its shard applied.
  double ps_pushes = 0;
  for (int s = 0; s < num_ps; ++s) {
    const std::string address = cluster.ps(s).address();
    std::map<std::string, double> counters = PsCounters(address);
    const double pushes = counters["pushes"];
    ps_pushes += pushes;
    const proto::ChecksumResponse sums = Checksums(address);
    ASSERT_GT(sums.blocks_size(), 0) << "ps " << s;
    uint64_t versions = 0;
    for (const proto::BlockChecksum& block : sums.blocks()) {
      EXPECT_EQ(static_cast<double>(block.version()), pushes)
          << "ps " << s << " block " << block.block_id();
      versions += block.version();
    }
    EXPECT_EQ(static_cast<double>(versions), counters["applied_updates"])
        << "ps " << s;
  }
  EXPECT_EQ(ps_pushes, static_cast<double>(worker_pushes * num_ps));
  EXPECT_THAT(cluster.Stop(), IsOk());
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, InProcessClusterTest,
    ::testing::Values(std::make_pair(1, 1), std::make_pair(2, 2)),
    [](const ::testing::TestParamInfo<std::pair<int, int>>& info) {
      return absl::StrCat(info.param.first, "Ps", info.param.second, "Workers");
    });

// A ps stopped in order writes its final checkpoint and stops heartbeating;
// after heartbeat.timeout_s the coordinator hands its shard to the standby,
// which loads that checkpoint, and the worker trains on to the end.
TEST(InProcessStandbyTest, StandbyTakesOverAStoppedShard) {
  Config config = SmallJob(1, 1, 1, /*epochs=*/40);
  config.heartbeat.timeout_s = 1;
  config.rpc.deadline_s = 1;
  absl::StatusOr<std::unique_ptr<InProcessCluster>> started =
      InProcessCluster::Start(config);
  ASSERT_THAT(started, IsOk());
  InProcessCluster& cluster = **started;
  ASSERT_EQ(cluster.num_standbys(), 1);

  // In the middle of training (40 epochs are 1280 steps).
  ASSERT_TRUE(WaitUntil([&] { return cluster.worker(0).stats().step >= 20; },
                        kDeadline));
  ASSERT_FALSE(cluster.worker(0).ended()->HasBeenNotified());
  const uint64_t epoch_before = cluster.ClusterStatus()->placement_epoch();
  EXPECT_THAT(cluster.StopPs(0), IsOk());

  ASSERT_TRUE(WaitUntil(
      [&] {
        absl::StatusOr<proto::ClusterStatusResponse> status =
            cluster.ClusterStatus();
        if (!status.ok() || status->placement_epoch() <= epoch_before) {
          return false;
        }
        const proto::MemberStatus* ps0 =
            coordinator::FindMember(*status, "ps", 0);
        return ps0 != nullptr && ps0->address() == cluster.standby(0).address();
      },
      kDeadline))
      << "no standby took over shard 0";
  EXPECT_TRUE(WaitUntil([&] { return cluster.standby(0).name() == "ps 0"; },
                        kDeadline));

  ASSERT_THAT(cluster.WaitForWorkersToEnd(kDeadline), IsOk());
  EXPECT_THAT(cluster.worker(0).Stop(), IsOk());
  absl::StatusOr<proto::ClusterStatusResponse> status = cluster.ClusterStatus();
  ASSERT_THAT(status, IsOk());
  EXPECT_TRUE(status->stop());
  const proto::MemberStatus* w = coordinator::FindMember(*status, "worker", 0);
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->report().finished());
  EXPECT_EQ(w->report().step(), 40 * ((1000 + 31) / 32));
  // The standby applied pushes after taking over, on top of the checkpoint.
  EXPECT_GT(PsCounters(cluster.standby(0).address())["pushes"], 0);
  EXPECT_THAT(cluster.Stop(), IsOk());
}

}  // namespace
}  // namespace downpour::testing
