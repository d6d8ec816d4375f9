#include "worker/sparse_loop.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "common/sparse_keys.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "model/metrics.h"
#include "model/sparse_model.h"
#include "server/shard.h"
#include "worker/cpu/cpu_backend.h"

namespace downpour::worker {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;

// SparsePs over two in-process ps cores (server::Shard, no gRPC): the real
// admission, tables and optimizer, in one process.
class ShardsPs : public SparsePs {
 public:
  // Every dense block on ps 0.
  explicit ShardsPs(const Config& config)
      : spec_(ModelSpec::Create(config.model).value()), counters_(2) {
    std::vector<uint32_t> blocks;
    for (const BlockSpec& b : spec_.blocks()) blocks.push_back(b.id);
    for (int s = 0; s < 2; ++s) {
      auto shard = server::Shard::Create(config, s, &counters_[s]);
      EXPECT_THAT(shard.status(), IsOk());
      shards_.push_back(std::move(shard).value());
      EXPECT_THAT(
          shards_[s]->Assign(1, s == 0 ? blocks : std::vector<uint32_t>{}),
          IsOk());
    }
  }

  absl::Status Pull(float* params, std::vector<uint64_t>* versions) override {
    ++dense_pulls_;
    return ReadDense(params, versions);
  }

  // PushWithRows, then the dense values as a push's reply would hold them
  // (not counted as a pull).
  absl::Status PushWithRowsAndPull(
      const float* grad, const std::vector<uint64_t>& versions,
      const std::vector<std::vector<wire::SparseRef>>& rows, PushReport* report,
      float* params, std::vector<uint64_t>* fresh) override {
    absl::Status pushed = PushWithRows(grad, versions, rows, report);
    if (!pushed.ok()) return pushed;
    return ReadDense(params, fresh);
  }

  absl::Status ReadDense(float* params, std::vector<uint64_t>* versions) {
    proto::PullRequest request;
    request.set_placement_epoch(1);
    for (const BlockSpec& b : spec_.blocks()) request.add_block_ids(b.id);
    proto::PullResponse response;
    absl::Status s = shards_[0]->Pull(request, &response);
    if (!s.ok()) return s;
    versions->clear();
    for (int i = 0; i < response.blocks_size(); ++i) {
      const BlockSpec& b = spec_.blocks()[i];
      std::memcpy(params + b.offset, response.blocks(i).data().data(),
                  b.length * sizeof(float));
      versions->push_back(response.blocks(i).version());
    }
    return absl::OkStatus();
  }

  absl::Status PullTables(
      const std::vector<TableRows>& tables,
      const std::vector<std::vector<uint64_t>>& keys,
      std::vector<std::vector<std::vector<float>>>* values) override {
    values->assign(tables.size(), std::vector<std::vector<float>>(keys.size()));
    for (size_t s = 0; s < keys.size(); ++s) {
      if (keys[s].empty()) continue;
      proto::PullRequest request;
      request.set_placement_epoch(1);
      request.set_worker_id(0);
      for (const TableRows& t : tables) {
        proto::SparseRows* rows = request.add_sparse();
        rows->set_table(t.table);
        rows->set_keys(keys[s].data(), keys[s].size() * 8);
      }
      proto::PullResponse response;
      absl::Status status = shards_[s]->PullSparse(request, &response);
      if (!status.ok()) return status;
      for (size_t t = 0; t < tables.size(); ++t) {
        (*values)[t][s].resize(keys[s].size() * tables[t].dim);
        std::memcpy((*values)[t][s].data(), response.sparse(t).values().data(),
                    response.sparse(t).values().size());
      }
    }
    return absl::OkStatus();
  }

  absl::Status PushWithRows(
      const float* grad, const std::vector<uint64_t>& versions,
      const std::vector<std::vector<wire::SparseRef>>& rows,
      PushReport*) override {
    const uint64_t sequence = ++pushes_;
    if (sequence == fail_push_) {
      return absl::UnavailableError("ps 1 did not answer");
    }
    for (int s = 0; s < 2; ++s) {
      wire::PushView view;
      view.placement_epoch = 1;
      view.worker_id = 0;
      view.sequence = sequence;
      for (size_t i = 0; s == 0 && i < spec_.blocks().size(); ++i) {
        const BlockSpec& b = spec_.blocks()[i];
        view.blocks.push_back({b.id, versions[i], 0,
                               reinterpret_cast<const char*>(grad + b.offset),
                               static_cast<size_t>(b.length) * sizeof(float)});
      }
      if (static_cast<size_t>(s) < rows.size()) view.sparse = rows[s];
      if (view.blocks.empty() && view.sparse.empty()) continue;
      proto::PushResponse response;
      absl::Status status = shards_[s]->Push(view, &response);
      if (!status.ok()) return status;
    }
    return absl::OkStatus();
  }

