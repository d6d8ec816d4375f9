// Sparse tables (issue 21): how fast one ps shard's table reads and applies
// rows of a Criteo-shaped key stream, and what a row costs in memory.
//
//   bazel run -c opt //bench:sparse                     # every section
//   bazel run -c opt //bench:sparse -- --sections=core --dims=1,16,64
//   bazel run -c opt //bench:sparse -- --sections=rpc --dims=1,16
//   --min_counts=1,2 bazel run -c opt //bench:sparse -- --sections=memory
//   --rows=10000000 bazel run -c opt //bench:sparse -- --sections=eviction
//   --evict_max_rows=1000000 bazel run -c opt //bench:sparse --
//   --sections=eviction --evict_max_rows=0
//
// Key stream: minibatches of --batch examples with 39 fields each (Criteo's
// 13 integer and 26 categorical columns); field f's value is Zipf-distributed
// (s = --zipf) over --keys / 39 values and hashed with the field into a
// uint64 key. A worker sorts and de-duplicates a minibatch's keys (and sums
// their gradients) before it pushes, so the figures count UNIQUE keys.
//
// Sections:
//   core:   SparseTable::Read and CheckPush + Apply (FTRL) over the stream,
//           after a warm-up that creates the popular rows: unique keys per
//           second for pull and for push, per --dims and admission
//           min_count (--min_counts; 1 = off), median of --reps, with the
//           rows created and the keys still pending admission.
//   rpc:    the same stream over gRPC on loopback: a worker's GrpcPsClient
//           against --shards in-process ps shards (LocalCluster, real TCP):
//           per batch one PullRows of its keys (split by shard, all shards
//           at once) and one PushWithRows of their gradients (and the bias),
//           as worker/sparse_loop.cc does, for each of --dims (dim 1:
//           sparse_linear's weights; wider: an fm model's embeddings). Unique
//           keys per second per shard, bytes per key on the wire, p50/p99 of a
//           pull and of a push. Server and client share this machine's cores.
//           With --coordinator: the same client against a running job's
//           real ps daemons (one row, dim 1), as worker --worker_index;
//           bench/python/sparse_keys.py runs it next to the Python client
//           on the stream it writes with --stream_out.
//   memory: creates --rows FTRL rows of dim 1 and prints the process's RSS
//           growth per row (the target: <= 64 bytes, key, weight, z, n
//           and index) next to the table's own account (bytes());
//           --replicated: a table that tracks the rows changed for its
//           backup's cuts, none cut (the worst case).
//   eviction: (issue 22) --stream_batches minibatches of the stream above
//           (not in memory: drawn as they go) into one FTRL table of dim 1
//           that evicts every --evict_every batches as a ps does at its
//           checkpoints, to --evict_max_rows rows (0: unbounded), printing
//           rows, RSS growth and the table's bytes as it goes; then the
//           checkpoint files: a full cut, and --deltas deltas of
//           --delta_batches batches each (incremental checkpoints, with the
//           keys evicted), and the time to restore the full cut alone and
//           full + deltas (ShardCheckpoints::ReadNewest). Run it in a process
//           of its own: RSS is the process's.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "bench/bench_util.h"
#include "bench/local_cluster.h"
#include "common/config.h"
#include "common/counters.h"
#include "common/model_spec.h"
#include "common/sparse_keys.h"
#include "membership/coordinator_client.h"
#include "server/checkpoint.h"
#include "server/sparse_table.h"
#include "worker/grpc_ps_client.h"

ABSL_FLAG(std::string, sections, "core,rpc,memory",
          "core, rpc, memory, eviction");
ABSL_FLAG(std::string, shards, "1,2,4", "ps shards for the rpc section");
ABSL_FLAG(std::string, optimizer, "ftrl",
          "the tables' update rule in the core and rpc sections: ftrl, "
          "adagrad, adam or sgd (bench/pslite's servers apply sgd)");
ABSL_FLAG(std::string, dims, "1,16,64",
          "row widths for the core and rpc sections (rpc: dim 1 pulls and "
          "pushes sparse_linear's weights, wider an fm model's embeddings of "
          "that width)");
