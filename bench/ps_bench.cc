// ps_bench: the parameter server's throughput over loopback gRPC and one
// worker's training rate with and without it, each as a ratio to a baseline
// measured in the same run (the machine is shared; absolute figures drift).
//
//   bazel run -c opt //bench:ps_bench
//   bazel run -c opt //bench:ps_bench -- --sections=transport --sizes_mib=4
//
// Sections (docs/BENCHMARKS.md explains every column):
//   transport  GrpcPsClient Push / Pull of the whole flat vector against an
//              in-process coordinator and 1..S shards served over 127.0.0.1,
//              next to a plain TCP socket pair moving the same bytes in the
//              same message sizes, with the process's CPU time per GB; then
//              the same servers with a Push handler that acknowledges without
//              touching the shard (shard work off), and with a client that
//              keeps every 1 MiB chunk in flight (bench/pipelined_client.h).
//   apply      the shard's own work per full-model push, in process: Shard::
//              Push, BlockStore::ValidatePush and BlockStore::Push (validate +
//              apply), as a share of the gRPC push time.
//   latency    p50/p99 round trip of a 96-byte push and pull with
//              GrpcPsClient, next to a plain generated-stub unary call.
//   worker     DownpourLoop examples/s for the MNIST MLP with GrpcPsClient
//              against one in-process ps, and with no_communication.
//   tls        GrpcPsClient Push / Pull over plaintext next to the same over
//              TLS with role tokens checked (security section; certificates
//              from deploy/make_certs.sh in a temp folder), and mutual TLS.
// Every figure is the median of --reps (--worker_reps) samples; samples of
// the things compared are interleaved so that drift hits both alike.
#include <cblas.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "bench/local_cluster.h"
#include "bench/pipelined_client.h"
#include "bench/tcp_link.h"
#include "common/logging.h"
#include "common/model_spec.h"
#include "common/subprocess.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/security.h"
#include "rpc/server_util.h"
#include "server/block_store.h"
#include "server/optimizer.h"
#include "server/ps_service.h"
#include "worker/cpu/cpu_backend.h"
#include "worker/dataset.h"
#include "worker/downpour.h"
#include "worker/grpc_ps_client.h"

ABSL_FLAG(std::string, sections,
          "transport,apply,latency,worker,replication,tls",
          "which sections to run: transport, apply, latency, worker, "
          "replication, tls");
ABSL_FLAG(std::string, make_certs, "deploy/make_certs.sh",
          "tls: the certificate script (relative paths are tried in the "
          "working directory, then in $BUILD_WORKSPACE_DIRECTORY)");
ABSL_FLAG(int, latency_calls, 2000, "round trips per latency figure");
ABSL_FLAG(std::string, sizes_mib, "1,16",
          "model sizes in MiB of float32 parameters (transport, apply)");
ABSL_FLAG(std::string, shards, "1,2", "ps shard counts (transport)");
ABSL_FLAG(int64_t, block_size, 65536, "model.block_size in floats");
ABSL_FLAG(std::string, optimizer, "sgd", "optimizer.type the shards apply");
ABSL_FLAG(double, weight_decay, 0, "optimizer.weight_decay the shards apply");
ABSL_FLAG(bool, robustness, true,
          "config.robustness at its defaults (the ps's PushGuard: norm and "
          "rate bounds); false turns it off (factors 0), for an A/B of its "
          "cost");
ABSL_FLAG(int, reps, 15, "samples per transport/apply figure (median)");
ABSL_FLAG(int64_t, sample_bytes, 8 << 20,
          "a transport sample repeats an operation until it has moved this "
          "many bytes (at least once)");
ABSL_FLAG(int64_t, tcp_message_bytes, 4 << 20,
          "largest TCP baseline message; GrpcPsClient's chunk (kChunkBytes in "
          "worker/ps_client.cc)");
ABSL_FLAG(int64_t, pipeline_chunk_bytes, 1 << 20,
          "chunk size of the pipelined comparison client");
ABSL_FLAG(int, worker_steps, 600, "training steps per worker sample");
ABSL_FLAG(std::string, worker_encoding, "float32",
          "rpc.encoding of the worker section's pushes and pulls (float32, "
          "bf16, fp16)");
ABSL_FLAG(int, worker_reps, 7, "samples per worker figure (median)");
ABSL_FLAG(int, n_fetch, 1, "training.n_fetch for the worker section");
ABSL_FLAG(int, n_push, 1, "training.n_push for the worker section");
ABSL_FLAG(bool, worker_detail, false,
          "worker section: print each sample's time shares (computing, "
          "waiting for pulls, for pushes) and the process's CPU time per "
          "step (worker, ps and gRPC threads together) against its wall "
          "time, to stderr");
ABSL_FLAG(int64_t, layer_group_floats, 0,
          "training.fetch layerwise in the worker section: floats a group of "
          "blocks pushed and pulled as one holds, about (0: half the model, "
          "the worker's default)");

namespace downpour::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kMiB = 1 << 20;

void Check(const absl::Status& status, const std::string& what) {
  CheckOrExit(status, "ps_bench", what);
}

bool SectionOn(const std::string& name) {
  return bench::SectionOn(absl::GetFlag(FLAGS_sections), name);
}

double ProcessCpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

