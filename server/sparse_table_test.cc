#include "server/sparse_table.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour::server {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::HasSubstr;

std::unique_ptr<SparseTable> MakeTable(SparseOptimizerType type, int dim = 1,
                                       double lr = 0.1) {
  SparseTable::Options options;
  options.dim = dim;
  options.optimizer.type = type;
  options.optimizer.learning_rate = lr;
  auto table = SparseTable::Create(options);
  EXPECT_THAT(table.status(), IsOk());
  return std::move(table).value();
}

TEST(SparseTableTest, AReadCreatesNoRowAndReturnsTheInitialValues) {
  auto table = MakeTable(SparseOptimizerType::kFtrl, 3);
  const std::vector<uint64_t> keys = {7, 1ULL << 63, ~0ULL};
  std::vector<float> out(9, -1.0f);
  std::vector<uint32_t> versions(3, 9);
  table->Read(keys.data(), 3, out.data(), versions.data());
  EXPECT_EQ(table->rows(), 0);
  EXPECT_EQ(table->bytes(), 0) << "nothing is allocated before a row exists";
  for (float v : out) EXPECT_EQ(v, 0.0f);
  for (uint32_t v : versions) EXPECT_EQ(v, 0u);
}

TEST(SparseTableTest, SeededInitialValuesDependOnlyOnSeedAndKey) {
  SparseTable::Options options;
  options.dim = 4;
  options.init = SparseTable::Init::kUniform;
  options.init_scale = 0.5;
  options.seed = 42;
  options.optimizer.type = SparseOptimizerType::kAdagrad;
  auto a = SparseTable::Create(options).value();
  auto b = SparseTable::Create(options).value();
  // a creates rows in one order, b in the other.
  const std::vector<uint64_t> keys = {3, 99, 123456789};
  const std::vector<float> zero(12, 0.0f);
  a->Apply(keys.data(), 3, zero.data());
  for (int i = 2; i >= 0; --i) b->Apply(&keys[i], 1, zero.data());
  std::vector<float> va(12), vb(12), fresh(12);
  a->Read(keys.data(), 3, va.data());
  b->Read(keys.data(), 3, vb.data());
  auto c = SparseTable::Create(options).value();
  c->Read(keys.data(), 3, fresh.data());
  EXPECT_EQ(va, vb);
  EXPECT_EQ(va, fresh) << "a read before the row exists sees the same values";
  for (float v : va) {
    EXPECT_LE(std::fabs(v), 0.5f);
    EXPECT_NE(v, 0.0f);
  }
  EXPECT_NE(va[0], va[1]) << "values within a row differ";
  options.seed = 43;
  auto d = SparseTable::Create(options).value();
  std::vector<float> vd(12);
  d->Read(keys.data(), 3, vd.data());
  EXPECT_NE(va, vd) << "another seed gives other values";
}

TEST(SparseTableTest, ApplyCreatesEachRowOnceAndCountsItsUpdates) {
  auto table = MakeTable(SparseOptimizerType::kSgd);
  const std::vector<uint64_t> keys = {1, 5, 9};
  const std::vector<float> g = {1, 2, 3};
  EXPECT_EQ(table->Apply(keys.data(), 3, g.data()), 3);
  EXPECT_EQ(table->Apply(keys.data(), 2, g.data()), 0);
  EXPECT_EQ(table->rows(), 3);
  EXPECT_EQ(table->rows_created(), 3);
  EXPECT_EQ(table->row_updates(), 5);
  std::vector<float> w(3);
  std::vector<uint32_t> versions(3);
  table->Read(keys.data(), 3, w.data(), versions.data());
  EXPECT_FLOAT_EQ(w[0], -0.2f);  // two updates of lr 0.1 * 1
  EXPECT_FLOAT_EQ(w[1], -0.4f);
  EXPECT_FLOAT_EQ(w[2], -0.3f);
  EXPECT_EQ(versions, (std::vector<uint32_t>{2, 2, 1}));
}

// The rules against the formulas of the header, in double.
TEST(SparseTableTest, EachRuleFollowsItsFormula) {
  const std::vector<float> grads = {0.5f, -1.5f, 0.25f, 2.0f};
  const uint64_t key = 77;
  {
    auto t = MakeTable(SparseOptimizerType::kAdagrad, 1, 0.1);
    double w = 0, h = 0;
    for (float g : grads) {
      t->Apply(&key, 1, &g);
      h += double{g} * g;
      w -= 0.1 * g / (std::sqrt(h) + 1e-8);
    }
    float got;
    t->Read(&key, 1, &got);
    EXPECT_NEAR(got, w, 1e-6);
  }
  {
    auto t = MakeTable(SparseOptimizerType::kAdam, 1, 0.1);
    double w = 0, m = 0, v = 0;
    int step = 0;
    for (float g : grads) {
      t->Apply(&key, 1, &g);
      ++step;
      m = 0.9 * m + 0.1 * g;
      v = 0.999 * v + 0.001 * double{g} * g;
      w -= 0.1 * (m / (1 - std::pow(0.9, step))) /
           (std::sqrt(v / (1 - std::pow(0.999, step))) + 1e-8);
    }
    float got;
    t->Read(&key, 1, &got);
    EXPECT_NEAR(got, w, 1e-5);
  }
  {
    SparseTable::Options options;
    options.optimizer.type = SparseOptimizerType::kFtrl;
    options.optimizer.learning_rate = 0.5;  // alpha
    options.optimizer.beta = 1.0;
    options.optimizer.l1 = 0.1;
    options.optimizer.l2 = 0.2;
    auto t = SparseTable::Create(options).value();
    double w = 0, z = 0, n = 0;
    for (float g : grads) {
      t->Apply(&key, 1, &g);
      const double sigma = (std::sqrt(n + double{g} * g) - std::sqrt(n)) / 0.5;
      z += g - sigma * w;
      n += double{g} * g;
      w = std::fabs(z) <= 0.1 ? 0
                              : -(z - (z < 0 ? -1 : 1) * 0.1) /
                                    ((1.0 + std::sqrt(n)) / 0.5 + 0.2);
    }
    float got;
    t->Read(&key, 1, &got);
    EXPECT_NEAR(got, w, 1e-6);
    EXPECT_NE(got, 0.0f);
  }
}

