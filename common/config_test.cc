// Tests for the YAML config loader: defaults, every key, and each kind of
// error.
#include "common/config.h"

#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/config_test_util.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace downpour {
namespace {

using ::downpour::testing::IsOk;
using ::downpour::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

using config_testing::BadCase;
using config_testing::ExpectAllFail;
using config_testing::Parse;
using config_testing::WriteTempFile;

TEST(ConfigTest, EmptyTextGivesDefaults) {
  for (const std::string yaml :
       {"", "# only a comment\n", "training:\n", "cluster: ~\nmodel:\n"}) {
    absl::StatusOr<Config> config = Parse(yaml);
    ASSERT_THAT(config, IsOk()) << yaml;
    EXPECT_EQ(config->path, "cfg.yaml");
    EXPECT_EQ(config->cluster.coordinator, "127.0.0.1:7000");
    EXPECT_THAT(config->cluster.ps, ElementsAre("127.0.0.1:7001"));
    EXPECT_THAT(config->model.layers, ElementsAre(784, 256, 128, 10));
    EXPECT_EQ(config->optimizer.type, OptimizerType::kSgd);
    EXPECT_EQ(config->optimizer.schedule, LrScheduleType::kConstant);
    EXPECT_EQ(config->optimizer.warmup_updates, 0);
    EXPECT_EQ(config->optimizer.decay_updates, 0);
    EXPECT_DOUBLE_EQ(config->optimizer.decay_factor, 0.1);
    EXPECT_DOUBLE_EQ(config->optimizer.min_lr_fraction, 0.0);
    EXPECT_FALSE(config->optimizer.staleness_lr);
    EXPECT_EQ(config->optimizer.async_momentum, AsyncMomentum::kAuto);
    EXPECT_DOUBLE_EQ(config->optimizer.delay_compensation, 0.0);
    EXPECT_EQ(config->training.batch_size, 64);
    EXPECT_EQ(config->training.epochs, 10);
    EXPECT_DOUBLE_EQ(config->training.outage_timeout_s, 300);
    EXPECT_EQ(config->data.train_examples, 8000);
    EXPECT_DOUBLE_EQ(config->heartbeat.timeout_s, 3.0);
    EXPECT_EQ(config->rpc.encoding, WireEncoding::kFloat32);
    EXPECT_EQ(config->logging.level, LogLevel::kInfo);
  }
}

TEST(ConfigTest, ReadsEveryKey) {
  const std::string yaml = R"(
cluster:
  coordinator: coord.example:9000
  ps: [10.0.0.1:0, 10.0.0.2:0]
  workers:
    - 10.0.1.1:7101
    - 10.0.1.2:7101
    - "[::1]:7103"
model:
  type: softmax
  layers: [100, 5]
  block_size: 1024
  init_seed: 18446744073709551615
optimizer:
  type: adam
  learning_rate: 1e-3
  momentum: 0
  beta1: 0.8
  beta2: 0.99
  epsilon: 1e-6
  weight_decay: 0.0001
  schedule: cosine
  warmup_updates: 100
  decay_updates: 5000
  decay_factor: 0.5
  min_lr_fraction: 0.01
  staleness_lr: true
  async_momentum: off
  delay_compensation: 0.04
training:
  batch_size: 32
  n_fetch: 5
  n_push: 3
  max_pushes_in_flight: 2
  consistency: async
  max_staleness: 4
  epochs: 0
  steps: 5000000000
  target_accuracy: 0.5
  eval_every_steps: 0
  seed: 7
  outage_timeout_s: 0
data:
  source: synthetic
  path: ""
  train_examples: 100000
  test_examples: 10
  normalize: false
checkpoint:
  dir: ""
  interval_s: 0
heartbeat:
  interval_s: 0.1
  timeout_s: 1
rpc:
  deadline_s: 0.5
  connect_timeout_s: 10
  encoding: bf16
logging:
  level: debug
)";
  absl::StatusOr<Config> parsed = Parse(yaml);
  ASSERT_THAT(parsed, IsOk());
  const Config& c = *parsed;
  EXPECT_EQ(c.cluster.coordinator, "coord.example:9000");
  EXPECT_THAT(c.cluster.ps, ElementsAre("10.0.0.1:0", "10.0.0.2:0"));
  EXPECT_THAT(c.cluster.workers,
              ElementsAre("10.0.1.1:7101", "10.0.1.2:7101", "[::1]:7103"));
  EXPECT_EQ(c.model.type, ModelType::kSoftmax);
  EXPECT_THAT(c.model.layers, ElementsAre(100, 5));
  EXPECT_EQ(c.model.block_size, 1024);
  EXPECT_EQ(c.model.init_seed, 18446744073709551615ULL);
  EXPECT_EQ(c.optimizer.type, OptimizerType::kAdam);
  EXPECT_DOUBLE_EQ(c.optimizer.learning_rate, 1e-3);
  EXPECT_DOUBLE_EQ(c.optimizer.momentum, 0);
  EXPECT_DOUBLE_EQ(c.optimizer.beta1, 0.8);
  EXPECT_DOUBLE_EQ(c.optimizer.beta2, 0.99);
  EXPECT_DOUBLE_EQ(c.optimizer.epsilon, 1e-6);
  EXPECT_DOUBLE_EQ(c.optimizer.weight_decay, 0.0001);
  EXPECT_EQ(c.optimizer.schedule, LrScheduleType::kCosine);
  EXPECT_EQ(c.optimizer.warmup_updates, 100);
  EXPECT_EQ(c.optimizer.decay_updates, 5000);
  EXPECT_DOUBLE_EQ(c.optimizer.decay_factor, 0.5);
  EXPECT_DOUBLE_EQ(c.optimizer.min_lr_fraction, 0.01);
  EXPECT_TRUE(c.optimizer.staleness_lr);
  EXPECT_EQ(c.optimizer.async_momentum, AsyncMomentum::kOff);
  EXPECT_DOUBLE_EQ(c.optimizer.delay_compensation, 0.04);
  EXPECT_EQ(c.training.batch_size, 32);
  EXPECT_EQ(c.training.n_fetch, 5);
  EXPECT_EQ(c.training.n_push, 3);
  EXPECT_EQ(c.training.max_pushes_in_flight, 2);
  EXPECT_EQ(c.training.consistency, ConsistencyMode::kAsync);
  EXPECT_EQ(c.training.max_staleness, 4);
  EXPECT_EQ(c.training.epochs, 0);
  EXPECT_EQ(c.training.steps, 5000000000);
  EXPECT_DOUBLE_EQ(c.training.target_accuracy, 0.5);
  EXPECT_EQ(c.training.eval_every_steps, 0);
  EXPECT_EQ(c.training.seed, 7u);
  EXPECT_DOUBLE_EQ(c.training.outage_timeout_s, 0);
  EXPECT_EQ(c.data.source, DataSource::kSynthetic);
  EXPECT_EQ(c.data.path, "");
  EXPECT_EQ(c.data.train_examples, 100000);
  EXPECT_EQ(c.data.test_examples, 10);
  EXPECT_FALSE(c.data.normalize);
  EXPECT_EQ(c.checkpoint.dir, "");
  EXPECT_DOUBLE_EQ(c.checkpoint.interval_s, 0);
  EXPECT_DOUBLE_EQ(c.heartbeat.interval_s, 0.1);
  EXPECT_DOUBLE_EQ(c.heartbeat.timeout_s, 1);
  EXPECT_DOUBLE_EQ(c.rpc.deadline_s, 0.5);
  EXPECT_DOUBLE_EQ(c.rpc.connect_timeout_s, 10);
  EXPECT_EQ(c.rpc.encoding, WireEncoding::kBf16);
  EXPECT_EQ(c.logging.level, LogLevel::kDebug);
}

