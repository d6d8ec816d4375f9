// Shard with a sparse model (model.type sparse_linear): sparse pushes and
// pulls through the same admission, epochs and exactly-once windows as
// blocks.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/push_sequence.h"
#include "common/sparse_keys.h"
#include "common/status_macros.h"
#include "common/testing/poll.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "server/bucket_transfer.h"
#include "server/checkpoint.h"
#include "server/shard.h"

namespace downpour::server {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

class ShardSparseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.model.type = ModelType::kSparseLinear;
    config_.model.task = Task::kBinary;
    config_.model.sparse_buckets = 64;
    config_.cluster.workers.assign(2, "127.0.0.1:0");
    config_.cluster.ps.assign(2, "127.0.0.1:0");
    config_.optimizer.type = OptimizerType::kFtrl;
    config_.optimizer.learning_rate = 0.5;
    config_.optimizer.l1 = 0.0;
  }

  std::unique_ptr<Shard> MakeShard(int index) {
    auto shard = Shard::Create(config_, index, &counters_);
    EXPECT_THAT(shard, IsOk());
    if (!shard.ok()) return nullptr;
    EXPECT_THAT((*shard)->Assign(1, index == 0 ? std::vector<uint32_t>{0}
                                               : std::vector<uint32_t>{}),
                IsOk());
    return *std::move(shard);
  }

  // n keys that ps `index` serves, ascending.
  std::vector<uint64_t> KeysOf(int index, int n) const {
    std::vector<uint64_t> keys;
    for (uint64_t k = 1; static_cast<int>(keys.size()) < n; ++k) {
      if (ShardOfKey(k, 64, 2) == index) keys.push_back(k);
    }
    return keys;
  }

  static proto::PushRequest SparsePush(const std::vector<uint64_t>& keys,
                                       const std::vector<float>& grads,
                                       uint64_t sequence, int worker = 1) {
    proto::PushRequest request;
    request.set_placement_epoch(1);
    request.set_worker_id(worker);
    request.set_sequence(sequence);
    proto::SparseRows* rows = request.add_sparse();
    rows->set_table(0);
    rows->set_keys(keys.data(), keys.size() * sizeof(uint64_t));
    rows->set_values(grads.data(), grads.size() * sizeof(float));
    return request;
  }

  static proto::PullRequest SparsePull(const std::vector<uint64_t>& keys) {
    proto::PullRequest request;
    request.set_placement_epoch(1);
    request.set_worker_id(0);
    proto::SparseRows* rows = request.add_sparse();
    rows->set_table(0);
    rows->set_keys(keys.data(), keys.size() * sizeof(uint64_t));
    return request;
  }

  static std::vector<float> Values(const proto::PullResponse& response) {
    const std::string& bytes = response.sparse(0).values();
    std::vector<float> values(bytes.size() / sizeof(float));
    std::memcpy(values.data(), bytes.data(), bytes.size());
    return values;
  }

  Config config_;
  Counters counters_;
};

TEST_F(ShardSparseTest, APushCreatesRowsAPullReadsThemAndCreatesNone) {
  auto shard = MakeShard(0);
  const std::vector<uint64_t> keys = KeysOf(0, 5);
  proto::PullResponse pulled;
  ASSERT_THAT(shard->PullSparse(SparsePull(keys), &pulled), IsOk());
  EXPECT_EQ(Values(pulled), std::vector<float>(5, 0.0f));
  EXPECT_EQ(shard->sparse_stats()[0].rows, 0) << "a pull creates no row";

  proto::PushResponse response;
  ASSERT_THAT(shard->Push(SparsePush(keys, {1, 1, 1, 1, 1}, 1), &response),
              IsOk());
  EXPECT_EQ(shard->sparse_stats()[0].rows, 5);
  EXPECT_EQ(counters_.Get("sparse_rows_created"), 5);
  EXPECT_EQ(counters_.Get("sparse_push_keys"), 5);
  ASSERT_THAT(shard->PullSparse(SparsePull(keys), &pulled), IsOk());
  // FTRL, alpha 0.5, beta 1, g = 1 once: w = -1 / ((1 + 1) / 0.5) = -0.25.
  for (float w : Values(pulled)) EXPECT_FLOAT_EQ(w, -0.25f);
  const std::string& versions = pulled.sparse(0).versions();
  ASSERT_EQ(versions.size(), 5 * sizeof(uint32_t));
  uint32_t first = 0;
  std::memcpy(&first, versions.data(), sizeof(first));
  EXPECT_EQ(first, 1u);
}

