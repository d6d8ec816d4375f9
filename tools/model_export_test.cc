// Sparse export from a synthetic checkpoint folder of two shards, and each
// refusal: a shard missing or extra, another model, a checkpoint without
// sparse tables, a key on the wrong shard or out of order.
#include "tools/model_export.h"

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "common/model_spec.h"
#include "common/sparse_keys.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/checkpoint.h"

namespace downpour::tools {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr uint32_t kBuckets = 8;

std::string TempDir(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path =
      std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
  return path;
}

Config SparseConfig(int shards) {
  Config config;
  config.cluster.ps.clear();
  for (int i = 0; i < shards; ++i) {
    config.cluster.ps.push_back(absl::StrCat("127.0.0.1:", 7301 + i));
  }
  config.model.task = Task::kBinary;
  config.model.type = ModelType::kSparseLinear;
  config.model.sparse_buckets = kBuckets;
  config.data.source = DataSource::kLibsvm;
  return config;
}

// Weight of key k: 0 for every third key (FTRL's l1), else k / 100.
float WeightOf(uint64_t key) {
  return key % 3 == 0 ? 0.0f : static_cast<float>(key) / 100;
}

// Rows of table 0 for `keys` (ascending): weight, FTRL z and n, versions.
server::SparseTable::Rows Rows(const std::vector<uint64_t>& keys) {
  server::SparseTable::Rows rows;
  rows.dim = 1;
  rows.state_slots = 2;
  rows.optimizer = server::SparseOptimizerType::kFtrl;
  rows.keys = keys;
  for (uint64_t key : keys) {
    rows.data.insert(rows.data.end(), {WeightOf(key), 0.5f, 2.0f});
    rows.versions.push_back(3);
  }
  return rows;
}

// The checkpoint shard `shard` of `shards` writes for a model with
// `buckets`: the bias block (on ps 0) and its keys of 1..40 and one key
// above 2^63.
server::Checkpoint ShardCheckpoint(int shard, int shards, uint32_t buckets) {
  server::Checkpoint c;
  c.shard_index = shard;
  c.placement_epoch = 1;
  c.optimizer = "ftrl";
  if (shard == 0) c.blocks.push_back({0, 123, {0.75f}, {0, 0}});
  std::vector<uint64_t> keys;
  for (uint64_t key = 1; key <= 40; ++key) {
    if (ShardOfKey(key, buckets, shards) == shard) keys.push_back(key);
  }
  const uint64_t big = (uint64_t{1} << 63) + 11;
  if (ShardOfKey(big, buckets, shards) == shard) keys.push_back(big);
  c.sparse_tables.emplace_back(0, Rows(keys));
  return c;
}

absl::Status Write(const std::string& dir, const Config& config,
                   server::Checkpoint c) {
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(config.model);
  if (!spec.ok()) return spec.status();
  server::ShardCheckpoints files({dir, c.shard_index, spec->Fingerprint(), 3});
  return files.Write(std::move(c)).status();
}

// A folder with the checkpoints of the first `written` shards of a job of
// `config` (its cluster.ps).
std::string Folder(const std::string& name, const Config& config, int written) {
  const std::string dir = TempDir(name);
  const int shards = static_cast<int>(config.cluster.ps.size());
  for (int s = 0; s < written; ++s) {
    EXPECT_THAT(Write(dir, config, ShardCheckpoint(s, shards, kBuckets)),
                IsOk());
  }
  return dir;
}

TEST(ModelExportTest, SparseExportMergesTheNonzeroRowsOfTwoShards) {
  const Config config = SparseConfig(2);
  const std::string dir = Folder("two", config, 2);
  absl::StatusOr<SparseParams> params = SparseFromCheckpoints(config, dir);
  ASSERT_THAT(params, IsOk());
  std::vector<uint64_t> keys;
  std::vector<float> weights;
  for (uint64_t key = 1; key <= 40; ++key) {
    if (WeightOf(key) != 0) {
      keys.push_back(key);
      weights.push_back(WeightOf(key));
    }
  }
  keys.push_back((uint64_t{1} << 63) + 11);
  weights.push_back(WeightOf(keys.back()));
  ASSERT_NE(weights.back(), 0);
  EXPECT_THAT(params->keys, ElementsAreArray(keys));
  EXPECT_THAT(params->weights, ElementsAreArray(weights));
  EXPECT_EQ(params->rows, 41) << "zero weights count as rows held";
  EXPECT_EQ(params->bias, 0.75f);
  EXPECT_EQ(params->updates, 123u);
  // Both shards contributed.
  int on_one = 0;
  for (uint64_t key : params->keys) on_one += ShardOfKey(key, kBuckets, 2);
  EXPECT_GT(on_one, 0);
  EXPECT_LT(on_one, static_cast<int>(params->keys.size()));
}

// A block a live move handed on is in both shards' checkpoints until the old
// owner writes its next one: the newer copy (the higher version) is exported,
// in either order.
TEST(ModelExportTest, ABlockInTwoCheckpointsIsTakenFromTheNewerCopy) {
  const Config config = SparseConfig(2);
  for (const uint64_t moved_version : {200u, 50u}) {
    const std::string dir = TempDir(absl::StrCat("moved", moved_version));
    ASSERT_THAT(Write(dir, config, ShardCheckpoint(0, 2, kBuckets)), IsOk());
    server::Checkpoint moved = ShardCheckpoint(1, 2, kBuckets);
    moved.blocks.push_back({0, moved_version, {-1.5f}, {0, 0}});
    ASSERT_THAT(Write(dir, config, std::move(moved)), IsOk());
    absl::StatusOr<SparseParams> params = SparseFromCheckpoints(config, dir);
    ASSERT_THAT(params, IsOk());
    const bool newer = moved_version > 123;
    EXPECT_EQ(params->bias, newer ? -1.5f : 0.75f);
    EXPECT_EQ(params->updates, newer ? moved_version : 123u);
  }
}

TEST(ModelExportTest, SparseExportRefusesAFolderThatIsNotTheConfigsJob) {
  const Config config = SparseConfig(2);
  // A shard missing.
  std::string dir = Folder("missing", config, 1);
  EXPECT_THAT(SparseFromCheckpoints(config, dir),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("no checkpoint of ps 1 in " + dir)));
  // A shard too many: a job of 3 ps read as one of 2 would lose rows.
  dir = TempDir("extra");
  for (int s = 0; s < 3; ++s) {
    ASSERT_THAT(Write(dir, config, ShardCheckpoint(s, 3, kBuckets)), IsOk());
  }
  EXPECT_THAT(SparseFromCheckpoints(config, dir),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("holds checkpoints of ps 2, but the config "
                                 "names 2 ps")));
  // Another model: the job had 8 buckets, the config says 16.
  dir = Folder("buckets", config, 2);
  Config other = config;
  other.model.sparse_buckets = 16;
  EXPECT_THAT(SparseFromCheckpoints(other, dir),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("holds another model than the config's")));
  // A dense config on a sparse folder, and the other way round.
  Config dense = config;
  dense.model.type = ModelType::kLinear;
  dense.model.layers = {4, 1};
  EXPECT_THAT(SparseFromCheckpoints(dense, dir),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("has no sparse tables")));
  uint64_t updates = 0;
  EXPECT_THAT(ParamsFromCheckpoints(config, dir, &updates),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("SparseFromCheckpoints")));
}

