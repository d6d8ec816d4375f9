// GrpcPsClient against a real coordinator and real shards served over loopback
// gRPC in-process, with backoff on a FakeClock (no sleeping): a push retried
// after its ack came too late is applied once, pushes from many threads are
// each applied once, and a shard that is gone makes a push wait, saying for
// what, and give up after training.outage_timeout_s.
#include "worker/grpc_ps_client.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/counters.h"
#include "common/push_sequence.h"
#include "common/testing/fake_clock.h"
#include "common/testing/poll.h"
#include "common/testing/status_matchers.h"
#include "common/wire_encoding.h"
#include "coordinator/cluster_state.h"
#include "coordinator/coordinator_service.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "membership/coordinator_client.h"
#include "rpc/grpc_status.h"
#include "rpc/server_util.h"
#include "server/shard.h"

namespace downpour::worker {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::downpour::testing::WaitUntil;
using ::testing::AllOf;
using ::testing::HasSubstr;

// Forwards to a Shard. With `hold_first_push_ack`, the first Push is applied at
// once but answered only when the next Push arrives, i.e. after the client's
// deadline made it retry.
class ForwardingService final : public proto::ParameterServer::CallbackService {
 public:
  ForwardingService(server::Shard* shard, bool hold_first_push_ack)
      : shard_(shard), hold_(hold_first_push_ack) {}
  ~ForwardingService() override {
    ReleaseHeld();
    OpenGate();
  }

  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* context,
                                 const proto::PullRequest* request,
                                 proto::PullResponse* response) override {
    auto* reactor = context->DefaultReactor();
    reactor->Finish(ToGrpcStatus(shard_->Pull(*request, response)));
    return reactor;
  }

  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* context,
                                 const proto::PushRequest* request,
                                 proto::PushResponse* response) override {
    auto* reactor = context->DefaultReactor();
    {
      absl::MutexLock lock(&mu_);
      sequences_.push_back(request->sequence());
    }
    const grpc::Status status = ToGrpcStatus(shard_->Push(*request, response));
    ReleaseHeld();  // a later push: the held ack is now late
    absl::MutexLock lock(&mu_);
    if (gate_) {
      gated_.push_back({reactor, status});
    } else if (hold_ && pushes_++ == 0) {
      held_ = reactor;
      held_status_ = status;
    } else {
      reactor->Finish(status);
    }
    return reactor;
  }

  // From now on every push is applied at once but answered only by OpenGate:
  // a slow ps.
  void GatePushes() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    gate_ = true;
  }
  // Answers the gated pushes and gates no more.
  void OpenGate() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    for (auto& [reactor, status] : gated_) reactor->Finish(status);
    gated_.clear();
    gate_ = false;
  }
  int gated() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(gated_.size());
  }

  // The sequence of every push request received, in arrival order.
  std::vector<uint64_t> sequences() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return sequences_;
  }

 private:
  void ReleaseHeld() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (held_ != nullptr) held_->Finish(held_status_);
    held_ = nullptr;
  }

  server::Shard* const shard_;
  const bool hold_;
  absl::Mutex mu_;
  int pushes_ ABSL_GUARDED_BY(mu_) = 0;
  grpc::ServerUnaryReactor* held_ ABSL_GUARDED_BY(mu_) = nullptr;
  grpc::Status held_status_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> sequences_ ABSL_GUARDED_BY(mu_);
  bool gate_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::pair<grpc::ServerUnaryReactor*, grpc::Status>> gated_
      ABSL_GUARDED_BY(mu_);
};