// Found by tools/fuzz/config_fuzzer: this config loaded, and building its
// model then ran out of memory.
TEST(ConfigTest, ModelTooLargeIsRefused) {
  EXPECT_THAT(
      Parse("model:\n  layers: [16000000, 16000000, 10]\n  block_size: 4\n"
            "data:\n  source: synthetic\n  train_examples: 10\n"
            "  test_examples: 0\n"),
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          HasSubstr("model.layers [16000000, 16000000, 10] with "
                    "model.block_size 4 make over 1073741824 parameters")));
  EXPECT_THAT(Parse("model:\n  layers: [4096, 4096, 10]\n  block_size: 16\n"
                    "data:\n  source: synthetic\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("make over 1048576 blocks")));
}

TEST(ConfigTest, StreamedDataPathTakesListsAndGlobs) {
  const std::string sparse =
      "model:\n  type: sparse_linear\n  task: binary\noptimizer:\n"
      "  type: ftrl\n";
  absl::StatusOr<Config> c =
      Parse(sparse +
            "data:\n  source: criteo\n  path: [a.txt, 'logs/day_*.gz']\n"
            "  test_path: t.txt\n  shuffle_window: 0\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->data.path, "a.txt");
  EXPECT_THAT(c->data.paths, ::testing::ElementsAre("a.txt", "logs/day_*.gz"));
  EXPECT_TRUE(StreamsData(c->data));
  EXPECT_EQ(c->data.shuffle_window, 0);
  EXPECT_EQ(c->data.eval_rows, 10000);
  config_testing::ExpectAllFail({
      {sparse + "data:\n  source: libsvm\n  path: ['a', 'b']\n",
       "data.path names several files or a glob pattern, which only the "
       "streaming readers read: set data.stream: true"},
      {sparse + "data:\n  source: libsvm\n  path: 'day_*'\n",
       "set data.stream: true"},
      {sparse + "data:\n  source: criteo\n  path: a\n", "needs data.test_path"},
      {"data:\n  source: csv\n  stream: true\n  path: a\n  test_path: b\n",
       "model.type mlp reads its data in memory: data.stream is for the "
       "sparse models"},
      {sparse + "data:\n  source: criteo\n  path: []\n",
       "data.path is an empty list"},
      {"data:\n  source: criteo\n  path: a\n  test_path: b\n",
       "model.type mlp reads its data in memory: data.source criteo is read "
       "by the sparse models"},
  });
}

TEST(ConfigTest, UnknownKeyNamesLineKeyAndAllowedKeys) {
  EXPECT_THAT(
      Parse(
          "model:\n  type: mlp\ntraining:\n  batch_size: 8\n  batchsize: 3\n"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "cfg.yaml:5: unknown key 'training.batchsize'; allowed keys in "
               "'training': batch_size, n_fetch, n_push, fetch, "
               "max_pushes_in_flight, "
               "consistency, "
               "max_staleness, epochs, steps, target_accuracy, target_metric, "
               "target_value, stop_at_target, eval_every_steps, seed, "
               "warmstart_steps, outage_timeout_s, mode, easgd_alpha, "
               "easgd_tau (did "
               "you mean 'batch_size'?)"));
  ExpectAllFail({
      {"trainig:\n  steps: 1\n",
       "cfg.yaml:1: unknown key 'trainig'; allowed sections: cluster, model, "
       "optimizer, training, data, checkpoint, heartbeat, rpc, logging, "
       "compute, coordinator, launcher, security, robustness, fm, metrics, "
       "wide_deep, export, admission, "
       "eviction (did you mean 'training'?)"},
      {"training:\n  learning_rate: 0.1\n",
       "cfg.yaml:2: unknown key 'training.learning_rate'; allowed keys in "
       "'training': batch_size"},
      {"training:\n  learning_rate: 0.1\n",
       "(did you mean 'optimizer.learning_rate'?)"},
      {"security:\n  token: x\n", "cfg.yaml:2: unknown key 'security.token'"},
      {"security:\n  tls: false\n  admin_token_file: a.token\n",
       "security.*_token_file needs security.tls: true"},
      {"security:\n  mutual_tls: true\n",
       "security.mutual_tls needs security.tls: true"},
      {"security:\n  tls: true\n", "security.tls needs security.ca_file"},
      {"security:\n  tls: true\n  ca_file: ca.pem\n  cert_file: a.pem\n",
       "security.cert_file and security.key_file go together"},
      {"rpc:\n  deadline: 3\n",
       "allowed keys in 'rpc': deadline_s, connect_timeout_s, encoding (did "
       "you mean 'deadline_s'?)"},
      // Removed: the error names the one knob and the fix.
      {"rpc:\n  push_window: 8\n",
       "cfg.yaml:2: rpc.push_window is no longer a setting: a worker's pushes "
       "in flight have one knob now, training.max_pushes_in_flight"},
      {"rpc:\n  push_window: 64\n",
       "delete rpc.push_window, and raise training.max_pushes_in_flight to "
       "keep more pushes in flight"},
      {"data:\n  source: idx\n\n  source: mnist\n",
       "cfg.yaml:4: duplicate key 'data.source' (first at line 2)"},
  });
}

TEST(ConfigTest, WrongTypeNamesLineKeyAndValue) {
  ExpectAllFail({
      {"training:\n  batch_size: abc\n",
       "cfg.yaml:2: training.batch_size must be an integer, got 'abc'"},
      {"training:\n  batch_size: 6.5\n",
       "training.batch_size must be an integer, got '6.5'"},
      {"training:\n  steps: [1]\n",
       "training.steps must be an integer, got a list"},
      {"training:\n  seed: x\n", "training.seed must be an integer, got 'x'"},
      {"optimizer:\n  learning_rate: fast\n",
       "cfg.yaml:2: optimizer.learning_rate must be a number, got 'fast'"},
      {"optimizer:\n  epsilon: .nan\n", "optimizer.epsilon must be a number"},
      {"data:\n  normalize: maybe\n",
       "data.normalize must be true or false, got 'maybe'"},
      {"data:\n  path: {a: 1}\n", "data.path must be a string, got a map"},
      {"checkpoint:\n  dir:\n", "checkpoint.dir must be a string, got null"},
      {"cluster:\n  ps: 127.0.0.1:7001\n",
       "cfg.yaml:2: cluster.ps must be a list of host:port addresses, got "
       "'127.0.0.1:7001'"},
      {"cluster:\n  workers: {a: b}\n", "cluster.workers must be a list"},
      {"cluster:\n  ps: [[127.0.0.1:7001]]\n",
       "cluster.ps[0] must be a string, got a list"},
      {"cluster:\n  coordinator: [a]\n",
       "cluster.coordinator must be a string, got a list"},
      {"model:\n  layers: 784\n",
       "model.layers must be a list of integers, got '784'"},
      {"model:\n  layers: [784, x, 10]\n",
       "model.layers[1] must be an integer, got 'x'"},
      {"training: 5\n",
       "cfg.yaml:1: training must be a map of keys (batch_size, n_fetch"},
      {"- a\n- b\n", "cfg.yaml:1: the top level must be a map of sections"},
      {"42\n", "the top level must be a map of sections (cluster, model"},
      {"? [a]\n: 1\n", "keys must be plain names, got a list"},
  });
}

TEST(ConfigTest, EnumsListAllowedValues) {
  ExpectAllFail({
      {"model:\n  type: cnn\n",
       "cfg.yaml:2: model.type must be one of mlp, linear, softmax, "
       "sparse_linear, fm, wide_deep, tensors; got 'cnn'"},
      {"optimizer:\n  type: adamw\n",
       "cfg.yaml:2: optimizer.type must be one of sgd, momentum, adagrad, "
       "adam, ftrl; got 'adamw' (did you mean 'adam'?)"},
      {"optimizer:\n  type: ftrl\n",
       "optimizer.type ftrl trains sparse tables (model.type sparse_linear, "
       "fm or wide_deep); "
       "model.type mlp is dense: use adagrad, adam, momentum or sgd"},
      {"model:\n  type: sparse_linear\n",
       "model.type sparse_linear is logistic (model.task: binary) or linear "
       "regression (model.task: regression), not multiclass"},
      {"model:\n  type: sparse_linear\n  task: binary\n",
       "model.type sparse_linear reads data.source libsvm (64-bit indices), "
       "criteo"},
      {"admission:\n  min_count: 2\n",
       "admission.min_count and admission.probability decide which keys of a "
       "sparse table get a row: they apply to model.type sparse_linear, fm "
       "and wide_deep only"},
      {"fm:\n  dim: 4\n",
       "the fm section configures model.type fm, but model.type is mlp"},
      {"fm:\n  dim: 0\n", "cfg.yaml:2: fm.dim"},
      {"model:\n  type: wide_deep\n  task: binary\ndata:\n  source: libsvm\n"
       "wide_deep:\n  embedding_min_count: 2\nadmission:\n  probability: 0.5\n",
       "wide_deep.embedding_min_count admits embeddings by count and "
       "admission.probability admits keys by chance: set one"},
      {"wide_deep:\n  dim: 4\n",
       "the wide_deep section configures model.type wide_deep, but "
       "model.type is mlp"},
      {"model:\n  type: wide_deep\n  task: binary\ndata:\n  source: "
       "libsvm\nwide_deep:\n  pooling: max\n",
       "wide_deep.pooling must be one of sum, mean"},
      {"model:\n  type: wide_deep\n  task: binary\ndata:\n  source: "
       "libsvm\nwide_deep:\n  hidden: [0]\n",
       "wide_deep.hidden"},
      {"model:\n  type: fm\n  task: binary\ndata:\n  source: libsvm\n"
       "fm:\n  embedding_min_count: 2\nadmission:\n  probability: 0.5\n",
       "fm.embedding_min_count admits embeddings by count and "
       "admission.probability admits keys by chance: set one"},
      {"model:\n  type: fm\n",
       "model.type fm is logistic (model.task: binary) or linear"},
      {"admission:\n  min_count: 0\n", "cfg.yaml:2: admission.min_count"},
      {"admission:\n  probability: 0\n", "cfg.yaml:2: admission.probability"},
      {"eviction:\n  max_rows: 100\n",
       "eviction.ttl_updates and eviction.max_rows drop rows of sparse "
       "tables: they apply to model.type sparse_linear, fm and wide_deep "
       "only, not mlp"},
      {"model:\n  type: sparse_linear\n  task: binary\ndata:\n  source: "
       "libsvm\neviction:\n  ttl_updates: 5\ncheckpoint:\n  interval_s: 0\n",
       "eviction runs when a ps takes its periodic checkpoint, every "
       "checkpoint.interval_s; with checkpoint.interval_s 0 it would never "
       "run: set checkpoint.interval_s > 0"},
      {"model:\n  type: sparse_linear\n  task: binary\n  sparse_max_rows: 10\n"
       "data:\n  source: libsvm\neviction:\n  max_rows: 11\n",
       "eviction.max_rows 11 is above model.sparse_max_rows 10: pushes are "
       "refused at that bound before eviction trims a table; lower "
       "eviction.max_rows or raise model.sparse_max_rows"},
      {"eviction:\n  max_rows: -1\n", "cfg.yaml:2: eviction.max_rows"},
      {"eviction:\n  memory_budget_mb: 8\n",
       "eviction.memory_budget_mb 8 is below 16 MiB, less than a ps needs to "
       "run: set 0 (derived from the host's memory) or at least 16"},
      {"eviction:\n  memory_budget_mb: -1\n",
       "cfg.yaml:2: eviction.memory_budget_mb"},
      {"checkpoint:\n  full_every: 0\n", "cfg.yaml:2: checkpoint.full_every"},
      {"checkpoint:\n  incremental: maybe\n",
       "cfg.yaml:2: checkpoint.incremental"},
      {"optimizer:\n  schedule: linear\n",
       "cfg.yaml:2: optimizer.schedule must be one of constant, step, cosine; "
       "got 'linear'"},
      {"training:\n  fetch: sync\n",
       "cfg.yaml:2: training.fetch must be one of after_push, overlap, "
       "layerwise; got 'sync'"},
      {"training:\n  fetch: layerwise\n  consistency: ssp\n",
       "training.fetch layerwise pushes and pulls every step's blocks as "
       "backprop produces them, so it needs training.consistency async (not "
       "ssp) and training.n_fetch and n_push 1 (not 1 and 1)"},
      {"training:\n  fetch: layerwise\n  n_push: 2\n  n_fetch: 2\n",
       "n_fetch and n_push 1 (not 2 and 2): set those, or use training.fetch "
       "after_push"},
      {"optimizer:\n  async_momentum: on\n",
       "cfg.yaml:2: optimizer.async_momentum must be one of auto, off; got "
       "'on'"},
      {"training:\n  consistency: sync\n",
       "training.consistency must be one of async, ssp, bsp; got 'sync'"},
      {"training:\n  consistency: bsp\n  n_fetch: 1\n  n_push: 2\n",
       "training.consistency bsp computes every step on the parameters of the "
       "last round, so training.n_fetch (1) must equal training.n_push (2): "
       "set both to 2"},
      {"training:\n  consistency: bsp\n  max_pushes_in_flight: 2\n",
       "training.max_pushes_in_flight (2) must be 1: set it to 1"},
      {"training:\n  consistency: ssp\n  warmstart_steps: 10\n",
       "training.warmstart_steps (10) needs training.consistency async: with "
       "ssp the waiting workers would block worker 0's pushes"},
      {"training:\n  warmstart_steps: -1\n",
       "training.warmstart_steps must be in 0..1099511627776, got -1"},
      {"data:\n  source: parquet\n",
       "data.source must be one of mnist, idx, csv, libsvm, synthetic, criteo; "
       "got "
       "'parquet'"},
      {"data:\n  missing: skip\n",
       "data.missing must be one of error, zero, mean; got 'skip'"},
      {"model:\n  task: ranking\n",
       "model.task must be one of multiclass, binary, regression; got "
       "'ranking'"},
      {"logging:\n  level: verbose\n",
       "logging.level must be one of trace, debug, info, warn, error; got "
       "'verbose'"},
      {"logging:\n  level: INFO\n", "got 'INFO'"},
  });
}

// wide_deep's fields come from the data section: one per hashed csv column,
// one for libsvm.
TEST(ConfigTest, WideDeepFieldsFollowTheDataSection) {
  absl::StatusOr<Config> config = Parse(
      "model:\n  type: wide_deep\n  task: binary\n"
      "data:\n  source: csv\n  path: x.csv\n  categorical: [a, b]\n"
      "  text: [t]\n  bucketize: [c]\n  ignore: [d]\n"
      "wide_deep:\n  dim: 4\n  hidden: []\n  pooling: sum\n"
      "  mlp_learning_rate: 0.001\n");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->model.wide_deep.fields, 4);
  EXPECT_EQ(config->model.wide_deep.mlp_learning_rate, 0.001);
  EXPECT_EQ(config->model.wide_deep.pooling, Pooling::kSum);
  EXPECT_TRUE(config->model.wide_deep.hidden.empty());
  EXPECT_EQ(&EmbeddingOptions(config->model), &config->model.wide_deep);
  config = Parse(
      "model:\n  type: wide_deep\n  task: binary\n"
      "data:\n  source: libsvm\n  path: x.svm\n");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->model.wide_deep.fields, 1);
  EXPECT_EQ(config->model.wide_deep.hidden, (std::vector<int>{32, 16}));
}

