// GrpcPsClient across live bucket moves, against real ps cores (server::Shard)
// served over loopback gRPC in-process and a coordinator whose placement the
// test sets. Each service answers a request with keys of a bucket its shard
// does not hold as a ps that moved the bucket away answers
// (FAILED_PRECONDITION "bucket moved", common/sparse_keys.h: nothing
// applied, the sequence not used up), after the shard's own epoch and
// duplicate checks, as the ps does. Backoff runs on a FakeClock.
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/counters.h"
#include "common/push_sequence.h"
#include "common/sparse_keys.h"
#include "common/testing/fake_clock.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "membership/coordinator_client.h"
#include "proto/coordinator.grpc.pb.h"
#include "rpc/grpc_status.h"
#include "rpc/server_util.h"
#include "server/shard.h"
#include "worker/grpc_ps_client.h"

namespace downpour::worker {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint32_t kBuckets = 16;

// A coordinator that serves the placement the test sets.
class FakeCoordinator final : public proto::Coordinator::CallbackService {
 public:
  grpc::ServerUnaryReactor* GetPlacement(
      grpc::CallbackServerContext* context, const proto::GetPlacementRequest*,
      proto::GetPlacementResponse* response) override {
    {
      absl::MutexLock lock(&mu_);
      *response = placement_;
    }
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  void Set(proto::GetPlacementResponse placement) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    placement_ = std::move(placement);
  }

 private:
  absl::Mutex mu_;
  proto::GetPlacementResponse placement_ ABSL_GUARDED_BY(mu_);
};

// One push request as a ps service saw it, and what it answered.
struct SeenPush {
  uint64_t sequence = 0;
  uint64_t epoch = 0;
  size_t keys = 0;
  bool applied = false;  // OK and not a duplicate
  bool moved = false;    // answered "bucket moved"
};

// Forwards to a Shard. A request at the epoch served whose keys include a
// bucket not held, and (a push) whose sequence was not applied, is answered
// "bucket moved" without reaching the shard: the order of the ps's checks
// (epoch, duplicate, then moved buckets). `LoseNextAck`: the next push is
// applied, then `then` runs and the ack is lost (UNAVAILABLE), as when the
// ps's answer does not reach the worker.
class MovingPs final : public proto::ParameterServer::CallbackService {
 public:
  explicit MovingPs(server::Shard* shard) : shard_(shard) {}

  // Placement `epoch` gives this ps the buckets flagged in `held`.
  void Serve(uint64_t epoch, std::vector<char> held) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    epoch_ = epoch;
    held_ = std::move(held);
  }

  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* context,
                                 const proto::PullRequest* request,
                                 proto::PullResponse* response) override {
    absl::Status status;
    if (request->sparse_size() > 0) {
      status = Moved(request->placement_epoch(), request->sparse(0).keys(), 0);
      if (status.ok()) status = shard_->PullSparse(*request, response);
    } else {
      status = shard_->Pull(*request, response);
    }
    auto* reactor = context->DefaultReactor();
    reactor->Finish(ToGrpcStatus(status));
    return reactor;
  }

  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* context,
                                 const proto::PushRequest* request,
                                 proto::PushResponse* response) override {
    std::function<void()> before;
    {
      absl::MutexLock lock(&mu_);
      before = std::move(before_);
      before_ = nullptr;
    }
    if (before != nullptr) before();
    absl::Status status;
    for (const proto::SparseRows& rows : request->sparse()) {
      if (status.ok()) {
        status =
            Moved(request->placement_epoch(), rows.keys(), request->sequence());
      }
    }
    if (status.ok()) status = shard_->Push(*request, response);
    SeenPush seen{request->sequence(), request->placement_epoch(), 0,
                  status.ok() && !response->duplicate(),
                  absl::StrContains(status.message(), kBucketMovedMessage)};
    for (const proto::SparseRows& rows : request->sparse()) {
      if (rows.table() == 0) seen.keys = rows.keys().size() / 8;
    }
    std::function<void()> then;
    {
      absl::MutexLock lock(&mu_);
      if (seen.applied) applied_.push_back(seen.sequence);
      seen_.push_back(seen);
      then = std::move(then_);
      then_ = nullptr;
    }
    auto* reactor = context->DefaultReactor();
    if (then != nullptr) {
      then();
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "ack lost"));
    } else {
      reactor->Finish(ToGrpcStatus(status));
    }
    return reactor;
  }

  void LoseNextAck(std::function<void()> then) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    then_ = std::move(then);
  }
  // `before` runs when the next push arrives, before it is served.
  void BeforeNextPush(std::function<void()> before) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    before_ = std::move(before);
  }
  std::vector<SeenPush> seen() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return seen_;
  }
  // The sequences applied, in order.
  std::vector<uint64_t> applied() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return applied_;
  }

 private:
  // "bucket moved" for `keys` at the epoch served of a bucket not held (a
  // push's `sequence` not applied before); OK otherwise (the shard decides).
  absl::Status Moved(uint64_t epoch, const std::string& keys, uint64_t sequence)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (epoch != epoch_ || std::find(applied_.begin(), applied_.end(),
                                     sequence) != applied_.end()) {
      return absl::OkStatus();
    }
    for (size_t i = 0; i + 8 <= keys.size(); i += 8) {
      uint64_t key = 0;
      std::memcpy(&key, keys.data() + i, 8);
      const uint32_t bucket = BucketOf(key, kBuckets);
      if (!held_[bucket]) {
        return absl::FailedPreconditionError(
            absl::StrCat(kBucketMovedMessage, ": key ", key, " is in bucket ",
                         bucket, ", which this ps handed to another"));
      }
    }
    return absl::OkStatus();
  }

  server::Shard* const shard_;
  absl::Mutex mu_;
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<char> held_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> applied_ ABSL_GUARDED_BY(mu_);
  std::vector<SeenPush> seen_ ABSL_GUARDED_BY(mu_);
  std::function<void()> then_ ABSL_GUARDED_BY(mu_);
  std::function<void()> before_ ABSL_GUARDED_BY(mu_);
};