// optimizer.weight_decay reaches sparse rows (it once reached only the dense
// bias): sgd and adagrad add wd * w to a touched row's gradient; a key absent
// from a push is not decayed; ftrl ignores it (its L2 is l2).
TEST(SparseTableTest, WeightDecayIsAddedToTheGradientOfTouchedRows) {
  const std::vector<float> grads = {0.5f, -1.5f, 0.25f, 2.0f};
  const uint64_t key = 77, other = 78;
  const double wd = 0.3;
  for (SparseOptimizerType type :
       {SparseOptimizerType::kSgd, SparseOptimizerType::kAdagrad}) {
    SparseTable::Options options;
    options.optimizer.type = type;
    options.optimizer.learning_rate = 0.1;
    options.optimizer.weight_decay = wd;
    auto t = SparseTable::Create(options).value();
    double w = 0, h = 0;
    const float g_other = 1.0f;
    t->Apply(&other, 1, &g_other);
    float w_other;
    t->Read(&other, 1, &w_other);
    for (float g : grads) {
      t->Apply(&key, 1, &g);
      const double gd = g + wd * w;
      if (type == SparseOptimizerType::kSgd) {
        w -= 0.1 * gd;
      } else {
        h += gd * gd;
        w -= 0.1 * gd / (std::sqrt(h) + 1e-8);
      }
    }
    float got;
    t->Read(&key, 1, &got);
    EXPECT_NEAR(got, w, 1e-6) << SparseOptimizerName(type);
    float still;
    t->Read(&other, 1, &still);
    EXPECT_EQ(still, w_other) << "an untouched row is not decayed";
  }
  // ftrl: weight_decay has no effect on the rows.
  std::vector<float> ftrl_values;
  for (double decay : {0.0, wd}) {
    SparseTable::Options options;
    options.optimizer.type = SparseOptimizerType::kFtrl;
    options.optimizer.learning_rate = 0.5;
    options.optimizer.weight_decay = decay;
    auto t = SparseTable::Create(options).value();
    for (float g : grads) t->Apply(&key, 1, &g);
    float v;
    t->Read(&key, 1, &v);
    ftrl_values.push_back(v);
  }
  EXPECT_EQ(ftrl_values[0], ftrl_values[1]);
  SparseTable::Options bad;
  bad.optimizer.weight_decay = -1;
  EXPECT_THAT(
      SparseTable::Create(bad).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("weight_decay")));
}

TEST(SparseTableTest, FtrlL1KeepsSmallWeightsAtExactlyZero) {
  SparseTable::Options options;
  options.optimizer.type = SparseOptimizerType::kFtrl;
  options.optimizer.l1 = 1.0;
  auto t = SparseTable::Create(options).value();
  std::vector<uint64_t> keys(100);
  std::vector<float> g(100);
  for (int i = 0; i < 100; ++i) {
    keys[i] = i;
    g[i] = i < 10 ? 5.0f : 0.01f;  // 10 strong features, 90 weak ones
  }
  for (int round = 0; round < 3; ++round) t->Apply(keys.data(), 100, g.data());
  EXPECT_EQ(t->rows(), 100);
  EXPECT_EQ(t->nonzero_values(), 10);
  std::vector<float> w(100);
  t->Read(keys.data(), 100, w.data());
  for (int i = 10; i < 100; ++i) EXPECT_EQ(w[i], 0.0f) << i;
  for (int i = 0; i < 10; ++i) EXPECT_LT(w[i], 0.0f) << i;
}

// FTRL's update written out once, value by value in double precision, as
// the table's rows must follow it bit for bit whatever the row width (wide
// rows are updated two values at a time).
void ReferenceFtrl(const SparseOptimizer& p, float g, float* w, float* z_state,
                   float* n_state) {
  const double alpha = p.learning_rate;
  const double n_old = *n_state;
  const double n_new = n_old + static_cast<double>(g) * g;
  const double sigma = (std::sqrt(n_new) - std::sqrt(n_old)) / alpha;
  const double z = *z_state + g - sigma * *w;
  *z_state = static_cast<float>(z);
  *n_state = static_cast<float>(n_new);
  if (std::fabs(z) <= p.l1) {
    *w = 0.0f;
  } else {
    const double sign = z < 0 ? -1.0 : 1.0;
    *w = static_cast<float>(-(z - sign * p.l1) /
                            ((p.beta + std::sqrt(n_new)) / alpha + p.l2));
  }
}

