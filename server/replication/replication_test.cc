// Replication end to end inside one process, over real gRPC on loopback: a
// primary Shard with its Replicator, and a standby's PsService holding a
// Replica.
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/sparse_keys.h"
#include "common/testing/poll.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "rpc/server_util.h"
#include "server/ps_service.h"
#include "server/replication/replica.h"
#include "server/replication/replicator.h"
#include "server/shard.h"

namespace downpour::server {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;

class ReplicationTest : public ::testing::Test {
 protected:
  static Config TestConfig() {
    Config config;
    config.model.layers = {6, 4, 3};
    config.model.block_size = 8;
    config.cluster.workers.assign(4, "127.0.0.1:0");  // worker ids 0 to 3
    // State to replicate besides values.
    config.optimizer.type = OptimizerType::kAdam;
    config.optimizer.learning_rate = 0.1;
    config.checkpoint.dir = "";
    return config;
  }

  void SetUp() override {
    auto shard = Shard::Create(config_, 0, &counters_);
    ASSERT_THAT(shard, IsOk());
    primary_ = *std::move(shard);
    for (uint32_t i = 0; i < NumBlocks(); ++i) ids_.push_back(i);
    ASSERT_THAT(primary_->Assign(1, ids_), IsOk());
    // The standby: a real server whose service keeps a replica.
    backup_service_.set_replica(&replica_);
    auto server = StartServer("127.0.0.1:0", {&backup_service_}, "standby 0");
    ASSERT_THAT(server, IsOk());
    backup_ = *std::move(server);
  }

  void TearDown() override {
    replicator_.reset();
    if (backup_.server != nullptr) backup_.server->Shutdown();
  }

  uint32_t NumBlocks() const {
    return static_cast<uint32_t>(
        ModelSpec::Create(config_.model)->blocks().size());
  }

  void StartReplicator(absl::Duration give_up = absl::Seconds(5)) {
    Replicator::Options options;
    options.shard_index = 0;
    options.self_address = "primary";
    options.give_up_after = give_up;
    options.rpc_timeout = absl::Seconds(2);
    options.counters = &counters_;
    options.on_replaced = [this] { replaced_ = true; };
    replicator_ = std::make_unique<Replicator>(primary_.get(), options);
  }

  // A push of `value` on every block by worker 3 with `sequence`.
  proto::PushRequest Push(uint64_t sequence, float value) const {
    proto::PushRequest request;
    request.set_placement_epoch(1);
    request.set_worker_id(3);
    request.set_sequence(sequence);
    auto spec = ModelSpec::Create(config_.model);
    for (uint32_t id : ids_) {
      proto::BlockData* data = request.add_blocks();
      data->set_block_id(id);
      std::vector<float> g(spec->blocks()[id].length, value);
      data->set_data(g.data(), g.size() * sizeof(float));
    }
    return request;
  }

  // Applies a push and waits for the replicator's verdict on it.
  absl::Status PushAndWait(uint64_t sequence, float value) {
    proto::PushResponse response;
    absl::Status applied = primary_->Push(Push(sequence, value), &response);
    if (!applied.ok()) return applied;
    absl::Notification done;
    absl::Status verdict;
    replicator_->WhenReplicated([&](const absl::Status& s) {
      verdict = s;
      done.Notify();
    });
    if (!done.WaitForNotificationWithTimeout(absl::Seconds(20))) {
      return absl::DeadlineExceededError("no verdict in 20 s");
    }
    return verdict;
  }

  // The replica taken over as shard 0 at placement epoch 2 (null, with a
  // failure, when it cannot be): every block at the primary's version and
  // checksum.
  std::unique_ptr<Shard> TakeOver(Counters* counters) {
    std::optional<Checkpoint> state = replica_.Take(0);
    EXPECT_TRUE(state.has_value());
    if (!state.has_value()) return nullptr;
    auto taken = Shard::CreateFrom(config_, 0, counters, *std::move(state));
    EXPECT_THAT(taken, IsOk());
    if (!taken.ok() || !(*taken)->Assign(2, ids_).ok()) return nullptr;
    const proto::ChecksumResponse want = primary_->Checksums();
    const proto::ChecksumResponse got = (*taken)->Checksums();
    EXPECT_EQ(got.blocks_size(), want.blocks_size());
    for (int i = 0; i < want.blocks_size() && i < got.blocks_size(); ++i) {
      EXPECT_EQ(got.blocks(i).version(), want.blocks(i).version()) << i;
      EXPECT_EQ(got.blocks(i).crc32c(), want.blocks(i).crc32c()) << i;
    }
    return *std::move(taken);
  }