// Overrides go through the same parse as the file: a name sets the value.
TEST(ConfigTest, OverridesSetChoicesByName) {
  const std::string path = WriteTempFile("choices.yaml", "training:\n");
  absl::StatusOr<Config> config = LoadConfig(
      path, {"training.fetch=overlap", "training.consistency=ssp",
             "data.missing=mean", "rpc.encoding=fp16", "launcher.restart=never",
             "compute.device=cpu", "logging.level=warn",
             "optimizer.schedule=step", "optimizer.decay_updates=10"});
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->training.fetch, FetchMode::kOverlap);
  EXPECT_EQ(config->training.consistency, ConsistencyMode::kSsp);
  EXPECT_EQ(config->data.missing, MissingPolicy::kMean);
  EXPECT_EQ(config->rpc.encoding, WireEncoding::kFp16);
  EXPECT_EQ(config->launcher.restart, RestartMode::kNever);
  EXPECT_EQ(config->compute.device, ComputeDevice::kCpu);
  EXPECT_EQ(config->logging.level, LogLevel::kWarn);
  EXPECT_EQ(config->optimizer.schedule, LrScheduleType::kStep);
  EXPECT_THAT(LoadConfig(path, {"training.fetch=eager"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--set training.fetch=eager: training.fetch must be one "
                       "of after_push, overlap, layerwise; got 'eager'"));
}

