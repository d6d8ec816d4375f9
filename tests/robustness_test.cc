// One bad worker cannot ruin the model (issue 25, point 4): a real
// coordinator, ps and two honest workers train on MNIST (synthetic digits
// when DOWNPOUR_MNIST_DIR is not set) while a plain gRPC client holding a
// configured worker id floods the ps with the largest gradients every
// absolute bound accepts (9e5 per element, under optimizer.max_gradient_value
// 1e6, to every block, from worker 2's free place, which it registered: its
// pushes carry that place's incarnation and push key, as a buggy worker's
// would). Asserts on what a client observes: the
// workers' test accuracy in ClusterStatus, gRPC codes, block versions and the
// ps's Status counters.
#include <atomic>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/push_sequence.h"
#include "common/testing/poll.h"
#include "coordinator/test_cluster.h"
#include "gtest/gtest.h"
#include "membership/coordinator_client.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/server_util.h"
#include "tests/daemon_harness.h"

namespace downpour {
namespace {

constexpr int kHonestWorkers = 2;
constexpr int kAttacker = 2;  // the configured worker id no daemon uses
constexpr absl::Duration kFlood = absl::Seconds(20);

class RobustnessTest : public testing::DaemonJobTest {
 protected:
  void StartJob() {
    const std::string mnist = testing::MnistDir();
    if (mnist.empty()) {
      std::fprintf(stderr,
                   "DOWNPOUR_MNIST_DIR not set: training on synthetic data\n");
    }
    const std::string data =
        mnist.empty()
            ? "data:\n  source: synthetic\n  train_examples: 3000\n"
              "  test_examples: 1000\n"
            : absl::StrCat("data:\n  source: mnist\n  path: ", mnist,
                           "\n  train_examples: 6000\n  test_examples: 1000\n");
    // A job that runs until the test ends; the robustness section at its
    // defaults.
    std::string yaml = testing::LoopbackConfig(
        1, kHonestWorkers + 1,
        absl::StrCat(data,
                     "model:\n  layers: [784, 64, 10]\n  block_size: 16384\n"
                     "optimizer:\n  type: adam\n  learning_rate: 0.003\n"
                     "training:\n  batch_size: 32\n  epochs: 100000\n"
                     "  eval_every_steps: 20\n"
                     "checkpoint:\n  dir: \"\"\n"));
    yaml.replace(yaml.find("timeout_s: 2"), 12, "timeout_s: 10");
    config_ = testing::WriteConfig("job.yaml", yaml);
    const std::string port_file = testing::TestDir() + "/coordinator.port";
    Subprocess& c =
        Start("coordinator", "coordinator/coordinator",
              {"--listen", "127.0.0.1:0", "--port_file", port_file});
    auto address = testing::WaitForPort(c, port_file);
    ASSERT_TRUE(address.ok()) << address.status();
    coordinator_ = *address;
    Start("ps-0", "server/ps_server",
          {"--index", "0", "--coordinator", coordinator_});
    for (int i = 0; i < kHonestWorkers; ++i) {
      Start(absl::StrCat("worker-", i), "worker/ps_worker",
            {"--index", absl::StrCat(i), "--coordinator", coordinator_});
    }
  }

  proto::ClusterStatusResponse Status() {
    RpcSection rpc;
    rpc.deadline_s = 2;
    membership::CoordinatorClient client(coordinator_, rpc, "test");
    auto status = client.ClusterStatus();
    return status.ok() ? *status : proto::ClusterStatusResponse();
  }

  // The honest workers' latest test accuracies (NaN before their first).
  std::vector<double> Accuracies() {
    const proto::ClusterStatusResponse status = Status();
    std::vector<double> out;
    for (int i = 0; i < kHonestWorkers; ++i) {
      const proto::MemberStatus* m =
          coordinator::FindMember(status, "worker", i);
      out.push_back(m == nullptr ? NAN : m->report().accuracy());
    }
    return out;
  }
  static double Mean(const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return sum / v.size();
  }

  // The sum of the ps's block versions (-1 when it cannot be asked).
  double Versions(const std::string& ps) {
    auto stub = proto::ParameterServer::NewStub(MakeChannel(ps));
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(5));
    proto::ChecksumResponse response;
    if (!stub->Checksums(&context, proto::ChecksumRequest(), &response).ok()) {
      return -1;
    }
    double sum = 0;
    for (const proto::BlockChecksum& b : response.blocks()) sum += b.version();
    return sum;
  }