  Config config_ = TestConfig();
  Counters counters_taken_;
  Counters counters_;
  std::unique_ptr<Shard> primary_;
  std::vector<uint32_t> ids_;
  Replica replica_{DenseOptimizer(config_)};
  PsService backup_service_;
  StartedServer backup_;
  std::unique_ptr<Replicator> replicator_;
  std::atomic<bool> replaced_{false};
};

TEST_F(ReplicationTest, AnAcknowledgedPushIsOnTheBackupAndSurvivesATakeOver) {
  StartReplicator();
  replicator_->SetBackup(backup_.address);
  for (uint64_t seq = 1; seq <= 20; ++seq) {
    ASSERT_THAT(PushAndWait(seq, 0.01f * seq), IsOk()) << seq;
    // Acknowledged means held by the backup: its generation covers it.
    EXPECT_GE(replica_.info().generation, primary_->generation() - 0) << seq;
  }
  EXPECT_TRUE(replicator_->in_sync());
  EXPECT_EQ(replica_.info().applied_total, primary_->applied_total());

  // The primary dies; the standby takes over from its replica.
  std::unique_ptr<Shard> taken = TakeOver(&counters_taken_);
  ASSERT_NE(taken, nullptr);
  const proto::ChecksumResponse want = primary_->Checksums();
  // The optimizer state came along: the next update is the same on both.
  proto::PushResponse a, b;
  proto::PushRequest next = Push(21, 0.5f);
  ASSERT_THAT(primary_->Push(next, &a), IsOk());
  next.set_placement_epoch(2);
  ASSERT_THAT(taken->Push(next, &b), IsOk());
  for (int i = 0; i < want.blocks_size(); ++i) {
    EXPECT_EQ(taken->Checksums().blocks(i).crc32c(),
              primary_->Checksums().blocks(i).crc32c())
        << "block " << i << " diverged after the take-over";
  }
  // So did the push windows: a retry of an acknowledged push is a duplicate.
  proto::PushRequest retry = Push(20, 0.2f);
  retry.set_placement_epoch(2);
  proto::PushResponse dup;
  ASSERT_THAT(taken->Push(retry, &dup), IsOk());
  EXPECT_TRUE(dup.duplicate());
}

// cluster.replication 3: a second standby beside the fixture's.
class TwoBackupsTest : public ReplicationTest {
 protected:
  void SetUp() override {
    ReplicationTest::SetUp();
    second_service_.set_replica(&second_);
    auto server = StartServer("127.0.0.1:0", {&second_service_}, "standby 1");
    ASSERT_THAT(server, IsOk());
    second_server_ = *std::move(server);
  }
  void TearDown() override {
    ReplicationTest::TearDown();
    if (second_server_.server != nullptr) second_server_.server->Shutdown();
  }

  Replica second_{DenseOptimizer(config_)};
  PsService second_service_;
  StartedServer second_server_;
};

TEST_F(TwoBackupsTest, AnAcknowledgedPushIsOnBothBackups) {
  StartReplicator();
  replicator_->SetBackups({backup_.address, second_server_.address});
  for (uint64_t seq = 1; seq <= 20; ++seq) {
    ASSERT_THAT(PushAndWait(seq, 0.01f * seq), IsOk()) << seq;
    // Acknowledged means held by both: each one's generation covers it.
    EXPECT_GE(replica_.info().generation, primary_->generation()) << seq;
    EXPECT_GE(second_.info().generation, primary_->generation()) << seq;
  }
  EXPECT_TRUE(replicator_->in_sync());
  EXPECT_EQ(replicator_->backups_in_sync(), 2);
  EXPECT_EQ(second_.info().applied_total, primary_->applied_total());
  EXPECT_EQ(replica_.info().applied_total, primary_->applied_total());
}

TEST_F(TwoBackupsTest, ADeadSecondBackupHoldsPushesThenTheFirstAcknowledges) {
  StartReplicator(/*give_up=*/absl::Milliseconds(300));
  second_server_.server->Shutdown();  // nothing listens there
  replicator_->SetBackups({backup_.address, second_server_.address});
  const absl::Time start = absl::Now();
  ASSERT_THAT(PushAndWait(1, 0.1f), IsOk());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300))
      << "acknowledged before the second backup counted as dead";
  ASSERT_THAT(PushAndWait(2, 0.2f), IsOk());
  // The live backup still holds every acknowledged push.
  EXPECT_GE(replica_.info().generation, primary_->generation());
  EXPECT_EQ(replica_.info().applied_total, primary_->applied_total());
  EXPECT_FALSE(replicator_->in_sync());
  EXPECT_EQ(replicator_->backups_in_sync(), 1);
  EXPECT_GE(counters_.Get("replication_degraded"), 1);
}