TEST(SparseTableTest, FtrlRowsOfEveryWidthFollowTheScalarFormulaBitForBit) {
  for (int dim : {1, 2, 3, 16, 17}) {
    SparseTable::Options options;
    options.dim = dim;
    options.optimizer.type = SparseOptimizerType::kFtrl;
    options.optimizer.learning_rate = 0.05;
    options.optimizer.l1 = 0.3;  // both branches: some weights exactly 0
    options.optimizer.l2 = 0.1;
    options.optimizer.beta = 1.0;
    auto table = SparseTable::Create(options).value();
    const int keys = 50;
    std::vector<uint64_t> k(keys);
    for (int i = 0; i < keys; ++i) k[i] = 100 + i;
    // Per key: dim weights, then dim z, then dim n (the row's layout).
    std::vector<float> want(keys * 3 * dim, 0.0f);
    std::mt19937 rng(dim);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> g(keys * dim);
    for (int round = 0; round < 20; ++round) {
      for (float& x : g) x = normal(rng);
      table->Apply(k.data(), keys, g.data());
      for (int i = 0; i < keys; ++i) {
        float* row = want.data() + i * 3 * dim;
        for (int j = 0; j < dim; ++j) {
          ReferenceFtrl(options.optimizer, g[i * dim + j], row + j,
                        row + dim + j, row + 2 * dim + j);
        }
      }
    }
    const SparseTable::Rows rows = table->Snapshot();
    ASSERT_EQ(rows.data.size(), want.size()) << dim;
    int zeros = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      uint32_t got_bits, want_bits;
      std::memcpy(&got_bits, &rows.data[i], 4);
      std::memcpy(&want_bits, &want[i], 4);
      EXPECT_EQ(got_bits, want_bits) << "dim " << dim << ", float " << i << ": "
                                     << rows.data[i] << " != " << want[i];
      zeros += (i % (3 * dim)) < static_cast<size_t>(dim) && want[i] == 0.0f;
    }
    EXPECT_GT(zeros, 0) << dim;
  }
}

TEST(SparseTableTest, CheckPushRefusesHostileInput) {
  const int dim = 2;
  std::vector<uint64_t> keys = {1, 2, 3};
  std::vector<float> g(6, 0.5f);
  std::vector<uint32_t> counts = {1, 2, 1};
  EXPECT_THAT(SparseTable::CheckPush(keys.data(), 3, g.data(), 6, counts.data(),
                                     dim, 1e6),
              IsOk());
  // No keys is a bsp worker's empty part of a round; a negative count is not.
  EXPECT_THAT(
      SparseTable::CheckPush(keys.data(), 0, g.data(), 0, nullptr, dim, 0),
      IsOk());
  EXPECT_THAT(
      SparseTable::CheckPush(keys.data(), -1, g.data(), 0, nullptr, dim, 0),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("-1 keys")));
  EXPECT_THAT(
      SparseTable::CheckPush(keys.data(), 3, g.data(), 5, nullptr, dim, 0),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("need 6 gradient floats, got 5")));
  std::vector<uint64_t> unsorted = {1, 3, 2};
  EXPECT_THAT(
      SparseTable::CheckPush(unsorted.data(), 3, g.data(), 6, nullptr, dim, 0),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("key 2 at position 2 is out of order")));
  std::vector<uint64_t> repeated = {1, 3, 3};
  EXPECT_THAT(
      SparseTable::CheckPush(repeated.data(), 3, g.data(), 6, nullptr, dim, 0),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("key 3 at position 2 is repeated")));
  for (float bad : {std::numeric_limits<float>::quiet_NaN(),
                    std::numeric_limits<float>::infinity(), 1e30f}) {
    std::vector<float> poisoned = g;
    poisoned[3] = bad;
    EXPECT_THAT(SparseTable::CheckPush(keys.data(), 3, poisoned.data(), 6,
                                       nullptr, dim, 1e6),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("gradient of key 2 (value 1)")))
        << bad;
  }
  counts[1] = 0;
  EXPECT_THAT(SparseTable::CheckPush(keys.data(), 3, g.data(), 6, counts.data(),
                                     dim, 0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("key 2 has occurrence count 0")));
  EXPECT_THAT(
      SparseTable::CheckPush(keys.data(), SparseTable::kMaxKeysPerRequest + 1,
                             g.data(), 6, nullptr, dim, 0),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("split larger pushes")));
}

TEST(SparseTableTest, CapacityBoundsTheRowsCreated) {
  SparseTable::Options options;
  options.max_rows = 3;
  auto t = SparseTable::Create(options).value();
  const std::vector<uint64_t> keys = {1, 2, 3, 4};
  const std::vector<float> g(4, 1.0f);
  EXPECT_THAT(t->CheckCapacity(keys.data(), 3), IsOk());
  t->Apply(keys.data(), 3, g.data());
  EXPECT_THAT(t->CheckCapacity(keys.data(), 3), IsOk()) << "existing rows";
  EXPECT_THAT(
      t->CheckCapacity(keys.data(), 4),
      StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("max_rows 3")));
}

