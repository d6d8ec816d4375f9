// Identity that cannot be forged by a field: a real coordinator, ps, standby
// and worker on loopback, attacked by a plain gRPC client that knows the
// protocol but holds no member key. Each attack of issue 12 is replayed and
// must be refused with its code, leave the job running, the real ps serving
// with its parameters unchanged, and the worker's later pushes applied (also
// after the ps restarts). Asserts only on what a client observes: gRPC codes,
// ClusterStatus, Status counters, Checksums.
#include <signal.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/mnist.h"
#include "common/push_sequence.h"
#include "common/subprocess.h"
#include "common/testing/poll.h"
#include "coordinator/test_cluster.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "membership/coordinator_client.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/server_util.h"
#include "tests/daemon_harness.h"

namespace downpour {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kWait = absl::Seconds(30);

class ForgedIdentityTest : public testing::DaemonJobTest {
 protected:
  void SetUp() override { dir_ = testing::TestDir(); }

  void WriteConfig(bool standby, int workers = 1) {
    // A job far from its end (a learning rate so small that the target
    // accuracy is out of reach in the test's time, and 100,000 epochs: at
    // 1000 epochs an unloaded machine finished worker 0's 32,000 steps
    // within the test, and the stranger's claims were then confirmed by its
    // own next evaluation), so that only an attack could stop it; a heartbeat
    // timeout longer than the test stops the worker, so that it is never
    // declared dead (a dead member's place is free to take).
    std::string yaml = testing::LoopbackConfig(
        1, workers,
        absl::StrCat("data:\n  source: synthetic\n  train_examples: 2000\n"
                     "  test_examples: 200\n",
                     "model:\n  layers: [", kMnistDim, ", 32, ", kMnistClasses,
                     "]\n  block_size: 4096\n"
                     "optimizer:\n  type: sgd\n  learning_rate: 0.0000001\n"
                     "training:\n  batch_size: 32\n  epochs: 100000\n"
                     "  eval_every_steps: 50\n  target_accuracy: 0.999\n"
                     "checkpoint:\n  dir: ",
                     dir_, "/ckpt\n  interval_s: 0.3\n"));
    yaml.replace(yaml.find("timeout_s: 2"), 12, "timeout_s: 10");
    if (standby) {
      yaml = absl::StrCat(yaml.substr(0, yaml.find("  workers:")),
                          "  standby_ps: [127.0.0.1:0]\n",
                          yaml.substr(yaml.find("  workers:")));
    }
    config_ = testing::WriteConfig("job.yaml", yaml);
  }

  // A coordinator, ps 0, a standby when asked, and worker 0, training.
  // `workers` configured; only worker 0 runs (the others' places are free).
  void StartJob(bool standby, int workers = 1) {
    WriteConfig(standby, workers);
    const std::string port_file = dir_ + "/coordinator.port";
    Subprocess& c =
        Start("coordinator", "coordinator/coordinator",
              {"--listen", "127.0.0.1:0", "--port_file", port_file});
    auto address = testing::WaitForPort(c, port_file);
    ASSERT_TRUE(address.ok()) << address.status();
    coordinator_ = *address;
    StartPs();
    if (standby) {
      Start("standby-0", "server/ps_server",
            {"--index", "0", "--standby", "--coordinator", coordinator_});
    }
    Start("worker-0", "worker/ps_worker",
          {"--index", "0", "--coordinator", coordinator_});
    ASSERT_TRUE(WaitUntil([&] { return Step() >= 20; }))
        << daemons_["worker-0"]->LogTail(20);
  }

  void StartPs() {
    Start("ps-0", "server/ps_server",
          {"--index", "0", "--coordinator", coordinator_});
  }

  bool WaitUntil(const std::function<bool()>& done,
                 absl::Duration timeout = kWait) {
    return testing::WaitUntil(done, timeout, absl::Milliseconds(50));
  }

  proto::ClusterStatusResponse Status() {
    RpcSection rpc;
    rpc.deadline_s = 2;
    membership::CoordinatorClient client(coordinator_, rpc, "test");
    auto status = client.ClusterStatus();
    return status.ok() ? *status : proto::ClusterStatusResponse();
  }