TEST_F(TwoBackupsTest, EitherBackupTakingOverFencesThePrimary) {
  StartReplicator();
  replicator_->SetBackups({backup_.address, second_server_.address});
  ASSERT_THAT(PushAndWait(1, 0.1f), IsOk());
  ASSERT_TRUE(second_.Take(0).has_value());  // the second one took over
  EXPECT_THAT(PushAndWait(2, 0.1f),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("replaced")));
  EXPECT_TRUE(replaced_);
}

TEST_F(TwoBackupsTest, ABackupNamedLaterIsWaitedForWithAFullCopy) {
  StartReplicator();
  replicator_->SetBackup(backup_.address);
  ASSERT_THAT(PushAndWait(1, 0.1f), IsOk());
  EXPECT_FALSE(second_.info().held);
  replicator_->SetBackups({backup_.address, second_server_.address});
  ASSERT_THAT(PushAndWait(2, 0.2f), IsOk());
  EXPECT_TRUE(second_.info().held);
  EXPECT_EQ(second_.info().applied_total, primary_->applied_total());
  EXPECT_EQ(replica_.info().applied_total, primary_->applied_total());
  // Dropping one releases nothing it held and keeps the other streaming.
  replicator_->SetBackups({second_server_.address});
  ASSERT_THAT(PushAndWait(3, 0.3f), IsOk());
  EXPECT_EQ(second_.info().applied_total, primary_->applied_total());
}

TEST_F(ReplicationTest, AReplacedPrimaryCanNoLongerAcknowledge) {
  StartReplicator();
  replicator_->SetBackup(backup_.address);
  ASSERT_THAT(PushAndWait(1, 0.1f), IsOk());
  ASSERT_TRUE(replica_.Take(0).has_value());  // the standby took over
  EXPECT_THAT(PushAndWait(2, 0.1f),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("replaced")));
  EXPECT_TRUE(replaced_);
  EXPECT_THAT(PushAndWait(3, 0.1f), StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(ReplicationTest, ADeadBackupHoldsPushesForAWhileThenLetsThemGo) {
  StartReplicator(/*give_up=*/absl::Milliseconds(300));
  // Nothing listens there.
  backup_.server->Shutdown();
  replicator_->SetBackup(backup_.address);
  const absl::Time start = absl::Now();
  ASSERT_THAT(PushAndWait(1, 0.1f), IsOk());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300))
      << "acknowledged before the backup counted as dead";
  EXPECT_FALSE(replicator_->in_sync());
  ASSERT_THAT(PushAndWait(2, 0.1f), IsOk());
  EXPECT_GE(counters_.Get("replication_degraded"), 1);
}

TEST_F(ReplicationTest, NoBackupNoWait) {
  StartReplicator();
  ASSERT_THAT(PushAndWait(1, 0.1f), IsOk());
  EXPECT_FALSE(replicator_->in_sync());
  EXPECT_EQ(replica_.info().held, false);
}

TEST_F(ReplicationTest, ANewBackupGetsAFullCopy) {
  StartReplicator();
  replicator_->SetBackup(backup_.address);
  ASSERT_THAT(PushAndWait(1, 0.1f), IsOk());
  replica_.Drop();  // e.g. the standby restarted
  replicator_->SetBackup("");
  replicator_->SetBackup(backup_.address);
  ASSERT_THAT(PushAndWait(2, 0.1f), IsOk());
  EXPECT_TRUE(replica_.info().held);
  EXPECT_EQ(replica_.info().applied_total, primary_->applied_total());
}