TEST(ConfigTest, DelimiterCharSpellsTabBothWays) {
  DataSection data;
  EXPECT_EQ(DelimiterChar(data), ',');
  data.delimiter = ";";
  EXPECT_EQ(DelimiterChar(data), ';');
  data.delimiter = "\t";
  EXPECT_EQ(DelimiterChar(data), '\t');
  data.delimiter = "\\t";
  EXPECT_EQ(DelimiterChar(data), '\t');
}

TEST(ConfigTest, SspAndBspAreAccepted) {
  absl::StatusOr<Config> ssp =
      Parse("training:\n  consistency: ssp\n  max_staleness: 0\n");
  ASSERT_TRUE(ssp.ok()) << ssp.status();
  EXPECT_EQ(ssp->training.max_staleness, 0);
  absl::StatusOr<Config> bsp =
      Parse("training:\n  consistency: bsp\n  n_fetch: 2\n  n_push: 2\n");
  ASSERT_TRUE(bsp.ok()) << bsp.status();
  absl::StatusOr<Config> warm = Parse("training:\n  warmstart_steps: 50\n");
  ASSERT_TRUE(warm.ok()) << warm.status();
  EXPECT_EQ(warm->training.warmstart_steps, 50);
}

TEST(ConfigTest, SimulatedComputeNeedsAStepTime) {
  absl::StatusOr<Config> simulated =
      Parse("compute:\n  device: simulated\n  simulated_step_ms: 200\n");
  ASSERT_TRUE(simulated.ok()) << simulated.status();
  EXPECT_EQ(simulated->compute.device, ComputeDevice::kSimulated);
  EXPECT_DOUBLE_EQ(simulated->compute.simulated_step_ms, 200);
  EXPECT_FALSE(simulated->compute.simulated_real_gradients);
  absl::StatusOr<Config> real = Parse(
      "compute:\n  device: simulated\n  simulated_step_ms: 200\n"
      "  simulated_real_gradients: true\n");
  ASSERT_TRUE(real.ok()) << real.status();
  EXPECT_TRUE(real->compute.simulated_real_gradients);
  ExpectAllFail({
      {"compute:\n  device: cpu\n  simulated_real_gradients: true\n",
       "compute.simulated_real_gradients only applies to compute.device "
       "simulated, but compute.device is cpu"},
      {"compute:\n  device: simulated\n",
       "compute.device simulated needs compute.simulated_step_ms > 0 (the "
       "milliseconds one step takes), got 0"},
      {"compute:\n  device: simulated\n  simulated_step_ms: -1\n",
       "cfg.yaml:3: compute.simulated_step_ms must be in [0, 3.6e+06], got -1"},
      {"compute:\n  device: cpu\n  simulated_step_ms: 5\n",
       "compute.simulated_step_ms (5) only applies to compute.device "
       "simulated, but compute.device is cpu"},
      {"compute:\n  device: gpu\n",
       "compute.device must be one of auto, cpu, cuda, simulated; got 'gpu'"},
  });
}