  const proto::MemberStatus Member(const std::string& role, int index) {
    const proto::ClusterStatusResponse status = Status();
    const proto::MemberStatus* m = coordinator::FindMember(status, role, index);
    return m == nullptr ? proto::MemberStatus() : *m;
  }

  uint64_t Step() { return Member("worker", 0).report().step(); }

  std::string Checksums(const std::string& address) {
    auto stub = proto::ParameterServer::NewStub(MakeChannel(address));
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(5));
    proto::ChecksumResponse response;
    if (!stub->Checksums(&context, proto::ChecksumRequest(), &response).ok()) {
      return "";
    }
    return response.DebugString();
  }

  // Stops the worker and waits until the ps's parameters no longer change
  // (its pushes in flight have landed): what an attack must leave as it is.
  std::string Quiesce(const std::string& ps) {
    daemons_["worker-0"]->Signal(SIGSTOP);
    std::string last = Checksums(ps), now;
    EXPECT_TRUE(WaitUntil([&] {
      now = Checksums(ps);
      const bool same = !now.empty() && now == last;
      last = now;
      return same;
    }));
    return now;
  }

  // The worker goes on, and its pushes are applied by the ps at `ps`.
  void ExpectTrainingGoesOn(const std::string& ps) {
    const double pushes = testing::LiveCounter(ps, "pushes");
    daemons_["worker-0"]->Signal(SIGCONT);
    EXPECT_TRUE(WaitUntil([&] {
      return testing::StatusCounter(ps, "pushes") >= pushes + 20;
    })) << "the worker's pushes are no longer applied";
    EXPECT_FALSE(daemons_["worker-0"]->Poll().has_value())
        << daemons_["worker-0"]->LogTail(20);
  }

  std::unique_ptr<proto::Coordinator::Stub> CoordinatorStub() {
    return proto::Coordinator::NewStub(MakeChannel(coordinator_));
  }

  std::string dir_, coordinator_;
};

grpc::Status Call(
    const std::function<grpc::Status(grpc::ClientContext*)>& call) {
  grpc::ClientContext context;
  // On a loaded machine (the test five times at once beside a CPU hog) a
  // connection attempt once timed out before the server's SETTINGS frame,
  // failing the call at once with UNAVAILABLE: wait for the channel to
  // connect instead, within a generous deadline.
  context.set_deadline(DeadlineIn(15));
  context.set_wait_for_ready(true);
  return call(&context);
}