  // The ps's address, as any client reads it.
  std::string PsAddress() {
    const proto::ClusterStatusResponse cluster = Status();
    const proto::MemberStatus* ps = coordinator::FindMember(cluster, "ps", 0);
    return ps == nullptr ? "" : ps->address();
  }

  // The attacker's push: every block of the model (DescribeModel) at the
  // current placement epoch, each element `value(block)`, as worker
  // kAttacker, whose free place the attacker takes (plaintext: anyone may).
  proto::PushRequest Flood(
      const std::function<float(const proto::BlockInfo&)>& value) {
    auto coordinator = proto::Coordinator::NewStub(MakeChannel(coordinator_));
    if (attacker_.push_key() == 0) {
      proto::RegisterWorkerRequest take;
      take.set_index(kAttacker);
      take.set_address(coordinator_);  // answers health checks
      grpc::ClientContext take_context;
      take_context.set_deadline(DeadlineIn(5));
      EXPECT_TRUE(
          coordinator->RegisterWorker(&take_context, take, &attacker_).ok());
      // Until the ps hears of the incarnation (its next heartbeat) every
      // push is UNAVAILABLE; an empty one is then refused, changing nothing.
      auto ps = proto::ParameterServer::NewStub(MakeChannel(PsAddress()));
      proto::PushRequest empty;
      empty.set_placement_epoch(Status().placement_epoch());
      empty.set_worker_id(kAttacker);
      empty.set_push_key(attacker_.push_key());
      EXPECT_TRUE(testing::WaitUntil(
          [&] {
            uint64_t n = 0;
            return PushOnce(ps.get(), empty, &n).error_code() ==
                   grpc::StatusCode::INVALID_ARGUMENT;
          },
          absl::Seconds(10), absl::Milliseconds(50)));
    }
    proto::DescribeModelResponse model;
    proto::GetPlacementResponse placement;
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(5));
    EXPECT_TRUE(coordinator->DescribeModel(&context, {}, &model).ok());
    grpc::ClientContext placement_context;
    placement_context.set_deadline(DeadlineIn(5));
    EXPECT_TRUE(
        coordinator->GetPlacement(&placement_context, {}, &placement).ok());
    proto::PushRequest flood;
    flood.set_placement_epoch(placement.epoch());
    flood.set_worker_id(kAttacker);
    flood.set_push_key(attacker_.push_key());
    for (const proto::BlockInfo& block : model.blocks()) {
      const std::vector<float> values(block.floats(), value(block));
      proto::BlockData* data = flood.add_blocks();
      data->set_block_id(block.id());
      data->set_data(values.data(), values.size() * sizeof(float));
    }
    return flood;
  }