TEST(ConfigTest, ImpossibleValuesNameTheRange) {
  ExpectAllFail({
      {"training:\n  batch_size: 0\n",
       "cfg.yaml:2: training.batch_size must be in 1..1048576, got 0"},
      {"training:\n  n_fetch: -1\n",
       "training.n_fetch must be in 1..1000000, got -1"},
      {"training:\n  n_push: 0\n",
       "training.n_push must be in 1..1000000, got 0"},
      {"training:\n  max_pushes_in_flight: 0\n",
       "cfg.yaml:2: training.max_pushes_in_flight must be in 1..1024, got 0"},
      {"training:\n  batch_size: 99999999999\n",
       "training.batch_size must be in 1..1048576, got 99999999999"},
      {"training:\n  max_staleness: -2\n",
       "training.max_staleness must be in 0..1000000"},
      {"training:\n  steps: -5\n",
       "training.steps must be in 0..1099511627776, got -5"},
      {"training:\n  outage_timeout_s: -1\n",
       "cfg.yaml:2: training.outage_timeout_s must be in [0, 604800], got -1"},
      {"training:\n  seed: -1\n", "training.seed must be >= 0, got -1"},
      {"training:\n  target_accuracy: 1.5\n",
       "training.target_accuracy must be in [0, 1], got 1.5"},
      {"optimizer:\n  learning_rate: 0\n",
       "cfg.yaml:2: optimizer.learning_rate must be in (0, 1000], got 0"},
      {"optimizer:\n  momentum: 1\n",
       "optimizer.momentum must be in [0, 1), got 1"},
      {"optimizer:\n  beta1: -0.1\n", "optimizer.beta1 must be in [0, 1)"},
      {"optimizer:\n  beta2: 1.0\n",
       "optimizer.beta2 must be in [0, 1), got 1"},
      {"optimizer:\n  epsilon: 0\n",
       "optimizer.epsilon must be in [1e-30, 1], got 0"},
      {"optimizer:\n  weight_decay: -1\n",
       "optimizer.weight_decay must be in [0, 1], got -1"},
      {"optimizer:\n  warmup_updates: -1\n",
       "cfg.yaml:2: optimizer.warmup_updates must be in 0..1099511627776, got "
       "-1"},
      {"optimizer:\n  decay_updates: -5\n",
       "optimizer.decay_updates must be in 0..1099511627776, got -5"},
      {"optimizer:\n  decay_factor: 0\n",
       "optimizer.decay_factor must be in (0, 1], got 0"},
      {"optimizer:\n  decay_factor: 1.5\n",
       "optimizer.decay_factor must be in (0, 1], got 1.5"},
      {"optimizer:\n  min_lr_fraction: -0.1\n",
       "optimizer.min_lr_fraction must be in [0, 1], got -0.1"},
      {"optimizer:\n  staleness_lr: sometimes\n",
       "optimizer.staleness_lr must be"},
      {"optimizer:\n  delay_compensation: -0.04\n",
       "optimizer.delay_compensation must be in [0, 1000], got -0.04"},
      {"model:\n  layers: [784]\n",
       "model.layers must have at least 2 entries, got 1"},
      {"model:\n  layers: [784, 0, 10]\n",
       "model.layers[1] must be in 1..16777216, got 0"},
      {"model:\n  block_size: 0\n",
       "model.block_size must be in 1..16777216, got 0"},
      {"data:\n  train_examples: 0\n",
       "data.train_examples must be >= 1 and data.test_examples >= 0 for "
       "data.source mnist, got 0 and 2000"},
      {"data:\n  test_examples: -1\n",
       "data.train_examples must be >= 1 and data.test_examples >= 0 for "
       "data.source mnist, got 8000 and -1"},
      {"data:\n  test_examples: -2\n",
       "data.test_examples must be in -1..100000000, got -2"},
      {"model:\n  task: binary\n  layers: [4, 2]\n",
       "model.task binary has one output, so the last entry of model.layers "
       "must be 1, got [4, 2]"},
      {"model:\n  task: multiclass\n  type: linear\n  layers: [4, 1]\n",
       "model.task multiclass needs at least 2 classes"},
      {"model:\n  task: regression\n  layers: [784, 1]\n",
       "data.source mnist holds 10 digit classes: model.task must be "
       "multiclass, got regression"},
      {"model:\n  task: regression\n  layers: [4, 1]\ndata:\n  source: "
       "csv\n  path: a.csv\ntraining:\n  target_metric: auc\n",
       "training.target_metric auc is not measured for model.task regression: "
       "use one of rmse, mae, r2"},
      {"data:\n  source: mnist\n  path: d\n  test_path: t.csv\n",
       "data.test_path is read for data.source csv, libsvm and idx, not mnist"},
      {"checkpoint:\n  interval_s: -1\n",
       "checkpoint.interval_s must be in [0, 604800]"},
      {"checkpoint:\n  keep: 0\n",
       "cfg.yaml:2: checkpoint.keep must be in 1..100, got 0"},
      {"checkpoint:\n  keep: 101\n",
       "checkpoint.keep must be in 1..100, got 101"},
      {"checkpoint:\n  keep: two\n", "checkpoint.keep must be"},
      {"heartbeat:\n  interval_s: 0\n",
       "heartbeat.interval_s must be in [0.001, 3600], got 0"},
      {"rpc:\n  deadline_s: 0\n",
       "rpc.deadline_s must be in (0, 86400], got 0"},
      {"rpc:\n  connect_timeout_s: -3\n",
       "rpc.connect_timeout_s must be in (0, 86400]"},
      {"rpc:\n  encoding: fp32\n",
       "cfg.yaml:2: rpc.encoding must be one of float32, bf16, fp16; got "
       "'fp32'"},
      {"cluster:\n  ps: []\n",
       "cfg.yaml:2: cluster.ps must list at least one host:port, got an empty "
       "list"},
      {"cluster:\n  workers: []\n", "cluster.workers must list at least one"},
      {"cluster:\n  ps: [127.0.0.1:7001, 127.0.0.1:70000]\n",
       "cluster.ps[1] must be host:port with a port in 0..65535, got "
       "'127.0.0.1:70000'"},
      {"cluster:\n  coordinator: localhost\n",
       "cluster.coordinator must be host:port with a port in 0..65535, got "
       "'localhost'"},
      {"cluster:\n  coordinator: ':7000'\n", "got ':7000'"},
      {"cluster:\n  coordinator: 'a:b'\n", "got 'a:b'"},
  });
}