// Keys of a bucket, ascending: the first `n` of 1, 2, 3, ... in `bucket`.
std::vector<uint64_t> KeysIn(uint32_t bucket, int n) {
  std::vector<uint64_t> keys;
  for (uint64_t k = 1; static_cast<int>(keys.size()) < n; ++k) {
    if (BucketOf(k, kBuckets) == bucket) keys.push_back(k);
  }
  return keys;
}

std::vector<uint64_t> Sorted(std::vector<uint64_t> a,
                             const std::vector<uint64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  std::sort(a.begin(), a.end());
  return a;
}

// A sparse_linear model (its bias on ps 0) over `num_shards` ps, buckets
// b % num_shards at placement epoch 1, a client connected at epoch 1.
class MovesTest : public ::testing::Test {
 protected:
  void StartCluster(int num_shards) {
    config_.model.type = ModelType::kSparseLinear;
    config_.model.task = Task::kBinary;
    config_.model.sparse_buckets = kBuckets;
    config_.optimizer.type = OptimizerType::kSgd;
    config_.optimizer.learning_rate = 1.0;
    config_.checkpoint.dir = "";
    config_.cluster.ps.assign(num_shards, "127.0.0.1:0");
    config_.cluster.workers = {"127.0.0.1:0"};
    config_.rpc.deadline_s = 5;
    config_.rpc.connect_timeout_s = 10;
    auto spec = ModelSpec::Create(config_.model);
    ASSERT_THAT(spec, IsOk());
    spec_ = std::make_unique<ModelSpec>(*std::move(spec));
    auto coordinator_server =
        StartServer("127.0.0.1:0", {&coordinator_service_}, "coordinator");
    ASSERT_THAT(coordinator_server, IsOk());
    coordinator_server_ = std::move(coordinator_server->server);
    coordinator_ = std::make_unique<membership::CoordinatorClient>(
        coordinator_server->address, config_.rpc, "test");
    for (int i = 0; i < num_shards; ++i) {
      auto shard = server::Shard::Create(config_, i, &ps_counters_);
      ASSERT_THAT(shard, IsOk());
      shards_.push_back(*std::move(shard));
      services_.push_back(std::make_unique<MovingPs>(shards_.back().get()));
      auto server = StartServer("127.0.0.1:0", {services_.back().get()},
                                "ps " + std::to_string(i));
      ASSERT_THAT(server, IsOk());
      addresses_.push_back(server->address);
      ever_held_.emplace_back(kBuckets, 0);
      ever_held_buckets_.emplace_back();
      ps_servers_.push_back(std::move(server->server));
    }
    Place(1, BucketOwners(kBuckets, num_shards));
    client_ =
        std::make_unique<GrpcPsClient>(*spec_, coordinator_.get(), config_.rpc,
                                       0, &worker_counters_, nullptr, &clock_);
    ASSERT_THAT(client_->Connect(), IsOk());
    ASSERT_EQ(client_->epoch(), 1u);
  }