// Seconds per call of fn, over `times` calls; CPU seconds of the whole process
// (client and servers) per call go to *cpu when given.
template <typename Fn>
double PerCall(int times, Fn&& fn, std::vector<double>* cpu = nullptr) {
  const double cpu_start = ProcessCpuSeconds();
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < times; ++i) fn();
  const double wall =
      std::chrono::duration<double>(Clock::now() - start).count();
  if (cpu != nullptr) cpu->push_back((ProcessCpuSeconds() - cpu_start) / times);
  return wall / times;
}

// A softmax [floats/4 - 1, 4] model: exactly `floats` parameters.
// --robustness=false turns the ps's PushGuard off.
void SetRobustness(Config* config) {
  if (absl::GetFlag(FLAGS_robustness)) return;
  config->robustness.norm_clip_factor = 0;
  config->robustness.norm_refuse_factor = 0;
  config->robustness.rate_factor = 0;
}

Config ModelConfig(int64_t floats, int shards) {
  Config config;
  config.model.type = ModelType::kSoftmax;
  config.model.layers = {static_cast<int>(floats / 4 - 1), 4};
  config.model.block_size = absl::GetFlag(FLAGS_block_size);
  absl::StatusOr<OptimizerType> type =
      ParseOptimizerType(absl::GetFlag(FLAGS_optimizer));
  Check(type.status(), "--optimizer");
  config.optimizer.type = *type;
  config.optimizer.weight_decay = absl::GetFlag(FLAGS_weight_decay);
  config.cluster.ps.assign(shards, "127.0.0.1:0");
  // Worker ids the ps takes: 0 (GrpcPsClient) and 1 (PipelinedClient).
  config.cluster.workers.assign(2, "127.0.0.1:0");
  config.rpc.deadline_s = 30;
  config.rpc.connect_timeout_s = 10;
  SetRobustness(&config);
  return config;
}

// A cluster and one worker's client of it.
struct Endpoint {
  std::unique_ptr<LocalCluster> cluster;
  std::unique_ptr<ModelSpec> spec;  // the client keeps a reference
  Counters counters;
  std::unique_ptr<worker::GrpcPsClient> client;
  std::vector<uint64_t> versions;
};

// `before_client` runs between the cluster's start and the client's (the tls
// section switches the process's token from the ps's to the worker's there).
std::unique_ptr<Endpoint> Connect(
    const Config& config, LocalCluster::ServiceFactory factory,
    const std::function<void()>& before_client = {}) {
  auto e = std::make_unique<Endpoint>();
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster =
      LocalCluster::Start(config, std::move(factory));
  Check(cluster.status(), "start cluster");
  e->cluster = *std::move(cluster);
  if (before_client) before_client();
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(config.model);
  Check(spec.status(), "model");
  e->spec = std::make_unique<ModelSpec>(*std::move(spec));
  e->client = std::make_unique<worker::GrpcPsClient>(
      *e->spec, e->cluster->coordinator_client(), config.rpc, 0, &e->counters);
  Check(e->client->Connect(), "connect");
  return e;
}