// optimizer.weight_decay reaches the sparse rows of an sgd/adagrad/adam model
// (it once reached only the dense bias) and no longer the bias: sgd, lr 0.5,
// wd 0.2, g = 1 twice: a row goes w1 = -0.5, w2 = -0.5 - 0.5 (1 + 0.2 * -0.5)
// = -0.95 (-1.0 without decay); the bias -0.5, -1.0.
TEST_F(ShardSparseTest, WeightDecayReachesSparseRowsAndNotTheBias) {
  config_.optimizer.type = OptimizerType::kSgd;
  config_.optimizer.weight_decay = 0.2;
  auto shard = MakeShard(0);
  const std::vector<uint64_t> keys = KeysOf(0, 2);
  proto::PushResponse response;
  for (uint32_t n : {1u, 2u}) {
    proto::PushRequest push = SparsePush(keys, {1, 1}, MakeSequence(1, n));
    proto::BlockData* bias = push.add_blocks();
    bias->set_block_id(0);
    const float one = 1.0f;
    bias->set_data(&one, sizeof(one));
    ASSERT_THAT(shard->Push(push, &response), IsOk());
  }
  proto::PullResponse pulled;
  ASSERT_THAT(shard->PullSparse(SparsePull(keys), &pulled), IsOk());
  for (float w : Values(pulled)) EXPECT_FLOAT_EQ(w, -0.95f);
  proto::PullRequest pull;
  pull.set_placement_epoch(1);
  pull.add_block_ids(0);
  proto::PullResponse dense;
  ASSERT_THAT(shard->Pull(pull, &dense), IsOk());
  float bias = 0;
  ASSERT_EQ(dense.blocks(0).data().size(), sizeof(bias));
  std::memcpy(&bias, dense.blocks(0).data().data(), sizeof(bias));
  EXPECT_FLOAT_EQ(bias, -1.0f);
}

TEST_F(ShardSparseTest, ARetriedSparsePushIsAppliedOnce) {
  auto shard = MakeShard(0);
  const std::vector<uint64_t> keys = KeysOf(0, 3);
  proto::PushResponse first, retry;
  ASSERT_THAT(
      shard->Push(SparsePush(keys, {1, 2, 3}, MakeSequence(1, 1)), &first),
      IsOk());
  ASSERT_THAT(
      shard->Push(SparsePush(keys, {1, 2, 3}, MakeSequence(1, 1)), &retry),
      IsOk());
  EXPECT_TRUE(retry.duplicate());
  proto::PullResponse pulled;
  ASSERT_THAT(shard->PullSparse(SparsePull(keys), &pulled), IsOk());
  uint32_t version = 0;
  std::memcpy(&version, pulled.sparse(0).versions().data(), sizeof(version));
  EXPECT_EQ(version, 1u) << "applied once";
  EXPECT_EQ(counters_.Get("sparse_push_keys"), 3);
}

// Hostile input: refused with InvalidArgument, nothing applied, the shard
// serving on.
TEST_F(ShardSparseTest, HostileSparsePushesAreRefusedAndChangeNothing) {
  auto shard = MakeShard(0);
  const std::vector<uint64_t> keys = KeysOf(0, 3);
  const std::vector<uint64_t> theirs = KeysOf(1, 1);
  struct Case {
    const char* name;
    proto::PushRequest request;
    const char* message;
  };
  std::vector<Case> cases;
  cases.push_back({"unsorted",
                   SparsePush({keys[1], keys[0], keys[2]}, {1, 1, 1}, 1),
                   "out of order"});
  cases.push_back({"repeated",
                   SparsePush({keys[0], keys[0], keys[2]}, {1, 1, 1}, 2),
                   "is repeated"});
  cases.push_back({"count mismatch", SparsePush(keys, {1, 1}, 3),
                   "need 3 gradient floats, got 2"});
  cases.push_back(
      {"NaN",
       SparsePush(keys, {1, std::numeric_limits<float>::quiet_NaN(), 1}, 4),
       "not finite"});
  cases.push_back({"another ps's key", SparsePush(theirs, {1}, 5),
                   "which ps 0 does not hold"});
  proto::PushRequest ragged = SparsePush(keys, {1, 1, 1}, 6);
  ragged.mutable_sparse(0)->mutable_keys()->resize(23);
  cases.push_back({"ragged keys", ragged, "not a whole number of uint64"});
  proto::PushRequest unknown = SparsePush(keys, {1, 1, 1}, 7);
  unknown.mutable_sparse(0)->set_table(3);
  cases.push_back({"unknown table", unknown, "unknown sparse table 3"});
  proto::PushRequest twice = SparsePush(keys, {1, 1, 1}, 8);
  *twice.add_sparse() = twice.sparse(0);
  cases.push_back({"table twice", twice, "appears twice"});
  proto::PushRequest counts = SparsePush(keys, {1, 1, 1}, 9);
  counts.mutable_sparse(0)->set_counts(std::string(8, '\1'));
  cases.push_back({"counts", counts, "bytes of counts"});
  for (const Case& c : cases) {
    proto::PushResponse response;
    EXPECT_THAT(
        shard->Push(c.request, &response),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.name;
  }
  EXPECT_EQ(shard->sparse_stats()[0].rows, 0) << "nothing applied";
  proto::PushResponse response;
  EXPECT_THAT(shard->Push(SparsePush(keys, {1, 1, 1}, 10), &response), IsOk())
      << "the shard serves on";
  EXPECT_EQ(shard->sparse_stats()[0].rows, 3);

  proto::PullResponse ignored;
  EXPECT_THAT(
      shard->PullSparse(SparsePull({keys[1], keys[0]}), &ignored),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("out of order")));
  proto::PullRequest mixed = SparsePull(keys);
  mixed.add_block_ids(0);
  EXPECT_THAT(
      shard->PullSparse(mixed, &ignored),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not both")));
  EXPECT_THAT(shard->PullSparse(SparsePull(theirs), &ignored),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("which ps 0 does not hold")));
}