  // Placement `epoch`: the shards first (they serve it), then the
  // coordinator. `ps_owners`: the shards' own idea of the buckets (the
  // coordinator's by default).
  void Place(uint64_t epoch, const std::vector<int>& owners,
             const std::vector<int>* ps_owners = nullptr) {
    proto::GetPlacementResponse placement;
    placement.set_epoch(epoch);
    for (size_t s = 0; s < shards_.size(); ++s) {
      proto::ShardInfo* info = placement.add_shards();
      info->set_index(static_cast<int>(s));
      info->set_address(addresses_[s]);
      std::vector<uint32_t> blocks;
      if (s == 0) {
        for (const BlockSpec& b : spec_->blocks()) blocks.push_back(b.id);
      }
      for (uint32_t id : blocks) info->add_block_ids(id);
      // The shard holds every bucket it ever held (rows are not copied
      // here); the service answers for the buckets moved away.
      std::vector<char> held(kBuckets, 0);
      for (uint32_t b = 0; b < kBuckets; ++b) {
        if (owners[b] == static_cast<int>(s)) info->add_buckets(b);
        const std::vector<int>& ps = ps_owners != nullptr ? *ps_owners : owners;
        held[b] = ps[b] == static_cast<int>(s);
        if (held[b] && !ever_held_[s][b]) {
          ever_held_[s][b] = 1;
          ever_held_buckets_[s].push_back(b);
        }
      }
      ASSERT_THAT(shards_[s]->Assign(epoch, blocks), IsOk());
      ASSERT_THAT(shards_[s]->AssignBuckets(ever_held_buckets_[s]), IsOk());
      services_[s]->Serve(epoch, std::move(held));
    }
    coordinator_service_.Set(std::move(placement));
  }

  // rows[s]: `keys[s]` with gradient Gradient(key).
  std::vector<std::vector<wire::SparseRef>> Rows(
      const std::vector<std::vector<uint64_t>>& keys) {
    grads_.assign(keys.size(), {});
    std::vector<std::vector<wire::SparseRef>> rows(keys.size());
    for (size_t s = 0; s < keys.size(); ++s) {
      for (uint64_t k : keys[s]) grads_[s].push_back(Gradient(k));
      if (keys[s].empty()) continue;
      wire::SparseRef ref;
      ref.keys = reinterpret_cast<const char*>(keys[s].data());
      ref.keys_size = keys[s].size() * 8;
      ref.values = reinterpret_cast<const char*>(grads_[s].data());
      ref.values_size = grads_[s].size() * 4;
      rows[s].push_back(ref);
    }
    return rows;
  }
  static float Gradient(uint64_t key) { return 0.25f * (1 + key % 7); }

  absl::Status PushRows(const std::vector<std::vector<uint64_t>>& keys) {
    std::vector<float> params(spec_->num_params());
    std::vector<uint64_t> versions;
    absl::Status pulled = client_->Pull(params.data(), &versions);
    if (!pulled.ok()) return pulled;
    const std::vector<float> bias_grad(spec_->num_params(), 1.0f);
    PushReport report;
    return client_->PushWithRows(bias_grad.data(), versions, Rows(keys),
                                 &report);
  }

  // The weight of each key as ps `s` holds it now (its own keys only).
  std::vector<float> WeightsOn(int s, const std::vector<uint64_t>& keys) {
    proto::PullRequest request;
    request.set_placement_epoch(client_->epoch());
    proto::SparseRows* wanted = request.add_sparse();
    wanted->set_table(0);
    wanted->set_keys(keys.data(), keys.size() * 8);
    proto::PullResponse response;
    EXPECT_THAT(shards_[s]->PullSparse(request, &response), IsOk());
    std::vector<float> out(keys.size());
    std::memcpy(out.data(), response.sparse(0).values().data(), out.size() * 4);
    return out;
  }
  int64_t RowsOn(int s) { return shards_[s]->sparse_stats()[0].rows; }

  void TearDown() override {
    client_.reset();
    for (auto& server : ps_servers_) server->Shutdown(DeadlineIn(1));
    if (coordinator_server_ != nullptr)
      coordinator_server_->Shutdown(DeadlineIn(1));
  }