TEST(SparseTableTest, SnapshotAndRestoreAreBitIdentical) {
  auto a = MakeTable(SparseOptimizerType::kAdam, 4, 0.01);
  std::mt19937_64 rng(5);
  std::vector<uint64_t> keys;
  for (int i = 0; i < 200000; ++i) keys.push_back(rng());
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  std::vector<float> g(keys.size() * 4);
  std::normal_distribution<float> normal;
  for (float& x : g) x = normal(rng);
  a->Apply(keys.data(), keys.size(), g.data());
  a->Apply(keys.data(), keys.size() / 2, g.data());
  const SparseTable::Rows rows = a->Snapshot();
  ASSERT_EQ(rows.keys.size(), keys.size());
  EXPECT_TRUE(std::is_sorted(rows.keys.begin(), rows.keys.end()));
  auto b = MakeTable(SparseOptimizerType::kAdam, 4, 0.01);
  ASSERT_THAT(b->Restore(rows), IsOk());
  // Both continue with the same updates and stay identical, state included
  // (a lost m or v, or a wrong step count, would show here).
  a->Apply(keys.data(), keys.size(), g.data());
  b->Apply(keys.data(), keys.size(), g.data());
  const SparseTable::Rows ra = a->Snapshot(), rb = b->Snapshot();
  EXPECT_EQ(ra.keys, rb.keys);
  EXPECT_EQ(ra.versions, rb.versions);
  EXPECT_EQ(0, std::memcmp(ra.data.data(), rb.data.data(),
                           ra.data.size() * sizeof(float)));
  EXPECT_EQ(a->nonzero_values(), b->nonzero_values());

  auto ftrl = MakeTable(SparseOptimizerType::kFtrl, 4);
  EXPECT_THAT(ftrl->Restore(rows),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("trained with adam; this table has dim 4 and "
                                 "ftrl")));
  auto narrow = MakeTable(SparseOptimizerType::kAdam, 2);
  EXPECT_THAT(narrow->Restore(rows),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dim 2")));
  SparseTable::Rows broken = rows;
  std::swap(broken.keys[0], broken.keys[1]);
  EXPECT_THAT(b->Restore(broken), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("not ascending")));
  EXPECT_EQ(b->rows(), static_cast<int64_t>(keys.size())) << "unchanged";
}

// A backup follows its primary by merging the rows each cut changed: after
// every cut it holds exactly the primary's rows, state and versions, and its
// version sum counts the row updates.
TEST(SparseTableTest, MergingEachCutsChangesKeepsACopyIdentical) {
  SparseTable::Options options;
  options.dim = 2;
  options.optimizer.type = SparseOptimizerType::kFtrl;
  options.optimizer.l1 = 0.01;
  options.track_changes = true;
  auto primary = SparseTable::Create(options);
  ASSERT_THAT(primary.status(), IsOk());
  options.track_changes = false;
  auto backup = SparseTable::Create(options);
  ASSERT_THAT(backup.status(), IsOk());
  std::mt19937_64 rng(9);
  std::normal_distribution<float> normal;
  uint64_t updates = 0;
  for (int cut = 0; cut < 20; ++cut) {
    for (int push = 0; push < 5; ++push) {
      std::vector<uint64_t> keys;
      for (int i = 0; i < 300; ++i) keys.push_back(rng() % 5000);
      std::sort(keys.begin(), keys.end());
      keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
      std::vector<float> g(keys.size() * 2);
      for (float& x : g) x = normal(rng);
      (*primary)->Apply(keys.data(), keys.size(), g.data());
      updates += keys.size();
    }
    const SparseTable::Rows changed = (*primary)->TakeChanges();
    EXPECT_LT(changed.keys.size(), 1500u) << "only the rows of this cut";
    ASSERT_THAT((*backup)->Merge(changed), IsOk());
    EXPECT_TRUE((*primary)->TakeChanges().keys.empty()) << "taken once";
    const SparseTable::Rows a = (*primary)->Snapshot(),
                            b = (*backup)->Snapshot();
    ASSERT_EQ(a.keys, b.keys) << "cut " << cut;
    ASSERT_EQ(a.versions, b.versions);
    ASSERT_EQ(0, std::memcmp(a.data.data(), b.data.data(),
                             a.data.size() * sizeof(float)));
  }
  EXPECT_EQ((*primary)->version_sum(), updates);
  EXPECT_EQ((*backup)->version_sum(), updates);
  EXPECT_EQ((*backup)->nonzero_values(), (*primary)->nonzero_values());
  EXPECT_EQ((*backup)->rows_created(), 0) << "merged rows are not created";

  SparseTable::Rows poisoned = (*primary)->Snapshot();
  poisoned.data[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THAT((*backup)->Merge(poisoned),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("NaN")));
  EXPECT_EQ((*backup)->version_sum(), updates) << "unchanged";
}