ABSL_FLAG(std::string, min_counts, "1,2",
          "core section: admission.min_count values (1: admission off); a "
          "key without a row is admitted at that many pushes holding it");
ABSL_FLAG(int64_t, keys, 10'000'000, "distinct keys in the stream");
ABSL_FLAG(double, zipf, 1.1, "Zipf exponent of each field's values");
ABSL_FLAG(int, batch, 1024, "examples per minibatch (39 keys each)");
ABSL_FLAG(int, batches, 200, "minibatches per sample");
ABSL_FLAG(int, reps, 3, "samples per figure (median)");
ABSL_FLAG(int64_t, rows, 10'000'000, "rows the memory section creates");
ABSL_FLAG(bool, replicated, false,
          "memory: a table that tracks changed rows for a backup "
          "(cluster.replication 2); run it in a process of its own");
ABSL_FLAG(int64_t, evict_max_rows, 1'000'000,
          "eviction: eviction.max_rows of the table (0: unbounded)");
ABSL_FLAG(int, stream_batches, 2000, "eviction: minibatches streamed");
ABSL_FLAG(int, evict_every, 100,
          "eviction: batches between two evictions (checkpoints)");
ABSL_FLAG(int, delta_batches, 20,
          "eviction: batches between two checkpoints of the chain");
ABSL_FLAG(int, deltas, 3, "eviction: deltas written after the full cut");
ABSL_FLAG(std::string, coordinator, "",
          "rpc: instead of in-process shards, the real daemons of a running "
          "sparse_linear job (sparse_buckets 1024, --shards ps) whose "
          "coordinator listens here; the bench registers as worker "
          "--worker_index (bench/python/sparse_keys.py starts such a job)");
ABSL_FLAG(int, worker_index, 0, "rpc with --coordinator: the worker slot");
ABSL_FLAG(std::string, stream_out, "",
          "rpc: writes the timed batches' keys to this file (per batch a "
          "little-endian uint32 count, then its uint64 keys)");
ABSL_FLAG(std::string, checkpoint_dir, "/tmp/downpour_bench_sparse_ckpt",
          "eviction: where the checkpoint chain is written (emptied first)");

namespace downpour::bench {
namespace {

using server::SparseOptimizerType;
using server::SparseTable;
using Clock = std::chrono::steady_clock;

constexpr int kFields = 39;

// SplitMix64's output function: the keys of the stream (bench/pslite's
// harness repeats it).
uint64_t Mix(uint64_t x) { return MixKey(x + 0x9e3779b97f4a7c15ULL); }

// Zipf-like ranks in [0, n): the continuous power law's inverse CDF, floored.
class ZipfRanks {
 public:
  ZipfRanks(int64_t n, double s) : n_(n), s_(s) {}
  int64_t operator()(std::mt19937_64& rng) {
    const double u = std::uniform_real_distribution<double>()(rng);
    const double a = 1.0 - s_;
    const double x = std::pow((std::pow(n_ + 1.0, a) - 1.0) * u + 1.0, 1.0 / a);
    return std::min<int64_t>(n_ - 1, static_cast<int64_t>(x) - 1);
  }