// ParameterServer whose Push acknowledges without calling the shard: the
// transport cost of a push with validation and the optimizer switched off.
// Raw like PsService, so that neither side parses the payload.
class AckOnlyPsService final
    : public proto::ParameterServer::WithRawCallbackMethod_Push<
          proto::ParameterServer::CallbackService> {
  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer*,
                                 grpc::ByteBuffer* response) override {
    // An empty PushResponse: one empty slice (an empty buffer is invalid).
    grpc::Slice empty;
    *response = grpc::ByteBuffer(&empty, 1);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

struct TransportRow {
  double mib = 0;
  int shards = 0;
  int64_t message_bytes = 0;
  // GB/s
  double tcp = 0, push = 0, pull = 0, push_pull = 0, ack_push = 0;
  double pipe_push = 0, pipe_pull = 0, pipe_push_pull = 0;
  // CPU seconds (whole process: sender and receiver) per GB moved.
  double cpu_tcp = 0, cpu_push = 0, cpu_pull = 0;
  double push_ms = 0;
  // Of the push payload bytes the ps received: the share applied from the
  // received slices in place (the rest was copied once first).
  double in_place = 0;
};

TransportRow MeasureTransport(int mib, int shards, TcpLink* tcp) {
  const int64_t floats = static_cast<int64_t>(mib) * (1 << 18);
  const int64_t bytes = floats * 4;
  const Config config = ModelConfig(floats, shards);
  std::unique_ptr<Endpoint> real = Connect(config, nullptr);
  std::unique_ptr<Endpoint> ack = Connect(config, [](server::Shard*) {
    return std::unique_ptr<grpc::Service>(new AckOnlyPsService);
  });
  std::vector<float> params(floats), grad(floats, 1e-3f);
  Check(real->client->Pull(params.data(), &real->versions), "pull");
  absl::StatusOr<std::unique_ptr<PipelinedClient>> pipelined =
      PipelinedClient::Create(*real->spec, real->cluster->coordinator_client(),
                              absl::GetFlag(FLAGS_pipeline_chunk_bytes),
                              grad.data());
  Check(pipelined.status(), "pipelined client");
  ack->versions = real->versions;
  TransportRow row;
  row.mib = mib;
  row.shards = shards;
  row.message_bytes =
      std::min(absl::GetFlag(FLAGS_tcp_message_bytes), bytes / shards);
  const int times = static_cast<int>(
      std::max<int64_t>(1, absl::GetFlag(FLAGS_sample_bytes) / bytes));
  auto push = [&] {
    Check(real->client->Push(grad.data(), real->versions, nullptr), "push");
  };
  auto pull = [&] {
    Check(real->client->Pull(params.data(), &real->versions), "pull");
  };
  auto ack_push = [&] {
    Check(ack->client->Push(grad.data(), ack->versions, nullptr), "push");
  };
  auto pipe_push = [&] { Check((*pipelined)->Push(), "pipelined push"); };
  auto pipe_pull = [&] {
    Check((*pipelined)->Pull(params.data()), "pipelined pull");
  };
  auto tcp_send = [&] {
    absl::StatusOr<double> s = tcp->Transfer(bytes, row.message_bytes);
    Check(s.status(), "tcp");
  };
  for (int i = 0; i < 2; ++i) {  // warm up
    push(), pull(), ack_push(), pipe_push(), pipe_pull(), tcp_send();
  }
  std::vector<double> t_tcp, t_push, t_pull, t_pp, t_ack, t_ppush, t_ppull,
      t_ppp, c_tcp, c_push, c_pull;
  for (int r = 0; r < absl::GetFlag(FLAGS_reps); ++r) {
    t_tcp.push_back(PerCall(times, tcp_send, &c_tcp));
    t_push.push_back(PerCall(times, push, &c_push));
    t_pull.push_back(PerCall(times, pull, &c_pull));
    t_pp.push_back(t_push.back() + t_pull.back());
    t_ack.push_back(PerCall(times, ack_push));
    t_ppush.push_back(PerCall(times, pipe_push));
    t_ppull.push_back(PerCall(times, pipe_pull));
    t_ppp.push_back(t_ppush.back() + t_ppull.back());
  }
  auto gbps = [&](const std::vector<double>& t, double n) {
    return n * bytes / Median(t) / 1e9;
  };
  row.tcp = gbps(t_tcp, 1);
  row.push = gbps(t_push, 1);
  row.pull = gbps(t_pull, 1);
  row.push_pull = gbps(t_pp, 2);
  row.ack_push = gbps(t_ack, 1);
  row.pipe_push = gbps(t_ppush, 1);
  row.pipe_pull = gbps(t_ppull, 1);
  row.pipe_push_pull = gbps(t_ppp, 2);
  row.push_ms = Median(t_push) * 1e3;
  row.cpu_tcp = Median(c_tcp) / (bytes / 1e9);
  row.cpu_push = Median(c_push) / (bytes / 1e9);
  row.cpu_pull = Median(c_pull) / (bytes / 1e9);
  int64_t in_place = 0, copied = 0;
  for (int i = 0; i < shards; ++i) {
    auto* service =
        dynamic_cast<server::PsService*>(real->cluster->ps_service(i));
    if (service == nullptr) continue;
    in_place += service->push_bytes_in_place();
    copied += service->push_bytes_copied();
  }
  row.in_place = in_place + copied > 0
                     ? static_cast<double>(in_place) / (in_place + copied)
                     : 0;
  return row;
}

// A standby in this process: its PsService holding a Replica on its own
// loopback server.
struct Standby {
  explicit Standby(const Config& config)
      : replica(server::DenseOptimizer(config)) {}
  server::Replica replica;
  server::PsService service;
  StartedServer server;
};

// A primary's replication: its standbys (cluster.replication - 1) and the
// Replicator streaming to all of them.
struct Backup {
  std::vector<std::unique_ptr<Standby>> standbys;
  Counters counters;
  std::unique_ptr<server::Replicator> replicator;
};

// An endpoint whose shard streams to `copies - 1` standbys; its Backup goes
// to `backups`. REQUIRES: copies >= 2.
std::unique_ptr<Endpoint> ConnectReplicated(
    const Config& config, int copies,
    std::vector<std::unique_ptr<Backup>>* backups) {
  return Connect(config, [backups, &config, copies](server::Shard* shard) {
    auto backup = std::make_unique<Backup>();
    std::vector<std::string> addresses;
    for (int i = 1; i < copies; ++i) {
      auto standby = std::make_unique<Standby>(config);
      standby->service.set_replica(&standby->replica);
      absl::StatusOr<StartedServer> started =
          StartServer("127.0.0.1:0", {&standby->service}, "backup");
      Check(started.status(), "backup server");
      standby->server = *std::move(started);
      addresses.push_back(standby->server.address);
      backup->standbys.push_back(std::move(standby));
    }
    server::Replicator::Options options;
    options.shard_index = 0;
    options.counters = &backup->counters;
    backup->replicator = std::make_unique<server::Replicator>(shard, options);
    backup->replicator->SetBackups(addresses);
    auto service = std::make_unique<server::PsService>(shard);
    service->set_replicator(backup->replicator.get());
    backups->push_back(std::move(backup));
    return std::unique_ptr<grpc::Service>(std::move(service));
  });
}

// Push GB/s (1 shard, `mib` MiB, the --optimizer) unreplicated, with one
// backup (cluster.replication 2) and with two (3), measured in one run,
// alternating.
void RunReplication() {
  absl::PrintF(
      "\nreplication (1 shard, optimizer %s): a push is acknowledged once "
      "every backup of the shard holds the cut that has it\n",
      absl::GetFlag(FLAGS_optimizer));
  absl::PrintF("%8s %10s %10s %7s %10s %7s %7s %12s %10s\n", "MiB", "r1 GB/s",
               "r2 GB/s", "r2/r1", "r3 GB/s", "r3/r1", "r3/r2", "MB/push r3",
               "lag ms r3");
  for (int mib : ParseInts(absl::GetFlag(FLAGS_sizes_mib))) {
    const int64_t floats = static_cast<int64_t>(mib) * (1 << 18);
    const int64_t bytes = floats * 4;
    const Config config = ModelConfig(floats, 1);
    std::vector<std::unique_ptr<Backup>> two, three;
    std::unique_ptr<Endpoint> plain = Connect(config, nullptr);
    std::unique_ptr<Endpoint> r2 = ConnectReplicated(config, 2, &two);
    std::unique_ptr<Endpoint> r3 = ConnectReplicated(config, 3, &three);
    std::vector<float> params(floats), grad(floats, 1e-3f);
    std::vector<Endpoint*> endpoints = {plain.get(), r2.get(), r3.get()};
    for (Endpoint* e : endpoints) {
      Check(e->client->Pull(params.data(), &e->versions), "pull");
    }
    auto pusher = [&](Endpoint* e) {
      return [&grad, e] {
        Check(e->client->Push(grad.data(), e->versions, nullptr), "push");
      };
    };
    const int times = static_cast<int>(
        std::max<int64_t>(1, absl::GetFlag(FLAGS_sample_bytes) / bytes));
    for (int i = 0; i < 2; ++i) {
      for (Endpoint* e : endpoints) pusher(e)();
    }
    const double sent0 = three[0]->counters.stats().replicated_bytes.Value();
    std::vector<double> t[3];
    int pushes = 0;
    for (int r = 0; r < absl::GetFlag(FLAGS_reps); ++r) {
      for (int k = 0; k < 3; ++k) {
        t[k].push_back(PerCall(times, pusher(endpoints[k])));
      }
      pushes += times;
    }
    double gbps[3];
    for (int k = 0; k < 3; ++k) gbps[k] = bytes / Median(t[k]) / 1e9;
    // Bytes to both standbys over the pushes.
    const double sent =
        three[0]->counters.stats().replicated_bytes.Value() - sent0;
    absl::PrintF("%8d %10.2f %10.2f %7.2f %10.2f %7.2f %7.2f %12.1f %10.1f\n",
                 mib, gbps[0], gbps[1], gbps[1] / gbps[0], gbps[2],
                 gbps[2] / gbps[0], gbps[2] / gbps[1], sent / 1e6 / pushes,
                 three[0]->counters.stats().replication_lag_ms.Value());
    // Services before the backups they point to.
    r2.reset();
    r3.reset();
    for (auto* list : {&two, &three}) {
      for (auto& b : *list) {
        b->replicator->Stop();
        for (auto& s : b->standbys) s->server.server->Shutdown();
      }
    }
  }
}

void PrintTransport(const std::vector<TransportRow>& rows) {
  absl::PrintF(
      "\n== transport: GrpcPsClient over 127.0.0.1 vs a TCP socket pair "
      "(GB/s = 1e9 B/s, medians of %d) ==\n",
      absl::GetFlag(FLAGS_reps));
  absl::PrintF("%6s %6s %8s %7s %7s %7s %9s %8s %8s %8s %s %9s\n", "MiB",
               "shards", "msg KiB", "TCP", "push", "pull", "push+pull",
               "push/TCP", "pull/TCP", "p+p/TCP", "  CPU s/GB: TCP push pull",
               "in place");
  for (const TransportRow& r : rows) {
    absl::PrintF(
        "%6.0f %6d %8.0f %7.2f %7.2f %7.2f %9.2f %8.2f %8.2f %8.2f %15.2f "
        "%4.2f "
        "%4.2f %9.2f\n",
        r.mib, r.shards, r.message_bytes / 1024.0, r.tcp, r.push, r.pull,
        r.push_pull, r.push / r.tcp, r.pull / r.tcp, r.push_pull / r.tcp,
        r.cpu_tcp, r.cpu_push, r.cpu_pull, r.in_place);
  }
  absl::PrintF(
      "TCP: one socket pair, same bytes, messages of msg KiB (GrpcPsClient's "
      "chunk per shard). push+pull: 2 x bytes / (push + pull time).\n"
      "CPU s/GB: CPU time of the whole process (sender and receiver side) per "
      "GB moved; 2 cores give at most 2 CPU s per wall second.\n"
      "Copies per payload byte outside the kernel (rpc/wire_format.h): "
      "push: worker 0, ps 0 for the 'in place' share of bytes, else 1;\n"
      "pull: ps 1 (block -> reply), worker 1 (reply -> params).\n");
  absl::PrintF(
      "\n== the same servers, other clients and handlers (GB/s, medians of "
      "%d) ==\n",
      absl::GetFlag(FLAGS_reps));
  absl::PrintF("%6s %6s %7s %9s %8s %10s %10s %10s %10s\n", "MiB", "shards",
               "push", "ack-only", "on/off", "pipe push", "pipe pull",
               "pipe p+p", "pipe/TCP");
  for (const TransportRow& r : rows) {
    absl::PrintF("%6.0f %6d %7.2f %9.2f %8.2f %10.2f %10.2f %10.2f %10.2f\n",
                 r.mib, r.shards, r.push, r.ack_push, r.push / r.ack_push,
                 r.pipe_push, r.pipe_pull, r.pipe_push_pull,
                 r.pipe_push_pull / r.tcp);
  }
  absl::PrintF(
      "ack-only: GrpcPsClient push to a Push handler that acknowledges without "
      "calling the shard; on/off: push / ack-only\n(shard work = validation + "
      "optimizer on vs off; target >= 0.95). pipe: every %d KiB chunk in "
      "flight at once, requests reused\n(bench/pipelined_client.h); pipe/TCP: "
      "pipe p+p / TCP.\n",
      absl::GetFlag(FLAGS_pipeline_chunk_bytes) / 1024);
}

struct ApplyRow {
  double mib = 0;
  double shard_ms = 0, validate_ms = 0, store_push_ms = 0;
};

ApplyRow MeasureApply(int mib) {
  const int64_t floats = static_cast<int64_t>(mib) * (1 << 18);
  Config config = ModelConfig(floats, 1);
  config.checkpoint.dir = "";
  absl::StatusOr<ModelSpec> spec = ModelSpec::Create(config.model);
  Check(spec.status(), "model");
  Counters counters;
  absl::StatusOr<std::unique_ptr<server::Shard>> shard =
      server::Shard::Create(config, 0, &counters);
  Check(shard.status(), "shard");
  std::vector<uint32_t> ids;
  for (const BlockSpec& b : spec->blocks()) ids.push_back(b.id);
  Check((*shard)->Assign(1, ids), "assign");
  absl::StatusOr<std::unique_ptr<server::Optimizer>> optimizer =
      server::Optimizer::Create(config.optimizer);
  Check(optimizer.status(), "optimizer");
  server::BlockStore store(*std::move(optimizer));
  proto::PushRequest request;
  request.set_placement_epoch(1);
  const std::vector<float> grad(floats, 1e-3f);
  for (const BlockSpec& b : spec->blocks()) {
    Check(store.AddBlock(b.id, std::vector<float>(b.length, 0.5f)), "add");
    proto::BlockData* block = request.add_blocks();
    block->set_block_id(b.id);
    block->set_data(reinterpret_cast<const char*>(grad.data() + b.offset),
                    b.length * 4);
  }
  auto shard_push = [&] {
    proto::PushResponse response;
    Check((*shard)->Push(request, &response), "shard push");
  };
  auto validate = [&] {
    for (const proto::BlockData& b : request.blocks()) {
      Check(store.ValidatePush(b.block_id(), b.data().data(), b.data().size())
                .status(),
            "validate");
    }
  };
  auto store_push = [&] {
    for (const proto::BlockData& b : request.blocks()) {
      Check(store.Push(b.block_id(), b.data().data(), b.data().size(), 0)
                .status(),
            "store push");
    }
  };
  const int times = static_cast<int>(
      std::max<int64_t>(1, absl::GetFlag(FLAGS_sample_bytes) / (floats * 4)));
  shard_push(), validate(), store_push();
  std::vector<double> t_shard, t_validate, t_store;
  for (int r = 0; r < absl::GetFlag(FLAGS_reps); ++r) {
    t_shard.push_back(PerCall(times, shard_push));
    t_validate.push_back(PerCall(times, validate));
    t_store.push_back(PerCall(times, store_push));
  }
  return {static_cast<double>(mib), Median(t_shard) * 1e3,
          Median(t_validate) * 1e3, Median(t_store) * 1e3};
}

// Round trips of one small push (GrpcPsClient, 1 shard) and, as the floor, of
// a plain generated-stub unary call (Checksums) to the same server.
void RunLatency() {
  const int n = absl::GetFlag(FLAGS_latency_calls);
  const int64_t floats = 24;  // 96 bytes of gradient
  Config config = ModelConfig(floats, 1);
  std::unique_ptr<Endpoint> e = Connect(config, nullptr);
  std::vector<float> params(floats), grad(floats, 1e-3f);
  Check(e->client->Pull(params.data(), &e->versions), "pull");
  auto stub =
      proto::ParameterServer::NewStub(MakeChannel(e->cluster->ps_address(0)));
  auto seconds = [](Clock::time_point since) {
    return std::chrono::duration<double>(Clock::now() - since).count();
  };
  std::vector<double> push, pull, plain;
  for (int i = 0; i < n + n / 10; ++i) {  // the first tenth warms up
    const bool keep = i >= n / 10;
    Clock::time_point t = Clock::now();
    Check(e->client->Push(grad.data(), e->versions, nullptr), "push");
    if (keep) push.push_back(seconds(t));
    t = Clock::now();
    Check(e->client->Pull(params.data(), &e->versions), "pull");
    if (keep) pull.push_back(seconds(t));
    grpc::ClientContext context;
    proto::ChecksumRequest request;
    proto::ChecksumResponse response;
    t = Clock::now();
    const grpc::Status status = stub->Checksums(&context, request, &response);
    if (keep) plain.push_back(seconds(t));
    if (!status.ok()) Check(absl::InternalError(status.error_message()), "rpc");
  }
  auto quantile = [](std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))] * 1e6;
  };
  absl::PrintF(
      "\n== latency: round trips of a 96-byte push / pull to 1 shard over "
      "127.0.0.1, %d calls each (us) ==\n",
      n);
  absl::PrintF("%-34s %8s %8s\n", "call", "p50", "p99");
  absl::PrintF("%-34s %8.0f %8.0f   (target p50 <= 150, p99 <= 300)\n",
               "GrpcPsClient::Push", quantile(push, 0.5), quantile(push, 0.99));
  absl::PrintF("%-34s %8.0f %8.0f\n", "GrpcPsClient::Pull", quantile(pull, 0.5),
               quantile(pull, 0.99));
  absl::PrintF("%-34s %8.0f %8.0f\n", "plain gRPC unary (Checksums stub)",
               quantile(plain, 0.5), quantile(plain, 0.99));
}