// A coordinator and `num_shards` ps shards in this process, placed and serving.
class PsClientTest : public ::testing::Test {
 protected:
  void StartCluster(int num_shards, bool hold_first_push_ack,
                    std::vector<int> layers = {6, 3}) {
    config_.model.layers = layers;
    config_.model.type = ModelType::kSoftmax;
    config_.optimizer.type = OptimizerType::kSgd;
    config_.optimizer.learning_rate = 1.0;
    config_.checkpoint.dir = "";
    config_.coordinator.state_dir = "";
    config_.cluster.ps.assign(num_shards, "127.0.0.1:0");
    config_.cluster.workers = {"127.0.0.1:0", "127.0.0.1:0"};
    config_.rpc.deadline_s = 0.3;
    config_.rpc.connect_timeout_s = 10;
    auto spec = ModelSpec::Create(config_.model);
    ASSERT_THAT(spec, IsOk());
    spec_ = std::make_unique<ModelSpec>(*std::move(spec));

    auto state = coordinator::ClusterState::Create({config_});
    ASSERT_THAT(state, IsOk());
    state_ = *std::move(state);
    coordinator_service_ =
        std::make_unique<coordinator::CoordinatorService>(state_.get());
    auto coordinator_server =
        StartServer("127.0.0.1:0", {coordinator_service_.get()}, "coordinator");
    ASSERT_THAT(coordinator_server, IsOk());
    coordinator_server_ = std::move(coordinator_server->server);
    coordinator_ = std::make_unique<membership::CoordinatorClient>(
        coordinator_server->address, config_.rpc, "test");

    for (int i = 0; i < num_shards; ++i) {
      auto shard = server::Shard::Create(config_, i, &ps_counters_);
      ASSERT_THAT(shard, IsOk());
      shards_.push_back(*std::move(shard));
      services_.push_back(std::make_unique<ForwardingService>(
          shards_.back().get(), hold_first_push_ack));
      auto server = StartServer("127.0.0.1:0", {services_.back().get()},
                                "ps " + std::to_string(i));
      ASSERT_THAT(server, IsOk());
      ps_servers_.push_back(std::move(server->server));
      ASSERT_THAT(coordinator_->RegisterServer(i, server->address), IsOk());
    }
    auto placement = coordinator_->WaitForPlacement(1);
    ASSERT_THAT(placement, IsOk());
    for (const proto::ShardInfo& info : placement->shards()) {
      const std::vector<uint32_t> ids(info.block_ids().begin(),
                                      info.block_ids().end());
      ASSERT_THAT(shards_[info.index()]->Assign(placement->epoch(), ids),
                  IsOk());
    }
    client_ =
        std::make_unique<GrpcPsClient>(*spec_, coordinator_.get(), config_.rpc,
                                       0, &worker_counters_, nullptr, &clock_);
    ASSERT_THAT(client_->Connect(), IsOk());
  }

  void TearDown() override {
    client_.reset();
    for (auto& server : ps_servers_) {
      if (server != nullptr) server->Shutdown(DeadlineIn(1));
    }
    if (coordinator_server_ != nullptr)
      coordinator_server_->Shutdown(DeadlineIn(1));
  }

  Config config_;
  std::unique_ptr<ModelSpec> spec_;
  FakeClock clock_;
  Counters ps_counters_, worker_counters_;
  std::unique_ptr<coordinator::ClusterState> state_;
  std::unique_ptr<coordinator::CoordinatorService> coordinator_service_;
  std::unique_ptr<grpc::Server> coordinator_server_;
  std::unique_ptr<membership::CoordinatorClient> coordinator_;
  std::vector<std::unique_ptr<server::Shard>> shards_;
  std::vector<std::unique_ptr<ForwardingService>> services_;
  std::vector<std::unique_ptr<grpc::Server>> ps_servers_;
  std::unique_ptr<GrpcPsClient> client_;
};

TEST_F(PsClientTest, PushRetriedAfterATimeoutIsAppliedOnce) {
  StartCluster(1, /*hold_first_push_ack=*/true);
  std::vector<float> params(spec_->num_params());
  std::vector<uint64_t> versions;
  ASSERT_THAT(client_->Pull(params.data(), &versions), IsOk());
  ASSERT_EQ(versions.size(), spec_->blocks().size());
  const std::vector<float> before = params;

  const std::vector<float> gradient(spec_->num_params(), 1.0f);
  ASSERT_THAT(client_->Push(gradient.data(), versions, nullptr), IsOk());
  EXPECT_GE(worker_counters_.Get("rpc_retries"), 1)
      << "the first ack came too late";
  EXPECT_EQ(ps_counters_.Get("duplicate_pushes"), 1);
  EXPECT_GT(clock_.slept(), absl::ZeroDuration())
      << "backoff ran on the fake clock";

  ASSERT_THAT(client_->Pull(params.data(), &versions), IsOk());
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_FLOAT_EQ(params[i], before[i] - 1.0f) << "parameter " << i;
  }
  for (uint64_t v : versions) EXPECT_EQ(v, 1u) << "applied more than once";
}