TEST_F(ShardSparseTest, MaxRowsBoundsATableAndTheRefusalIsNotUsedUp) {
  config_.model.sparse_max_rows = 2;
  auto shard = MakeShard(0);
  const std::vector<uint64_t> keys = KeysOf(0, 3);
  proto::PushResponse response;
  EXPECT_THAT(
      shard->Push(SparsePush(keys, {1, 1, 1}, 1), &response),
      StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("max_rows 2")));
  EXPECT_EQ(shard->sparse_stats()[0].rows, 0);
}

// The placement map names the buckets a ps holds: keys of other buckets are
// refused, whatever the rule would have said, and a bucket beyond
// model.sparse_buckets is refused as a placement.
TEST_F(ShardSparseTest, TheBucketsOfThePlacementDecideWhichKeysAPsTakes) {
  auto shard = MakeShard(0);
  const std::vector<uint64_t> theirs = KeysOf(1, 3);  // ps 1's by the rule
  proto::PushResponse response;
  EXPECT_THAT(
      shard->Push(SparsePush(theirs, {1, 1, 1}, MakeSequence(1, 1)), &response),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("which ps 0 does not hold")));
  std::vector<uint32_t> all(64);
  for (uint32_t b = 0; b < 64; ++b) all[b] = b;
  ASSERT_THAT(shard->AssignBuckets(all), IsOk());
  EXPECT_THAT(
      shard->Push(SparsePush(theirs, {1, 1, 1}, MakeSequence(1, 2)), &response),
      IsOk());
  EXPECT_EQ(shard->sparse_stats()[0].rows, 3);
  ASSERT_THAT(shard->AssignBuckets({}), IsOk());
  proto::PullResponse pulled;
  // Buckets it held before: moved away (the sender re-reads the placement).
  EXPECT_THAT(shard->PullSparse(SparsePull(KeysOf(0, 2)), &pulled),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr(kBucketMovedMessage)));
  EXPECT_THAT(shard->AssignBuckets({64}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("beyond model.sparse_buckets 64")));
}

// A live move of buckets from ps 0 to ps 1 (server/bucket_transfer.h): a
// copy pass while pushes go on, a catch-up pass, the switch (ps 0 answers the
// moved buckets' keys "bucket moved" without using up the sequence), the last
// pass once ps 0 serves the new epoch, and ps 0 dropping the rows: ps 1 then
// holds exactly what ps 0 held, and no row update is lost or counted twice.
TEST_F(ShardSparseTest, MovedBucketsArriveWholeAndNoUpdateIsLostOrDoubled) {
  auto source = MakeShard(0);
  auto destination = MakeShard(1);
  std::vector<uint32_t> evens, odds;
  for (uint32_t b = 0; b < 64; ++b) (b % 2 == 0 ? evens : odds).push_back(b);
  ASSERT_THAT(source->AssignBuckets(evens), IsOk());
  ASSERT_THAT(destination->AssignBuckets(odds), IsOk());
  const std::vector<uint32_t> moving = {0, 2, 4, 6, 8, 10};
  std::vector<uint64_t> keys;  // source keys, some in moving buckets
  for (uint64_t k = 1; keys.size() < 40; ++k) {
    if (BucketOf(k, 64) % 2 == 0) keys.push_back(k);
  }
  const std::vector<float> ones(keys.size(), 1.0f);
  proto::PushResponse response;
  uint64_t n = 0;
  auto push = [&](Shard* shard, const std::vector<uint64_t>& k,
                  uint64_t epoch) {
    proto::PushRequest request =
        SparsePush(k, std::vector<float>(k.size(), 1.0f), MakeSequence(1, ++n));
    request.set_placement_epoch(epoch);
    return shard->Push(request, &response);
  };
  ASSERT_THAT(push(source.get(), keys, 1), IsOk());
  IncomingMove move(7, moving, 1);
  auto pass = [&](uint64_t at_epoch) -> absl::Status {
    uint32_t first = 0;
    do {
      proto::CopyBucketsResponse chunk;
      RETURN_IF_ERROR(
          source->CopyBuckets(move.NextRequest(first, at_epoch, 1), &chunk));
      std::vector<std::pair<uint32_t, SparseTable::Rows>> rows;
      RETURN_IF_ERROR(move.Accept(chunk, first, &rows));
      RETURN_IF_ERROR(destination->ImportMoved(rows));
      first = chunk.next();
    } while (!move.pass_complete());
    return absl::OkStatus();
  };
  ASSERT_THAT(pass(0), IsOk());
  const int64_t first_pass = move.last_pass_rows();
  EXPECT_GT(first_pass, 0);
  ASSERT_THAT(push(source.get(), {keys[0], keys[1]}, 1), IsOk());  // meanwhile
  ASSERT_THAT(pass(0), IsOk());
  EXPECT_LT(move.last_pass_rows(), first_pass) << "only what changed";
  // The destination does not answer the buckets before the switch.
  proto::PullResponse pulled;
  EXPECT_FALSE(destination->PullSparse(SparsePull({keys[0]}), &pulled).ok());

  // The switch: placement epoch 2 gives `moving` to ps 1.
  std::vector<uint32_t> kept;
  for (uint32_t b : evens) {
    if (b > 10) kept.push_back(b);
  }
  ASSERT_THAT(push(source.get(), keys, 1), IsOk());  // the last at epoch 1
  ASSERT_THAT(source->AssignBuckets(kept), IsOk());
  ASSERT_THAT(source->Assign(2, {0}), IsOk());
  proto::CopyBucketsResponse early;
  EXPECT_THAT(destination->CopyBuckets(move.NextRequest(0, 2, 0), &early),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("epoch 2")));
  proto::PushRequest stale = SparsePush(keys, ones, MakeSequence(1, ++n));
  stale.set_placement_epoch(2);
  EXPECT_THAT(source->Push(stale, &response),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr(kBucketMovedMessage)));
  ASSERT_THAT(pass(2), IsOk());
  std::vector<uint32_t> now = odds;
  now.insert(now.end(), moving.begin(), moving.end());
  std::sort(now.begin(), now.end());
  ASSERT_THAT(destination->AssignBuckets(now), IsOk());
  ASSERT_THAT(destination->Assign(2, {}), IsOk());
  const uint64_t before = source->sparse_stats()[0].updates;
  EXPECT_GT(source->DropUnheldRows({}), 0);

  // The refused push again, split: the source's keys with the same sequence.
  std::vector<uint64_t> stay, moved;
  for (uint64_t k : keys) (BucketOf(k, 64) > 10 ? stay : moved).push_back(k);
  stale =
      SparsePush(stay, std::vector<float>(stay.size(), 1.0f), stale.sequence());
  stale.set_placement_epoch(2);
  ASSERT_THAT(source->Push(stale, &response), IsOk());
  EXPECT_FALSE(response.duplicate());
  // Every moved key's row holds its three updates, on ps 1 only.
  for (uint64_t k : moved) {
    proto::PullResponse row;
    proto::PullRequest request = SparsePull({k});
    request.set_placement_epoch(2);
    ASSERT_THAT(destination->PullSparse(request, &row), IsOk());
    uint32_t version = 0;
    std::memcpy(&version, row.sparse(0).versions().data(), sizeof(version));
    const bool twice = k == keys[0] || k == keys[1];
    EXPECT_EQ(version, twice ? 3u : 2u) << "key " << k;
  }
  EXPECT_EQ(source->sparse_stats()[0].updates +
                destination->sparse_stats()[0].updates,
            before + stay.size())
      << "updates moved, none lost or counted twice";
}