// Admission by count: a key gets a row once its occurrences (the pushes'
// counts) reach min_count; before that its gradients are dropped, its reads
// return the initial value and only a counter is kept.
TEST(SparseTableTest, AdmissionByCountCreatesARowAtTheMinCount) {
  SparseTable::Options options;
  options.optimizer.type = SparseOptimizerType::kSgd;
  options.optimizer.learning_rate = 1.0;
  options.admit_min_count = 3;
  auto made = SparseTable::Create(options);
  ASSERT_THAT(made.status(), IsOk());
  SparseTable& t = **made;
  const uint64_t keys[2] = {10, 20};
  const float g[2] = {1, 1};
  const uint32_t once[2] = {1, 2};
  EXPECT_EQ(t.Apply(keys, 2, g, once), 0);  // 10 seen 1, 20 seen 2
  EXPECT_EQ(t.rows(), 0);
  EXPECT_EQ(t.pending_keys(), 2);
  EXPECT_EQ(t.updates_filtered(), 2);
  float w[2];
  t.Read(keys, 2, w);
  EXPECT_EQ(w[0], 0.0f);
  EXPECT_EQ(t.Apply(keys, 2, g, once), 1) << "20 reaches 3 (2 + 1), 10 not";
  EXPECT_EQ(t.rows(), 1);
  t.Read(keys, 2, w);
  EXPECT_EQ(w[0], 0.0f);
  EXPECT_EQ(w[1], -1.0f) << "the admitting push's gradient is applied";
  EXPECT_EQ(t.pending_keys(), 1);
  EXPECT_EQ(t.row_updates(), 1);
  EXPECT_EQ(t.Apply(keys, 1, g), 1) << "10: 2 + 1 (no counts: one each)";
  EXPECT_EQ(t.pending_keys(), 0);

  options.admit_probability = 0.5;
  EXPECT_THAT(
      SparseTable::Create(options).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("set one")));
}

// Admission by probability: each occurrence admits with the probability,
// from a seeded draw, so the same pushes admit the same keys in every run.
TEST(SparseTableTest, AdmissionByProbabilityIsSeededAndNearItsRate) {
  SparseTable::Options options;
  options.optimizer.type = SparseOptimizerType::kFtrl;
  options.admit_probability = 0.25;
  std::vector<uint64_t> keys(20000);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = 1 + 7 * i;
  const std::vector<float> g(keys.size(), 0.5f);
  std::vector<SparseTable::Rows> runs;
  for (int run = 0; run < 2; ++run) {
    auto made = SparseTable::Create(options);
    ASSERT_THAT(made.status(), IsOk());
    (*made)->Apply(keys.data(), keys.size(), g.data());
    const double admitted = static_cast<double>((*made)->rows()) / keys.size();
    EXPECT_NEAR(admitted, 0.25, 0.02);
    EXPECT_EQ((*made)->pending_keys() + (*made)->rows(),
              static_cast<int64_t>(keys.size()));
    // Three more occurrences each: 1 - 0.75^4 = 68 % admitted by now.
    const std::vector<uint32_t> three(keys.size(), 3);
    (*made)->Apply(keys.data(), keys.size(), g.data(), three.data());
    EXPECT_NEAR(static_cast<double>((*made)->rows()) / keys.size(),
                1 - std::pow(0.75, 4), 0.02);
    runs.push_back((*made)->Snapshot());
  }
  EXPECT_EQ(runs[0].keys, runs[1].keys) << "the same keys admitted";
}

// A key space of 10^8 touched at 10^5 keys: memory follows the rows created.
TEST(SparseTableTest, MemoryFollowsTheRowsCreatedNotTheKeySpace) {
  auto t = MakeTable(SparseOptimizerType::kFtrl);
  std::mt19937_64 rng(9);
  std::uniform_int_distribution<uint64_t> key(0, 100'000'000);
  std::vector<uint64_t> keys;
  for (int i = 0; i < 100000; ++i) keys.push_back(key(rng));
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  const std::vector<float> g(keys.size(), 0.1f);
  t->Apply(keys.data(), keys.size(), g.data());
  EXPECT_EQ(t->rows(), static_cast<int64_t>(keys.size()));
  // Two arena chunks (2^16 rows each, 16 bytes a row) and an index of at most
  // 2^18 slots (17 bytes each): under 100 bytes a row.
  EXPECT_LT(t->bytes(), 100 * t->rows());
  EXPECT_GT(t->bytes(), 16 * t->rows());
}

// --- Eviction, clocks and change cuts (issue 22) ------------------------

std::unique_ptr<SparseTable> EvictingTable(int64_t ttl, int64_t max_rows,
                                           bool track_changes = false) {
  SparseTable::Options options;
  options.dim = 2;
  options.optimizer.type = SparseOptimizerType::kFtrl;
  options.optimizer.l1 = 0.01;
  options.evict_ttl_updates = ttl;
  options.evict_max_rows = max_rows;
  options.track_changes = track_changes;
  auto table = SparseTable::Create(options);
  EXPECT_THAT(table.status(), IsOk());
  return std::move(table).value();
}

void ApplyOne(SparseTable* t, uint64_t key, float g = 0.5f) {
  const float grads[2] = {g, -g};
  t->Apply(&key, 1, grads);
}

// The whole of rows, bit for bit (values, state, versions, clocks, figures).
void ExpectSameRows(const SparseTable::Rows& a, const SparseTable::Rows& b) {
  ASSERT_EQ(a.keys, b.keys);
  EXPECT_EQ(a.versions, b.versions);
  EXPECT_EQ(a.clocks, b.clocks);
  EXPECT_EQ(a.clock, b.clock);
  EXPECT_EQ(a.evicted_versions, b.evicted_versions);
  ASSERT_EQ(a.data.size(), b.data.size());
  EXPECT_EQ(0, std::memcmp(a.data.data(), b.data.data(),
                           a.data.size() * sizeof(float)));
}