// Attacks 1-3: take over ps 0 (as a ps or a standby, from a stranger's
// address or ps 0's own, the stranger answering health and status checks
// itself), an empty registration, forged heartbeats (accuracy over the
// target, finished, diverged), oversized reports.
TEST_F(ForgedIdentityTest, AStrangerCannotTakeAShardOrStopTheJob) {
  StartJob(/*standby=*/true);
  const proto::MemberStatus ps = Member("ps", 0);
  const uint64_t epoch = Status().placement_epoch();
  ASSERT_GT(epoch, 0u);
  auto stub = CoordinatorStub();
  // While the worker heartbeats, its lease holds its place (issue 42: no
  // probe of its address decides it).
  const std::string worker_address = Member("worker", 0).address();
  proto::RegisterWorkerRequest worker;
  worker.set_index(0);
  worker.set_address(coordinator_);
  proto::RegisterWorkerResponse worker_response;
  grpc::Status registered = Call([&](grpc::ClientContext* c) {
    return stub->RegisterWorker(c, worker, &worker_response);
  });
  EXPECT_EQ(registered.error_code(), grpc::StatusCode::UNAVAILABLE)
      << registered.error_message();
  EXPECT_THAT(registered.error_message(),
              HasSubstr("worker 0's place is held by the process"));
  EXPECT_EQ(Member("worker", 0).address(), worker_address);

  const std::string before = Quiesce(ps.address());
  ASSERT_FALSE(before.empty());

  // The coordinator itself stands in for a stranger that answers health and
  // Status checks.
  for (const std::string& address : {coordinator_, ps.address()}) {
    for (const bool standby : {false, true}) {
      proto::RegisterServerRequest request;
      request.set_index(0);
      request.set_address(address);
      request.set_standby(standby);
      proto::RegisterServerResponse response;
      const grpc::Status status = Call([&](grpc::ClientContext* c) {
        return stub->RegisterServer(c, request, &response);
      });
      // A live member's lease holds its place (issue 42): a ps is told to
      // rejoin as a spare, a standby to retry once the lease runs out.
      EXPECT_EQ(status.error_code(), standby ? grpc::StatusCode::UNAVAILABLE
                                             : grpc::StatusCode::ALREADY_EXISTS)
          << address << (standby ? " as standby: " : " as ps: ")
          << status.error_message();
      EXPECT_THAT(status.error_message(), HasSubstr("'s place is held by"));
      EXPECT_TRUE(response.member_key().empty());
    }
  }
  grpc::Status status;

  for (const int index : {0, 7}) {
    proto::RegisterServerRequest invalid;
    invalid.set_index(index);  // 0: no address (the empty RegisterServer{})
    if (index != 0) invalid.set_address(coordinator_);
    proto::RegisterServerResponse response;
    status = Call([&](grpc::ClientContext* c) {
      return stub->RegisterServer(c, invalid, &response);
    });
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << status.error_message();
  }

  for (const auto& [role, index] : std::vector<std::pair<std::string, int>>{
           {"worker", 0}, {"ps", 0}, {"standby", 0}}) {
    proto::HeartbeatRequest forged;
    forged.set_role(role);
    forged.set_index(index);
    forged.set_address(coordinator_);
    forged.set_member_key("00000000000000000000000000000000");
    forged.mutable_report()->set_accuracy(1.0);
    forged.mutable_report()->set_finished(true);
    forged.mutable_report()->set_diverged("forged: stop everything");
    proto::HeartbeatResponse reply;
    status = Call([&](grpc::ClientContext* c) {
      return stub->Heartbeat(c, forged, &reply);
    });
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << role;
    EXPECT_THAT(status.error_message(),
                HasSubstr(absl::StrCat("heartbeat for ", role, " ", index,
                                       " is not from its registered process")));
    EXPECT_FALSE(reply.stop());
    EXPECT_FALSE(reply.replaced());
  }
  proto::HeartbeatRequest oversized;
  oversized.set_role("worker");
  oversized.mutable_report()->set_device(std::string(100000, 'd'));
  proto::HeartbeatResponse reply;
  status = Call([&](grpc::ClientContext* c) {
    return stub->Heartbeat(c, oversized, &reply);
  });
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("report.device is 100000 bytes"));

  // Nothing changed: same shard server, same epoch, no recovery, the job
  // runs, the worker's report is its own, the parameters are untouched.
  const proto::ClusterStatusResponse after = Status();
  EXPECT_FALSE(after.stop()) << after.stop_reason();
  EXPECT_EQ(after.placement_epoch(), epoch);
  EXPECT_EQ(after.recoveries_size(), 0);
  const proto::MemberStatus* m = coordinator::FindMember(after, "ps", 0);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->address(), ps.address());
  const proto::MemberStatus* w = coordinator::FindMember(after, "worker", 0);
  ASSERT_NE(w, nullptr);
  EXPECT_FALSE(w->report().finished());
  EXPECT_TRUE(w->report().diverged().empty());
  EXPECT_FALSE(w->report().accuracy() >= 1.0) << "NaN until evaluated";
  EXPECT_EQ(Checksums(ps.address()), before);
  EXPECT_FALSE(daemons_["ps-0"]->Poll().has_value())
      << "the real ps stood down";
  EXPECT_FALSE(daemons_["standby-0"]->Poll().has_value());
  ExpectTrainingGoesOn(ps.address());
  EXPECT_FALSE(Status().stop());
}