void PrintApply(const std::vector<ApplyRow>& rows,
                const std::vector<TransportRow>& transport) {
  absl::PrintF(
      "\n== apply: the shard's work per full-model push, in process, no gRPC "
      "(optimizer %s, ms, medians of %d) ==\n",
      absl::GetFlag(FLAGS_optimizer), absl::GetFlag(FLAGS_reps));
  absl::PrintF("%6s %11s %9s %11s %9s %8s %11s %11s %13s\n", "MiB",
               "Shard::Push", "validate", "store push", "apply", "GB/s",
               "gRPC push", "shard/push", "apply/push");
  for (const ApplyRow& a : rows) {
    const double apply_ms = std::max(0.0, a.store_push_ms - a.validate_ms);
    double push_ms = 0;
    for (const TransportRow& t : transport) {
      if (t.mib == a.mib && t.shards == 1) push_ms = t.push_ms;
    }
    const double gbps = a.mib * kMiB / (a.shard_ms * 1e-3) / 1e9;
    if (push_ms > 0) {
      absl::PrintF(
          "%6.0f %11.2f %9.2f %11.2f %9.2f %8.2f %11.2f %11.2f %13.2f\n", a.mib,
          a.shard_ms, a.validate_ms, a.store_push_ms, apply_ms, gbps, push_ms,
          a.shard_ms / push_ms, apply_ms / push_ms);
    } else {
      absl::PrintF("%6.0f %11.2f %9.2f %11.2f %9.2f %8.2f %11s %11s %13s\n",
                   a.mib, a.shard_ms, a.validate_ms, a.store_push_ms, apply_ms,
                   gbps, "-", "-", "-");
    }
  }
  absl::PrintF(
      "Shard::Push: the whole server-side push (checks + apply); validate: "
      "BlockStore::ValidatePush over all blocks;\nstore push: BlockStore::Push "
      "(validate + apply); apply = store push - validate; GB/s: gradient bytes "
      "/ Shard::Push time;\ngRPC push: 1-shard push time from the transport "
      "table; shard/push and apply/push: fraction of it spent in the shard / "
      "in the optimizer\n(the apply-on/off ratio is about 1 - apply/push, the "
      "shard-work on/off ratio about 1 - shard/push).\n");
}