// Replication by gradient (Adam): after the full copy each cut carries the
// push's gradients, 1x their bytes instead of 3x (values and two state
// slots), and the backup's replayed copy is the primary's, bit for bit.
TEST_F(ReplicationTest, AdamCutsCarryTheGradientsNotTheBlocks) {
  StartReplicator();
  replicator_->SetBackup(backup_.address);
  ASSERT_THAT(PushAndWait(1, 0.01f), IsOk());
  const double bytes_before = counters_.Get("replicated_bytes");
  const double updates_before = counters_.Get("replicated_updates");
  const ModelSpec spec = *ModelSpec::Create(config_.model);
  int64_t floats = 0;
  for (const BlockSpec& b : spec.blocks()) floats += b.length;
  for (uint64_t seq = 2; seq <= 21; ++seq) {
    ASSERT_THAT(PushAndWait(seq, 0.01f * seq), IsOk()) << seq;
  }
  EXPECT_EQ(counters_.Get("replicated_updates") - updates_before,
            20.0 * NumBlocks());
  EXPECT_EQ(counters_.Get("replicated_bytes") - bytes_before,
            20.0 * floats * sizeof(float));
  EXPECT_EQ(counters_.Get("replication_mismatches"), 0);
  EXPECT_NE(TakeOver(&counters_taken_), nullptr);
}

// A standby whose optimizer section differs (here its learning rate) replays
// the updates into other floats: the next cut's checksums catch it, the
// primary counts the mismatch and sends a full copy, and what the backup
// then holds is the primary's again.
// A standby whose optimizer section differs from its primary's in a number
// refuses the full cut, naming the key, before it replays anything; one
// whose settings agree takes it; a cut without settings (an older primary)
// is compared by type alone.
TEST_F(ReplicationTest, AStandbyWithAnotherLearningRateRefusesTheFullCut) {
  Config other = config_;
  other.optimizer.learning_rate = 0.2;
  proto::ReplicateRequest full;
  full.set_full(true);
  full.set_optimizer("adam");
  full.set_generation(1);
  full.set_optimizer_settings(OptimizerSettingsText(DenseOptimizer(config_)));
  Replica wrong(DenseOptimizer(other));
  EXPECT_THAT(
      wrong.Apply(full),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               HasSubstr("optimizer.learning_rate is 0.10000000000000001 "
                         "on the primary and 0.20000000000000001 on "
                         "this standby")));
  EXPECT_FALSE(wrong.info().held);
  Replica right(DenseOptimizer(config_));
  EXPECT_THAT(right.Apply(full), IsOk());
  full.clear_optimizer_settings();
  EXPECT_THAT(wrong.Apply(full), IsOk());
  // The primary's cuts carry its settings.
  StartReplicator();
  replicator_->SetBackup(backup_.address);
  ASSERT_THAT(PushAndWait(1, 0.01f), IsOk());
  EXPECT_TRUE(replica_.info().held);
  EXPECT_EQ(primary_->CutForReplica(/*full=*/true, false).optimizer_settings,
            OptimizerSettingsText(DenseOptimizer(config_)));
}

TEST_F(ReplicationTest,
       AStandbyThatReplaysDifferentlyIsCaughtAndGetsAFullCopy) {
  Config other = config_;
  other.optimizer.learning_rate = 0.2;
  // Expecting the primary's settings while replaying with its own: a copy
  // that differs without a setting that says so, for the checksums to catch.
  Replica wrong(DenseOptimizer(other),
                OptimizerSettingsText(DenseOptimizer(config_)));
  PsService service;
  service.set_replica(&wrong);
  auto server = StartServer("127.0.0.1:0", {&service}, "standby 1");
  ASSERT_THAT(server, IsOk());
  StartReplicator();
  replicator_->SetBackup(server->address);
  uint64_t seq = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (counters_.Get("replication_mismatches") < 1 &&
         absl::Now() < deadline) {
    ++seq;
    ASSERT_THAT(PushAndWait(seq, 0.01f), IsOk()) << seq;
  }
  ASSERT_GE(counters_.Get("replication_mismatches"), 1)
      << seq << " pushes replicated without a check catching the difference";
  // A copy found wrong takes no partial cut: only the full one.
  {
    Replica caught(DenseOptimizer(other));
    proto::ReplicateRequest full;
    full.set_full(true);
    full.set_optimizer("adam");
    full.set_generation(1);
    proto::ReplicaBlock* b = full.add_blocks();
    b->set_id(0);
    b->set_version(1);
    b->set_values(std::string(8, '\0'));
    b->set_state(std::string(16, '\0'));
    ASSERT_THAT(caught.Apply(full), IsOk());
    proto::ReplicateRequest checked;
    checked.set_generation(2);
    proto::ReplicaCheck* check = checked.add_checks();
    check->set_block(0);
    check->set_version(1);
    check->set_crc32c(12345);
    EXPECT_THAT(caught.Apply(checked),
                StatusIs(absl::StatusCode::kDataLoss,
                         HasSubstr("block 0 differs from the primary's")));
    EXPECT_FALSE(caught.info().held);
    checked.clear_checks();
    EXPECT_THAT(caught.Apply(checked),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         HasSubstr("send a full cut")));
    EXPECT_FALSE(caught.Take(0).has_value());
  }
  std::optional<Checkpoint> state = wrong.Take(0);
  ASSERT_TRUE(state.has_value()) << "the full copy came";
  std::map<uint32_t, std::vector<float>> held;
  for (const BlockStore::BlockSnapshot& b : state->blocks)
    held[b.id] = b.values;
  proto::PullRequest pull;
  pull.set_placement_epoch(1);
  for (uint32_t id : ids_) pull.add_block_ids(id);
  proto::PullResponse response;
  ASSERT_THAT(primary_->Pull(pull, &response), IsOk());
  for (const proto::BlockData& b : response.blocks()) {
    std::vector<float> values(b.data().size() / sizeof(float));
    std::memcpy(values.data(), b.data().data(), b.data().size());
    EXPECT_EQ(held[b.block_id()], values) << "block " << b.block_id();
  }
  replicator_.reset();
  server->server->Shutdown();
}