// A push of 4 requests to one shard: all in the window at once, each with its
// own sequence of the worker's incarnation, each applied once.
TEST_F(PsClientTest, AWindowOfPushRequestsIsAppliedOnceEach) {
  StartCluster(1, /*hold_first_push_ack=*/false, {819199, 4});  // 12.5 MiB
  client_->set_incarnation(7);
  std::vector<float> params(spec_->num_params());
  std::vector<uint64_t> versions;
  ASSERT_THAT(client_->Pull(params.data(), &versions), IsOk());
  const std::vector<float> before = params;
  const std::vector<float> gradient(spec_->num_params(), 0.5f);
  ASSERT_THAT(client_->Push(gradient.data(), versions, nullptr), IsOk());
  std::vector<uint64_t> sequences = services_[0]->sequences();
  std::sort(sequences.begin(), sequences.end());
  // A request retried (its deadline passed on a loaded machine) arrives
  // twice with its sequence; it is applied once.
  const double retries = worker_counters_.Get("rpc_retries") +
                         worker_counters_.Get("push_resends");
  EXPECT_LE(sequences.size(), 4 + static_cast<size_t>(retries));
  sequences.erase(std::unique(sequences.begin(), sequences.end()),
                  sequences.end());
  EXPECT_EQ(sequences,
            (std::vector<uint64_t>{MakeSequence(7, 1), MakeSequence(7, 2),
                                   MakeSequence(7, 3), MakeSequence(7, 4)}));
  ASSERT_THAT(client_->Pull(params.data(), &versions), IsOk());
  for (uint64_t v : versions) ASSERT_EQ(v, 1u);
  for (size_t i = 0; i < params.size(); i += 4099) {
    ASSERT_FLOAT_EQ(params[i], before[i] - 0.5f) << "parameter " << i;
  }
  EXPECT_LE(ps_counters_.Get("duplicate_pushes"), retries)
      << "only retries come back as duplicates";
}

// Issue 25: when every push comes back as a duplicate (here: another
// process pushed as this worker, with its incarnation, first), the client
// says so; one applied push ends the streak.
TEST_F(PsClientTest, AStreakOfDuplicatesIsReported) {
  StartCluster(1, /*hold_first_push_ack=*/false);
  client_->set_incarnation(7);
  std::vector<float> params(spec_->num_params());
  std::vector<uint64_t> versions;
  ASSERT_THAT(client_->Pull(params.data(), &versions), IsOk());
  const std::vector<float> gradient(spec_->num_params(), 0.5f);
  GrpcPsClient impostor(*spec_, coordinator_.get(), config_.rpc, 0,
                        &worker_counters_, nullptr, &clock_);
  ASSERT_THAT(impostor.Connect(), IsOk());
  impostor.set_incarnation(7);
  for (int i = 0; i < 3; ++i) {
    ASSERT_THAT(impostor.Push(gradient.data(), versions, nullptr), IsOk());
  }
  EXPECT_FALSE(client_->duplicate_streak().has_value());
  for (int i = 0; i < 3; ++i) {
    ASSERT_THAT(client_->Push(gradient.data(), versions, nullptr), IsOk());
  }
  const std::optional<GrpcPsClient::DuplicateStreak> streak =
      client_->duplicate_streak();
  ASSERT_TRUE(streak.has_value()) << "three pushes, none applied";
  EXPECT_EQ(streak->shard, 0);
  EXPECT_EQ(streak->pushes, 3u);
  ASSERT_THAT(client_->Push(gradient.data(), versions, nullptr), IsOk());
  EXPECT_FALSE(client_->duplicate_streak().has_value()) << "applied again";
}

// A worker process replaced by a newer incarnation cannot push any more.
TEST_F(PsClientTest, AReplacedIncarnationIsRefused) {
  StartCluster(1, /*hold_first_push_ack=*/false);
  client_->set_incarnation(1);
  std::vector<float> params(spec_->num_params());
  std::vector<uint64_t> versions;
  ASSERT_THAT(client_->Pull(params.data(), &versions), IsOk());
  const std::vector<float> gradient(spec_->num_params(), 0.5f);
  ASSERT_THAT(client_->Push(gradient.data(), versions, nullptr), IsOk());
  GrpcPsClient successor(*spec_, coordinator_.get(), config_.rpc, 0,
                         &worker_counters_, nullptr, &clock_);
  ASSERT_THAT(successor.Connect(), IsOk());
  successor.set_incarnation(2);
  ASSERT_THAT(successor.Push(gradient.data(), versions, nullptr), IsOk());
  EXPECT_THAT(client_->Push(gradient.data(), versions, nullptr),
              StatusIs(absl::StatusCode::kOutOfRange,
                       HasSubstr("incarnation 1 was replaced")));
}