// Issue 42, attack 1: a RegisterServer asking to join as a spare standby
// was answered with every worker's incarnation and push key, and pushes at
// the worker's sequence plus 64 with that key froze training. A spare hears
// of the workers only once it backs a shard up (here at once: shard 0 has no
// backup), and then only each key's digest, which pushes nothing.
TEST_F(ForgedIdentityTest, ASpareHearsNoWorkersPushKey) {
  StartJob(/*standby=*/false);
  const std::string ps = Member("ps", 0).address();
  const uint64_t epoch = Status().placement_epoch();
  auto stub = CoordinatorStub();
  proto::RegisterServerRequest spare;
  spare.set_index(-1);
  spare.set_address(coordinator_);  // a daemon that answers Status
  spare.set_standby(true);
  spare.set_spare(true);
  spare.set_former_shard(-1);
  proto::RegisterServerResponse registered;
  ASSERT_TRUE(Call([&](grpc::ClientContext* c) {
                return stub->RegisterServer(c, spare, &registered);
              }).ok());
  proto::HeartbeatRequest beat;
  beat.set_role("standby");
  beat.set_index(registered.standby_index());
  beat.set_address(coordinator_);
  beat.set_member_key(registered.member_key());
  proto::HeartbeatResponse reply;
  ASSERT_TRUE(Call([&](grpc::ClientContext* c) {
                return stub->Heartbeat(c, beat, &reply);
              }).ok());
  ASSERT_EQ(reply.worker_incarnations_size(), 1) << "it backs shard 0 up";
  const proto::WorkerIncarnation& heard = reply.worker_incarnations(0);
  ASSERT_NE(heard.push_key_digest(), 0u);
  // What it heard, used as the key, at the worker's window plus 64.
  proto::DescribeModelResponse model;
  ASSERT_TRUE(Call([&](grpc::ClientContext* c) {
                return stub->DescribeModel(c, {}, &model);
              }).ok());
  ASSERT_GT(model.blocks_size(), 0);
  const std::vector<float> zeros(model.blocks(0).floats(), 0.0f);
  auto ps_stub = proto::ParameterServer::NewStub(MakeChannel(ps));
  const double applied = testing::LiveCounter(ps, "pushes");
  for (const uint64_t n : {uint64_t{64}, uint64_t{1} << 20}) {
    proto::PushRequest forged;
    forged.set_placement_epoch(epoch);
    forged.set_worker_id(heard.worker());
    forged.set_sequence(MakeSequence(heard.incarnation(), n));
    forged.set_push_key(heard.push_key_digest());
    proto::BlockData* block = forged.add_blocks();
    block->set_block_id(model.blocks(0).id());
    block->set_data(zeros.data(), zeros.size() * sizeof(float));
    proto::PushResponse response;
    const grpc::Status pushed = Call([&](grpc::ClientContext* c) {
      return ps_stub->Push(c, forged, &response);
    });
    EXPECT_EQ(pushed.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << pushed.error_message();
  }
  // The worker's own pushes go on being applied.
  EXPECT_TRUE(WaitUntil(
      [&] { return testing::StatusCounter(ps, "pushes") >= applied + 20; }));
  // A spare's address must be one a daemon answers at.
  spare.set_address("127.0.0.1:1");
  const grpc::Status nobody = Call([&](grpc::ClientContext* c) {
    return stub->RegisterServer(c, spare, &registered);
  });
  EXPECT_EQ(nobody.error_code(), grpc::StatusCode::UNAVAILABLE)
      << nobody.error_message();
  EXPECT_THAT(nobody.error_message(), HasSubstr("nothing answers at"));
}

// Attack 4: pushes with forged sequences (2^64-1 without blocks, a jump far
// past the window, a worker id outside the config) are refused, leave the
// parameters as they were, and do not freeze the worker: its pushes go on
// being applied, also by a restarted ps (from the checkpoint written after
// the attack).
TEST_F(ForgedIdentityTest, AForgedSequenceCannotFreezeAWorker) {
  StartJob(/*standby=*/false);
  const std::string ps = Member("ps", 0).address();
  const std::string worker = Member("worker", 0).address();
  const uint64_t epoch = Status().placement_epoch();
  const double incarnation = testing::LiveCounter(worker, "member_incarnation");
  ASSERT_GT(incarnation, 0);
  const std::string before = Quiesce(ps);
  auto stub = proto::ParameterServer::NewStub(MakeChannel(ps));
  struct Case {
    const char* name;
    int32_t worker_id;
    uint64_t sequence;
    grpc::StatusCode code;
  } cases[] = {
      {"sequence 2^64-1", 0, ~uint64_t{0}, grpc::StatusCode::INVALID_ARGUMENT},
      {"a jump of 2^31", 0,
       MakeSequence(static_cast<uint64_t>(incarnation), uint64_t{1} << 31),
       grpc::StatusCode::PERMISSION_DENIED},
      {"worker id 5", 5, 1, grpc::StatusCode::INVALID_ARGUMENT},
      {"worker id -1", -1, 1, grpc::StatusCode::INVALID_ARGUMENT},
  };
  for (const Case& c : cases) {
    proto::PushRequest push;
    push.set_placement_epoch(epoch);
    push.set_worker_id(c.worker_id);
    push.set_sequence(c.sequence);
    proto::PushResponse response;
    const grpc::Status status = Call([&](grpc::ClientContext* context) {
      return stub->Push(context, push, &response);
    });
    EXPECT_EQ(status.error_code(), c.code)
        << c.name << ": " << status.error_message();
  }
  proto::PullRequest pull;
  pull.set_placement_epoch(epoch);
  pull.set_worker_id(1 << 30);
  pull.add_block_ids(0);
  proto::PullResponse pulled;
  const grpc::Status status = Call([&](grpc::ClientContext* context) {
    return stub->Pull(context, pull, &pulled);
  });
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Checksums(ps), before);
  // A checkpoint taken after the attack: the restarted ps reads it.
  const double written = testing::LiveCounter(ps, "checkpoints_written");
  ASSERT_TRUE(WaitUntil([&] {
    return testing::StatusCounter(ps, "checkpoints_written") > written;
  }));
  ExpectTrainingGoesOn(ps);

  daemons_["ps-0"]->Signal(SIGTERM);
  ASSERT_TRUE(daemons_["ps-0"]->Wait(kWait).has_value());
  daemons_.erase("ps-0");
  StartPs();
  std::string restarted;
  ASSERT_TRUE(WaitUntil([&] {
    const proto::MemberStatus m = Member("ps", 0);
    restarted = m.address();
    return m.alive() && restarted != ps &&
           testing::StatusCounter(restarted, "pushes") > 0;
  })) << daemons_["ps-0"]->LogTail(20);
  const double pushes = testing::LiveCounter(restarted, "pushes");
  EXPECT_TRUE(WaitUntil([&] {
    return testing::StatusCounter(restarted, "pushes") >= pushes + 20;
  })) << "the restarted ps no longer applies the worker's pushes";
  EXPECT_FALSE(Status().stop());
}