// Sparse rows replicate as blocks do: a push is acknowledged once the
// backup holds its rows (values and optimizer state, whole), cuts larger
// than a request come in pieces, and a take-over continues bit-identically.
TEST(SparseReplicationTest, AcknowledgedRowsAreOnTheBackupWithTheirState) {
  Config config;
  config.model.type = ModelType::kSparseLinear;
  config.model.task = Task::kBinary;
  config.model.sparse_buckets = 16;
  config.cluster.workers.assign(1, "127.0.0.1:0");
  config.cluster.ps.assign(1, "127.0.0.1:0");
  config.cluster.replication = 2;
  config.optimizer.type = OptimizerType::kFtrl;
  config.optimizer.learning_rate = 0.3;
  config.optimizer.l1 = 0.05;
  config.checkpoint.dir = "";
  Counters counters;
  auto made = Shard::Create(config, 0, &counters);
  ASSERT_THAT(made, IsOk());
  std::unique_ptr<Shard> primary = *std::move(made);
  ASSERT_THAT(primary->Assign(1, {0}), IsOk());
  Replica replica(DenseOptimizer(config));
  PsService service;
  service.set_replica(&replica);
  auto server = StartServer("127.0.0.1:0", {&service}, "standby 0");
  ASSERT_THAT(server, IsOk());
  Replicator::Options options;
  options.self_address = "primary";
  options.rpc_timeout = absl::Seconds(5);
  options.counters = &counters;
  // 40 rows a request at most: every cut below comes in several.
  options.max_request_bytes = 40 * (8 + 3 * 4 + 4);
  auto replicator = std::make_unique<Replicator>(primary.get(), options);
  replicator->SetBackup(server->address);

  std::mt19937_64 rng(3);
  std::set<uint64_t> seen;
  uint64_t row_updates = 0;
  auto push = [&](Shard* shard, uint64_t epoch, uint64_t sequence,
                  const std::vector<uint64_t>& keys) {
    std::vector<float> grads(keys.size());
    for (size_t i = 0; i < keys.size(); ++i)
      grads[i] = (keys[i] % 7) * 0.1f - 0.3f;
    proto::PushRequest request;
    request.set_placement_epoch(epoch);
    request.set_worker_id(0);
    request.set_sequence(sequence);
    proto::SparseRows* rows = request.add_sparse();
    rows->set_table(0);
    rows->set_keys(keys.data(), keys.size() * sizeof(uint64_t));
    rows->set_values(grads.data(), grads.size() * sizeof(float));
    proto::PushResponse response;
    return shard->Push(request, &response);
  };
  for (uint64_t seq = 1; seq <= 30; ++seq) {
    std::set<uint64_t> keys;
    while (keys.size() < 100) keys.insert(1 + rng() % 3000);
    std::vector<uint64_t> sorted(keys.begin(), keys.end());
    ASSERT_THAT(push(primary.get(), 1, seq, sorted), IsOk());
    seen.insert(sorted.begin(), sorted.end());
    row_updates += sorted.size();
    absl::Notification done;
    absl::Status verdict;
    replicator->WhenReplicated([&](const absl::Status& s) {
      verdict = s;
      done.Notify();
    });
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(20)));
    ASSERT_THAT(verdict, IsOk());
    // Acknowledged means held: the backup counts every row update.
    ASSERT_EQ(replica.info().applied_total, row_updates) << "push " << seq;
  }
  EXPECT_EQ(replica.info().sparse_rows, static_cast<int64_t>(seen.size()));
  EXPECT_GT(counters.Get("replicated_cuts"), 30 - 1);
  replicator.reset();

  std::optional<Checkpoint> state = replica.Take(0);
  ASSERT_TRUE(state.has_value());
  Counters taken_counters;
  auto taken = Shard::CreateFrom(config, 0, &taken_counters, *std::move(state));
  ASSERT_THAT(taken, IsOk());
  ASSERT_THAT((*taken)->Assign(2, {0}), IsOk());
  EXPECT_EQ((*taken)->applied_total(), primary->applied_total());
  const std::vector<uint64_t> all(seen.begin(), seen.end());
  auto read = [&](Shard* shard, uint64_t epoch) {
    proto::PullRequest request;
    request.set_placement_epoch(epoch);
    request.set_worker_id(0);
    proto::SparseRows* rows = request.add_sparse();
    rows->set_table(0);
    rows->set_keys(all.data(), all.size() * sizeof(uint64_t));
    proto::PullResponse response;
    EXPECT_THAT(shard->PullSparse(request, &response), IsOk());
    return response.sparse(0).values() + response.sparse(0).versions();
  };
  EXPECT_EQ(read(taken->get(), 2), read(primary.get(), 1));
  // FTRL's z and n came along: one more push gives the same rows on both.
  ASSERT_THAT(push(primary.get(), 1, 31, all), IsOk());
  ASSERT_THAT(push(taken->get(), 2, 31, all), IsOk());
  EXPECT_EQ(read(taken->get(), 2), read(primary.get(), 1));
  server->server->Shutdown();
}