struct WorkerFigures {
  double examples_per_s = 0;
  double pulls_per_step = 0, pushes_per_step = 0;
};

WorkerFigures TrainOnce(const ModelSpec& spec, worker::PsClient* client,
                        const worker::Dataset& train, bool no_communication,
                        FetchMode fetch = FetchMode::kAfterPush) {
  static const worker::Dataset kNoTest{kMnistDim, kMnistClasses};
  worker::CpuBackend backend(spec, 64);
  worker::DownpourLoop::Options options;
  options.training.batch_size = 64;
  options.training.n_fetch = absl::GetFlag(FLAGS_n_fetch);
  options.training.n_push = absl::GetFlag(FLAGS_n_push);
  options.training.fetch = fetch;
  options.training.steps = absl::GetFlag(FLAGS_worker_steps);
  options.training.eval_every_steps = 0;
  options.no_communication = no_communication;
  options.layer_group_floats = absl::GetFlag(FLAGS_layer_group_floats);
  worker::DownpourLoop loop(spec, &backend, client, &train, &kNoTest, options);
  const double cpu0 = ProcessCpuSeconds();
  const auto wall0 = Clock::now();
  Check(loop.Run(), "worker");
  const double cpu = ProcessCpuSeconds() - cpu0;
  const double wall =
      std::chrono::duration<double>(Clock::now() - wall0).count();
  const worker::WorkerStats s = loop.stats();
  if (absl::GetFlag(FLAGS_worker_detail)) {
    absl::FPrintF(stderr,
                  "%s: compute %.2f pull %.2f push %.2f; cpu %.0f us/step, "
                  "wall %.0f us/step\n",
                  no_communication ? "no communication" : FetchModeName(fetch),
                  s.share_compute, s.share_wait_pull, s.share_wait_push,
                  1e6 * cpu / s.step, 1e6 * wall / s.step);
  }
  return {s.examples_per_sec, static_cast<double>(s.pulls) / s.step,
          static_cast<double>(s.pushes) / s.step};
}