TEST(ModelExportTest, SparseExportRefusesACheckpointWithoutSparseTables) {
  const Config config = SparseConfig(2);
  const std::string dir = Folder("format3", config, 1);
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(config.model);
  ASSERT_THAT(spec, IsOk());
  server::Checkpoint c = ShardCheckpoint(1, 2, kBuckets);
  c.model_fingerprint = spec->Fingerprint();
  c.generation = 1;
  ASSERT_THAT(server::WriteCheckpointInFormatForTest(
                  server::ShardCheckpointDir(dir, 1) + "/" +
                      server::GenerationFileName(1, 1),
                  c, 3),
              IsOk());
  EXPECT_THAT(SparseFromCheckpoints(config, dir),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("checkpoint of ps 1 in " + dir +
                                 " holds no sparse table 0 (weights; format 3, "
                                 "which predates sparse tables)")));
}

TEST(ModelExportTest, SparseExportRefusesRowsOnTheWrongShardOrOutOfOrder) {
  const Config config = SparseConfig(2);
  // Shard 0 holding a key of shard 1's buckets (as a job of another
  // cluster.ps would have placed it).
  uint64_t foreign = 1;
  while (ShardOfKey(foreign, kBuckets, 2) != 1) ++foreign;
  std::string dir = Folder("foreign", config, 2);
  server::Checkpoint c = ShardCheckpoint(0, 2, kBuckets);
  c.sparse_tables[0].second = Rows({foreign});
  ASSERT_THAT(Write(dir, config, c), IsOk());
  EXPECT_THAT(
      SparseFromCheckpoints(config, dir),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               HasSubstr(absl::StrCat(
                   "ps 0 in ", dir, " holds key ", foreign, " of bucket ",
                   BucketOf(foreign, kBuckets), ", which ps 1 serves"))));
  // Keys out of order (a damaged file: the table writes them ascending).
  std::vector<uint64_t> mine;
  for (uint64_t key = 1; mine.size() < 2; ++key) {
    if (ShardOfKey(key, kBuckets, 2) == 0) mine.push_back(key);
  }
  dir = Folder("unsorted", config, 2);
  c = ShardCheckpoint(0, 2, kBuckets);
  c.sparse_tables[0].second = Rows({mine[1], mine[0]});
  ASSERT_THAT(Write(dir, config, c), IsOk());
  EXPECT_THAT(
      SparseFromCheckpoints(config, dir),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               HasSubstr(absl::StrCat("key ", mine[0], " follows ", mine[1]))));
  // A table of another dim.
  dir = Folder("dim", config, 2);
  c = ShardCheckpoint(1, 2, kBuckets);
  c.sparse_tables[0].second.dim = 2;
  c.sparse_tables[0].second.data.resize(c.sparse_tables[0].second.data.size() *
                                        2);
  ASSERT_THAT(Write(dir, config, c), IsOk());
  EXPECT_THAT(SparseFromCheckpoints(config, dir),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("rows of dim 2, the config's model 1")));
}