TEST(ConfigTest, CrossFieldRulesNameTheKeys) {
  ExpectAllFail({
      {"model:\n  type: softmax\n",
       "cfg.yaml: model.type softmax needs exactly 2 layers [inputs, outputs], "
       "got 4: [784, 256, "
       "128, 10]"},
      {"model:\n  layers: [100, 10]\n",
       "model.layers[0] (100) must be 784 for data.source mnist"},
      {"model:\n  layers: [784, 64, 5]\n",
       "model.layers[2] (5) must be 10 for data.source mnist"},
      {"heartbeat:\n  interval_s: 2\n  timeout_s: 1\n",
       "heartbeat.timeout_s (1) must be > heartbeat.interval_s (2)"},
      {"training:\n  epochs: 0\n",
       "training.epochs and training.steps are both 0"},
      {"training:\n  target_accuracy: 0.9\ndata:\n  test_examples: 0\n",
       "training.target_accuracy (0.9) needs test examples"},
      {"cluster:\n  ps: [127.0.0.1:7101]\n",
       "cluster.workers[0] '127.0.0.1:7101' is also cluster.ps[0]"},
      {"data:\n  train_examples: 1\ncluster:\n  workers: [a:0, b:0]\n",
       "data.train_examples (1) is fewer than the 2 worker slots"},
      {"data:\n  train_examples: 3\ncluster:\n  workers: [a:0, b:0]\n"
       "  max_workers: 4\n",
       "data.train_examples (3) is fewer than the 4 worker slots"},
      {"cluster:\n  workers: [a:0, b:0]\n  max_workers: 1\n",
       "cluster.max_workers 1 is below the 2 cluster.workers"},
      {"data:\n  train_examples: 9000\n",
       "data.train_examples + data.test_examples (11000) exceed the 10000"},
      {"data:\n  path: ''\n",
       "data.path must name a folder for data.source mnist"},
      {"optimizer:\n  schedule: cosine\n",
       "cfg.yaml: optimizer.schedule cosine needs optimizer.decay_updates > 0, "
       "got 0: set it to the number of updates to decay over (after "
       "warmup_updates); a whole job applies updates = epochs * "
       "train_examples / (batch_size * n_push); for this config 10 * 8000 / "
       "(64 * 1) = 1250"},
      {"optimizer:\n  schedule: step\ntraining:\n  steps: 100\n  n_push: "
       "2\ncluster:\n  workers: [a:0, b:0, c:0]\n",
       "optimizer.schedule step needs optimizer.decay_updates > 0, got 0: set "
       "it to the number of updates to decay over (after warmup_updates); a "
       "whole job applies updates = epochs * train_examples / (batch_size * "
       "n_push), or with training.steps, steps * workers / n_push; for this "
       "config 100 * 3 / 2 = 150"},
      {"cluster:\n  replication: 3\n  standby_ps: [s:0]\n",
       "cfg.yaml: cluster.replication 3 keeps two backups of every shard on "
       "standbys: 1 ps need 2 cluster.standby_ps entries, the file lists 1. "
       "Add 1 standby_ps address(es), or set cluster.replication: 2 (one "
       "backup per shard)"},
  });
  EXPECT_THAT(Parse("cluster:\n  replication: 3\n  standby_ps: [s:0, t:0]\n"),
              IsOk());
  // Port 0 is ephemeral, so several daemons may ask for it.
  EXPECT_THAT(Parse("cluster:\n  ps: [127.0.0.1:0, 127.0.0.1:0]\n"), IsOk());
}

TEST(ConfigTest, ValidateConfigChecksAStructWithoutLines) {
  Config config;
  EXPECT_THAT(ValidateConfig(config), IsOk());
  config.training.batch_size = 0;
  EXPECT_THAT(ValidateConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "training.batch_size must be in 1..1048576, got 0"));
  config = Config();
  config.optimizer.type = static_cast<OptimizerType>(99);  // a cast
  EXPECT_THAT(ValidateConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("optimizer.type must be one of")));
}

TEST(ConfigTest, LoadsFileAndNamesItInErrors) {
  const std::string good =
      WriteTempFile("good.yaml", "training:\n  steps: 7\n");
  absl::StatusOr<Config> config = LoadConfig(good);
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->path, good);
  EXPECT_EQ(config->training.steps, 7);

  const std::string bad =
      WriteTempFile("bad.yaml", "\n\ntraining:\n  steps: x\n");
  EXPECT_THAT(LoadConfig(bad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       bad + ":4: training.steps must be an integer, got 'x'"));
}

TEST(ConfigTest, OverridesApplyInOrderBeforeValidation) {
  const std::string path = WriteTempFile(
      "softmax.yaml", "model:\n  type: softmax\n  layers: [784, 10]\n");
  absl::StatusOr<Config> config = LoadConfig(
      path, {"training.steps=100", "cluster.ps=[127.0.0.1:0, 127.0.0.1:0]",
             "optimizer.type=adam", "optimizer.type=adagrad",
             "checkpoint.dir=\"\"", " data.normalize = false",
             // Valid only together: softmax with 3 layers is rejected after all
             // overrides, not in between.
             "model.type=mlp", "model.layers=[784, 32, 10]"});
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->training.steps, 100);
  EXPECT_THAT(config->cluster.ps, ElementsAre("127.0.0.1:0", "127.0.0.1:0"));
  EXPECT_EQ(config->optimizer.type, OptimizerType::kAdagrad);
  EXPECT_EQ(config->checkpoint.dir, "");
  EXPECT_FALSE(config->data.normalize);
  EXPECT_THAT(config->model.layers, ElementsAre(784, 32, 10));
}