void RunWorker() {
  Config config;  // the MNIST MLP 784-256-128-10, block_size 65536, SGD
  config.cluster.ps = {"127.0.0.1:0"};
  config.rpc.connect_timeout_s = 10;
  absl::StatusOr<WireEncoding> encoding =
      ParseWireEncoding(absl::GetFlag(FLAGS_worker_encoding));
  Check(encoding.status(), "--worker_encoding");
  config.rpc.encoding = *encoding;
  SetRobustness(&config);
  std::unique_ptr<Endpoint> ps = Connect(config, nullptr);
  const worker::Dataset train =
      worker::MakeSynthetic(8192, kMnistDim, kMnistClasses, /*seed=*/7);
  std::vector<WorkerFigures> alone, with_ps, layerwise;
  // training.fetch layerwise needs n_fetch = n_push = 1.
  const bool layers =
      absl::GetFlag(FLAGS_n_fetch) == 1 && absl::GetFlag(FLAGS_n_push) == 1;
  TrainOnce(*ps->spec, ps->client.get(), train, true);  // warm up
  for (int r = 0; r < absl::GetFlag(FLAGS_worker_reps); ++r) {
    alone.push_back(TrainOnce(*ps->spec, ps->client.get(), train, true));
    with_ps.push_back(TrainOnce(*ps->spec, ps->client.get(), train, false));
    if (layers) {
      layerwise.push_back(TrainOnce(*ps->spec, ps->client.get(), train, false,
                                    FetchMode::kLayerwise));
    }
  }
  auto median = [](const std::vector<WorkerFigures>& v,
                   double WorkerFigures::*field) {
    std::vector<double> x;
    for (const WorkerFigures& f : v) x.push_back(f.*field);
    return Median(x);
  };
  absl::PrintF(
      "\n== worker: DownpourLoop, MLP 784-256-128-10 (%d params, %.2f MB), "
      "batch 64, n_fetch %d, n_push %d, encoding %s, 1 OpenBLAS thread,\n   "
      "%d steps per sample, medians of %d; ps: 1 in-process shard over "
      "127.0.0.1 ==\n",
      ps->spec->num_params(), ps->spec->num_params() * 4 / 1e6,
      absl::GetFlag(FLAGS_n_fetch), absl::GetFlag(FLAGS_n_push),
      WireEncodingName(config.rpc.encoding), absl::GetFlag(FLAGS_worker_steps),
      absl::GetFlag(FLAGS_worker_reps));
  absl::PrintF("%-22s %12s %12s %12s\n", "mode", "examples/s", "pulls/step",
               "pushes/step");
  const double a = median(alone, &WorkerFigures::examples_per_s);
  const double w = median(with_ps, &WorkerFigures::examples_per_s);
  absl::PrintF("%-22s %12.0f %12s %12s\n", "no communication", a, "-", "-");
  absl::PrintF("%-22s %12.0f %12.2f %12.2f\n", "with ps, after_push", w,
               median(with_ps, &WorkerFigures::pulls_per_step),
               median(with_ps, &WorkerFigures::pushes_per_step));
  if (layers) {
    absl::PrintF("%-22s %12.0f %12.2f %12.2f\n", "with ps, layerwise",
                 median(layerwise, &WorkerFigures::examples_per_s),
                 median(layerwise, &WorkerFigures::pulls_per_step),
                 median(layerwise, &WorkerFigures::pushes_per_step));
  }
  absl::PrintF("%-22s %12.2f\n", "after_push / without", w / a);
  if (layers) {
    absl::PrintF("%-22s %12.2f   (target >= 0.8)\n", "layerwise / without",
                 median(layerwise, &WorkerFigures::examples_per_s) / a);
  }
  absl::PrintF(
      "pulls/step, pushes/step: parameter swaps and gradient hand-offs per "
      "step; communication kept up when they are 1/n_fetch and 1/n_push.\n");
}