// Eviction on a replicated shard: the keys the primary evicts travel to the
// backup as tombstones with the next cut (in pieces of their own when a cut
// is split), so a take-over after evictions leaves the new primary with
// exactly the primary's rows and row updates, and both go on evicting alike.
TEST(SparseReplicationTest, AnEvictionReachesTheBackupAndSurvivesATakeOver) {
  Config config;
  config.model.type = ModelType::kSparseLinear;
  config.model.task = Task::kBinary;
  config.model.sparse_buckets = 16;
  config.cluster.workers.assign(1, "127.0.0.1:0");
  config.cluster.ps.assign(1, "127.0.0.1:0");
  config.cluster.replication = 2;
  config.optimizer.type = OptimizerType::kFtrl;
  config.optimizer.learning_rate = 0.3;
  config.optimizer.l1 = 0.05;
  config.eviction.max_rows = 250;
  config.checkpoint.dir = "";  // eviction runs at checkpoint time all the same
  Counters counters;
  auto made = Shard::Create(config, 0, &counters);
  ASSERT_THAT(made, IsOk());
  std::unique_ptr<Shard> primary = *std::move(made);
  ASSERT_THAT(primary->Assign(1, {0}), IsOk());
  Replica replica(DenseOptimizer(config));
  PsService service;
  service.set_replica(&replica);
  auto server = StartServer("127.0.0.1:0", {&service}, "standby 0");
  ASSERT_THAT(server, IsOk());
  Replicator::Options options;
  options.self_address = "primary";
  options.rpc_timeout = absl::Seconds(5);
  options.counters = &counters;
  // 30 rows or 60 tombstones a request: cuts come in several.
  options.max_request_bytes = 30 * (8 + 3 * 4 + 4 + 8);
  auto replicator = std::make_unique<Replicator>(primary.get(), options);
  replicator->SetBackup(server->address);
  auto replicated = [&] {
    absl::Notification done;
    absl::Status verdict;
    replicator->WhenReplicated([&](const absl::Status& s) {
      verdict = s;
      done.Notify();
    });
    if (!done.WaitForNotificationWithTimeout(absl::Seconds(20))) {
      return absl::DeadlineExceededError("no verdict in 20 s");
    }
    return verdict;
  };
  auto push = [](Shard* shard, uint64_t epoch, uint64_t sequence,
                 const std::vector<uint64_t>& keys) {
    std::vector<float> grads(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      grads[i] = (keys[i] % 7) * 0.1f - 0.3f;
    }
    proto::PushRequest request;
    request.set_placement_epoch(epoch);
    request.set_worker_id(0);
    request.set_sequence(sequence);
    proto::SparseRows* rows = request.add_sparse();
    rows->set_table(0);
    rows->set_keys(keys.data(), keys.size() * sizeof(uint64_t));
    rows->set_values(grads.data(), grads.size() * sizeof(float));
    proto::PushResponse response;
    return shard->Push(request, &response);
  };
  std::mt19937_64 rng(5);
  std::set<uint64_t> seen;
  uint64_t sequence = 0;
  for (int round = 0; round < 6; ++round) {
    for (int i = 0; i < 4; ++i) {
      std::set<uint64_t> keys;
      while (keys.size() < 80) keys.insert(1 + rng() % 2000);
      const std::vector<uint64_t> sorted(keys.begin(), keys.end());
      ASSERT_THAT(push(primary.get(), 1, ++sequence, sorted), IsOk());
      seen.insert(sorted.begin(), sorted.end());
      ASSERT_THAT(replicated(), IsOk());
    }
    ASSERT_THAT(primary->WriteCheckpoint(), IsOk());  // evicts
    EXPECT_EQ(primary->sparse_stats()[0].rows, 250);
    ASSERT_THAT(replicated(), IsOk()) << "the eviction's cut";
    EXPECT_EQ(replica.info().sparse_rows, 250) << "round " << round;
    EXPECT_EQ(replica.info().applied_total, primary->applied_total());
  }
  EXPECT_GT(counters.Get("sparse_evicted_rows"), 1000);
  replicator.reset();

  std::optional<Checkpoint> state = replica.Take(0);
  ASSERT_TRUE(state.has_value());
  Counters taken_counters;
  auto taken = Shard::CreateFrom(config, 0, &taken_counters, *std::move(state));
  ASSERT_THAT(taken, IsOk());
  ASSERT_THAT((*taken)->Assign(2, {0}), IsOk());
  EXPECT_EQ((*taken)->applied_total(), primary->applied_total());
  const std::vector<uint64_t> all(seen.begin(), seen.end());
  // Which keys have a row, their values and versions.
  auto read = [&](Shard* shard, uint64_t epoch) {
    proto::LookupRequest lookup;
    lookup.set_table(0);
    lookup.set_keys(all.data(), all.size() * sizeof(uint64_t));
    proto::LookupResponse found;
    EXPECT_THAT(shard->Lookup(lookup, &found), IsOk());
    proto::PullRequest request;
    request.set_placement_epoch(epoch);
    request.set_worker_id(0);
    proto::SparseRows* rows = request.add_sparse();
    rows->set_table(0);
    rows->set_keys(all.data(), all.size() * sizeof(uint64_t));
    proto::PullResponse response;
    EXPECT_THAT(shard->PullSparse(request, &response), IsOk());
    return found.missing() + response.sparse(0).values() +
           response.sparse(0).versions();
  };
  EXPECT_EQ(read(taken->get(), 2), read(primary.get(), 1));
  // Both go on alike: the same pushes, then each evicts the same rows (the
  // rows' clocks came along).
  for (int i = 0; i < 3; ++i) {
    std::set<uint64_t> keys;
    while (keys.size() < 80) keys.insert(1 + rng() % 2000);
    const std::vector<uint64_t> sorted(keys.begin(), keys.end());
    ++sequence;
    ASSERT_THAT(push(primary.get(), 1, sequence, sorted), IsOk());
    ASSERT_THAT(push(taken->get(), 2, sequence, sorted), IsOk());
  }
  ASSERT_THAT(primary->WriteCheckpoint(), IsOk());
  ASSERT_THAT((*taken)->WriteCheckpoint(), IsOk());
  EXPECT_EQ(read(taken->get(), 2), read(primary.get(), 1));
  EXPECT_EQ((*taken)->applied_total(), primary->applied_total());
  server->server->Shutdown();
}