// max_rows keeps the most recently updated rows; the others go with their
// state and version, whose count stays in version_sum.
TEST(SparseTableTest, EvictionBeyondMaxRowsDropsTheLeastRecentlyUpdated) {
  auto t = EvictingTable(0, 3);
  for (uint64_t key = 1; key <= 6; ++key) ApplyOne(t.get(), key);
  ApplyOne(t.get(), 2);  // clocks: 1..6 for keys 1..6, then 7 for key 2
  EXPECT_EQ(t->clock(), 7u);
  const uint64_t kept[3] = {2, 5, 6};
  std::vector<float> before(6);
  std::vector<uint32_t> versions_before(3);
  t->Read(kept, 3, before.data(), versions_before.data());
  const uint64_t updates = t->version_sum();
  const int64_t nonzero_before = t->nonzero_values();
  EXPECT_EQ(t->Evict(), (std::vector<uint64_t>{1, 3, 4}));
  EXPECT_EQ(t->rows(), 3);
  EXPECT_EQ(t->rows_evicted(), 3);
  EXPECT_EQ(t->version_sum(), updates) << "eviction loses no row update";
  EXPECT_EQ(t->evicted_versions(), 3u);
  EXPECT_EQ(t->nonzero_values(), nonzero_before - 6);
  std::vector<float> after(6);
  std::vector<uint32_t> versions_after(3);
  t->Read(kept, 3, after.data(), versions_after.data());
  EXPECT_EQ(before, after) << "the rows kept are untouched";
  EXPECT_EQ(versions_before, versions_after);
  for (uint64_t key : {1, 3, 4}) EXPECT_FALSE(t->Contains(key));
  EXPECT_TRUE(t->Evict().empty()) << "within the bound now";
  // Seen again, an evicted key starts from its initial values.
  ApplyOne(t.get(), 3);
  auto fresh = EvictingTable(0, 0);
  ApplyOne(fresh.get(), 3);
  float again[2], first[2];
  uint32_t version = 0;
  t->Read(std::vector<uint64_t>{3}.data(), 1, again, &version);
  fresh->Read(std::vector<uint64_t>{3}.data(), 1, first);
  EXPECT_EQ(again[0], first[0]);
  EXPECT_EQ(again[1], first[1]);
  EXPECT_EQ(version, 1u);
}

// ttl_updates: a row untouched by the table's last N key updates goes.
TEST(SparseTableTest, EvictionByTtlDropsRowsUntouchedByTheLastUpdates) {
  auto t = EvictingTable(4, 0);
  for (uint64_t key = 1; key <= 5; ++key) ApplyOne(t.get(), key);  // clocks 1-5
  ApplyOne(t.get(), 1);                                            // clock 6
  // Clock 6: the last 4 updates are clocks 3..6 (keys 3, 4, 5, 1).
  EXPECT_EQ(t->Evict(), (std::vector<uint64_t>{2}));
  ApplyOne(t.get(), 4);
  ApplyOne(t.get(), 4);  // clock 8: keys 4 (8) and 1 (6) and 5 (5) stay
  EXPECT_EQ(t->Evict(), (std::vector<uint64_t>{3}));
  EXPECT_EQ(t->rows(), 3);
  auto both = EvictingTable(2, 1);
  for (uint64_t key = 1; key <= 4; ++key) ApplyOne(both.get(), key);
  EXPECT_EQ(both->Evict(), (std::vector<uint64_t>{1, 2, 3}))
      << "ttl drops 1 and 2, then max_rows 3";
}

// Compaction: holes are filled from the end, chunks past the end freed, and
// every row kept reads as before; new rows reuse the room.
TEST(SparseTableTest, EvictionCompactsTheArenaAndItsMemoryIsFreed) {
  auto t = EvictingTable(0, 20000);
  std::mt19937_64 rng(17);
  std::vector<uint64_t> keys;
  for (int i = 0; i < 150000; ++i) keys.push_back(rng());
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  // Rows in shuffled order of creation, so the victims are spread out.
  std::vector<uint64_t> order = keys;
  std::shuffle(order.begin(), order.end(), rng);
  for (uint64_t key : order) ApplyOne(t.get(), key, 0.1f * (key % 7));
  const SparseTable::Rows before = t->Snapshot();
  const int64_t bytes_before = t->bytes();
  const std::vector<uint64_t> gone = t->Evict();
  ASSERT_EQ(gone.size(), keys.size() - 20000);
  EXPECT_EQ(t->rows(), 20000);
  // 3 chunks and 2^18 index slots before; 1 chunk and 2^15 slots after.
  EXPECT_LT(t->bytes(), bytes_before / 3) << "chunks and index slots freed";
  // Exactly the 20000 most recent of `order` are kept, each whole.
  std::set<uint64_t> recent(order.end() - 20000, order.end());
  const SparseTable::Rows after = t->Snapshot();
  ASSERT_EQ(after.keys.size(), 20000u);
  size_t j = 0;
  for (size_t i = 0; i < before.keys.size(); ++i) {
    if (!recent.count(before.keys[i])) continue;
    ASSERT_EQ(after.keys[j], before.keys[i]);
    EXPECT_EQ(after.versions[j], before.versions[i]);
    EXPECT_EQ(after.clocks[j], before.clocks[i]);
    EXPECT_EQ(0, std::memcmp(&after.data[j * 6], &before.data[i * 6],
                             6 * sizeof(float)));
    ++j;
  }
  // The arena goes on: new rows after the compacted ones read back.
  for (int i = 0; i < 70000; ++i) ApplyOne(t.get(), i + 1, 0.25f);
  EXPECT_EQ(t->rows(), 90000);
  float w[2];
  t->Read(std::vector<uint64_t>{69999}.data(), 1, w);
  auto fresh = EvictingTable(0, 0);
  ApplyOne(fresh.get(), 69999, 0.25f);
  float expected[2];
  fresh->Read(std::vector<uint64_t>{69999}.data(), 1, expected);
  EXPECT_EQ(w[0], expected[0]);
}