TEST(ModelExportTest, ALiveClusterExportOfASparseModelSaysToUseCheckpoints) {
  Config config = SparseConfig(2);
  EXPECT_THAT(CheckExportableFromCluster(config),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("Pass --checkpoint_dir with the job's "
                                 "checkpoint folder (a launcher job's "
                                 "<run_dir>/checkpoints, or checkpoint.dir: "
                                 "run/checkpoints)")));
  config.checkpoint.dir = "/data/ckpt";
  config.explicit_keys.insert("checkpoint.dir");
  EXPECT_THAT(CheckExportableFromCluster(config),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("(checkpoint.dir: /data/ckpt)")));
  config.model.type = ModelType::kMlp;
  EXPECT_THAT(CheckExportableFromCluster(config), IsOk());
}

TEST(ModelExportTest, BuildSparseExportKeepsTheClassesAndCsvBuckets) {
  const std::string dir = TempDir("build");
  Config config = SparseConfig(2);
  config.data.source = DataSource::kCsv;
  config.data.path = dir + "/train.csv";
  config.data.label_column = "y";
  config.data.categorical = {"color"};
  config.data.bucketize = {"amount"};
  config.data.quantile_buckets = 4;
  config.data.classes = {"no", "yes"};
  config.data.train_examples = 0;  // as LoadConfig leaves csv: all rows
  config.data.test_examples = 8;
  {
    std::ofstream out(config.data.path);
    out << "color,amount,y\n";
    for (int i = 0; i < 40; ++i) {
      out << (i % 2 ? "red" : "blue") << "," << i << ","
          << (i % 3 ? "no" : "yes") << "\n";
    }
  }
  SparseParams params;
  params.bias = 0.5f;
  params.keys = {1, 2};
  params.weights = {1, -1};
  params.rows = 5;
  params.updates = 9;
  absl::StatusOr<model::SparseModel> m =
      BuildSparseExport(config, params, "checkpoints x");
  ASSERT_THAT(m, IsOk());
  EXPECT_THAT(m->meta.class_names(), ElementsAre("no", "yes"));
  EXPECT_EQ(m->meta.origin(), "checkpoints x");
  EXPECT_EQ(m->meta.updates(), 9u);
  EXPECT_EQ(m->meta.sparse_rows(), 5u);
  EXPECT_EQ(m->meta.data().label_column(), "y");
  ASSERT_EQ(m->meta.data().columns_size(), 2);
  EXPECT_EQ(m->meta.data().columns(1).name(), "amount");
  // Quantiles of 0..39 in 4 buckets: v[10], v[20], v[30].
  EXPECT_THAT(m->meta.data().columns(1).boundaries(), ElementsAre(10, 20, 30));
  EXPECT_EQ(m->bias, 0.5f);
  EXPECT_THAT(m->keys, ElementsAre(1, 2));

  config.data.path = dir + "/missing.csv";
  EXPECT_THAT(BuildSparseExport(config, params, "x"),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("export reads the training data")));
}

// data.source synthetic makes 784 features whatever model.layers says: the
// export refuses a model of another width (serve could not load the file).
TEST(ModelExportTest, DenseExportRefusesDataOfAnotherWidth) {
  Config config;
  config.data.source = DataSource::kSynthetic;
  config.data.train_examples = 20;
  config.data.test_examples = 10;
  config.model.layers = {16, 8, 10};
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(config.model);
  ASSERT_THAT(spec, IsOk());
  EXPECT_THAT(
      BuildExport(config, std::vector<float>(spec->num_params()), "x", 1),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               HasSubstr("have 784 features but model.layers[0] is 16")));
  config.model.layers = {784, 8, 10};
  spec = ModelSpec::Create(config.model);
  ASSERT_THAT(spec, IsOk());
  EXPECT_THAT(
      BuildExport(config, std::vector<float>(spec->num_params()), "x", 1),
      IsOk());
}

}  // namespace
}  // namespace downpour::tools