TEST(ConfigTest, BadOverridesAreNamed) {
  const std::string path =
      WriteTempFile("plain.yaml", "logging:\n  level: info\n");
  const struct {
    std::string assignment;
    std::string error;
  } kCases[] = {
      {"training.steps=abc",
       "--set training.steps=abc: training.steps must be an integer, got "
       "'abc'"},
      {"training.batchsize=3",
       "--set training.batchsize=3: unknown key 'training.batchsize'; allowed "
       "keys in 'training': batch_size"},
      {"trainig.steps=3",
       "--set trainig.steps=3: unknown key 'trainig'; allowed sections: "
       "cluster"},
      {"training.steps", "--set training.steps: expected section.key=value"},
      {"steps=3", "--set steps=3: expected section.key=value"},
      {"cluster.ps=[a:1", "--set cluster.ps=[a:1: malformed YAML: "},
      {"training.steps=", "training.steps must be an integer, got null"},
      {"optimizer.momentum=1", "optimizer.momentum must be in [0, 1), got 1"},
      {"model.type=softmax", "plain.yaml: model.type softmax needs exactly 2"},
      {"rpc.push_window=8",
       "--set rpc.push_window=8: rpc.push_window is no longer a setting"},
  };
  for (const auto& c : kCases) {
    EXPECT_THAT(
        LoadConfig(path, {c.assignment}),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.error)))
        << c.assignment;
  }
}

TEST(ConfigTest, TargetAccuracyIsShorthandForTheTarget) {
  absl::StatusOr<Config> config =
      ParseConfig("training:\n  target_accuracy: 0.9\n", "cfg.yaml");
  ASSERT_THAT(config, IsOk());
  const JobTarget target = TargetOf(*config);
  EXPECT_EQ(target.metric, "accuracy");
  EXPECT_DOUBLE_EQ(target.value, 0.9);
  EXPECT_TRUE(target.stop);
  EXPECT_TRUE(ReachedTarget("accuracy", 0.9, 0.9));
  EXPECT_FALSE(ReachedTarget("accuracy", NAN, 0.9));
  config = ParseConfig(
      "model:\n  task: regression\n  type: linear\n  layers: [3, 1]\n"
      "data:\n  source: csv\n  path: d.csv\n",
      "cfg.yaml");
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(TargetMetric(*config), "rmse");
  EXPECT_FALSE(HigherIsBetter("rmse"));
  EXPECT_TRUE(ReachedTarget("rmse", 49.0, 50.0));
  EXPECT_FALSE(ReachedTarget("rmse", 51.0, 50.0));
  EXPECT_EQ(TargetOf(*config).metric, "");  // no target_value: no target
  // csv and libsvm count their rows when they read them.
  EXPECT_EQ(config->data.train_examples, 0);
  EXPECT_EQ(config->data.test_examples, -1);
}

TEST(ConfigTest, QuickstartConfigLoads) {
  absl::StatusOr<Config> config = LoadConfig("deploy/configs/mnist_local.yaml");
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->cluster.coordinator, "127.0.0.1:7000");
  EXPECT_THAT(config->cluster.ps,
              ElementsAre("127.0.0.1:7001", "127.0.0.1:7002"));
  EXPECT_THAT(config->cluster.workers,
              ElementsAre("127.0.0.1:7101", "127.0.0.1:7102"));
  EXPECT_EQ(config->model.type, ModelType::kMlp);
  EXPECT_THAT(config->model.layers, ElementsAre(784, 256, 128, 10));
  EXPECT_EQ(config->optimizer.type, OptimizerType::kAdam);
  EXPECT_DOUBLE_EQ(config->optimizer.learning_rate, 0.001);
  EXPECT_EQ(config->training.batch_size, 64);
  EXPECT_EQ(config->training.consistency, ConsistencyMode::kAsync);
  EXPECT_EQ(config->training.epochs, 30);
  EXPECT_EQ(config->training.target_metric, "accuracy");
  EXPECT_DOUBLE_EQ(config->training.target_value, 0.95);
  EXPECT_FALSE(config->training.stop_at_target);
  EXPECT_EQ(config->training.eval_every_steps, 100);
  EXPECT_EQ(config->training.seed, 42u);
  EXPECT_EQ(config->data.source, DataSource::kMnist);
  EXPECT_EQ(config->data.path, "data/mnist");
  EXPECT_EQ(config->data.train_examples, 8000);
  EXPECT_EQ(config->data.test_examples, 2000);
  EXPECT_EQ(config->checkpoint.dir, "run/checkpoints");
  EXPECT_DOUBLE_EQ(config->checkpoint.interval_s, 10);
}

}  // namespace
}  // namespace downpour

namespace downpour {
namespace {

TEST(ConfigTest, MergeOverrideFragmentsRejoinsListsSplitAtCommas) {
  EXPECT_THAT(
      MergeOverrideFragments(
          {"model.layers=[784", " 64", " 10]", "training.steps=3"}),
      ::testing::ElementsAre("model.layers=[784, 64, 10]", "training.steps=3"));
}

}  // namespace
}  // namespace downpour