// Lookup reads rows by key in any order, marks the keys without a row
// missing (with their initial values), creates nothing, and refuses another
// ps's keys and bad bytes (a key asked twice: the next test).
TEST_F(ShardSparseTest, LookupReadsRowsAndMarksTheMissingOnes) {
  auto shard = MakeShard(0);
  const std::vector<uint64_t> keys = KeysOf(0, 3);
  proto::PushResponse pushed;
  ASSERT_THAT(shard->Push(SparsePush({keys[0], keys[1]}, {1, 1}, 1), &pushed),
              IsOk());
  proto::LookupRequest request;
  const uint64_t asked[3] = {keys[2], keys[1], keys[0]};
  request.set_keys(asked, sizeof(asked));
  proto::LookupResponse response;
  ASSERT_THAT(shard->Lookup(request, &response), IsOk());
  EXPECT_EQ(response.dim(), 1u);
  EXPECT_EQ(response.missing(), std::string("\1\0\0", 3));
  float v[3];
  ASSERT_EQ(response.values().size(), sizeof(v));
  std::memcpy(v, response.values().data(), sizeof(v));
  EXPECT_EQ(v[0], 0.0f);
  EXPECT_FLOAT_EQ(v[1], -0.25f);
  EXPECT_FLOAT_EQ(v[2], -0.25f);
  EXPECT_EQ(shard->sparse_stats()[0].rows, 2) << "a lookup creates no row";
  const std::vector<uint64_t> theirs = KeysOf(1, 1);
  request.set_keys(theirs.data(), sizeof(uint64_t));
  EXPECT_THAT(shard->Lookup(request, &response),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("which ps 0 does not hold")));
  request.set_keys(std::string(9, '\0'));
  EXPECT_THAT(shard->Lookup(request, &response),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not a whole number")));
  request.set_table(2);
  EXPECT_THAT(shard->Lookup(request, &response),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unknown sparse table 2")));
}

// --- The memory budget (issue 42) -----------------------------------------

// A flood of fresh keys from one worker next to a job that keeps touching
// its keys: the tables stay within the budget's half, the flood evicts its
// own rows, every row of the job survives with its updates.
TEST_F(ShardSparseTest, AFloodOfFreshKeysStaysWithinTheBudget) {
  config_.eviction.memory_budget_mb = 16;  // tables: 8 MiB
  auto shard = MakeShard(0);
  const int64_t limit = int64_t{8} << 20;
  const std::vector<uint64_t> keys = KeysOf(0, 40000 * 12 + 100);
  const std::vector<uint64_t> job(keys.begin(), keys.begin() + 100);
  proto::PushResponse response;
  for (int round = 0; round < 12; ++round) {
    ASSERT_THAT(shard->Push(SparsePush(job, std::vector<float>(100, 0.1f),
                                       MakeSequence(1, round + 1), 0),
                            &response),
                IsOk());
    const std::vector<uint64_t> flood(keys.begin() + 100 + round * 40000,
                                      keys.begin() + 100 + (round + 1) * 40000);
    ASSERT_THAT(shard->Push(SparsePush(flood, std::vector<float>(40000, 0.1f),
                                       MakeSequence(1, round + 1), 1),
                            &response),
                IsOk());
    EXPECT_LE(shard->sparse_stats()[0].bytes, limit) << "round " << round;
  }
  EXPECT_GT(counters_.Get("sparse_budget_evicted_rows"), 100000);
  EXPECT_EQ(counters_.Get("sparse_refused_keys"), 0);
  proto::LookupRequest lookup;
  lookup.set_keys(job.data(), job.size() * sizeof(uint64_t));
  proto::LookupResponse found;
  ASSERT_THAT(shard->Lookup(lookup, &found), IsOk());
  EXPECT_EQ(found.missing(), std::string(100, '\0'))
      << "every row the job keeps touching is held";
}

// A push whose new keys cannot fit even with every other row evicted is
// refused whole, naming the budget, a key and the fix; its sequence is not
// used up, and nothing was evicted for it.
TEST_F(ShardSparseTest, APushBeyondTheBudgetIsRefusedWholeAndNotUsedUp) {
  config_.eviction.memory_budget_mb = 16;
  auto shard = MakeShard(0);
  const std::vector<uint64_t> keys = KeysOf(0, 400000);
  proto::PushResponse response;
  const std::vector<uint64_t> held(keys.begin(), keys.begin() + 10);
  ASSERT_THAT(shard->Push(SparsePush(held, std::vector<float>(10, 1.0f),
                                     MakeSequence(1, 1)),
                          &response),
              IsOk());
  const uint64_t sequence = MakeSequence(1, 2);
  EXPECT_THAT(
      shard->Push(
          SparsePush(keys, std::vector<float>(keys.size(), 1.0f), sequence),
          &response),
      StatusIs(absl::StatusCode::kResourceExhausted,
               AllOf(HasSubstr("eviction.memory_budget_mb"),
                     HasSubstr(absl::StrCat("key ", keys[10])),
                     HasSubstr("nothing of the push was applied"))));
  EXPECT_EQ(shard->sparse_stats()[0].rows, 10) << "nothing evicted or made";
  EXPECT_EQ(counters_.Get("sparse_refused_keys"), 399990);
  const std::vector<uint64_t> fits(keys.begin(), keys.begin() + 1000);
  EXPECT_THAT(
      shard->Push(SparsePush(fits, std::vector<float>(1000, 1.0f), sequence),
                  &response),
      IsOk());
  EXPECT_FALSE(response.duplicate()) << "the refusal did not use it up";
  EXPECT_EQ(shard->sparse_stats()[0].rows, 1000);
}

// Lookups and pulls: a key asked twice is refused, and a reply that would
// pass the bytes of replies in flight (a quarter of the budget) is refused
// before anything is allocated.
TEST_F(ShardSparseTest, LookupsAndPullsAreBoundedInKeysAndBytes) {
  config_.eviction.memory_budget_mb = 16;  // replies: 4 MiB in flight
  auto shard = MakeShard(0);
  const std::vector<uint64_t> keys = KeysOf(0, 200000);
  proto::LookupRequest lookup;
  const uint64_t twice[3] = {keys[1], keys[0], keys[1]};
  lookup.set_keys(twice, sizeof(twice));
  proto::LookupResponse found;
  EXPECT_THAT(shard->Lookup(lookup, &found),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat(
                           "key ", keys[1], " is asked for more than once"))));
  EXPECT_TRUE(found.values().empty());
  lookup.set_keys(keys.data(), keys.size() * sizeof(uint64_t));
  EXPECT_THAT(shard->Lookup(lookup, &found),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("ask for fewer keys per request")));
  EXPECT_TRUE(found.values().empty()) << "refused before allocating";
  proto::PullResponse pulled;
  EXPECT_THAT(shard->PullSparse(SparsePull(keys), &pulled),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("ask for fewer keys per request")));
  lookup.set_keys(keys.data(), 1000 * sizeof(uint64_t));
  EXPECT_THAT(shard->Lookup(lookup, &found), IsOk());
}