TEST(ReplicaTest, RefusesSparseRowsThatDoNotFit) {
  Replica replica;
  proto::ReplicateRequest full;
  full.set_shard_index(0);
  full.set_full(true);
  full.set_optimizer("sgd");
  full.set_generation(1);
  proto::ReplicaSparseRows* rows = full.add_sparse();
  rows->set_table(0);
  rows->set_optimizer("ftrl");
  rows->set_dim(1);
  rows->set_state_slots(2);
  const uint64_t keys[2] = {5, 9};
  const float data[6] = {0.5f, 1, 2, std::nanf(""), 1, 2};
  const uint32_t versions[2] = {1, 1};
  rows->set_keys(keys, sizeof(keys));
  rows->set_data(data, sizeof(data));
  rows->set_versions(versions, sizeof(versions));
  EXPECT_THAT(replica.Apply(full), StatusIs(absl::StatusCode::kInvalidArgument,
                                            HasSubstr("key 9 holds NaN")));
  EXPECT_FALSE(replica.info().held);
  rows->set_data(data, 5 * sizeof(float));
  EXPECT_THAT(replica.Apply(full), StatusIs(absl::StatusCode::kInvalidArgument,
                                            HasSubstr("2 keys but 5 floats")));
  rows->set_optimizer("momentum");
  EXPECT_THAT(replica.Apply(full),
              StatusIs(absl::StatusCode::kInvalidArgument));
  rows->set_optimizer("ftrl");
  rows->set_keys(std::string(7, '\0'));
  EXPECT_THAT(replica.Apply(full), StatusIs(absl::StatusCode::kInvalidArgument,
                                            HasSubstr("not whole values")));
  EXPECT_FALSE(replica.info().held);
}