// Certificates and tokens for the tls section, made by deploy/make_certs.sh in
// a fresh temp folder; the security section that uses them.
SecuritySection MakeBenchCerts(bool mutual) {
  std::string script = absl::GetFlag(FLAGS_make_certs);
  if (!std::filesystem::exists(script)) {
    const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
    if (workspace != nullptr) script = std::string(workspace) + "/" + script;
  }
  char dir_template[] = "/tmp/ps_bench_certs.XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) Check(absl::InternalError("mkdtemp failed"), "certs");
  const std::string certs = std::string(dir) + "/certs";
  auto make = Subprocess::Start(
      "make_certs",
      {script, "--out", certs, "--ps", "1", "--standby", "0", "--workers", "1"},
      std::string(dir) + "/make_certs.log");
  Check(make.status(), "start " + script);
  if ((*make)->Wait(absl::Seconds(60)) != 0) {
    Check(absl::InternalError((*make)->LogTail(10)), script);
  }
  SecuritySection security;
  security.tls = true;
  security.mutual_tls = mutual;
  security.ca_file = certs + "/ca.pem";
  // The in-process servers install ps-0's certificate (the one shard's, as
  // mutual TLS wants of the ps place it registers for), the client worker-0's
  // (the worker id its pushes carry).
  security.cert_file = certs + "/{name}.pem";
  security.key_file = certs + "/{name}.key";
  security.ps_token_file = certs + "/ps.token";
  security.worker_token_file = certs + "/worker.token";
  security.admin_token_file = certs + "/admin.token";
  security.reader_token_file = certs + "/reader.token";
  return security;
}