  server::Shard& shard(int s) { return *shards_[s]; }
  uint64_t pushes() const { return pushes_.load(); }
  // Calls of Pull (the dense parameters), not counting push replies.
  int dense_pulls() const { return dense_pulls_.load(); }
  // Push number n (1-based) fails, as a dead ps's would.
  void FailPush(uint64_t n) { fail_push_ = n; }

  // A placement map of its own: each ps holds the buckets `owners` gives it.
  void SetBucketOwners(std::vector<int> owners) {
    for (int s = 0; s < 2; ++s) {
      std::vector<uint32_t> mine;
      for (uint32_t b = 0; b < owners.size(); ++b) {
        if (owners[b] == s) mine.push_back(b);
      }
      EXPECT_THAT(shards_[s]->AssignBuckets(mine), IsOk());
    }
    owners_ = std::make_shared<const std::vector<int>>(std::move(owners));
  }
  std::shared_ptr<const std::vector<int>> BucketOwners() const override {
    return owners_;
  }

 private:
  const ModelSpec spec_;
  std::shared_ptr<const std::vector<int>> owners_;
  std::vector<Counters> counters_;
  std::vector<std::unique_ptr<server::Shard>> shards_;
  std::atomic<uint64_t> pushes_{0};
  std::atomic<int> dense_pulls_{0};
  uint64_t fail_push_ = 0;
};

// Examples of 20 features out of 200 keys; the label is 1 when the example
// holds more "positive" keys (key % 3 == 0) than a third of its features.
data::SparseDataset MakeData(int rows, uint64_t seed) {
  data::SparseDataset d;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint64_t> key(1, 200);
  data::SparseRowWriter writer(&d);
  for (int r = 0; r < rows; ++r) {
    int positive = 0;
    for (int f = 0; f < 20; ++f) {
      const uint64_t k = key(rng) * 1000003ULL;  // patterned ids
      positive += (k / 1000003ULL) % 3 == 0;
      writer.Add(k, 1.0f);
    }
    EXPECT_THAT(writer.EndRow(positive > 20 / 3 ? 1.0f : 0.0f), IsOk());
  }
  return d;
}

// sparse_linear, binary, 16 buckets over 2 ps, 1 worker, FTRL at alpha 0.5.
Config TwoShardConfig() {
  Config config;
  config.model.type = ModelType::kSparseLinear;
  config.model.task = Task::kBinary;
  config.model.sparse_buckets = 16;
  config.cluster.ps.assign(2, "127.0.0.1:0");
  config.cluster.workers.assign(1, "127.0.0.1:0");
  config.optimizer.type = OptimizerType::kFtrl;
  config.optimizer.learning_rate = 0.5;
  return config;
}

TEST(SparseLoopTest, UniqueKeysAreSortedAndEveryEntryFindsItsSlot) {
  const data::SparseDataset d = MakeData(50, 1);
  std::vector<int64_t> rows = {3, 7, 7, 20};
  std::vector<uint64_t> keys;
  std::vector<uint32_t> slot;
  SparseLoop::UniqueKeys(d, rows, &keys, &slot);
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  EXPECT_EQ(std::adjacent_find(keys.begin(), keys.end()), keys.end());
  size_t e = 0;
  for (int64_t r : rows) {
    for (int64_t i = d.offsets[r]; i < d.offsets[r + 1]; ++i, ++e) {
      EXPECT_EQ(keys[slot[e]], d.keys[i]);
    }
  }
  EXPECT_EQ(e, slot.size());
}

// The same for hashed keys (spread over the whole range) and for small raw
// indices (all in the sort's first bucket, many more than it sorts by
// insertion), against a plain sort and unique.
TEST(SparseLoopTest, UniqueKeysOfHashedAndOfSmallKeys) {
  for (const bool hashed : {true, false}) {
    std::mt19937_64 rng(hashed ? 5 : 6);
    data::SparseDataset d;
    data::SparseRowWriter writer(&d);
    for (int r = 0; r < 300; ++r) {
      for (int f = 0; f < 39; ++f) {
        const uint64_t k = rng() % 2000;
        writer.Add(hashed ? MixKey(k) : k, 1.0f);
      }
      ASSERT_THAT(writer.EndRow(0.0f), IsOk());
    }
    std::vector<int64_t> rows(300);
    std::iota(rows.begin(), rows.end(), 0);
    std::vector<uint64_t> keys;
    std::vector<uint32_t> slot;
    SparseLoop::UniqueKeys(d, rows, &keys, &slot);
    std::vector<uint64_t> want = d.keys;
    std::sort(want.begin(), want.end());
    want.erase(std::unique(want.begin(), want.end()), want.end());
    EXPECT_EQ(keys, want) << (hashed ? "hashed" : "small");
    ASSERT_EQ(slot.size(), d.keys.size());
    for (size_t e = 0; e < slot.size(); ++e) {
      ASSERT_EQ(keys[slot[e]], d.keys[e]) << e;
    }
  }
}

// Two shards, FTRL: the loop learns the rule (AUC near 1 on held-out rows),
// the rows live on the shards their buckets name, and the evaluation's
// reads create no row.
TEST(SparseLoopTest, LearnsASeparableRuleOverTwoShards) {
  const Config config = TwoShardConfig();
  auto spec = ModelSpec::Create(config.model);
  ASSERT_THAT(spec.status(), IsOk());
  ShardsPs ps(config);
  auto train = std::make_shared<data::SparseDataset>(MakeData(4000, 2));
  const data::SparseDataset test = MakeData(1000, 3);
  SparseLoop::Options options;
  options.training.batch_size = 32;
  options.training.epochs = 3;
  options.training.eval_every_steps = 100;
  options.num_shards = 2;
  SparseLoop loop(*spec, &ps, train, &test, options);
  ASSERT_THAT(loop.Run(), IsOk());
  const WorkerStats stats = loop.stats();
  EXPECT_TRUE(stats.finished);
  EXPECT_EQ(stats.step, 3 * 4000 / 32);
  ASSERT_FALSE(stats.metrics.empty());
  EXPECT_EQ(stats.metrics[0].first, "auc");
  EXPECT_GT(stats.metrics[0].second, 0.95);
  const int64_t rows0 = ps.shard(0).sparse_stats()[0].rows;
  const int64_t rows1 = ps.shard(1).sparse_stats()[0].rows;
  EXPECT_GT(rows0, 0);
  EXPECT_GT(rows1, 0);
  EXPECT_LE(rows0 + rows1, 200) << "one row per distinct training key";
}

// training.fetch overlap: step t+1's rows are pulled while step t computes
// and pushes go out in the background; every batch is still trained and
// counted once, and the model learns as with after_push.
TEST(SparseLoopTest, OverlapTrainsEveryBatchOnceAndLearns) {
  const Config config = TwoShardConfig();
  auto spec = ModelSpec::Create(config.model);
  ASSERT_THAT(spec.status(), IsOk());
  for (const int in_flight : {1, 3}) {
    ShardsPs ps(config);
    auto train = std::make_shared<data::SparseDataset>(MakeData(4000, 2));
    const data::SparseDataset test = MakeData(1000, 3);
    SparseLoop::Options options;
    options.training.batch_size = 32;
    options.training.epochs = 3;
    options.training.eval_every_steps = 100;
    options.training.fetch = FetchMode::kOverlap;
    options.training.max_pushes_in_flight = in_flight;
    options.num_shards = 2;
    SparseLoop loop(*spec, &ps, train, &test, options);
    ASSERT_THAT(loop.Run(), IsOk());
    const WorkerStats stats = loop.stats();
    EXPECT_TRUE(stats.finished);
    EXPECT_EQ(stats.step, 3 * 4000 / 32);
    EXPECT_EQ(stats.pushed_steps, 3 * 4000 / 32);
    EXPECT_EQ(stats.examples, 3 * 4000);
    ASSERT_EQ(stats.epoch_examples.size(), 3u);
    EXPECT_EQ(stats.epoch_examples[2], 4000);
    ASSERT_FALSE(stats.metrics.empty());
    EXPECT_GT(stats.metrics[0].second, 0.95) << in_flight << " in flight";
    EXPECT_EQ(ps.pushes(), 3 * 4000 / 32) << "each step pushed once";
    // Under async a step computes on the dense values the last push was
    // answered with: pulled only by the steps prepared before the first
    // push was answered, and to evaluate (not once a step).
    EXPECT_LE(ps.dense_pulls(), stats.evaluations + 2 + in_flight);
  }
  // A push that fails in the background fails the run, also the last one.
  ShardsPs ps(config);
  ps.FailPush(5);
  auto train = std::make_shared<data::SparseDataset>(MakeData(160, 2));
  const data::SparseDataset test = MakeData(100, 3);
  SparseLoop::Options options;
  options.training.batch_size = 32;
  options.training.epochs = 1;
  options.training.fetch = FetchMode::kOverlap;
  options.num_shards = 2;
  SparseLoop loop(*spec, &ps, train, &test, options);
  EXPECT_THAT(loop.Run(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_FALSE(loop.stats().finished);
  EXPECT_EQ(loop.stats().pushed_steps, 4);
}

// compute.device simulated: each step's compute lasts at least
// simulated_compute (real gradients, the rest slept), so that a scale model
// slows compute like its links. A lower bound only: load can only add time.
TEST(SparseLoopTest, SimulatedComputePadsEachStep) {
  const Config config = TwoShardConfig();
  auto spec = ModelSpec::Create(config.model);
  ASSERT_THAT(spec.status(), IsOk());
  ShardsPs ps(config);
  auto train = std::make_shared<data::SparseDataset>(MakeData(320, 2));
  const data::SparseDataset test = MakeData(100, 3);
  SparseLoop::Options options;
  options.training.batch_size = 32;
  options.training.steps = 5;
  options.num_shards = 2;
  options.simulated_compute = absl::Milliseconds(40);
  SparseLoop loop(*spec, &ps, train, &test, options);
  const absl::Time start = absl::Now();
  ASSERT_THAT(loop.Run(), IsOk());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(5 * 40));
  EXPECT_EQ(loop.stats().step, 5);
  EXPECT_GT(
      ps.shard(0).sparse_stats()[0].rows + ps.shard(1).sparse_stats()[0].rows,
      0)
      << "the padded steps still push real gradients";
}

// Keys go where the placement map puts their buckets, not by a rule of the
// worker's own: with every bucket on ps 1, ps 0 holds no row (it refuses
// keys of buckets it does not hold, so a worker with its own rule would fail).
TEST(SparseLoopTest, KeysFollowThePlacementsBuckets) {
  const Config config = TwoShardConfig();
  auto spec = ModelSpec::Create(config.model);
  ASSERT_THAT(spec.status(), IsOk());
  ShardsPs ps(config);
  ps.SetBucketOwners(std::vector<int>(16, 1));
  auto train = std::make_shared<data::SparseDataset>(MakeData(500, 2));
  const data::SparseDataset test = MakeData(100, 3);
  SparseLoop::Options options;
  options.training.batch_size = 32;
  options.training.epochs = 1;
  options.training.eval_every_steps = 100;
  options.num_shards = 2;
  SparseLoop loop(*spec, &ps, train, &test, options);
  ASSERT_THAT(loop.Run(), IsOk());
  EXPECT_EQ(ps.shard(0).sparse_stats()[0].rows, 0);
  EXPECT_GT(ps.shard(1).sparse_stats()[0].rows, 0);

  // A placement that leaves a bucket without a ps is an error, not a guess.
  std::vector<int> holed(16, 1);
  holed[3] = -1;
  ps.SetBucketOwners(holed);
  SparseLoop again(*spec, &ps, train, &test, options);
  EXPECT_THAT(again.Run(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                    HasSubstr("no ps for hash bucket 3")));
}

// A ps added while training (psctl add-ps) holds buckets past cluster.ps:
// the loop splits its keys over as many shards as the placement names.
TEST(SparseLoopTest, KeysFollowAPsTheConfigDoesNotList) {
  const Config config = TwoShardConfig();
  auto spec = ModelSpec::Create(config.model);
  ASSERT_THAT(spec.status(), IsOk());
  ShardsPs ps(config);
  std::vector<int> owners(16, 0);
  for (int b = 8; b < 16; ++b) owners[b] = 1;  // ps 1 joined later
  ps.SetBucketOwners(owners);
  auto train = std::make_shared<data::SparseDataset>(MakeData(500, 2));
  const data::SparseDataset test = MakeData(100, 3);
  SparseLoop::Options options;
  options.training.batch_size = 32;
  options.training.epochs = 1;
  options.training.eval_every_steps = 100;
  options.num_shards = 1;  // cluster.ps lists one
  SparseLoop loop(*spec, &ps, train, &test, options);
  ASSERT_THAT(loop.Run(), IsOk());
  EXPECT_GT(ps.shard(0).sparse_stats()[0].rows, 0);
  EXPECT_GT(ps.shard(1).sparse_stats()[0].rows, 0);
}

// Admission by count with the worker's occurrence counts: in one pass (one
// batch) a key that occurs once gets no row; key 1000, held by two examples,
// arrives with count 2 in the one push and gets one (without counts it would
// count 1 and not).
TEST(SparseLoopTest, OccurrenceCountsDriveAdmission) {
  Config config = TwoShardConfig();
  config.admission.min_count = 2;
  auto spec = ModelSpec::Create(config.model);
  ASSERT_THAT(spec.status(), IsOk());
  ShardsPs ps(config);
  // Keys 1..40 once each; examples 7 and 8 also hold key 1000.
  auto train = std::make_shared<data::SparseDataset>();
  data::SparseRowWriter writer(train.get());
  for (uint64_t k = 1; k <= 40; ++k) {
    writer.Add(k, 1.0f);
    if (k == 7 || k == 8) writer.Add(1000, 1.0f);
    ASSERT_THAT(writer.EndRow(k % 2 == 0 ? 1.0f : 0.0f), IsOk());
  }
  SparseLoop::Options options;
  options.training.batch_size = 40;
  options.training.epochs = 1;
  options.training.eval_every_steps = 100;
  options.num_shards = 2;
  options.send_counts = true;
  SparseLoop loop(*spec, &ps, train, train.get(), options);
  ASSERT_THAT(loop.Run(), IsOk());
  int64_t rows = 0, pending = 0;
  for (int s = 0; s < 2; ++s) {
    rows += ps.shard(s).sparse_stats()[0].rows;
    pending += ps.shard(s).sparse_stats()[0].pending;
  }
  EXPECT_EQ(rows, 1) << "only key 1000 occurs twice";
  EXPECT_EQ(pending, 40);
}

// fm, binary, 3 factors, plain sgd at rate 1 (an update is minus the
// gradient), embeddings starting large enough that pairs matter.
Config FmConfig() {
  Config config = TwoShardConfig();
  config.model.type = ModelType::kFm;
  config.model.fm.dim = 3;
  config.model.fm.init_scale = 0.5;
  config.model.fm.learning_rate = 0;  // the optimizer's
  config.optimizer.type = OptimizerType::kSgd;
  config.optimizer.learning_rate = 1.0;
  return config;
}

// Keys 1..5 in four examples with uneven values (one key twice in a row).
std::shared_ptr<data::SparseDataset> FmData() {
  auto d = std::make_shared<data::SparseDataset>();
  data::SparseRowWriter writer(d.get());
  const std::vector<std::vector<std::pair<uint64_t, float>>> rows = {
      {{1, 1.0f}, {2, 0.5f}, {3, 2.0f}},
      {{2, 1.5f}, {4, -1.0f}},
      {{1, 0.25f}, {3, 1.0f}, {5, 1.0f}, {5, 0.5f}},
      {{4, 2.0f}, {5, -0.75f}, {1, 1.0f}}};
  const float labels[] = {1, 0, 1, 0};
  for (size_t r = 0; r < rows.size(); ++r) {
    for (const auto& [k, x] : rows[r]) writer.Add(k, x);
    EXPECT_THAT(writer.EndRow(labels[r]), IsOk());
  }
  return d;
}

// The rows of keys 1..5: linear weights, then embeddings (k a key).
void ReadFm(ShardsPs& ps, int k, std::vector<double>* w,
            std::vector<double>* v) {
  w->assign(6, 0);
  v->assign(6 * k, 0);
  for (uint64_t key = 1; key <= 5; ++key) {
    std::vector<std::vector<uint64_t>> keys(2);
    keys[ShardOfKey(key, 16, 2)].push_back(key);
    std::vector<std::vector<float>> values;
    ASSERT_THAT(ps.PullRows(0, 1, keys, &values), IsOk());
    (*w)[key] = values[ShardOfKey(key, 16, 2)][0];
    ASSERT_THAT(ps.PullRows(1, k, keys, &values), IsOk());
    for (int f = 0; f < k; ++f) {
      (*v)[key * k + f] = values[ShardOfKey(key, 16, 2)][f];
    }
  }
}

// The batch's summed logistic loss, the pairs summed one by one (not by
// Rendle's identity, which the loop uses); with `row_scale`, row r's loss
// counts row_scale[r] times.
double FmLoss(const data::SparseDataset& d, double bias,
              const std::vector<double>& w, const std::vector<double>& v, int k,
              const std::vector<double>* row_scale = nullptr) {
  double loss = 0;
  for (int64_t r = 0; r < d.rows(); ++r) {
    double m = bias;
    for (int64_t i = d.offsets[r]; i < d.offsets[r + 1]; ++i) {
      m += w[d.keys[i]] * d.values[i];
      for (int64_t j = i + 1; j < d.offsets[r + 1]; ++j) {
        double dot = 0;
        for (int f = 0; f < k; ++f) {
          dot += v[d.keys[i] * k + f] * v[d.keys[j] * k + f];
        }
        m += dot * d.values[i] * d.values[j];
      }
    }
    loss += (row_scale == nullptr ? 1.0 : (*row_scale)[r]) *
            (std::log1p(std::exp(m)) - d.y[r] * m);
  }
  return loss;
}

TEST(SparseLoopTest, FmPushesTheGradientOfItsLoss) {
  Config config = FmConfig();
  config.model.fm.scale_step = false;  // the plain gradient
  auto spec = ModelSpec::Create(config.model);
  ASSERT_THAT(spec.status(), IsOk());
  ASSERT_EQ(spec->sparse_tables().size(), 2u);
  ShardsPs ps(config);
  const int k = 3;
  std::vector<double> w0, v0;
  ReadFm(ps, k, &w0, &v0);
  ASSERT_NE(v0[1 * k], 0.0) << "embeddings start at their initializer";
  auto train = FmData();
  SparseLoop::Options options;
  options.training.batch_size = 4;
  options.training.steps = 1;
  options.num_shards = 2;
  SparseLoop loop(*spec, &ps, train, train.get(), options);
  ASSERT_THAT(loop.Run(), IsOk());
  std::vector<double> w1, v1;
  ReadFm(ps, k, &w1, &v1);
  // sgd at rate 1: the gradient is the change; against central differences
  // of the loss at the starting point (bias 0).
  const double h = 1e-5;
  for (uint64_t key = 1; key <= 5; ++key) {
    std::vector<double> wp = w0, wm = w0;
    wp[key] += h;
    wm[key] -= h;
    const double g =
        (FmLoss(*train, 0, wp, v0, k) - FmLoss(*train, 0, wm, v0, k)) / (2 * h);
    EXPECT_NEAR(w0[key] - w1[key], g, 1e-4 + 1e-4 * std::fabs(g))
        << "weight of key " << key;
    for (int f = 0; f < k; ++f) {
      std::vector<double> vp = v0, vm = v0;
      vp[key * k + f] += h;
      vm[key * k + f] -= h;
      const double gv =
          (FmLoss(*train, 0, w0, vp, k) - FmLoss(*train, 0, w0, vm, k)) /
          (2 * h);
      EXPECT_NEAR(v0[key * k + f] - v1[key * k + f], gv,
                  1e-4 + 1e-4 * std::fabs(gv))
          << "embedding " << f << " of key " << key;
    }
  }
}

TEST(SparseLoopTest, EmbeddingStepScaleIsOneOverTheExamplesL1) {
  auto d = FmData();
  EXPECT_DOUBLE_EQ(EmbeddingStepScale(*d, 0), 1 / 3.5);
  EXPECT_DOUBLE_EQ(EmbeddingStepScale(*d, 1), 1 / 2.5);
  EXPECT_DOUBLE_EQ(EmbeddingStepScale(*d, 2), 1 / 2.75);
  EXPECT_DOUBLE_EQ(EmbeddingStepScale(*d, 3), 1 / 3.75);
  // At least 1: a small example's step is not raised.
  data::SparseDataset small;
  data::SparseRowWriter writer(&small);
  writer.Add(7, 0.25f);
  ASSERT_THAT(writer.EndRow(1), IsOk());
  EXPECT_DOUBLE_EQ(EmbeddingStepScale(small, 0), 1.0);
}

// fm.scale_step (the default): the weights' gradient is the loss's, each
// embedding's that of the loss with each example's term divided by the sum
// of its |x| (EmbeddingStepScale), against central differences.
TEST(SparseLoopTest, FmScalesEachExamplesEmbeddingGradientByItsL1) {
  Config config = FmConfig();
  ASSERT_TRUE(config.model.fm.scale_step);
  auto spec = ModelSpec::Create(config.model);
  ASSERT_THAT(spec.status(), IsOk());
  ShardsPs ps(config);
  const int k = 3;
  std::vector<double> w0, v0;
  ReadFm(ps, k, &w0, &v0);
  auto train = FmData();
  std::vector<double> scale;
  for (int64_t r = 0; r < train->rows(); ++r) {
    scale.push_back(EmbeddingStepScale(*train, r));
  }
  SparseLoop::Options options;
  options.training.batch_size = 4;
  options.training.steps = 1;
  options.num_shards = 2;
  options.fm_scale_step = true;
  SparseLoop loop(*spec, &ps, train, train.get(), options);
  ASSERT_THAT(loop.Run(), IsOk());
  std::vector<double> w1, v1;
  ReadFm(ps, k, &w1, &v1);
  const double h = 1e-5;
  for (uint64_t key = 1; key <= 5; ++key) {
    std::vector<double> wp = w0, wm = w0;
    wp[key] += h;
    wm[key] -= h;
    const double g =
        (FmLoss(*train, 0, wp, v0, k) - FmLoss(*train, 0, wm, v0, k)) / (2 * h);
    EXPECT_NEAR(w0[key] - w1[key], g, 1e-4 + 1e-4 * std::fabs(g))
        << "weight of key " << key;
    for (int f = 0; f < k; ++f) {
      std::vector<double> vp = v0, vm = v0;
      vp[key * k + f] += h;
      vm[key * k + f] -= h;
      const double gv = (FmLoss(*train, 0, w0, vp, k, &scale) -
                         FmLoss(*train, 0, w0, vm, k, &scale)) /
                        (2 * h);
      EXPECT_NEAR(v0[key * k + f] - v1[key * k + f], gv,
                  1e-4 + 1e-4 * std::fabs(gv))
          << "embedding " << f << " of key " << key;
      // Not the unscaled gradient (every example here has |x| > 1).
      const double plain =
          (FmLoss(*train, 0, w0, vp, k) - FmLoss(*train, 0, w0, vm, k)) /
          (2 * h);
      if (std::fabs(plain) > 1e-3) {
        EXPECT_GT(std::fabs(v0[key * k + f] - v1[key * k + f] - plain), 1e-4)
            << "embedding " << f << " of key " << key;
      }
    }
  }
}

// What an export of the ps holds for MakeData's keys into *m: each nonzero
// weight and each embedding row (k floats) that exists; returns how many
// keys have no embedding row (the export's scorer reads their initializer).
int64_t AddRows(ShardsPs& ps, int k, model::SparseModel* m) {
  int64_t without = 0;
  for (uint64_t id = 1; id <= 200; ++id) {
    const uint64_t key = id * 1000003ULL;
    const int s = ShardOfKey(key, 16, 2);
    std::vector<std::vector<uint64_t>> keys(2);
    keys[s].push_back(key);
    std::vector<std::vector<float>> values;
    EXPECT_THAT(ps.PullRows(0, 1, keys, &values), IsOk());
    if (values[s][0] != 0) {
      m->keys.push_back(key);
      m->weights.push_back(values[s][0]);
    }
    proto::LookupRequest lookup;
    lookup.set_table(1);
    lookup.set_keys(&key, sizeof(key));
    proto::LookupResponse found;
    EXPECT_THAT(ps.shard(s).Lookup(lookup, &found), IsOk());
    if (found.missing()[0] != 0) {
      ++without;
      continue;
    }
    EXPECT_THAT(ps.PullRows(1, k, keys, &values), IsOk());
    m->embedding_keys.push_back(key);
    m->embeddings.insert(m->embeddings.end(), values[s].begin(),
                         values[s].end());
  }
  return without;
}

TEST(SparseLoopTest, FmEvaluationIsTheExportedModelsScoring) {
  Config config = FmConfig();
  config.optimizer.learning_rate = 0.1;
  config.model.fm.embedding_min_count = 60;  // some keys keep no embedding
  auto spec = ModelSpec::Create(config.model);
  ASSERT_THAT(spec.status(), IsOk());
  ShardsPs ps(config);
  auto train = std::make_shared<data::SparseDataset>(MakeData(300, 5));
  const data::SparseDataset test = MakeData(200, 6);
  SparseLoop::Options options;
  options.training.batch_size = 16;
  options.training.epochs = 2;
  options.num_shards = 2;
  options.send_counts = true;
  SparseLoop loop(*spec, &ps, train, &test, options);
  ASSERT_THAT(loop.Run(), IsOk());
  // The model as an export holds it: weights, the embedding rows that
  // exist, and the initializer for the rest.
  model::SparseModel m;
  m.meta.set_type("fm");
  m.meta.set_fm_dim(3);
  m.meta.set_fm_init_scale(config.model.fm.init_scale);
  m.meta.set_fm_init_seed(SparseTableSeed(config.model.init_seed, 1));
  std::vector<float> bias(1);
  std::vector<uint64_t> versions;
  ASSERT_THAT(ps.Pull(bias.data(), &versions), IsOk());
  m.bias = bias[0];
  const int64_t without = AddRows(ps, 3, &m);
  EXPECT_GT(without, 0) << "embedding_min_count 60 left some keys without";
  const std::vector<float> served = model::Margins(m, test);
  const model::Metrics mine = model::ComputeMetrics(
      Task::kBinary, served.data(), test.y.data(), test.rows(), 1);
  const WorkerStats stats = loop.stats();
  // Every metric equal to the last bit: the same floats went in.
  EXPECT_EQ(stats.test_loss, mine.loss);
  EXPECT_EQ(stats.metrics, mine.Reported(Task::kBinary));
}

// wide_deep over keys 1..5 in two fields (key % 2), mean pooling, an MLP of
// [2 * 3, 4, 1] on the CPU backend.
Config WideDeepConfig() {
  Config config = FmConfig();
  config.model.type = ModelType::kWideDeep;
  config.model.wide_deep.dim = 3;
  config.model.wide_deep.fields = 2;
  config.model.wide_deep.hidden = {4};
  config.model.wide_deep.init_scale = 0.5;
  return config;
}

std::shared_ptr<data::SparseDataset> WideDeepData() {
  auto d = FmData();
  d->fields.clear();
  for (uint64_t key : d->keys) d->fields.push_back(key % 2);
  return d;
}

// The summed logistic loss of the batch, in double and written out
// plainly: the weights' sum plus an MLP of the per-field mean of x * v.
double WideDeepLoss(const data::SparseDataset& d, const std::vector<double>& w,
                    const std::vector<double>& v, const std::vector<double>& p,
                    const std::vector<int>& layers, int k) {
  double loss = 0;
  for (int64_t r = 0; r < d.rows(); ++r) {
    double m = 0;
    std::vector<double> a(layers[0], 0.0);
    std::vector<int> count(2, 0);
    for (int64_t i = d.offsets[r]; i < d.offsets[r + 1]; ++i) {
      ++count[d.fields[i]];
    }
    for (int64_t i = d.offsets[r]; i < d.offsets[r + 1]; ++i) {
      m += w[d.keys[i]] * d.values[i];
      for (int f = 0; f < k; ++f) {
        a[d.fields[i] * k + f] +=
            d.values[i] / count[d.fields[i]] * v[d.keys[i] * k + f];
      }
    }
    size_t at = 0;
    for (size_t l = 0; l + 1 < layers.size(); ++l) {
      const int in = layers[l], out = layers[l + 1];
      std::vector<double> z(out);
      for (int o = 0; o < out; ++o) {
        z[o] = p[at + in * out + o];
        for (int i = 0; i < in; ++i) z[o] += a[i] * p[at + i * out + o];
        if (l + 2 < layers.size()) z[o] = std::max(z[o], 0.0);
      }
      at += in * out + out;
      a = z;
    }
    m += a[0];
    loss += std::log1p(std::exp(m)) - d.y[r] * m;
  }
  return loss;
}

// One step of sgd at rate 1 (the MLP at 0.5): the change of every weight and
// embedding is the summed loss's gradient, and of every MLP parameter half
// the mean loss's,
// against central differences of WideDeepLoss.
TEST(SparseLoopTest, WideDeepPushesTheGradientOfItsLoss) {
  Config config = WideDeepConfig();
  // The MLP's blocks at a rate of their own (the ps's dense optimizer).
  config.model.wide_deep.mlp_learning_rate = 0.5;
  auto spec = ModelSpec::Create(config.model);
  ASSERT_THAT(spec.status(), IsOk());
  ASSERT_EQ(spec->layers(), (std::vector<int>{6, 4, 1}));
  ShardsPs ps(config);
  const int k = 3;
  std::vector<double> w0, v0;
  ReadFm(ps, k, &w0, &v0);
  std::vector<float> params(spec->num_params());
  std::vector<uint64_t> versions;
  ASSERT_THAT(ps.Pull(params.data(), &versions), IsOk());
  const std::vector<double> p0(params.begin(), params.end());
  auto train = WideDeepData();
  CpuBackend backend(*spec, 4);
  SparseLoop::Options options;
  options.training.batch_size = 4;
  options.training.steps = 1;
  options.num_shards = 2;
  options.backend = &backend;
  options.mean_pooling = true;
  SparseLoop loop(*spec, &ps, train, train.get(), options);
  ASSERT_THAT(loop.Run(), IsOk());
  std::vector<double> w1, v1;
  ReadFm(ps, k, &w1, &v1);
  ASSERT_THAT(ps.Pull(params.data(), &versions), IsOk());
  const double h = 1e-5;
  auto loss = [&](const std::vector<double>& w, const std::vector<double>& v,
                  const std::vector<double>& p) {
    return WideDeepLoss(*train, w, v, p, spec->layers(), k);
  };
  for (uint64_t key = 1; key <= 5; ++key) {
    std::vector<double> wp = w0, wm = w0;
    wp[key] += h;
    wm[key] -= h;
    const double g = (loss(wp, v0, p0) - loss(wm, v0, p0)) / (2 * h);
    EXPECT_NEAR(w0[key] - w1[key], g, 1e-4 + 1e-3 * std::fabs(g))
        << "weight of key " << key;
    for (int f = 0; f < k; ++f) {
      std::vector<double> vp = v0, vm = v0;
      vp[key * k + f] += h;
      vm[key * k + f] -= h;
      const double gv = (loss(w0, vp, p0) - loss(w0, vm, p0)) / (2 * h);
      EXPECT_NEAR(v0[key * k + f] - v1[key * k + f], gv,
                  1e-4 + 1e-3 * std::fabs(gv))
          << "embedding " << f << " of key " << key;
    }
  }
  for (size_t i = 0; i < p0.size(); ++i) {
    std::vector<double> pp = p0, pm = p0;
    pp[i] += h;
    pm[i] -= h;
    const double g = (loss(w0, v0, pp) - loss(w0, v0, pm)) / (2 * h) / 4;
    EXPECT_NEAR(p0[i] - params[i], 0.5 * g, 1e-4 + 1e-3 * std::fabs(g))
        << "MLP parameter " << i;
  }
}

// The worker's evaluation of a trained wide_deep model is the exported
// model's scoring (model::Margins) to the last bit.
TEST(SparseLoopTest, WideDeepEvaluationIsTheExportedModelsScoring) {
  Config config = WideDeepConfig();
  config.optimizer.learning_rate = 0.05;
  auto spec = ModelSpec::Create(config.model);
  ASSERT_THAT(spec.status(), IsOk());
  ShardsPs ps(config);
  auto with_fields = [](data::SparseDataset d) {
    for (uint64_t key : d.keys) d.fields.push_back((key / 1000003ULL) % 2);
    return d;
  };
  auto train =
      std::make_shared<data::SparseDataset>(with_fields(MakeData(300, 5)));
  const data::SparseDataset test = with_fields(MakeData(200, 6));
  CpuBackend backend(*spec, 16);
  SparseLoop::Options options;
  options.training.batch_size = 16;
  options.training.epochs = 2;
  options.num_shards = 2;
  options.backend = &backend;
  options.mean_pooling = true;
  SparseLoop loop(*spec, &ps, train, &test, options);
  ASSERT_THAT(loop.Run(), IsOk());
  model::SparseModel m;
  m.meta.set_type("wide_deep");
  m.meta.set_fm_dim(3);
  m.meta.set_fm_init_scale(config.model.wide_deep.init_scale);
  m.meta.set_fm_init_seed(SparseTableSeed(config.model.init_seed, 1));
  m.meta.set_pooling("mean");
  for (int width : spec->layers()) m.meta.add_layers(width);
  m.mlp.resize(spec->num_params());
  std::vector<uint64_t> versions;
  ASSERT_THAT(ps.Pull(m.mlp.data(), &versions), IsOk());
  AddRows(ps, 3, &m);
  const std::vector<float> served = model::Margins(m, test);
  const model::Metrics mine = model::ComputeMetrics(
      Task::kBinary, served.data(), test.y.data(), test.rows(), 1);
  const WorkerStats stats = loop.stats();
  EXPECT_EQ(stats.test_loss, mine.loss);
  EXPECT_EQ(stats.metrics, mine.Reported(Task::kBinary));
}

}  // namespace
}  // namespace downpour::worker