// A bsp round of a table: each active worker's rows (its keys, or none)
// held until all are in, then per key the mean over the workers, applied
// once; a retry of a part already applied is a duplicate.
TEST_F(ShardSparseTest, BspRoundAppliesTheMeanOfTheWorkersRowsOnce) {
  config_.training.consistency = ConsistencyMode::kBsp;
  config_.optimizer.type = OptimizerType::kSgd;
  config_.optimizer.learning_rate = 1.0;
  auto shard = MakeShard(1);  // rows only, no dense block
  shard->SetActiveWorkers({0, 1});
  const std::vector<uint64_t> k = KeysOf(1, 3);
  absl::Status first;
  proto::PushResponse first_response;
  std::thread pusher0([&] {
    first = shard->Push(SparsePush({k[0], k[1]}, {1, 1}, MakeSequence(1, 1), 0),
                        &first_response, absl::Now() + absl::Seconds(30));
  });
  ASSERT_TRUE(downpour::testing::WaitUntil(
      [&] { return counters_.Get("bsp_waits") >= 1; }, absl::Seconds(10)));
  EXPECT_EQ(shard->sparse_stats()[0].rows, 0) << "nothing before the round";
  proto::PushResponse response;
  ASSERT_THAT(
      shard->Push(SparsePush({k[1], k[2]}, {3, 3}, MakeSequence(1, 1), 1),
                  &response, absl::Now() + absl::Seconds(30)),
      IsOk());
  pusher0.join();
  ASSERT_THAT(first, IsOk());
  proto::PullResponse pulled;
  ASSERT_THAT(shard->PullSparse(SparsePull(k), &pulled), IsOk());
  // sgd, rate 1: minus the mean over 2 workers (a key one did not push
  // counts 0 for it).
  EXPECT_EQ(Values(pulled), (std::vector<float>{-0.5f, -2.0f, -1.5f}));
  EXPECT_EQ(shard->sparse_stats()[0].updates, 3u) << "one update a row";
  EXPECT_EQ(counters_.Get("bsp_rounds"), 1);
  ASSERT_THAT(
      shard->Push(SparsePush({k[1], k[2]}, {3, 3}, MakeSequence(1, 1), 1),
                  &response, absl::Now() + absl::Seconds(30)),
      IsOk());
  EXPECT_TRUE(response.duplicate());
  // A round in which neither worker has keys here changes nothing.
  std::thread pusher1([&] {
    proto::PushResponse r;
    first = shard->Push(SparsePush({}, {}, MakeSequence(1, 2), 0), &r,
                        absl::Now() + absl::Seconds(30));
  });
  ASSERT_THAT(shard->Push(SparsePush({}, {}, MakeSequence(1, 2), 1), &response,
                          absl::Now() + absl::Seconds(30)),
              IsOk());
  pusher1.join();
  ASSERT_THAT(first, IsOk());
  ASSERT_THAT(shard->PullSparse(SparsePull(k), &pulled), IsOk());
  EXPECT_EQ(Values(pulled), (std::vector<float>{-0.5f, -2.0f, -1.5f}));
  EXPECT_EQ(shard->sparse_stats()[0].updates, 3u);
}