  // One push of `request` with the attacker's next sequence, as a client
  // sends it: `*n` is kept after UNAVAILABLE (a retry sends the same
  // sequence, or the window would run away from it), else the next is taken.
  grpc::Status PushOnce(proto::ParameterServer::Stub* stub,
                        proto::PushRequest request, uint64_t* n) {
    if (*n == 0) *n = ++next_n_;
    request.set_sequence(MakeSequence(attacker_.incarnation(), *n));
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(5));
    proto::PushResponse response;
    grpc::Status status = stub->Push(&context, request, &response);
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE) *n = 0;
    // The guard's refusal is answered OK with PushResponse.refused (nothing
    // applied): counted here as ABORTED, apart from the applied ones.
    if (status.ok() && !response.refused().empty()) {
      status = grpc::Status(grpc::StatusCode::ABORTED, response.refused());
    }
    return status;
  }
  // Until the ps has heard of the attacker's incarnation, its pushes are
  // UNAVAILABLE.
  grpc::Status PushOnce(proto::ParameterServer::Stub* stub,
                        const proto::PushRequest& request) {
    uint64_t n = 0;
    grpc::Status status;
    for (int i = 0; i < 100; ++i) {
      status = PushOnce(stub, request, &n);
      if (status.error_code() != grpc::StatusCode::UNAVAILABLE) break;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return status;
  }

  // Pushes `flood` to `ps` from two threads for `duration`, as fast as the ps
  // answers; returns the pushes per gRPC code. *lowest: the lowest accuracy
  // an honest worker reported meanwhile.
  std::map<int, int> Push(const std::string& ps,
                          const proto::PushRequest& flood,
                          absl::Duration duration, double* lowest) {
    std::atomic<bool> stop{false};
    std::mutex codes_mu;
    std::map<int, int> codes;  // gRPC code -> pushes
    std::vector<std::thread> attackers;
    for (int t = 0; t < 2; ++t) {
      attackers.emplace_back([&] {
        auto stub = proto::ParameterServer::NewStub(MakeChannel(ps));
        uint64_t n = 0;
        while (!stop.load()) {
          const grpc::Status status = PushOnce(stub.get(), flood, &n);
          std::lock_guard<std::mutex> lock(codes_mu);
          ++codes[status.error_code()];
        }
      });
    }
    const absl::Time end = absl::Now() + duration;
    while (absl::Now() < end) {
      absl::SleepFor(absl::Milliseconds(250));
      for (double a : Accuracies()) {
        if (a >= 0) *lowest = std::min(*lowest, a);
      }
    }
    stop = true;
    for (std::thread& t : attackers) t.join();
    return codes;
  }

  // Waits until both honest workers test at 0.8 or better.
  bool WaitForTraining() {
    return testing::WaitUntil(
        [&] {
          for (double a : Accuracies()) {
            if (!(a >= 0.8)) return false;
          }
          return true;
        },
        absl::Seconds(120), absl::Milliseconds(200));
  }

  // Prints what a flood did (the figures docs/SECURITY.md quotes).
  void Report(const char* what, const std::string& ps,
              const std::map<int, int>& codes, double before, double lowest,
              double after) {
    std::string pushes;
    for (const auto& [code, n] : codes) {
      absl::StrAppend(&pushes, " code ", code, ": ", n);
    }
    std::fprintf(
        stderr,
        "%s: accuracy before %.4f, lowest during %.4f, 3 s after %.4f; "
        "flood pushes:%s; suspect_pushes_worker_%d %.0f, guard_refused_norm "
        "%.0f, guard_refused_rate %.0f, clipped_blocks_worker_%d %.0f, "
        "guard_clipped_blocks %.0f\n",
        what, before, lowest, after, pushes.c_str(), kAttacker,
        testing::StatusCounter(
            ps, absl::StrCat("suspect_pushes_worker_", kAttacker)),
        testing::StatusCounter(ps, "guard_refused_norm"),
        testing::StatusCounter(ps, "guard_refused_rate"), kAttacker,
        testing::StatusCounter(
            ps, absl::StrCat("clipped_blocks_worker_", kAttacker)),
        testing::StatusCounter(ps, "guard_clipped_blocks"));
  }

  // The honest workers still run, and a refusal of theirs is a rare outlier
  // (each one costs that worker one gradient: its retry is a duplicate).
  void ExpectHonestWorkersUnharmed(const std::string& ps) {
    const double attacker = testing::StatusCounter(
        ps, absl::StrCat("suspect_pushes_worker_", kAttacker));
    for (int i = 0; i < kHonestWorkers; ++i) {
      EXPECT_LE(
          testing::StatusCounter(ps, absl::StrCat("suspect_pushes_worker_", i)),
          attacker / 100)
          << "honest worker " << i << " was refused";
      EXPECT_FALSE(daemons_[absl::StrCat("worker-", i)]->Poll().has_value())
          << daemons_[absl::StrCat("worker-", i)]->LogTail(20);
    }
  }

  std::string coordinator_;
  proto::RegisterWorkerResponse attacker_;  // worker kAttacker's place
  std::atomic<uint64_t> next_n_{0};         // its last push sequence's n
};