TEST_F(PsClientTest, PushReportsTheUpdatesEachBlockSawSinceItsPull) {
  StartCluster(2, /*hold_first_push_ack=*/false);
  const uint64_t num_blocks = spec_->blocks().size();
  std::vector<float> params(spec_->num_params());
  std::vector<uint64_t> pulled;
  ASSERT_THAT(client_->Pull(params.data(), &pulled), IsOk());
  const std::vector<float> gradient(spec_->num_params(), 0.5f);
  // Three pushes computed on the same pulled versions: by hand, every block of
  // the first finds no update since the pull, of the second one, of the third
  // two.
  for (uint64_t expected : {0, 1, 2}) {
    PushReport report;
    const StalenessHistogram& staleness = report.staleness;
    ASSERT_THAT(client_->Push(gradient.data(), pulled, &report), IsOk());
    EXPECT_EQ(report.refused, 0);
    EXPECT_EQ(staleness.count(), num_blocks) << "one value per block";
    EXPECT_EQ(staleness.Quantile(0.0), expected);
    EXPECT_EQ(staleness.max(), expected);
  }
  // Computed on fresh parameters, a push is not stale.
  ASSERT_THAT(client_->Pull(params.data(), &pulled), IsOk());
  PushReport report;
  const StalenessHistogram& staleness = report.staleness;
  ASSERT_THAT(client_->Push(gradient.data(), pulled, &report), IsOk());
  EXPECT_EQ(staleness.count(), num_blocks);
  EXPECT_EQ(staleness.max(), 0u);
}

// PushPullBlocks sends only the blocks asked for. A ps that answers without
// the values (this test's protobuf service ignores reply_values, as a ps
// built before it would) is an error naming the cause, never stale values
// taken for fresh ones; the push itself was applied once.
TEST_F(PsClientTest, PushPullBlocksRefusesAnAnswerWithoutValues) {
  StartCluster(1, /*hold_first_push_ack=*/false, {6, 3});
  std::vector<float> params(spec_->num_params());
  std::vector<uint64_t> versions;
  ASSERT_THAT(client_->Pull(params.data(), &versions), IsOk());
  ASSERT_GE(spec_->blocks().size(), 2u);
  const std::vector<float> gradient(spec_->num_params(), 0.5f);
  EXPECT_THAT(
      client_->PushPullBlocks(gradient.data(), versions, {1}, nullptr,
                              params.data(), &versions),
      StatusIs(absl::StatusCode::kInternal,
               HasSubstr("with the values of 0 (training.fetch layerwise "
                         "asks for them): is it an older version?")));
  std::vector<uint64_t> now;
  ASSERT_THAT(client_->Pull(params.data(), &now), IsOk());
  for (size_t id = 0; id < now.size(); ++id) {
    EXPECT_EQ(now[id], id == 1 ? 1u : 0u) << "block " << id;
  }
}