 private:
  const int64_t n_;
  const double s_;
};

// The sorted unique keys of each of `count` minibatches.
std::vector<std::vector<uint64_t>> MakeBatches(int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  ZipfRanks rank(absl::GetFlag(FLAGS_keys) / kFields,
                 absl::GetFlag(FLAGS_zipf));
  const int batch = absl::GetFlag(FLAGS_batch);
  std::vector<std::vector<uint64_t>> batches(count);
  for (auto& keys : batches) {
    keys.reserve(batch * kFields);
    for (int e = 0; e < batch; ++e) {
      for (uint64_t f = 0; f < kFields; ++f) {
        keys.push_back(Mix((f << 48) ^ static_cast<uint64_t>(rank(rng))));
      }
    }
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  }
  return batches;
}

double Seconds(Clock::time_point from) {
  return std::chrono::duration<double>(Clock::now() - from).count();
}

void Core() {
  const int reps = absl::GetFlag(FLAGS_reps);
  const auto warm = MakeBatches(absl::GetFlag(FLAGS_batches), 1);
  const auto batches = MakeBatches(absl::GetFlag(FLAGS_batches), 2);
  int64_t unique = 0;
  for (const auto& b : batches) unique += b.size();
  absl::PrintF(
      "\n== core: one shard's table, %s, %d fields, Zipf s=%.2f over %d "
      "keys, %d examples a batch (%.0f unique keys a batch), medians of %d "
      "==\n",
      absl::GetFlag(FLAGS_optimizer), kFields, absl::GetFlag(FLAGS_zipf),
      absl::GetFlag(FLAGS_keys), absl::GetFlag(FLAGS_batch),
      static_cast<double>(unique) / batches.size(), reps);
  absl::PrintF("%5s %6s %14s %14s %12s %12s %12s\n", "dim", "admit",
               "pull keys/s", "push keys/s", "rows", "bytes/row", "pending");
  for (int dim : ParseInts(absl::GetFlag(FLAGS_dims))) {
    for (int min_count : ParseInts(absl::GetFlag(FLAGS_min_counts))) {
      SparseTable::Options options;
      options.dim = dim;
      options.admit_min_count = min_count;
      auto type = server::ParseSparseOptimizer(absl::GetFlag(FLAGS_optimizer));
      CheckOrExit(type.status(), "sparse", "--optimizer");
      options.optimizer.type = *type;
      auto table = SparseTable::Create(options);
      CheckOrExit(table.status(), "sparse", "table");
      std::vector<float> values, grads;
      std::mt19937_64 rng(3);
      std::normal_distribution<float> normal(0.0f, 0.1f);
      auto push = [&](const std::vector<uint64_t>& keys) {
        grads.resize(keys.size() * dim);
        for (float& g : grads) g = normal(rng);
        CheckOrExit(
            SparseTable::CheckPush(keys.data(), keys.size(), grads.data(),
                                   grads.size(), nullptr, dim, 1e6),
            "sparse", "push");
        (*table)->Apply(keys.data(), keys.size(), grads.data());
      };
      for (const auto& keys : warm) push(keys);
      std::vector<double> pull_rates, push_rates;
      for (int r = 0; r < reps; ++r) {
        Clock::time_point t = Clock::now();
        for (const auto& keys : batches) {
          values.resize(keys.size() * dim);
          (*table)->Read(keys.data(), keys.size(), values.data());
        }
        pull_rates.push_back(unique / Seconds(t));
        // Gradients are drawn outside the timed part.
        std::vector<std::vector<float>> all(batches.size());
        for (size_t b = 0; b < batches.size(); ++b) {
          all[b].resize(batches[b].size() * dim);
          for (float& g : all[b]) g = normal(rng);
        }
        t = Clock::now();
        for (size_t b = 0; b < batches.size(); ++b) {
          const auto& keys = batches[b];
          CheckOrExit(
              SparseTable::CheckPush(keys.data(), keys.size(), all[b].data(),
                                     all[b].size(), nullptr, dim, 1e6),
              "sparse", "push");
          (*table)->Apply(keys.data(), keys.size(), all[b].data());
        }
        push_rates.push_back(unique / Seconds(t));
      }
      absl::PrintF("%5d %6d %14.0f %14.0f %12d %12.1f %12d\n", dim, min_count,
                   Median(pull_rates), Median(push_rates), (*table)->rows(),
                   static_cast<double>((*table)->bytes()) / (*table)->rows(),
                   (*table)->pending_keys());
      std::fflush(stdout);
    }
  }
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

// A worker slot of a running job (--coordinator): registered with its
// coordinator, heartbeating until destroyed, so that its ps take the pushes.
class RunningJobWorker {
 public:
  RunningJobWorker(const std::string& address, const RpcSection& rpc, int index)
      : index_(index), client_(address, rpc, "bench sparse") {
    // No Status service answers there: the coordinator's probe of it fails,
    // which a registered worker survives (bench/sparse_flood does the same).
    auto registered =
        client_.RegisterWorker(index, absl::StrCat("127.0.0.1:", 1 + index));
    CheckOrExit(registered.status(), "sparse", "register with --coordinator");
    incarnation_ = registered->incarnation();
    push_key_ = registered->push_key();
    heartbeat_ = std::thread([this] {
      while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(200))) {
        proto::HeartbeatRequest beat;
        beat.set_role("worker");
        beat.set_index(index_);
        (void)client_.Heartbeat(beat);
      }
    });
  }
  ~RunningJobWorker() {
    stop_.Notify();
    heartbeat_.join();
  }