// Under bsp a restored shard continues bit-identically: rounds of two
// workers, a checkpoint, a new shard from it, then the same rounds on both,
// their parts arriving in the opposite order on the restored one.
TEST_F(ShardSparseTest, ABspCheckpointRestoreContinuesBitIdentically) {
  config_.training.consistency = ConsistencyMode::kBsp;
  config_.optimizer.l1 = 0.01;
  config_.checkpoint.dir =
      std::string(std::getenv("TEST_TMPDIR")) + "/sparse_bsp_checkpoint";
  std::filesystem::remove_all(config_.checkpoint.dir);
  const std::vector<uint64_t> keys = KeysOf(0, 60);
  // Worker w's part of round n: every (w + n + i) % 3 != 0 key, gradients
  // from (w, n, i).
  auto part = [&](int w, uint64_t n) {
    std::vector<uint64_t> mine;
    std::vector<float> grads;
    for (size_t i = 0; i < keys.size(); ++i) {
      if ((w + n + i) % 3 == 0) continue;
      mine.push_back(keys[i]);
      grads.push_back(0.05f * static_cast<float>((i * 7 + n * 3 + w) % 11) -
                      0.25f);
    }
    return SparsePush(mine, grads, MakeSequence(1, n), w);
  };
  auto round = [&](Shard* shard, uint64_t n, bool reversed) {
    const int first = reversed ? 1 : 0;
    const double waits = counters_.Get("bsp_waits");
    absl::Status a, b;
    std::thread t([&] {
      proto::PushResponse r;
      a = shard->Push(part(first, n), &r, absl::Now() + absl::Seconds(30));
    });
    ASSERT_TRUE(downpour::testing::WaitUntil(
        [&] { return counters_.Get("bsp_waits") > waits; }, absl::Seconds(10)));
    proto::PushResponse r;
    b = shard->Push(part(1 - first, n), &r, absl::Now() + absl::Seconds(30));
    t.join();
    ASSERT_THAT(a, IsOk());
    ASSERT_THAT(b, IsOk());
  };
  auto a = MakeShard(0);
  a->SetActiveWorkers({0, 1});
  for (uint64_t n = 1; n <= 5; ++n)
    ASSERT_NO_FATAL_FAILURE(round(a.get(), n, false));
  ASSERT_THAT(a->WriteCheckpoint(), IsOk());
  auto b = MakeShard(0);
  b->SetActiveWorkers({0, 1});
  EXPECT_EQ(b->sparse_stats()[0].rows, 60);
  for (uint64_t n = 6; n <= 9; ++n) {
    ASSERT_NO_FATAL_FAILURE(round(a.get(), n, false));
    ASSERT_NO_FATAL_FAILURE(round(b.get(), n, true));
  }
  proto::PullResponse pa, pb;
  ASSERT_THAT(a->PullSparse(SparsePull(keys), &pa), IsOk());
  ASSERT_THAT(b->PullSparse(SparsePull(keys), &pb), IsOk());
  EXPECT_EQ(pa.sparse(0).values(), pb.sparse(0).values());
  EXPECT_EQ(pa.sparse(0).versions(), pb.sparse(0).versions());
  EXPECT_EQ(a->sparse_stats()[0].updates, b->sparse_stats()[0].updates);
}