namespace downpour {
namespace {

TEST(ConfigTest, ClusterAddressesListsEveryDaemonInOrder) {
  ClusterSection cluster;
  cluster.coordinator = "c:1";
  cluster.ps = {"p:1", "p:2"};
  cluster.standby_ps = {"s:1"};
  cluster.workers = {"w:1"};
  std::vector<std::string> seen;
  for (const ClusterAddress& a : ClusterAddresses(cluster)) {
    seen.push_back(
        absl::StrCat(a.key, " ", a.role, " ", a.index, " ", a.address));
  }
  EXPECT_THAT(seen, ::testing::ElementsAre(
                        "cluster.coordinator coordinator 0 c:1",
                        "cluster.ps[0] ps 0 p:1", "cluster.ps[1] ps 1 p:2",
                        "cluster.standby_ps[0] standby 0 s:1",
                        "cluster.workers[0] worker 0 w:1"));
}

TEST(ConfigTest, MnistShapeIsTheDefaultModelsEnds) {
  const Config config;
  EXPECT_EQ(config.model.layers.front(), kMnistDim);
  EXPECT_EQ(config.model.layers.back(), kMnistClasses);
  EXPECT_EQ(MnistDigitFile(3), "3.json");
}

TEST(ConfigTest, TensorsModelIsDeclaredByItsTensors) {
  absl::StatusOr<Config> config = Parse(
      "model:\n  type: tensors\n  tensors:\n    - conv.weight 8x1x3x3\n"
      "    - conv.bias 8\noptimizer:\n  type: adam\n");
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->model.type, ModelType::kTensors);
  EXPECT_EQ(config->model.tensors.size(), 2u);
  ExpectAllFail({
      {"model:\n  type: tensors\n", "model.type tensors needs model.tensors"},
      {"model:\n  type: tensors\n  tensors: [w 3]\noptimizer:\n  type: "
       "ftrl\n",
       "optimizer.type ftrl trains sparse tables; model.type tensors is dense"},
      {"model:\n  tensors: [w 3]\n",
       "model.tensors declares the tensors of model.type tensors; model.type "
       "is mlp"},
  });
}

TEST(ConfigTest, ExplicitKeysTellTheUsersChoiceFromADefault) {
  const std::string path = WriteTempFile(
      "explicit.yaml", "checkpoint:\n  dir: ckpt\ntraining:\n  steps: 5\n");
  absl::StatusOr<Config> config =
      LoadConfig(path, {"coordinator.state_dir=state"});
  ASSERT_THAT(config, IsOk());
  EXPECT_THAT(
      config->explicit_keys,
      ElementsAre("checkpoint.dir", "coordinator.state_dir", "training.steps"));
  absl::StatusOr<Config> defaults = Parse("");
  ASSERT_THAT(defaults, IsOk());
  EXPECT_TRUE(defaults->explicit_keys.empty());
}

// Issue 12: every value has an upper bound, so that a typo cannot make a
// daemon allocate gigabytes or wait for ever; messages give file:line, key,
// value and the allowed range.
TEST(ConfigTest, ValuesAboveTheirUpperBoundAreRefused) {
  std::string many_ps = "cluster:\n  ps: [";
  for (int i = 0; i < 1025; ++i) {
    absl::StrAppend(&many_ps, i == 0 ? "" : ", ", "127.0.0.1:0");
  }
  absl::StrAppend(&many_ps, "]\n");
  std::string many_layers = "model:\n  layers: [";
  for (int i = 0; i < 65; ++i) absl::StrAppend(&many_layers, i ? ", " : "", 4);
  absl::StrAppend(&many_layers, "]\ndata:\n  source: synthetic\n");
  ExpectAllFail({
      {"model:\n  layers: [784, 100000000, 10]\n",
       "cfg.yaml:2: model.layers[1] must be in 1..16777216, got 100000000"},
      {"model:\n  layers: [784, 1000000, 10000, 10]\n",
       "make over 1073741824 parameters, the most a model may have"},
      {"model:\n  block_size: 1000000000\n",
       "cfg.yaml:2: model.block_size must be in 1..16777216, got 1000000000"},
      {"coordinator:\n  history_size: 100000000\n",
       "cfg.yaml:2: coordinator.history_size must be in 1..1000000, got "
       "100000000"},
      {"training:\n  batch_size: 10000000\n",
       "cfg.yaml:2: training.batch_size must be in 1..1048576, got 10000000"},
      {"data:\n  source: synthetic\n  train_examples: 1000000000\n",
       "cfg.yaml:3: data.train_examples must be in 0..100000000"},
      {"data:\n  source: synthetic\n  train_examples: 99000000\n"
       "model:\n  layers: [784, 10]\n  type: softmax\n",
       "x model.layers[0] (784) = 77617568000 input floats; at most"},
      {"rpc:\n  deadline_s: 1e9\n",
       "cfg.yaml:2: rpc.deadline_s must be in (0, 86400], got 1e+09"},
      {"heartbeat:\n  timeout_s: 1e7\n", "heartbeat.timeout_s must be in"},
      {"checkpoint:\n  interval_s: 1e12\n", "checkpoint.interval_s must be in"},
      {"optimizer:\n  learning_rate: 1e30\n",
       "optimizer.learning_rate must be in (0, 1000], got 1e+30"},
      {"optimizer:\n  max_gradient_value: 1e38\n",
       "optimizer.max_gradient_value must be in [0, 1e+30], got 1e+38"},
      {"optimizer:\n  max_gradient_norm: -1\n",
       "optimizer.max_gradient_norm must be in [0, 1e+30], got -1"},
      {"training:\n  epochs: 2000000000\n", "training.epochs must be in"},
      {"launcher:\n  max_restarts: 100000\n",
       "launcher.max_restarts must be in"},
      {"compute:\n  gpu: 5000\n", "compute.gpu must be in 0..1023, got 5000"},
      {many_ps, "cluster.ps must have at most 1024 entries, got 1025"},
      {many_layers, "model.layers must have at most 64 entries, got 65"},
      {absl::StrCat("data:\n  path: ", std::string(5000, 'x'), "\n"),
       "cfg.yaml:2: data.path must be at most 4096 characters, got 5000"},
  });
}

TEST(ConfigTest, RobustnessIsOnByDefaultAndItsRulesNameTheKeys) {
  absl::StatusOr<Config> defaults = Parse("");
  ASSERT_THAT(defaults, IsOk());
  EXPECT_EQ(defaults->robustness.norm_clip_factor, 10);
  EXPECT_EQ(defaults->robustness.norm_refuse_factor, 1000);
  EXPECT_EQ(defaults->robustness.warmup_pushes, 20);
  EXPECT_EQ(defaults->robustness.rate_factor, 4);
  EXPECT_EQ(defaults->robustness.rate_window_s, 5);
  absl::StatusOr<Config> off = Parse(
      "robustness:\n  norm_clip_factor: 0\n  norm_refuse_factor: 0\n"
      "  rate_factor: 0\n");
  ASSERT_THAT(off, IsOk());
  EXPECT_EQ(off->robustness.norm_refuse_factor, 0);
  ExpectAllFail({
      {"robustness:\n  norm_clip_factor: 0.5\n",
       "robustness.norm_clip_factor (0.5) must be 0 (off) or >= 1: below 1 it "
       "would clip the typical honest push"},
      {"robustness:\n  rate_factor: 0.9\n",
       "robustness.rate_factor (0.9) must be 0 (off) or >= 1"},
      {"robustness:\n  norm_clip_factor: 100\n  norm_refuse_factor: 50\n",
       "robustness.norm_refuse_factor (50) must be >= "
       "robustness.norm_clip_factor (100)"},
      {"robustness:\n  warmup_pushes: 0\n",
       "cfg.yaml:2: robustness.warmup_pushes must be in 1..1000000, got 0"},
      {"robustness:\n  rate_window_s: 0\n",
       "robustness.rate_window_s must be in"},
      {"robustness:\n  rate_factr: 4\n",
       "cfg.yaml:2: unknown key 'robustness.rate_factr'"},
  });
}

TEST(ConfigTest, OptimizerGradientBoundsHaveDefaultsAndLoad) {
  absl::StatusOr<Config> defaults = Parse("");
  ASSERT_THAT(defaults, IsOk());
  EXPECT_EQ(defaults->optimizer.max_gradient_value, 1e6);
  EXPECT_EQ(defaults->optimizer.max_gradient_norm, 0);
  absl::StatusOr<Config> config =
      Parse("optimizer:\n  max_gradient_value: 0\n  max_gradient_norm: 5\n");
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->optimizer.max_gradient_value, 0);
  EXPECT_EQ(config->optimizer.max_gradient_norm, 5);
}

}  // namespace
}  // namespace downpour