  membership::CoordinatorClient* coordinator() { return &client_; }
  void Identify(worker::GrpcPsClient* ps) {
    ps->set_incarnation(incarnation_, push_key_);
  }

 private:
  const int index_;
  membership::CoordinatorClient client_;
  uint64_t incarnation_ = 0, push_key_ = 0;
  absl::Notification stop_;
  std::thread heartbeat_;
};

// --stream_out: per batch a little-endian uint32 count, then its keys.
void WriteStream(const std::string& path,
                 const std::vector<std::vector<uint64_t>>& batches) {
  std::ofstream out(path, std::ios::binary);
  for (const auto& keys : batches) {
    const uint32_t count = keys.size();
    out.write(reinterpret_cast<const char*>(&count), sizeof(count));
    out.write(reinterpret_cast<const char*>(keys.data()),
              keys.size() * sizeof(uint64_t));
  }
  if (!out.good()) {
    absl::FPrintF(stderr, "sparse: cannot write --stream_out %s\n", path);
    std::exit(1);
  }
}

// The rpc section's stream through one client: per batch a pull of its keys
// (split by shard) from table `table` of width `dim` and a push of their
// gradients with the dense gradient; the seconds each took, summed.
class RpcStream {
 public:
  RpcStream(worker::GrpcPsClient* client, int shards, int dim, int params)
      : client_(*client),
        shards_(shards),
        dim_(dim),
        table_(dim == 1 ? 0 : 1),
        dense_grad_(params, 0.0f) {
    dense_grad_[0] = 0.01f;  // the bias
    std::vector<float> dense(params);
    CheckOrExit(client_.Pull(dense.data(), &versions_), "sparse", "pull dense");
  }

  // Runs `stream`; with `timed`, adds each pull's and push's time.
  void Run(const std::vector<std::vector<uint64_t>>& stream, bool timed) {
    for (const auto& keys : stream) {
      const auto [pull, push] = Step(keys);
      if (!timed) continue;
      pull_s += pull;
      push_s += push;
      pull_ms.push_back(pull * 1e3);
      push_ms.push_back(push * 1e3);
    }
  }

  double pull_s = 0, push_s = 0;
  std::vector<double> pull_ms, push_ms;

 private:
  std::pair<double, double> Step(const std::vector<uint64_t>& keys) {
    std::vector<std::vector<uint64_t>> by_shard(shards_);
    for (uint64_t k : keys) by_shard[ShardOfKey(k, 1024, shards_)].push_back(k);
    std::vector<std::vector<float>> values;
    Clock::time_point t = Clock::now();
    CheckOrExit(client_.PullRows(table_, dim_, by_shard, &values), "sparse",
                "pull rows");
    const double pull = Seconds(t);
    std::vector<std::vector<float>> grads(shards_);
    std::vector<std::vector<wire::SparseRef>> refs(shards_);
    for (int s = 0; s < shards_; ++s) {
      grads[s].resize(by_shard[s].size() * dim_);
      for (float& g : grads[s]) g = normal_(rng_);
      if (by_shard[s].empty()) continue;
      wire::SparseRef ref;
      ref.table = table_;
      ref.keys = reinterpret_cast<const char*>(by_shard[s].data());
      ref.keys_size = by_shard[s].size() * sizeof(uint64_t);
      ref.values = reinterpret_cast<const char*>(grads[s].data());
      ref.values_size = grads[s].size() * sizeof(float);
      refs[s].push_back(ref);
    }
    t = Clock::now();
    CheckOrExit(
        client_.PushWithRows(dense_grad_.data(), versions_, refs, nullptr),
        "sparse", "push rows");
    return {pull, Seconds(t)};
  }