// A checkpoint holds whole rows (values, FTRL state, versions) with the push
// windows of the same moment: a shard restored from it continues
// bit-identically, and a push it already holds is a duplicate there.
TEST_F(ShardSparseTest, ACheckpointRestoreContinuesBitIdentically) {
  config_.checkpoint.dir =
      std::string(std::getenv("TEST_TMPDIR")) + "/sparse_checkpoint";
  std::filesystem::remove_all(config_.checkpoint.dir);
  auto a = MakeShard(0);
  const std::vector<uint64_t> keys = KeysOf(0, 50);
  std::vector<float> grads(50);
  for (int i = 0; i < 50; ++i) grads[i] = 0.1f * (i % 7) - 0.3f;
  proto::PushResponse response;
  for (uint64_t n = 1; n <= 5; ++n) {
    ASSERT_THAT(a->Push(SparsePush(keys, grads, MakeSequence(1, n)), &response),
                IsOk());
  }
  ASSERT_THAT(a->WriteCheckpoint(), IsOk());
  auto b = MakeShard(0);
  EXPECT_EQ(b->sparse_stats()[0].rows, 50);
  ASSERT_THAT(b->Push(SparsePush(keys, grads, MakeSequence(1, 5)), &response),
              IsOk());
  EXPECT_TRUE(response.duplicate()) << "the window came with the rows";
  for (uint64_t n = 6; n <= 8; ++n) {
    for (Shard* shard : {a.get(), b.get()}) {
      ASSERT_THAT(
          shard->Push(SparsePush(keys, grads, MakeSequence(1, n)), &response),
          IsOk());
    }
  }
  proto::PullResponse pa, pb;
  ASSERT_THAT(a->PullSparse(SparsePull(keys), &pa), IsOk());
  ASSERT_THAT(b->PullSparse(SparsePull(keys), &pb), IsOk());
  EXPECT_EQ(pa.sparse(0).values(), pb.sparse(0).values());
  EXPECT_EQ(pa.sparse(0).versions(), pb.sparse(0).versions());
}

// eviction.max_rows at checkpoint time: the table is cut back to the bound,
// the evicted rows are counted, and the row updates the shard holds (what
// the coordinator compares across a take-over) do not change.
TEST_F(ShardSparseTest, EvictionAtACheckpointBoundsTheRowsAndLosesNoUpdate) {
  config_.eviction.max_rows = 20;
  config_.checkpoint.dir =
      std::string(std::getenv("TEST_TMPDIR")) + "/sparse_evict";
  std::filesystem::remove_all(config_.checkpoint.dir);
  auto shard = MakeShard(0);
  const std::vector<uint64_t> keys = KeysOf(0, 50);
  proto::PushResponse response;
  for (uint64_t n = 1; n <= 3; ++n) {
    // The last 20 keys pushed last: they are the ones kept.
    std::vector<uint64_t> part(keys.begin() + (n == 3 ? 30 : 0), keys.end());
    ASSERT_THAT(
        shard->Push(SparsePush(part, std::vector<float>(part.size(), 0.5f),
                               MakeSequence(1, n)),
                    &response),
        IsOk());
  }
  const uint64_t held = shard->applied_total();
  EXPECT_EQ(shard->sparse_stats()[0].rows, 50);
  ASSERT_THAT(shard->WriteCheckpoint(), IsOk());
  EXPECT_EQ(shard->sparse_stats()[0].rows, 20);
  EXPECT_EQ(shard->sparse_stats()[0].evicted, 30);
  EXPECT_EQ(counters_.Get("sparse_evicted_rows"), 30);
  EXPECT_EQ(shard->applied_total(), held) << "evicted versions stay counted";
  proto::LookupRequest lookup;
  lookup.set_table(0);
  lookup.set_keys(keys.data(), keys.size() * sizeof(uint64_t));
  proto::LookupResponse found;
  ASSERT_THAT(shard->Lookup(lookup, &found), IsOk());
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(found.missing()[i], i < 30 ? 1 : 0) << "key " << i;
  }
  // The checkpoint holds the bounded table, and a restart keeps the count.
  auto restored = MakeShard(0);
  EXPECT_EQ(restored->sparse_stats()[0].rows, 20);
  EXPECT_EQ(restored->applied_total(), held);
}