  Config config_;
  std::unique_ptr<ModelSpec> spec_;
  FakeClock clock_;
  Counters ps_counters_, worker_counters_;
  FakeCoordinator coordinator_service_;
  std::unique_ptr<grpc::Server> coordinator_server_;
  std::unique_ptr<membership::CoordinatorClient> coordinator_;
  std::vector<std::unique_ptr<server::Shard>> shards_;
  std::vector<std::unique_ptr<MovingPs>> services_;
  std::vector<std::string> addresses_;
  std::vector<std::unique_ptr<grpc::Server>> ps_servers_;
  std::unique_ptr<GrpcPsClient> client_;
  std::vector<std::vector<float>> grads_;
  std::vector<std::vector<char>> ever_held_;
  std::vector<std::vector<uint32_t>> ever_held_buckets_;
};

// Bucket 2 moves from ps 0 to ps 1 (epoch 2) after the worker split a push
// by epoch 1: ps 0 keeps its other keys and the push's sequence; bucket 2's
// keys reach ps 1 as a request of their own, with ps 1's next sequence; each
// key applied once, on its new owner; no sequence gap on either ps.
TEST_F(MovesTest, APushAcrossAMoveIsAppliedOnceOnTheNewOwner) {
  StartCluster(2);
  const std::vector<uint64_t> moved = KeysIn(2, 3), stays = KeysIn(4, 2),
                              on_one = KeysIn(5, 2);
  std::vector<int> owners = BucketOwners(kBuckets, 2);
  owners[2] = 1;
  Place(2, owners);

  ASSERT_THAT(PushRows({Sorted(moved, stays), on_one}), IsOk());
  const uint64_t first = MakeSequence(0, 1);
  EXPECT_THAT(services_[0]->applied(), ElementsAre(first));
  EXPECT_THAT(services_[1]->applied(), ElementsAre(first, first + 1));
  // What ps 0 applied under its sequence held only the keys it still holds.
  for (const SeenPush& p : services_[0]->seen()) {
    if (p.applied) {
      EXPECT_EQ(p.keys, stays.size());
    }
  }
  EXPECT_EQ(RowsOn(0), 2);
  EXPECT_EQ(RowsOn(1), 5);
  for (const auto& [s, keys] : std::map<int, std::vector<uint64_t>>{
           {0, stays}, {1, Sorted(moved, on_one)}}) {
    const std::vector<float> weights = WeightsOn(s, keys);
    for (size_t i = 0; i < keys.size(); ++i) {
      EXPECT_FLOAT_EQ(weights[i], -Gradient(keys[i])) << "key " << keys[i];
    }
  }
  EXPECT_EQ(worker_counters_.Get("pushes_acked"), 1) << "one push";

  // The lanes go on from there: the next push, split right, leaves no hole.
  ASSERT_THAT(PushRows({stays, Sorted(moved, on_one)}), IsOk());
  EXPECT_THAT(services_[0]->applied(), ElementsAre(first, first + 1));
  EXPECT_THAT(services_[1]->applied(),
              ElementsAre(first, first + 1, first + 2));
  EXPECT_EQ(shards_[0]->push_holes(), 0u);
  EXPECT_EQ(shards_[1]->push_holes(), 0u);
}

// Every key ps 0 was sent moved away: ps 0 still gets the request (no rows,
// its dense bias) under its sequence.
TEST_F(MovesTest, APushWhoseKeysAllMovedStillReachesTheOldPs) {
  StartCluster(2);
  const std::vector<uint64_t> moved = KeysIn(2, 2);
  std::vector<int> owners = BucketOwners(kBuckets, 2);
  owners[2] = 1;
  Place(2, owners);
  ASSERT_THAT(PushRows({moved, {}}), IsOk());
  const uint64_t first = MakeSequence(0, 1);
  EXPECT_THAT(services_[0]->applied(), ElementsAre(first));
  EXPECT_THAT(services_[1]->applied(), ElementsAre(first));
  EXPECT_EQ(RowsOn(0), 0);
  EXPECT_EQ(RowsOn(1), 2);
  std::vector<float> params(spec_->num_params());
  std::vector<uint64_t> versions;
  ASSERT_THAT(client_->Pull(params.data(), &versions), IsOk());
  EXPECT_THAT(versions, ElementsAre(1u)) << "the bias, applied once on ps 0";
}

// ps 0 applied the push at epoch 1, then bucket 2 moved and the ack was
// lost: the retry at epoch 2 is a duplicate, answered as such and not split
// (nothing of it reaches ps 1).
TEST_F(MovesTest, ARetriedPushAppliedBeforeTheMoveIsADuplicateNotSplit) {
  StartCluster(2);
  const std::vector<uint64_t> moved = KeysIn(2, 3), stays = KeysIn(4, 2);
  std::vector<int> owners = BucketOwners(kBuckets, 2);
  owners[2] = 1;
  services_[0]->LoseNextAck([&] { Place(2, owners); });
  ASSERT_THAT(PushRows({Sorted(moved, stays), {}}), IsOk());
  EXPECT_EQ(ps_counters_.Get("duplicate_pushes"), 1);
  EXPECT_THAT(services_[0]->applied(), ElementsAre(MakeSequence(0, 1)));
  EXPECT_TRUE(services_[1]->seen().empty()) << "nothing split off";
  EXPECT_EQ(RowsOn(0), 5) << "applied before the move, on ps 0";
  EXPECT_EQ(RowsOn(1), 0);
}