  worker::GrpcPsClient& client_;
  const int shards_;
  const int dim_;
  const uint32_t table_;
  std::vector<float> dense_grad_;
  std::vector<uint64_t> versions_;
  std::mt19937_64 rng_{3};
  std::normal_distribution<float> normal_{0.0f, 0.1f};
};

// One rpc row: `shards` in-process ps shards, their rows of width `dim`
// (dim 1: sparse_linear's weights, table 0; else an fm model's embeddings of
// that width, table 1), the stream pulled and pushed through one client.
void RpcRow(int shards, int dim, const std::vector<std::vector<uint64_t>>& warm,
            const std::vector<std::vector<uint64_t>>& batches) {
  int64_t unique = 0;
  for (const auto& b : batches) unique += b.size();
  Config config;
  config.model.type = dim == 1 ? ModelType::kSparseLinear : ModelType::kFm;
  config.model.fm.dim = dim;
  config.model.task = Task::kBinary;
  config.model.sparse_buckets = 1024;
  auto type = ParseOptimizerType(absl::GetFlag(FLAGS_optimizer));
  CheckOrExit(type.status(), "sparse", "--optimizer");
  config.optimizer.type = *type;
  config.cluster.ps.assign(shards, "127.0.0.1:0");
  config.cluster.workers.assign(1, "127.0.0.1:0");
  config.cluster.replication = 1;
  config.rpc.deadline_s = 30;
  config.rpc.connect_timeout_s = 10;
  auto spec = ModelSpec::Create(config.model);
  CheckOrExit(spec.status(), "sparse", "model");
  std::unique_ptr<LocalCluster> cluster;
  std::unique_ptr<RunningJobWorker> external;
  membership::CoordinatorClient* coordinator;
  int worker = 0;
  if (absl::GetFlag(FLAGS_coordinator).empty()) {
    auto started = LocalCluster::Start(config);
    CheckOrExit(started.status(), "sparse", "start cluster");
    cluster = std::move(*started);
    coordinator = cluster->coordinator_client();
  } else {
    worker = absl::GetFlag(FLAGS_worker_index);
    external = std::make_unique<RunningJobWorker>(
        absl::GetFlag(FLAGS_coordinator), config.rpc, worker);
    coordinator = external->coordinator();
  }
  Counters counters;
  worker::GrpcPsClient client(*spec, coordinator, config.rpc, worker,
                              &counters);
  if (external != nullptr) external->Identify(&client);
  CheckOrExit(client.Connect(), "sparse", "connect");
  RpcStream stream(&client, shards, dim, spec->num_params());
  stream.Run(warm, false);
  std::vector<double> pull_rates, push_rates;
  for (int r = 0; r < absl::GetFlag(FLAGS_reps); ++r) {
    stream.pull_s = stream.push_s = 0;
    stream.Run(batches, true);
    pull_rates.push_back(unique / stream.pull_s / shards);
    push_rates.push_back(unique / stream.push_s / shards);
  }
  // On the wire, per key: a pull sends the key (8 bytes) and gets back its
  // values and version (4 * dim + 4); a push sends the key and its gradient.
  absl::PrintF("%4d %6d %16.0f %16.0f %11.1f %11.1f %11.2f %11.2f %11.2f\n",
               dim, shards, Median(pull_rates), Median(push_rates),
               12.0 + 4.0 * dim, 8.0 + 4.0 * dim, Quantile(stream.pull_ms, 0.5),
               Quantile(stream.pull_ms, 0.99), Quantile(stream.push_ms, 0.99));
  std::fflush(stdout);
}

void Rpc() {
  const auto warm = MakeBatches(absl::GetFlag(FLAGS_batches) / 4, 1);
  const auto batches = MakeBatches(absl::GetFlag(FLAGS_batches), 2);
  int64_t unique = 0;
  for (const auto& b : batches) unique += b.size();
  absl::PrintF(
      "\n== rpc: gRPC over 127.0.0.1, %s, %d batches of %.0f unique "
      "keys, medians of %d; client and shards in one process on this "
      "machine's cores ==\n",
      absl::GetFlag(FLAGS_optimizer), batches.size(),
      static_cast<double>(unique) / batches.size(), absl::GetFlag(FLAGS_reps));
  absl::PrintF("%4s %6s %16s %16s %11s %11s %11s %11s %11s\n", "dim", "shards",
               "pull keys/s/shd", "push keys/s/shd", "pull B/key", "push B/key",
               "pull p50 ms", "pull p99 ms", "push p99 ms");
  if (!absl::GetFlag(FLAGS_stream_out).empty()) {
    WriteStream(absl::GetFlag(FLAGS_stream_out), batches);
  }
  if (!absl::GetFlag(FLAGS_coordinator).empty()) {
    RpcRow(ParseInts(absl::GetFlag(FLAGS_shards)).front(), 1, warm, batches);
    return;
  }
  for (int dim : ParseInts(absl::GetFlag(FLAGS_dims))) {
    for (int shards : ParseInts(absl::GetFlag(FLAGS_shards))) {
      RpcRow(shards, dim, warm, batches);
    }
  }
}

// The stream's minibatches one at a time (MakeBatches draws them all).
class BatchStream {
 public:
  explicit BatchStream(uint64_t seed)
      : rng_(seed),
        rank_(absl::GetFlag(FLAGS_keys) / kFields, absl::GetFlag(FLAGS_zipf)) {}
  const std::vector<uint64_t>& Next() {
    const int batch = absl::GetFlag(FLAGS_batch);
    keys_.clear();
    for (int e = 0; e < batch; ++e) {
      for (uint64_t f = 0; f < kFields; ++f) {
        keys_.push_back(Mix((f << 48) ^ static_cast<uint64_t>(rank_(rng_))));
      }
    }
    std::sort(keys_.begin(), keys_.end());
    keys_.erase(std::unique(keys_.begin(), keys_.end()), keys_.end());
    return keys_;
  }