TEST_F(PsClientTest, TwoAlternatingWorkersSeeStalenessOne) {
  StartCluster(1, /*hold_first_push_ack=*/false);
  Counters other_counters;
  GrpcPsClient other(*spec_, coordinator_.get(), config_.rpc, /*worker_id=*/1,
                     &other_counters, nullptr, &clock_);
  ASSERT_THAT(other.Connect(), IsOk());
  const uint64_t num_blocks = spec_->blocks().size();
  std::vector<float> params(spec_->num_params());
  const std::vector<float> gradient(spec_->num_params(), 0.25f);
  std::vector<uint64_t> a_pulled, b_pulled;
  PushReport a_report, b_report;
  const StalenessHistogram& a = a_report.staleness;
  const StalenessHistogram& b = b_report.staleness;
  // By hand: A and B pull version 0; A pushes (0 updates since its pull: 0).
  // Then each round, A pulls and B pushes what it computed on its older pull
  // (A's push came between: 1), B pulls and A pushes (B's push came between:
  // 1). So A sees {0, 1, 1, 1, 1} per block and B {1, 1, 1, 1, 1}.
  ASSERT_THAT(client_->Pull(params.data(), &a_pulled), IsOk());
  ASSERT_THAT(other.Pull(params.data(), &b_pulled), IsOk());
  ASSERT_THAT(client_->Push(gradient.data(), a_pulled, &a_report), IsOk());
  for (int round = 0; round < 4; ++round) {
    ASSERT_THAT(client_->Pull(params.data(), &a_pulled), IsOk());
    ASSERT_THAT(other.Push(gradient.data(), b_pulled, &b_report), IsOk());
    ASSERT_THAT(other.Pull(params.data(), &b_pulled), IsOk());
    ASSERT_THAT(client_->Push(gradient.data(), a_pulled, &a_report), IsOk());
  }
  ASSERT_THAT(other.Push(gradient.data(), b_pulled, &b_report), IsOk());

  EXPECT_EQ(a.count(), 5 * num_blocks);
  EXPECT_EQ(a.Quantile(0.5), 1u);
  EXPECT_EQ(a.Quantile(0.99), 1u);
  EXPECT_EQ(a.Quantile(0.0), 0u);
  EXPECT_EQ(a.max(), 1u);
  EXPECT_DOUBLE_EQ(a.mean(), 0.8);
  EXPECT_EQ(b.count(), 5 * num_blocks);
  EXPECT_EQ(b.Quantile(0.0), 1u);
  EXPECT_EQ(b.max(), 1u);
  EXPECT_DOUBLE_EQ(b.mean(), 1.0);
  // The ps measured the same updates: 10 pushes of every block, one at 0.
  const StalenessHistogram ps = ps_counters_.Staleness();
  EXPECT_EQ(ps.count(), 10 * num_blocks);
  EXPECT_EQ(ps.Quantile(0.5), 1u);
  EXPECT_EQ(ps.max(), 1u);
  EXPECT_DOUBLE_EQ(ps.mean(), 0.9);
}

// A push the shard's guard refuses as an outlier ends OK, reporting the
// refusal and its reason, with nothing applied; the worker goes on, and its
// retry-free next push is applied. Before PushResponse.refused, the refusal
// came back ABORTED, was retried, answered "duplicate" and counted as
// applied work.
TEST_F(PsClientTest, APushTheGuardRefusesIsReportedRefusedNotApplied) {
  StartCluster(1, /*hold_first_push_ack=*/false);
  Counters other_counters;
  GrpcPsClient other(*spec_, coordinator_.get(), config_.rpc, /*worker_id=*/1,
                     &other_counters, nullptr, &clock_);
  ASSERT_THAT(other.Connect(), IsOk());
  std::vector<float> params(spec_->num_params());
  std::vector<uint64_t> versions;
  const std::vector<float> small(spec_->num_params(), 0.01f);
  for (int i = 0; i < 20; ++i) {
    ASSERT_THAT(client_->Pull(params.data(), &versions), IsOk());
    PushReport report;
    ASSERT_THAT(client_->Push(small.data(), versions, &report), IsOk());
    ASSERT_EQ(report.refused, 0);
  }
  std::vector<float> before(spec_->num_params());
  ASSERT_THAT(other.Pull(before.data(), &versions), IsOk());
  const std::vector<uint64_t> versions_before = versions;
  const std::vector<float> huge(spec_->num_params(), 1e4f);
  PushReport refused;
  const absl::Duration slept = clock_.slept();
  ASSERT_THAT(other.Push(huge.data(), versions, &refused), IsOk());
  // It pauses 25-50 ms before pushing again, as the retry of a refused push
  // used to: pushing at once would raise the rate the guard's rate bound is
  // drawn from; pausing past 1.25 s would drop it from that rate's median.
  EXPECT_GE(clock_.slept() - slept, absl::Milliseconds(25));
  EXPECT_LE(clock_.slept() - slept, absl::Milliseconds(50));
  EXPECT_EQ(refused.refused, 1);
  EXPECT_THAT(refused.refused_why,
              AllOf(HasSubstr("ps 0"), HasSubstr("worker 1"),
                    HasSubstr("robustness.norm_refuse_factor")));
  EXPECT_EQ(refused.staleness.count(), 0u) << "nothing was applied";
  EXPECT_EQ(other_counters.Get("pushes_refused"), 1);
  EXPECT_EQ(other_counters.Get("rpc_retries"), 0) << "a refusal is not retried";
  ASSERT_THAT(client_->Pull(params.data(), &versions), IsOk());
  EXPECT_EQ(params, before);
  EXPECT_EQ(versions, versions_before);
  // The next push of that worker is applied.
  PushReport applied;
  ASSERT_THAT(other.Push(small.data(), versions, &applied), IsOk());
  EXPECT_EQ(applied.refused, 0);
  EXPECT_EQ(applied.staleness.count(), spec_->blocks().size());
}