TEST(ReplicaTest, RefusesPartialCutsOfAShardNotHeldAndBadBytes) {
  Replica replica;
  proto::ReplicateRequest partial;
  partial.set_shard_index(2);
  partial.set_generation(5);
  EXPECT_THAT(replica.Apply(partial),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("send a full cut")));
  proto::ReplicateRequest bad;
  bad.set_full(true);
  bad.set_optimizer("sgd");
  bad.set_generation(1);
  bad.add_blocks()->set_values("abc");
  EXPECT_THAT(replica.Apply(bad), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_FALSE(replica.info().held);
  EXPECT_FALSE(replica.Take(2).has_value()) << "nothing held";
}

// Found by tools/fuzz/ps_fuzzer: a cut with Inf optimizer state was held,
// and a standby that took it over served a block whose Adam state was Inf.
TEST(ReplicaTest, RefusesNonFiniteValuesOrState) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const bool in_state : {false, true}) {
    for (const float bad : {inf, -inf, nan}) {
      Replica replica;
      proto::ReplicateRequest cut;
      cut.set_full(true);
      cut.set_generation(1);
      proto::ReplicaBlock* b = cut.add_blocks();
      b->set_id(3);
      const float values[2] = {1.0f, in_state ? 1.0f : bad};
      const float state[4] = {0.0f, in_state ? bad : 0.0f, 0.0f, 0.0f};
      b->set_values(values, sizeof(values));
      b->set_state(state, sizeof(state));
      EXPECT_THAT(replica.Apply(cut),
                  StatusIs(absl::StatusCode::kInvalidArgument,
                           HasSubstr(absl::StrCat(
                               "block 3 ", in_state ? "state[1]" : "values[1]",
                               " is ", std::isnan(bad) ? "NaN" : "Inf"))));
      EXPECT_FALSE(replica.info().held);
      EXPECT_FALSE(replica.Take(0).has_value());
    }
  }
}

TEST(ReplicaTest, ACutInSeveralRequestsCountsOnlyWhenComplete) {
  Replica replica;
  proto::ReplicateRequest first;
  first.set_shard_index(1);
  first.set_full(true);
  first.set_optimizer("sgd");
  proto::ReplicaBlock* b = first.add_blocks();
  b->set_id(0);
  b->set_version(3);
  b->set_values(std::string(8, '\0'));
  ASSERT_THAT(replica.Apply(first), IsOk());
  EXPECT_FALSE(replica.info().held) << "the cut is not complete";
  proto::ReplicateRequest last;
  last.set_shard_index(1);
  last.set_generation(9);
  proto::ReplicaBlock* c = last.add_blocks();
  c->set_id(1);
  c->set_version(4);
  c->set_values(std::string(4, '\0'));
  proto::ReplicaSequence* s = last.add_sequences();
  s->set_worker_id(2);
  s->set_base(77);
  ASSERT_THAT(replica.Apply(last), IsOk());
  EXPECT_TRUE(replica.info().held);
  EXPECT_EQ(replica.info().applied_total, 7u);
  std::optional<Checkpoint> taken = replica.Take(1);
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->blocks.size(), 2u);
  EXPECT_EQ(taken->sequences.at(2).base(), 77u);
  EXPECT_THAT(replica.Apply(last), StatusIs(absl::StatusCode::kAborted));
}

}  // namespace
}  // namespace downpour::server