 private:
  std::mt19937_64 rng_;
  ZipfRanks rank_;
  std::vector<uint64_t> keys_;
};

int64_t RssBytes();

// The eviction benchmark's table and stream: batches applied, evictions
// (their keys kept for the next delta once checkpoints are written), and
// checkpoints of the table.
class EvictionRun {
 public:
  explicit EvictionRun(SparseTable* table) : table_(*table) {}

  int64_t updates() const { return updates_; }
  const std::vector<double>& evict_ms() const { return evict_ms_; }
  size_t tombstones() const { return evicted_keys_.size(); }
  void KeepTombstones() { keep_tombstones_ = true; }

  void Step() {
    const std::vector<uint64_t>& keys = stream_.Next();
    grads_.resize(keys.size());
    for (float& g : grads_) g = normal_(rng_);
    table_.Apply(keys.data(), keys.size(), grads_.data());
    updates_ += static_cast<int64_t>(keys.size());
  }

  void Evict() {
    const Clock::time_point t = Clock::now();
    const std::vector<uint64_t> gone = table_.Evict();
    evict_ms_.push_back(Seconds(t) * 1e3);
    if (keep_tombstones_) {
      evicted_keys_.insert(evicted_keys_.end(), gone.begin(), gone.end());
    }
  }

  // Writes a full cut (`full`) or a delta of the changes since clock
  // `since`; the file written and the seconds it took.
  auto Cut(const server::ShardCheckpoints& files, bool full, uint64_t base,
           uint64_t parent, uint64_t since) {
    server::Checkpoint c;
    c.placement_epoch = 1;
    c.optimizer = "adagrad";
    SparseTable::Rows rows =
        full ? table_.Snapshot() : table_.ChangedSince(since);
    if (!full) {
      std::sort(evicted_keys_.begin(), evicted_keys_.end());
      rows.evicted_keys = evicted_keys_;
      c.kind = server::CheckpointKind::kDelta;
      c.base_generation = base;
      c.parent_generation = parent;
    }
    evicted_keys_.clear();
    c.sparse_tables.emplace_back(0, std::move(rows));
    const Clock::time_point t = Clock::now();
    auto written = files.Write(std::move(c));
    CheckOrExit(written.status(), "sparse", "write checkpoint");
    return std::make_pair(*written, Seconds(t));
  }