// A replicated table sends what it evicted as tombstones: a copy that
// merges each cut holds exactly the primary's rows, evictions (and keys
// evicted, then seen again) included, with the same row updates counted.
TEST(SparseTableTest, EvictedKeysTravelAsTombstonesAndTheCopyDropsThem) {
  auto primary = EvictingTable(0, 300, /*track_changes=*/true);
  SparseTable::Options options;
  options.dim = 2;
  options.optimizer.type = SparseOptimizerType::kFtrl;
  options.optimizer.l1 = 0.01;
  options.track_clocks = true;
  auto backup = SparseTable::Create(options).value();
  std::mt19937_64 rng(21);
  std::normal_distribution<float> normal;
  int64_t evicted = 0;
  for (int cut = 0; cut < 12; ++cut) {
    for (int push = 0; push < 4; ++push) {
      std::vector<uint64_t> keys;
      for (int i = 0; i < 120; ++i) keys.push_back(rng() % 1500);
      std::sort(keys.begin(), keys.end());
      keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
      std::vector<float> g(keys.size() * 2);
      for (float& x : g) x = normal(rng);
      primary->Apply(keys.data(), keys.size(), g.data());
    }
    if (cut % 3 == 1) evicted += static_cast<int64_t>(primary->Evict().size());
    const SparseTable::Rows changed = primary->TakeChanges();
    ASSERT_THAT(backup->Merge(changed), IsOk());
    ASSERT_NO_FATAL_FAILURE(
        ExpectSameRows(primary->Snapshot(), backup->Snapshot()));
    EXPECT_EQ(backup->version_sum(), primary->version_sum());
    EXPECT_EQ(backup->nonzero_values(), primary->nonzero_values());
  }
  EXPECT_GT(evicted, 0);
  // Without the tombstones the copy keeps rows its primary dropped.
  primary->Evict();
  for (uint64_t key = 0; key < 1500; key += 3) ApplyOne(primary.get(), key);
  EXPECT_GT(primary->Evict().size(), 0u);
  SparseTable::Rows changed = primary->TakeChanges();
  EXPECT_FALSE(changed.evicted_keys.empty());
  auto blind = SparseTable::Create(options).value();
  ASSERT_THAT(blind->Restore(backup->Snapshot()), IsOk());
  ASSERT_THAT(backup->Merge(changed), IsOk());
  EXPECT_EQ(backup->Snapshot().keys, primary->Snapshot().keys);
  changed.evicted_keys.clear();
  ASSERT_THAT(blind->Merge(changed), IsOk());
  EXPECT_NE(blind->Snapshot().keys, primary->Snapshot().keys);
}