TEST_F(RobustnessTest, AFloodOfHugeAcceptedGradientsDoesNotRuinTheModel) {
  StartJob();
  // Training well under way: both honest workers past 0.8.
  ASSERT_TRUE(WaitForTraining()) << daemons_["worker-0"]->LogTail(20);
  const std::vector<double> before = Accuracies();
  const double accuracy_before = Mean(before);

  const std::string ps = PsAddress();
  const proto::PushRequest flood =
      Flood([](const proto::BlockInfo&) { return 9e5f; });
  const double versions_before = Versions(ps);
  double lowest = 1;
  std::map<int, int> codes = Push(ps, flood, kFlood, &lowest);
  // Two more evaluations of each worker.
  absl::SleepFor(absl::Seconds(3));
  const double accuracy_after = Mean(Accuracies());
  Report("9e5 flood", ps, codes, accuracy_before, lowest, accuracy_after);

  // The model is as good as before (training went on meanwhile), and was
  // never ruined during the flood (without the guard it fell to ~0.1). Single
  // evaluations dip meanwhile (0.71-0.85 in runs on a loaded 2-core machine:
  // the ps spends its time refusing ~2,000 pushes of 200 kB a second, and the
  // honest workers' pushes wait), so the dip is bounded loosely.
  EXPECT_GE(accuracy_after, accuracy_before - 0.02);
  EXPECT_GE(lowest, 0.5);
  // Of the flood, at most the attacker's warm-up pushes were applied (each
  // clipped to 10 times the typical norm); the honest pushes were.
  EXPECT_LE(codes[grpc::StatusCode::OK], 20);
  EXPECT_GT(
      codes[grpc::StatusCode::ABORTED] + codes[grpc::StatusCode::UNAVAILABLE],
      100);
  EXPECT_GT(Versions(ps), versions_before + 100);
  // The flooding worker is named in the ps's Status, the honest ones are not.
  EXPECT_GT(testing::StatusCounter(
                ps, absl::StrCat("suspect_pushes_worker_", kAttacker)),
            100);
  ExpectHonestWorkersUnharmed(ps);
}

// An attacker that stays under the refusal bound: it finds each block's bound
// by probing (a push 1000 times the typical norm is refused with
// ABORTED), then floods gradients a few times the honest workers'
// typical norm, all in one direction, as fast as the ps takes them. The rate
// bound refuses what goes beyond 4 times the median worker's rate, and names
// the worker.
TEST_F(RobustnessTest, AFloodUnderTheNormBoundIsRateLimitedAndNamed) {
  StartJob();
  ASSERT_TRUE(WaitForTraining()) << daemons_["worker-0"]->LogTail(20);
  const double accuracy_before = Mean(Accuracies());
  const std::string ps = PsAddress();
  auto stub = proto::ParameterServer::NewStub(MakeChannel(ps));
  const proto::PushRequest shape =
      Flood([](const proto::BlockInfo&) { return 0.0f; });
  std::map<uint32_t, float> refused_at;
  for (const proto::BlockData& block : shape.blocks()) {
    proto::PushRequest one = shape;
    one.clear_blocks();
    proto::BlockData* data = one.add_blocks();
    *data = block;
    float value = 1e-8f;
    for (int i = 0; i < 60; ++i, value *= 2) {
      const std::vector<float> values(block.data().size() / sizeof(float),
                                      value);
      data->set_data(values.data(), values.size() * sizeof(float));
      if (PushOnce(stub.get(), one).error_code() == grpc::StatusCode::ABORTED) {
        break;
      }
    }
    refused_at[block.block_id()] = value;
  }
  // Between 1.25 and 2.5 times the typical norm (refused at 1000 times).
  const proto::PushRequest flood = Flood(
      [&](const proto::BlockInfo& b) { return refused_at[b.id()] / 400; });
  const double versions_before = Versions(ps);
  double lowest = 1;
  std::map<int, int> codes = Push(ps, flood, kFlood, &lowest);
  absl::SleepFor(absl::Seconds(3));
  const double accuracy_after = Mean(Accuracies());
  Report("flood under the norm bound", ps, codes, accuracy_before, lowest,
         accuracy_after);
  // The accuracy is reported, not asserted: this flood still hurts the model
  // (docs/SECURITY.md, "What one worker can still do").
  EXPECT_GT(codes[grpc::StatusCode::UNAVAILABLE], 100);
  EXPECT_GT(testing::StatusCounter(ps, "guard_refused_rate"), 100);
  EXPECT_GT(testing::StatusCounter(
                ps, absl::StrCat("suspect_pushes_worker_", kAttacker)),
            100);
  EXPECT_GT(Versions(ps), versions_before + 100);
  ExpectHonestWorkersUnharmed(ps);
}

}  // namespace
}  // namespace downpour