 private:
  SparseTable& table_;
  BatchStream stream_{11};
  std::mt19937_64 rng_{3};
  std::normal_distribution<float> normal_{0.0f, 0.1f};
  std::vector<float> grads_;
  int64_t updates_ = 0;
  std::vector<double> evict_ms_;
  std::vector<uint64_t> evicted_keys_;  // since the last checkpoint
  bool keep_tombstones_ = false;        // once checkpoints are written
};

// The stream with an eviction every --evict_every batches: a line of rows
// and memory every tenth of the batches, then the rate and eviction times.
// `before`: the RSS before the run began.
void EvictionStream(SparseTable& table, EvictionRun& run, int64_t before) {
  const int64_t max_rows = absl::GetFlag(FLAGS_evict_max_rows);
  const int batches = absl::GetFlag(FLAGS_stream_batches);
  const int every = std::max(1, absl::GetFlag(FLAGS_evict_every));
  absl::PrintF(
      "\n== eviction: FTRL dim 1, %d batches of the %d-key Zipf stream "
      "(s=%.2f), eviction.max_rows %d (0: unbounded) every %d batches ==\n",
      batches, absl::GetFlag(FLAGS_keys), absl::GetFlag(FLAGS_zipf), max_rows,
      every);
  absl::PrintF("%8s %14s %12s %12s %12s %12s\n", "batches", "key updates",
               "rows", "evicted", "RSS MiB", "table MiB");
  const Clock::time_point start = Clock::now();
  for (int b = 1; b <= batches; ++b) {
    run.Step();
    if (b % every == 0) run.Evict();
    if (b % (batches / 10 > 0 ? batches / 10 : 1) == 0) {
      absl::PrintF("%8d %14d %12d %12d %12.1f %12.1f\n", b, run.updates(),
                   table.rows(), table.rows_evicted(),
                   (RssBytes() - before) / 1048576.0,
                   table.bytes() / 1048576.0);
      std::fflush(stdout);
    }
  }
  const double seconds = Seconds(start);
  std::vector<double> evict_ms = run.evict_ms();
  std::sort(evict_ms.begin(), evict_ms.end());
  absl::PrintF(
      "%.2f M key updates/s with eviction included; %d evictions, median "
      "%.1f ms, max %.1f ms\n",
      run.updates() / seconds / 1e6, evict_ms.size(),
      evict_ms.empty() ? 0.0 : evict_ms[evict_ms.size() / 2],
      evict_ms.empty() ? 0.0 : evict_ms.back());
}

// Restores the chain (full cut and deltas) in `files` and the full cut at
// `full_path` alone: the times, and whether the chain gave the table's keys.
void EvictionRestore(const server::ShardCheckpoints& files,
                     const std::string& full_path, SparseTable& table) {
  Clock::time_point t = Clock::now();
  auto chain = files.ReadNewest();
  CheckOrExit(chain.status(), "sparse", "restore");
  const double chain_s = Seconds(t);
  const size_t chain_rows =
      chain->checkpoint.sparse_tables[0].second.keys.size();
  const bool same =
      chain->checkpoint.sparse_tables[0].second.keys == table.Snapshot().keys;
  chain = absl::StatusOr<server::ShardCheckpoints::Loaded>();  // free it
  t = Clock::now();
  auto alone = server::ReadCheckpoint(full_path);
  CheckOrExit(alone.status(), "sparse", "read full cut");
  const double full_read_s = Seconds(t);
  absl::PrintF(
      "restore: full cut alone %.2f s; full + %d deltas %.2f s (%d rows, %s "
      "the table's keys)\n",
      full_read_s, absl::GetFlag(FLAGS_deltas), chain_s, chain_rows,
      same ? "equal to" : "DIFFERENT FROM");
}

void Eviction() {
  SparseTable::Options options;
  options.optimizer.type = SparseOptimizerType::kFtrl;
  options.evict_max_rows = absl::GetFlag(FLAGS_evict_max_rows);
  options.track_clocks = true;  // incremental checkpoints below
  auto made = SparseTable::Create(options);
  CheckOrExit(made.status(), "sparse", "table");
  SparseTable& table = **made;
  const int64_t before = RssBytes();
  EvictionRun run(&table);
  EvictionStream(table, run, before);
  // Checkpoints: a full cut now, then deltas.
  const std::string dir = absl::GetFlag(FLAGS_checkpoint_dir);
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  server::ShardCheckpoints::Options files_options;
  files_options.dir = dir;
  files_options.incremental = true;
  files_options.keep = 1;
  const server::ShardCheckpoints files(files_options);
  uint64_t clock = table.clock();
  const auto [full, full_s] = run.Cut(files, true, 0, 0, 0);
  run.KeepTombstones();
  absl::PrintF("full cut: %d rows, %.1f MiB, written in %.2f s\n", table.rows(),
               full.bytes / 1048576.0, full_s);
  uint64_t parent = full.generation;
  for (int d = 0; d < absl::GetFlag(FLAGS_deltas); ++d) {
    for (int b = 1; b <= absl::GetFlag(FLAGS_delta_batches); ++b) {
      run.Step();
    }
    run.Evict();  // as the ps does before each checkpoint
    const int64_t changed = table.ChangedSince(clock).keys.size();
    const int64_t tombstones = run.tombstones();
    const auto [delta, delta_s] =
        run.Cut(files, false, full.generation, parent, clock);
    clock = table.clock();
    parent = delta.generation;
    absl::PrintF(
        "delta %d after %d batches: %d rows changed, %d evicted keys, %.1f "
        "MiB (%.1f %% of the full cut), written in %.2f s\n",
        d + 1, absl::GetFlag(FLAGS_delta_batches), changed, tombstones,
        delta.bytes / 1048576.0, 100.0 * delta.bytes / full.bytes, delta_s);
  }
  EvictionRestore(files, full.path, table);
  std::filesystem::remove_all(dir, ignored);
}

int64_t RssBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * 4096;
}