// Issue 25 attacks 2 and 3, plaintext. (2) Pushes as worker 0 with its
// current incarnation (a Status counter anyone can read) and a sequence 2^20
// past its window, without blocks, or untracked, once froze the worker:
// every later push of it was acknowledged as a duplicate and dropped. Each
// is refused now (no push key), and the worker's pushes go on being
// applied, none answered as a duplicate. (3) A stranger that takes worker
// 1's free place and claims accuracy 1.0 evaluation after evaluation, its
// own pushes applied, does not end the job: worker 0 still evaluates, and
// its evaluations do not confirm the claim.
TEST_F(ForgedIdentityTest,
       AStrangerCannotFreezeAWorkerOrEndTheJobFromAFreeSlot) {
  StartJob(/*standby=*/false, /*workers=*/2);
  const std::string ps = Member("ps", 0).address();
  const std::string worker = Member("worker", 0).address();
  const uint64_t epoch = Status().placement_epoch();
  const uint64_t incarnation =
      static_cast<uint64_t>(testing::LiveCounter(worker, "member_incarnation"));
  ASSERT_GT(incarnation, 0u);
  proto::DescribeModelResponse model;
  ASSERT_TRUE(Call([&](grpc::ClientContext* c) {
                return CoordinatorStub()->DescribeModel(c, {}, &model);
              }).ok());
  ASSERT_GT(model.blocks_size(), 0);
  const std::vector<float> zeros(model.blocks(0).floats(), 0.0f);
  auto stub = proto::ParameterServer::NewStub(MakeChannel(ps));
  auto push = [&](int32_t worker_id, uint64_t sequence, uint64_t key,
                  bool with_block) {
    proto::PushRequest request;
    request.set_placement_epoch(epoch);
    request.set_worker_id(worker_id);
    request.set_sequence(sequence);
    request.set_push_key(key);
    if (with_block) {
      proto::BlockData* block = request.add_blocks();
      block->set_block_id(model.blocks(0).id());
      block->set_data(zeros.data(), zeros.size() * sizeof(float));
    }
    proto::PushResponse response;
    return Call([&](grpc::ClientContext* c) {
      return stub->Push(c, request, &response);
    });
  };
  // The ps's applied pushes per second over `span` (a figure printed for
  // the record: the attack must not slow the worker, a rate is not asserted).
  auto rate = [&](absl::Duration span) {
    const double from = testing::LiveCounter(ps, "pushes");
    absl::SleepFor(span);
    return (testing::LiveCounter(ps, "pushes") - from) /
           absl::ToDoubleSeconds(span);
  };
  const double rate_before = rate(absl::Seconds(3));
  const double duplicates = testing::LiveCounter(ps, "duplicate_pushes");
  const uint64_t far = MakeSequence(incarnation, uint64_t{1} << 20);
  struct Case {
    const char* name;
    uint64_t sequence, key;
    bool with_block;
    grpc::StatusCode code;
  } cases[] = {
      {"a jump of 2^20 without a key", far, 0, true,
       grpc::StatusCode::PERMISSION_DENIED},
      {"a jump of 2^20 with a guessed key", far, 0x5eed, true,
       grpc::StatusCode::PERMISSION_DENIED},
      {"an empty push", far, 0, false, grpc::StatusCode::PERMISSION_DENIED},
      {"untracked", 0, 0, true, grpc::StatusCode::INVALID_ARGUMENT},
  };
  for (const Case& c : cases) {
    const grpc::Status status = push(0, c.sequence, c.key, c.with_block);
    EXPECT_EQ(status.error_code(), c.code)
        << c.name << ": " << status.error_message();
    EXPECT_THAT(status.error_message(),
                ::testing::Not(HasSubstr(absl::StrCat(incarnation + 1))))
        << "names no other incarnation";
  }
  // The worker's pushes are applied, none answered as a duplicate.
  const double pushes = testing::LiveCounter(ps, "pushes");
  EXPECT_TRUE(WaitUntil([&] {
    return testing::StatusCounter(ps, "pushes") >= pushes + 20;
  })) << "the worker's pushes are no longer applied";
  EXPECT_EQ(testing::LiveCounter(ps, "duplicate_pushes"), duplicates);
  EXPECT_EQ(testing::LiveCounter(worker, "duplicate_push_streak_s"), 0);
  const double rate_after = rate(absl::Seconds(3));
  std::fprintf(stderr,
               "window attack: worker 0's pushes applied %.1f/s before, "
               "%.1f/s after (ratio %.2f)\n",
               rate_before, rate_after, rate_after / rate_before);

  // (3) Worker 1's place is free: in plaintext anyone may take it.
  auto coordinator = CoordinatorStub();
  proto::RegisterWorkerRequest take;
  take.set_index(1);
  take.set_address(coordinator_);  // answers health checks: stays "alive"
  proto::RegisterWorkerResponse taken;
  const grpc::Status registered = Call([&](grpc::ClientContext* c) {
    return coordinator->RegisterWorker(c, take, &taken);
  });
  ASSERT_TRUE(registered.ok())
      << registered.error_code() << ": " << registered.error_message();
  // Its own pushes are applied once the ps has heard of its incarnation.
  uint64_t n = 0;
  ASSERT_TRUE(WaitUntil([&] {
    return push(1, MakeSequence(taken.incarnation(), ++n), taken.push_key(),
                true)
        .ok();
  })) << "the stranger's own push was never applied";
  for (uint64_t evaluation = 1; evaluation <= 20; ++evaluation) {
    proto::HeartbeatRequest claim;
    claim.set_role("worker");
    claim.set_index(1);
    claim.set_address(coordinator_);
    claim.set_member_key(taken.member_key());
    claim.mutable_report()->set_accuracy(1.0);
    claim.mutable_report()->set_evaluations(evaluation);
    claim.mutable_report()->set_step(evaluation * 50);
    proto::HeartbeatResponse reply;
    const grpc::Status status = Call([&](grpc::ClientContext* c) {
      return coordinator->Heartbeat(c, claim, &reply);
    });
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_FALSE(reply.stop())
        << "claim " << evaluation << ": " << reply.stop_reason();
    // Interleaved with worker 0's own evaluations (every 50 steps).
    const uint64_t step = Step();
    WaitUntil([&] { return Step() >= step + 10; }, absl::Seconds(2));
  }
  EXPECT_FALSE(Status().stop()) << Status().stop_reason();
  EXPECT_FALSE(daemons_["worker-0"]->Poll().has_value());
}

}  // namespace
}  // namespace downpour