// Incremental checkpoints: a full cut, then deltas of the rows changed and
// the keys evicted. The chain read back (full + deltas) is bit for bit the
// full cut written of the same state, and a shard restored from it goes on
// exactly as the original.
TEST_F(ShardSparseTest, FullPlusDeltasRestoreTheStateBitForBit) {
  config_.optimizer.l1 = 0.01;
  config_.eviction.max_rows = 70;
  config_.checkpoint.incremental = true;
  config_.checkpoint.full_every = 3;
  config_.checkpoint.dir =
      std::string(std::getenv("TEST_TMPDIR")) + "/sparse_incremental";
  std::filesystem::remove_all(config_.checkpoint.dir);
  const std::vector<uint64_t> keys = KeysOf(0, 150);
  uint64_t sequence = 0;
  // Push n: a window of 20 keys that moves along by 7, so rows age and go
  // and a delta holds fewer rows than the table.
  auto push = [&](Shard* shard, uint64_t n) {
    std::vector<uint64_t> part;
    std::vector<float> grads;
    for (size_t i = 0; i < 20; ++i) {
      part.push_back(keys[(n * 7 + i) % keys.size()]);
    }
    std::sort(part.begin(), part.end());
    for (size_t i = 0; i < part.size(); ++i) {
      grads.push_back(0.05f * static_cast<float>((i * 7 + n) % 11) - 0.25f);
    }
    proto::PushResponse response;
    return shard->Push(SparsePush(part, grads, MakeSequence(1, n)), &response);
  };
  auto a = MakeShard(0);
  // Full cut, then three deltas, each after a few pushes.
  for (int checkpoint = 0; checkpoint < 4; ++checkpoint) {
    for (int i = 0; i < 3; ++i) ASSERT_THAT(push(a.get(), ++sequence), IsOk());
    ASSERT_THAT(a->WriteCheckpoint(), IsOk());
  }
  EXPECT_GT(a->sparse_stats()[0].evicted, 0);
  const std::string folder = config_.checkpoint.dir + "/ps-0";
  // A copy of the chain for a second shard to start from.
  const std::string copy =
      std::string(std::getenv("TEST_TMPDIR")) + "/sparse_incremental_copy";
  std::filesystem::remove_all(copy);
  std::filesystem::create_directories(copy);
  std::filesystem::copy(folder, copy + "/ps-0");
  ShardCheckpoints::Options options;
  options.dir = config_.checkpoint.dir;
  absl::StatusOr<ShardCheckpoints::Loaded> chain =
      ShardCheckpoints(options).ReadNewest();
  ASSERT_THAT(chain, IsOk());
  ASSERT_EQ(chain->deltas.size(), 3u);
  EXPECT_TRUE(chain->chain_ended.empty());
  // The next write is a full cut (full_every 3) of the same state: nothing
  // to evict, no push between.
  ASSERT_THAT(a->WriteCheckpoint(), IsOk());
  absl::StatusOr<ShardCheckpoints::Loaded> full =
      ShardCheckpoints(options).ReadNewest();
  ASSERT_THAT(full, IsOk());
  ASSERT_TRUE(full->deltas.empty()) << "a new chain";
  const Checkpoint& x = chain->checkpoint;
  const Checkpoint& y = full->checkpoint;
  ASSERT_EQ(x.blocks.size(), y.blocks.size());
  for (size_t i = 0; i < x.blocks.size(); ++i) {
    EXPECT_EQ(x.blocks[i].version, y.blocks[i].version);
    EXPECT_EQ(x.blocks[i].values, y.blocks[i].values);
    EXPECT_EQ(x.blocks[i].state, y.blocks[i].state);
  }
  EXPECT_EQ(x.sequences.at(1).base(), y.sequences.at(1).base());
  EXPECT_EQ(x.sequences.at(1).mask(), y.sequences.at(1).mask());
  ASSERT_EQ(x.sparse_tables.size(), 1u);
  const SparseTable::Rows& rx = x.sparse_tables[0].second;
  const SparseTable::Rows& ry = y.sparse_tables[0].second;
  EXPECT_EQ(rx.keys, ry.keys);
  EXPECT_LE(rx.keys.size(), 70u);
  EXPECT_EQ(rx.versions, ry.versions);
  EXPECT_EQ(rx.clocks, ry.clocks);
  EXPECT_EQ(rx.clock, ry.clock);
  EXPECT_EQ(rx.evicted_versions, ry.evicted_versions);
  ASSERT_EQ(rx.data.size(), ry.data.size());
  EXPECT_EQ(0, std::memcmp(rx.data.data(), ry.data.data(),
                           rx.data.size() * sizeof(float)))
      << "values and FTRL state";
  // The deltas were smaller than the full cuts.
  int64_t full_bytes = 0, delta_bytes = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 6 && name.substr(name.size() - 6) == ".delta") {
      delta_bytes = std::max<int64_t>(delta_bytes, entry.file_size());
    } else if (name.size() > 5 && name.substr(name.size() - 5) == ".ckpt") {
      full_bytes = std::max<int64_t>(full_bytes, entry.file_size());
    }
  }
  EXPECT_GT(delta_bytes, 0);
  EXPECT_LT(delta_bytes, full_bytes);
  // A shard restored from the chain (the copy) continues bit-identically,
  // evictions included.
  const std::string dir = config_.checkpoint.dir;
  config_.checkpoint.dir = copy;
  auto b = MakeShard(0);
  config_.checkpoint.dir = dir;
  EXPECT_EQ(b->applied_total(), a->applied_total());
  for (int round = 0; round < 3; ++round) {
    ++sequence;
    ASSERT_THAT(push(a.get(), sequence), IsOk());
    ASSERT_THAT(push(b.get(), sequence), IsOk());
    ASSERT_THAT(a->WriteCheckpoint(), IsOk());
    ASSERT_THAT(b->WriteCheckpoint(), IsOk());
  }
  proto::PullResponse pa, pb;
  ASSERT_THAT(a->PullSparse(SparsePull(keys), &pa), IsOk());
  ASSERT_THAT(b->PullSparse(SparsePull(keys), &pb), IsOk());
  EXPECT_EQ(pa.sparse(0).values(), pb.sparse(0).values());
  EXPECT_EQ(pa.sparse(0).versions(), pb.sparse(0).versions());
  EXPECT_EQ(a->sparse_stats()[0].rows, b->sparse_stats()[0].rows);
  EXPECT_EQ(a->applied_total(), b->applied_total());
}

TEST_F(ShardSparseTest, DenseModelsRefuseFtrlAndSparseModelsRefuseMomentum) {
  config_.optimizer.type = OptimizerType::kMomentum;
  EXPECT_THAT(Shard::Create(config_, 0, &counters_).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("does not train sparse tables")));
}

}  // namespace
}  // namespace downpour::server