// `replicated`: the table tracks changed rows for a backup's cuts
// (cluster.replication 2): a key per row, a bit, and the rows changed since
// the last cut; none is taken here, so every row stays listed (the worst
// case: a backup that never catches up).
void Memory(bool replicated) {
  const int64_t n = absl::GetFlag(FLAGS_rows);
  SparseTable::Options options;
  options.optimizer.type = SparseOptimizerType::kFtrl;
  options.track_changes = replicated;
  auto table = SparseTable::Create(options);
  CheckOrExit(table.status(), "sparse", "table");
  const int64_t before = RssBytes();
  // Keys from a 2^64 space, pushed in sorted batches of 65536.
  std::vector<uint64_t> keys(65536);
  std::vector<float> grads(keys.size(), 0.5f);
  const Clock::time_point t = Clock::now();
  for (int64_t made = 0; made < n; made += keys.size()) {
    const int64_t count = std::min<int64_t>(keys.size(), n - made);
    for (int64_t i = 0; i < count; ++i) keys[i] = Mix(made + i);
    std::sort(keys.begin(), keys.begin() + count);
    (*table)->Apply(keys.data(), count, grads.data());
  }
  const double seconds = Seconds(t);
  const int64_t grown = RssBytes() - before;
  absl::PrintF(
      "\n== memory: %d FTRL rows of dim 1 (keys from 2^64)%s ==\n"
      "RSS growth %.1f MiB = %.1f bytes/row (target <= 64); the table's own "
      "account %.1f bytes/row; created at %.0f rows/s\n",
      (*table)->rows(),
      replicated ? ", replicated (changes tracked, none cut yet)" : "",
      grown / 1048576.0, static_cast<double>(grown) / (*table)->rows(),
      static_cast<double>((*table)->bytes()) / (*table)->rows(),
      (*table)->rows() / seconds);
}

}  // namespace
}  // namespace downpour::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string sections = absl::GetFlag(FLAGS_sections);
  if (downpour::bench::SectionOn(sections, "core")) downpour::bench::Core();
  if (downpour::bench::SectionOn(sections, "rpc")) downpour::bench::Rpc();
  if (downpour::bench::SectionOn(sections, "memory")) {
    downpour::bench::Memory(absl::GetFlag(FLAGS_replicated));
  }
  if (downpour::bench::SectionOn(sections, "eviction")) {
    downpour::bench::Eviction();
  }
  return 0;
}