TEST_F(PsClientTest, PushesFromManyThreadsAreEachAppliedOnce) {
  StartCluster(2, /*hold_first_push_ack=*/false);
  constexpr int kThreads = 4, kPushesEach = 10;
  // As many pushes in flight as threads: they share each shard's window.
  client_ = std::make_unique<GrpcPsClient>(
      *spec_, coordinator_.get(), config_.rpc, 0, &worker_counters_, nullptr,
      &clock_, absl::Seconds(300), /*max_pushes_in_flight=*/kThreads);
  ASSERT_THAT(client_->Connect(), IsOk());
  std::vector<float> params(spec_->num_params());
  std::vector<uint64_t> versions;
  ASSERT_THAT(client_->Pull(params.data(), &versions), IsOk());
  const std::vector<float> before = params;

  const std::vector<float> gradient(spec_->num_params(), 1.0f);
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPushesEach && results[t].ok(); ++i) {
        results[t] = client_->Push(gradient.data(), versions, nullptr);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& result : results) EXPECT_THAT(result, IsOk());
  EXPECT_EQ(ps_counters_.Get("duplicate_pushes"), 0)
      << "a push reached a shard out of sequence order";

  ASSERT_THAT(client_->Pull(params.data(), &versions), IsOk());
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_FLOAT_EQ(params[i], before[i] - kThreads * kPushesEach)
        << "parameter " << i;
  }
  for (uint64_t v : versions) EXPECT_EQ(v, uint64_t{kThreads * kPushesEach});
}

// StartPush returns a ticket without waiting for the shards, but while
// max_pushes_in_flight pushes are in flight it first waits for one to end;
// Wait returns each push's status, staleness and buffer.
TEST_F(PsClientTest, StartPushWaitsWhileMaxPushesAreInFlight) {
  StartCluster(1, /*hold_first_push_ack=*/false);
  RpcSection rpc = config_.rpc;
  rpc.deadline_s = 60;  // the gate holds acks longer than the fixture's 0.3 s
  GrpcPsClient client(*spec_, coordinator_.get(), rpc, 0, &worker_counters_,
                      nullptr, &clock_, absl::Seconds(300),
                      /*max_pushes_in_flight=*/1);
  ASSERT_THAT(client.Connect(), IsOk());
  std::vector<float> params(spec_->num_params());
  std::vector<uint64_t> versions;
  ASSERT_THAT(client.Pull(params.data(), &versions), IsOk());
  const std::vector<float> before = params;
  const size_t n = params.size();

  services_[0]->GatePushes();
  absl::StatusOr<PushTicket> first =
      client.StartPush(std::vector<float>(n, 1.0f), versions);
  ASSERT_THAT(first, IsOk());
  ASSERT_TRUE(
      WaitUntil([&] { return services_[0]->gated() == 1; }, absl::Seconds(30)));
  EXPECT_EQ(client.pushes_in_flight(), 1);
  std::atomic<bool> calling{false}, first_done_when_started{false};
  absl::StatusOr<PushTicket> second;
  std::thread starter([&] {
    calling = true;
    second = client.StartPush(std::vector<float>(n, 1.0f), versions);
    first_done_when_started = client.PushDone(*first);
  });
  ASSERT_TRUE(WaitUntil([&] { return calling.load(); }, absl::Seconds(30)));
  EXPECT_FALSE(client.PushDone(*first));
  services_[0]->OpenGate();
  starter.join();
  EXPECT_TRUE(first_done_when_started)
      << "StartPush began a second push while max_pushes_in_flight were";
  ASSERT_THAT(second, IsOk());
  PushReport report;
  const StalenessHistogram& staleness = report.staleness;
  std::vector<float> buffer;
  EXPECT_THAT(client.Wait(*first, &report, &buffer), IsOk());
  EXPECT_EQ(buffer, std::vector<float>(n, 1.0f)) << "the buffer came back";
  EXPECT_THAT(client.Wait(*second, &report), IsOk());
  EXPECT_EQ(staleness.count(), 2 * spec_->blocks().size());
  EXPECT_EQ(client.pushes_in_flight(), 0);
  ASSERT_THAT(client.Pull(params.data(), &versions), IsOk());
  for (size_t i = 0; i < n; ++i) {
    ASSERT_FLOAT_EQ(params[i], before[i] - 2.0f) << "parameter " << i;
  }
}