// A pull split by epoch 1 after bucket 2 moved: the values come from each
// key's owner now, in the caller's order.
TEST_F(MovesTest, APullAcrossAMoveReturnsEveryKeyInTheCallersOrder) {
  StartCluster(2);
  const std::vector<uint64_t> moved = KeysIn(2, 3), stays = KeysIn(4, 2),
                              on_one = KeysIn(5, 2);
  std::vector<int> owners = BucketOwners(kBuckets, 2);
  owners[2] = 1;
  Place(2, owners);
  ASSERT_THAT(PushRows({Sorted(moved, stays), on_one}), IsOk());

  const std::vector<std::vector<uint64_t>> keys = {Sorted(moved, stays),
                                                   on_one};
  std::vector<std::vector<std::vector<float>>> values;
  ASSERT_THAT(client_->PullTables({{0, 1}}, keys, &values), IsOk());
  for (size_t s = 0; s < keys.size(); ++s) {
    ASSERT_EQ(values[0][s].size(), keys[s].size());
    for (size_t i = 0; i < keys[s].size(); ++i) {
      EXPECT_FLOAT_EQ(values[0][s][i], -Gradient(keys[s][i]))
          << "key " << keys[s][i];
    }
  }
}

// A bucket moved twice while its piece was on the way: ps 0 -> ps 1 (epoch
// 2), and ps 1 -> ps 2 (epoch 3) just before the piece reached ps 1; the
// piece is split again and lands on ps 2, once.
TEST_F(MovesTest, APieceMovedAgainOnTheWayIsSplitAgain) {
  StartCluster(3);
  const std::vector<uint64_t> moved = KeysIn(3, 2), stays = KeysIn(6, 2);
  std::vector<int> second = BucketOwners(kBuckets, 3);
  second[3] = 1;
  std::vector<int> third = second;
  third[3] = 2;
  Place(2, second);
  // ps 1's first request is the piece: the bucket moves on as it arrives.
  services_[1]->BeforeNextPush([&] { Place(3, third); });
  ASSERT_THAT(PushRows({Sorted(moved, stays), {}, {}}), IsOk());
  EXPECT_EQ(RowsOn(0), 2);
  EXPECT_EQ(RowsOn(1), 0);
  EXPECT_EQ(RowsOn(2), 2);
  const uint64_t first = MakeSequence(0, 1);
  EXPECT_THAT(services_[0]->applied(), ElementsAre(first));
  EXPECT_THAT(services_[1]->applied(), ElementsAre(first))
      << "the piece's sequence, sent again with no keys";
  EXPECT_THAT(services_[2]->applied(), ElementsAre(first));
  const std::vector<float> weights = WeightsOn(2, moved);
  for (size_t i = 0; i < moved.size(); ++i) {
    EXPECT_FLOAT_EQ(weights[i], -Gradient(moved[i]));
  }
  EXPECT_EQ(shards_[1]->push_holes(), 0u);
  EXPECT_EQ(shards_[2]->push_holes(), 0u);
}

// The coordinator still gives bucket 2 to ps 0, which calls it moved: a
// bounded number of tries, then an error that says so (no endless loop).
TEST_F(MovesTest, WhenCoordinatorAndPsDisagreeThePushFailsSayingSo) {
  StartCluster(2);
  const std::vector<uint64_t> moved = KeysIn(2, 2);
  const std::vector<int> owners = BucketOwners(kBuckets, 2);
  std::vector<int> ps_owners = owners;
  ps_owners[2] = 1;
  Place(2, owners, &ps_owners);
  EXPECT_THAT(PushRows({moved, {}}),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("the coordinator and the ps disagree")));
  std::vector<std::vector<std::vector<float>>> values;
  EXPECT_THAT(client_->PullTables({{0, 1}}, {moved, {}}, &values),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("the coordinator and the ps disagree")));
  EXPECT_EQ(RowsOn(0) + RowsOn(1), 0);
}

}  // namespace
}  // namespace downpour::worker