// Change cuts by clock (incremental checkpoints): a full snapshot overlaid
// with the cuts taken since, in one go or one by one, is the table now.
TEST(SparseTableTest, ChangesSinceAClockOverlaidOnASnapshotGiveTheTableNow) {
  auto t = EvictingTable(0, 400);
  std::mt19937_64 rng(33);
  std::normal_distribution<float> normal;
  auto train = [&](int pushes) {
    for (int push = 0; push < pushes; ++push) {
      std::vector<uint64_t> keys;
      for (int i = 0; i < 100; ++i) keys.push_back(rng() % 1200);
      std::sort(keys.begin(), keys.end());
      keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
      std::vector<float> g(keys.size() * 2);
      for (float& x : g) x = normal(rng);
      t->Apply(keys.data(), keys.size(), g.data());
    }
  };
  train(10);
  const SparseTable::Rows full = t->Snapshot();
  std::vector<SparseTable::Rows> deltas;
  for (int d = 0; d < 3; ++d) {
    const uint64_t since = t->clock();
    train(6);
    const std::vector<uint64_t> gone = t->Evict();
    SparseTable::Rows delta = t->ChangedSince(since);
    EXPECT_LT(delta.keys.size(), static_cast<size_t>(t->rows()) + 1);
    delta.evicted_keys = gone;
    deltas.push_back(std::move(delta));
  }
  const SparseTable::Rows now = t->Snapshot();
  absl::StatusOr<SparseTable::Rows> step = full;
  for (const SparseTable::Rows& d : deltas) {
    step = SparseTable::Overlay(*step, d);
    ASSERT_THAT(step.status(), IsOk());
  }
  step->evicted_keys.clear();
  ASSERT_NO_FATAL_FAILURE(ExpectSameRows(*step, now));
  auto composed = SparseTable::Overlay(deltas[0], deltas[1]);
  ASSERT_THAT(composed.status(), IsOk());
  composed = SparseTable::Overlay(*composed, deltas[2]);
  auto at_once = SparseTable::Overlay(full, *composed);
  ASSERT_THAT(at_once.status(), IsOk());
  ASSERT_NO_FATAL_FAILURE(ExpectSameRows(*at_once, now));
  // A restored table goes on evicting as the original does: clocks came along.
  auto restored = EvictingTable(0, 400);
  ASSERT_THAT(restored->Restore(now), IsOk());
  EXPECT_EQ(restored->version_sum(), t->version_sum());
  for (int push = 0; push < 8; ++push) {
    std::vector<uint64_t> keys;
    for (int i = 0; i < 100; ++i) keys.push_back(rng() % 1200);
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    std::vector<float> g(keys.size() * 2);
    for (float& x : g) x = normal(rng);
    t->Apply(keys.data(), keys.size(), g.data());
    restored->Apply(keys.data(), keys.size(), g.data());
  }
  EXPECT_EQ(t->Evict(), restored->Evict());
  ASSERT_NO_FATAL_FAILURE(ExpectSameRows(t->Snapshot(), restored->Snapshot()));
  SparseTable::Rows wrong = deltas[0];
  wrong.dim = 3;
  EXPECT_THAT(SparseTable::Overlay(full, wrong).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dim 3")));
}

TEST(SparseTableTest, CreateRefusesImpossibleOptions) {
  SparseTable::Options options;
  options.dim = 0;
  EXPECT_THAT(SparseTable::Create(options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dim 0")));
  options.dim = 1;
  options.optimizer.learning_rate = 0;
  EXPECT_THAT(
      SparseTable::Create(options).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("learning_rate")));
  options.optimizer.learning_rate = 0.1;
  options.optimizer.l1 = -1;
  EXPECT_THAT(SparseTable::Create(options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("l1")));
  EXPECT_THAT(ParseSparseOptimizer("momentum").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("valid: sgd, adagrad, adam, ftrl")));
}

// --- Eviction for the memory budget (issue 42) ---------------------------

// A flood of keys touched once goes before rows training keeps touching,
// however recent the flood; the push's own keys are never evicted.
TEST(SparseTableTest, EvictForRoomDropsRowsTouchedOnceBeforeTheOthers) {
  auto t = EvictingTable(0, 0, /*track_changes=*/true);
  t->TrackClocks();  // as SparseTables' tables do
  for (uint64_t key = 1; key <= 10; ++key) {
    ApplyOne(t.get(), key);
    ApplyOne(t.get(), key);  // established: updated twice
  }
  for (uint64_t key = 1000; key < 1100; ++key) ApplyOne(t.get(), key);
  const uint64_t updates = t->version_sum();
  const uint64_t keep_keys[] = {1000, 1099};  // the push about to land
  const std::vector<uint64_t> gone = t->EvictForRoom(12, keep_keys, 2);
  EXPECT_EQ(gone.size(), 98u);
  EXPECT_EQ(t->rows(), 12);
  for (uint64_t key = 1; key <= 10; ++key) {
    EXPECT_TRUE(t->Contains(key)) << key << ": updated twice, kept";
  }
  EXPECT_TRUE(t->Contains(1000)) << "the push's own keys stay";
  EXPECT_TRUE(t->Contains(1099));
  EXPECT_EQ(t->version_sum(), updates) << "eviction loses no row update";
  EXPECT_EQ(t->rows_evicted(), 98);
  EXPECT_EQ(t->TakeChanges().evicted_keys, gone) << "tombstones for the copy";
  // Beyond the flood, the least recently updated established rows go.
  const std::vector<uint64_t> more = t->EvictForRoom(8, keep_keys, 2);
  EXPECT_EQ(more, (std::vector<uint64_t>{1, 2, 3, 4}));
  // Never below the push's own rows.
  EXPECT_EQ(t->EvictForRoom(0, keep_keys, 2).size(), 6u);
  EXPECT_EQ(t->rows(), 2);
}

// BytesAt bounds bytes() at any size the table grows or shrinks to.
TEST(SparseTableTest, BytesAtBoundsTheBytesHeld) {
  auto t = EvictingTable(0, 0, /*track_changes=*/true);
  t->TrackClocks();
  for (int64_t rows : {0, 1, 1000, 70000, 150000}) {
    const int64_t bound = t->BytesAt(rows);
    for (uint64_t key = t->rows(); key < static_cast<uint64_t>(rows); ++key) {
      ApplyOne(t.get(), key + 1);
    }
    EXPECT_LE(t->bytes(), bound) << rows << " rows";
    EXPECT_GE(t->bytes(), rows * t->row_bytes()) << rows << " rows";
  }
  t->EvictForRoom(1000, nullptr, 0);
  t->TakeChanges();  // the replica's cut takes the tombstones
  EXPECT_LE(t->bytes(), t->BytesAt(1000)) << "after an eviction";
  EXPECT_LT(t->BytesAt(1000), t->BytesAt(150000)) << "chunks freed";
}

}  // namespace
}  // namespace downpour::server