// Wait returns the shard's answer to that push; until the caller has seen a
// failure, StartPush returns it instead of sending more behind it.
TEST_F(PsClientTest, WaitReturnsTheShardsAnswerToThatPush) {
  StartCluster(1, /*hold_first_push_ack=*/false);
  std::vector<float> params(spec_->num_params());
  std::vector<uint64_t> versions;
  ASSERT_THAT(client_->Pull(params.data(), &versions), IsOk());
  std::vector<float> bad(params.size(), 1.0f);
  bad[0] = std::nanf("");
  absl::StatusOr<PushTicket> failing =
      client_->StartPush(std::move(bad), versions);
  ASSERT_THAT(failing, IsOk());
  ASSERT_TRUE(WaitUntil([&] { return client_->PushDone(*failing); },
                        absl::Seconds(30)));
  EXPECT_THAT(client_->StartPush(std::vector<float>(params.size()), versions),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(client_->Wait(*failing, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
  absl::StatusOr<PushTicket> good =
      client_->StartPush(std::vector<float>(params.size(), 1.0f), versions);
  ASSERT_THAT(good, IsOk());
  EXPECT_THAT(client_->Wait(*good, nullptr), IsOk());
  EXPECT_THAT(
      client_->Wait(*good, nullptr),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("ticket")));
}

// With rpc.encoding bf16/fp16, a push and pull through 2 shards give the
// float32 run's values within the format's rounding: a second client that
// speaks float32 reads the ps's exact master weights.
void ExpectEncodedRunMatchesFloat32(const Counters& worker_counters,
                                    GrpcPsClient* client, GrpcPsClient* exact,
                                    const ModelSpec& spec,
                                    WireEncoding encoding,
                                    double relative_error) {
  const size_t n = spec.num_params();
  std::vector<float> initial(n), params(n);
  std::vector<uint64_t> versions, exact_versions;
  ASSERT_THAT(exact->Pull(initial.data(), &exact_versions), IsOk());
  ASSERT_THAT(client->Pull(params.data(), &versions), IsOk());
  EXPECT_EQ(versions, exact_versions);
  const auto round_trip = [encoding](float value) {
    char bytes[2];
    EncodeFloats(&value, 1, encoding, bytes);
    float back;
    DecodeFloats(bytes, 1, encoding, &back);
    return back;
  };
  int rounded = 0;
  for (size_t i = 0; i < n; ++i) {
    // What the worker got is the ps's value, rounded once.
    ASSERT_EQ(params[i], round_trip(initial[i])) << "parameter " << i;
    ASSERT_LE(std::abs(params[i] - initial[i]),
              relative_error * std::abs(initial[i]));
    rounded += params[i] != initial[i];
  }
  EXPECT_GT(rounded, 0) << "the pull came back in float32";

  std::vector<float> gradient(n);
  for (size_t i = 0; i < n; ++i) gradient[i] = 0.1f * std::sin(i + 0.5f);
  ASSERT_THAT(client->Push(gradient.data(), versions, nullptr), IsOk());
  std::vector<float> after(n);
  ASSERT_THAT(exact->Pull(after.data(), &exact_versions), IsOk());
  for (size_t i = 0; i < n; ++i) {
    // sgd, learning rate 1, on float32 master weights with the decoded
    // gradient: within the gradient's rounding of the float32 run.
    const float float32_run = initial[i] - gradient[i];
    ASSERT_FLOAT_EQ(after[i], initial[i] - round_trip(gradient[i]))
        << "parameter " << i;
    ASSERT_LE(
        std::abs(after[i] - float32_run),
        relative_error * std::abs(gradient[i]) + 1e-6f * std::abs(after[i]))
        << "parameter " << i;
  }
  for (uint64_t v : exact_versions) EXPECT_EQ(v, 1u);
  // Half the bytes of float32 each way.
  EXPECT_EQ(worker_counters.Get("bytes_out"), static_cast<double>(2 * n));
  EXPECT_EQ(worker_counters.Get("bytes_in"), static_cast<double>(2 * n));
}

TEST_F(PsClientTest, Bf16PushAndPullMatchTheFloat32RunWithinBf16Rounding) {
  config_.rpc.encoding = WireEncoding::kBf16;
  StartCluster(2, /*hold_first_push_ack=*/false);
  RpcSection float32_rpc = config_.rpc;
  float32_rpc.encoding = WireEncoding::kFloat32;
  Counters exact_counters;
  GrpcPsClient exact(*spec_, coordinator_.get(), float32_rpc, /*worker_id=*/-1,
                     &exact_counters, nullptr, &clock_);
  ASSERT_THAT(exact.Connect(), IsOk());
  ExpectEncodedRunMatchesFloat32(worker_counters_, client_.get(), &exact,
                                 *spec_, WireEncoding::kBf16, 0x1.0p-8);
}

TEST_F(PsClientTest, Fp16PushAndPullMatchTheFloat32RunWithinFp16Rounding) {
  config_.rpc.encoding = WireEncoding::kFp16;
  StartCluster(1, /*hold_first_push_ack=*/false);
  RpcSection float32_rpc = config_.rpc;
  float32_rpc.encoding = WireEncoding::kFloat32;
  Counters exact_counters;
  GrpcPsClient exact(*spec_, coordinator_.get(), float32_rpc, /*worker_id=*/-1,
                     &exact_counters, nullptr, &clock_);
  ASSERT_THAT(exact.Connect(), IsOk());
  ExpectEncodedRunMatchesFloat32(worker_counters_, client_.get(), &exact,
                                 *spec_, WireEncoding::kFp16, 0x1.0p-11);
}

// training.outage_timeout_s bounds the wait, not rpc.connect_timeout_s; while
// it waits the client says which shard it waits for, and the error names the
// shard and the key to raise.
TEST_F(PsClientTest, PushToAShardThatIsGoneWaitsForTheOutageTimeoutSayingWhy) {
  StartCluster(1, /*hold_first_push_ack=*/false);
  const GrpcPsClient* watched = nullptr;
  std::vector<std::string> seen;  // outage() at each retry
  GrpcPsClient client(
      *spec_, coordinator_.get(), config_.rpc, 0, &worker_counters_,
      [&] {
        const std::optional<GrpcPsClient::Outage> outage = watched->outage();
        seen.push_back(outage.has_value() ? DescribeOutage(*outage) : "");
        return false;
      },
      &clock_, absl::Seconds(45));
  watched = &client;
  ASSERT_THAT(client.Connect(), IsOk());
  std::vector<float> params(spec_->num_params());
  std::vector<uint64_t> versions;
  ASSERT_THAT(client.Pull(params.data(), &versions), IsOk());
  EXPECT_FALSE(client.outage().has_value());
  const std::string address = coordinator_->GetPlacement()->shards(0).address();
  ps_servers_[0]->Shutdown(DeadlineIn(1));
  ps_servers_[0].reset();

  const std::vector<float> gradient(spec_->num_params(), 1.0f);
  const absl::Status pushed = client.Push(gradient.data(), versions, nullptr);
  EXPECT_THAT(
      pushed,
      StatusIs(absl::StatusCode::kDeadlineExceeded,
               HasSubstr("worker 0: gave up waiting for push to ps 0")));
  EXPECT_THAT(
      pushed.message(),
      HasSubstr("training.outage_timeout_s (45 s) for an unreachable "
                "ps shard: bring ps 0 back (restart it with --index 0"));
  EXPECT_EQ(clock_.slept(), absl::Seconds(45));
  ASSERT_GE(seen.size(), 2u);
  EXPECT_EQ(seen.front(),
            absl::StrCat("ps 0 at ", address,
                         " (unreachable for 0 s; gives up after 45 s, "
                         "training.outage_timeout_s)"));
  EXPECT_THAT(seen.back(), HasSubstr("(unreachable for 4"));  // 40-45 s
  EXPECT_FALSE(client.outage().has_value()) << "no call retries any more";
}

TEST(OutageTimeoutTest, ZeroWaitsForever) {
  EXPECT_EQ(OutageTimeout(0), absl::InfiniteDuration());
  EXPECT_EQ(OutageTimeout(2.5), absl::Milliseconds(2500));
  GrpcPsClient::Outage outage{1, "127.0.0.1:7001", absl::Seconds(12),
                              absl::InfiniteDuration()};
  EXPECT_EQ(DescribeOutage(outage),
            "ps 1 at 127.0.0.1:7001 (unreachable for 12 s; waits forever, "
            "training.outage_timeout_s 0)");
}

}  // namespace
}  // namespace downpour::worker