// Push and pull of the whole model, plaintext vs TLS with tokens vs mutual
// TLS with tokens, interleaved. Servers and channels keep the transport that
// was installed when they were made, so each endpoint is built under its own.
void RunTls() {
  absl::PrintF(
      "\n== tls: GrpcPsClient over 127.0.0.1, plaintext vs TLS + role "
      "tokens (GB/s, medians of %d) ==\n",
      absl::GetFlag(FLAGS_reps));
  absl::PrintF("%6s %9s %9s %9s %9s %9s %9s %9s %9s\n", "MiB", "push", "pull",
               "TLS push", "TLS pull", "mTLS push", "mTLS pull", "TLS/plain",
               "mTLS/pl");
  const SecuritySection tls = MakeBenchCerts(false);
  SecuritySection mtls = tls;
  mtls.mutual_tls = true;
  for (int mib : ParseInts(absl::GetFlag(FLAGS_sizes_mib))) {
    const int64_t floats = static_cast<int64_t>(mib) * (1 << 18);
    const int64_t bytes = floats * 4;
    const Config config = ModelConfig(floats, 1);
    // The in-process shards register as ps; the client then calls as a
    // worker (the coordinator client the cluster keeps was made as ps, and
    // its GetPlacement is open to every role).
    auto secured = [&](const SecuritySection& security) {
      Check(InstallSecurity(security, "ps-0", CallerRole::kPs), "install TLS");
      return Connect(config, nullptr, [&] {
        Check(InstallSecurity(security, "worker-0", CallerRole::kWorker),
              "install TLS");
      });
    };
    UninstallSecurity();
    std::unique_ptr<Endpoint> plain = Connect(config, nullptr);
    std::unique_ptr<Endpoint> secure = secured(tls);
    std::unique_ptr<Endpoint> mutual = secured(mtls);
    UninstallSecurity();
    std::vector<float> params(floats), grad(floats, 1e-3f);
    Endpoint* endpoints[] = {plain.get(), secure.get(), mutual.get()};
    for (Endpoint* e : endpoints) {
      Check(e->client->Pull(params.data(), &e->versions), "pull");
    }
    const int times = static_cast<int>(
        std::max<int64_t>(1, absl::GetFlag(FLAGS_sample_bytes) / bytes));
    std::vector<double> t_push[3], t_pull[3];
    for (int r = -1; r < absl::GetFlag(FLAGS_reps); ++r) {  // -1: warm-up
      for (int k = 0; k < 3; ++k) {
        Endpoint* e = endpoints[k];
        const double push = PerCall(times, [&] {
          Check(e->client->Push(grad.data(), e->versions, nullptr), "push");
        });
        const double pull = PerCall(times, [&] {
          Check(e->client->Pull(params.data(), &e->versions), "pull");
        });
        if (r >= 0) t_push[k].push_back(push), t_pull[k].push_back(pull);
      }
    }
    auto gbps = [&](const std::vector<double>& t) {
      return bytes / Median(t) / 1e9;
    };
    auto pp = [&](int k) {
      return 2 * bytes / (Median(t_push[k]) + Median(t_pull[k])) / 1e9;
    };
    absl::PrintF("%6d %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f\n", mib,
                 gbps(t_push[0]), gbps(t_pull[0]), gbps(t_push[1]),
                 gbps(t_pull[1]), gbps(t_push[2]), gbps(t_pull[2]),
                 pp(1) / pp(0), pp(2) / pp(0));
  }
  absl::PrintF(
      "TLS: server certificate checked against the CA, every call carries a "
      "worker bearer token checked per method; mTLS: the client presents a "
      "certificate too.\nTLS/plain, mTLS/pl: (push + pull) throughput "
      "ratios, 1 shard.\n");
}

int Run() {
  openblas_set_num_threads(1);
  Check(InitLogging("", "warn"), "logging");
  absl::PrintF(
      "ps_bench: %u hardware threads, OpenBLAS %s, block_size %d, "
      "optimizer %s\n",
      std::thread::hardware_concurrency(), openblas_get_corename(),
      absl::GetFlag(FLAGS_block_size), absl::GetFlag(FLAGS_optimizer));
  const Clock::time_point start = Clock::now();
  std::vector<TransportRow> transport;
  if (SectionOn("transport")) {
    absl::StatusOr<std::unique_ptr<TcpLink>> tcp = TcpLink::Open();
    Check(tcp.status(), "tcp link");
    for (int mib : ParseInts(absl::GetFlag(FLAGS_sizes_mib))) {
      for (int shards : ParseInts(absl::GetFlag(FLAGS_shards))) {
        transport.push_back(MeasureTransport(mib, shards, tcp->get()));
      }
    }
    PrintTransport(transport);
  }
  if (SectionOn("apply")) {
    std::vector<ApplyRow> apply;
    for (int mib : ParseInts(absl::GetFlag(FLAGS_sizes_mib))) {
      apply.push_back(MeasureApply(mib));
    }
    PrintApply(apply, transport);
  }
  if (SectionOn("latency")) RunLatency();
  if (SectionOn("worker")) RunWorker();
  if (SectionOn("replication")) RunReplication();
  if (SectionOn("tls")) RunTls();
  PrintTotal(start);
  return 0;
}

}  // namespace
}  // namespace downpour::bench

int main(int argc, char** argv) {
  return downpour::bench::ParseFlagsAndRun(argc, argv, downpour::bench::Run);
}
