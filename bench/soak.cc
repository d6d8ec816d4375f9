// soak: a real ps daemon under 64 concurrent clients of valid, then invalid
// traffic, watching its memory (issue 12's load and soak target).
//
//   bazel build -c opt //bench:soak //:daemons
//   bazel-bin/bench/soak                       # 60 s valid + 60 s invalid
//   bazel-bin/bench/soak --seconds=2 --clients=8   # what tests/soak_smoke_test
//   runs
//
// Starts the coordinator and one ps_server as processes (bazel-bin's, or
// --bin_dir's) on 127.0.0.1 with ephemeral ports, serving a 784-256-128-10
// MLP in 256 KiB blocks, then runs two phases of --seconds each:
//   valid    every client repeats: pull a random block, push a small
//            gradient for it (its own worker id, exactly-once sequences);
//   invalid  every client cycles through the hostile requests of issue 12:
//            garbage bytes, unknown block ids, repeated ids, wrong sizes,
//            NaN gradients, huge pulls, unknown encodings, bad worker ids.
// Per phase it prints requests/s, p50/p99 latency, the replies by gRPC code
// (per kind of request for the invalid phase) and the ps's VmRSS at the
// start, at 10 s and at the end, with the growth after the first 10 s
// (target < 10 %; judged for phases of 20 s or more). Then it checks that the
// ps still serves valid traffic and that the invalid phase left its checksums
// exactly as the valid phase did. Exit 0 when every check holds, 1 when one
// fails (the figures are printed either way), 2 for bad flags.
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_util.h"
#include "common/config.h"
#include "common/file_util.h"
#include "common/push_sequence.h"
#include "common/subprocess.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/impl/codegen/client_unary_call.h"
#include "membership/coordinator_client.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/server_util.h"

ABSL_FLAG(int, seconds, 60, "length of each phase");
ABSL_FLAG(int, clients, 64, "concurrent clients (one channel and thread each)");
ABSL_FLAG(std::string, bin_dir, "",
          "folder holding server/ps_server and coordinator/coordinator "
          "(default: the bazel-bin this binary is in)");
ABSL_FLAG(std::string, run_dir, "",
          "folder for the config and the daemons' logs (default: a new "
          "/tmp/downpour-soak-XXXXXX)");
ABSL_FLAG(std::string, skip, "",
          "comma-separated invalid kinds to leave out (see --help)");

namespace downpour::bench {
namespace {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

constexpr int64_t kBlockFloats = 65536;  // model.block_size: 256 KiB blocks
constexpr char kPushMethod[] = "/downpour.proto.ParameterServer/Push";
constexpr char kPullMethod[] = "/downpour.proto.ParameterServer/Pull";

// The invalid requests, each with the reply the ps should give.
enum class Bad {
  kGarbagePush,   // random bytes as a Push body
  kGarbagePull,   // random bytes as a Pull body
  kUnknownBlock,  // a push to a block the model lacks
  kRepeatedIds,   // a push naming one block twice
  kWrongSize,     // a gradient of the wrong length
  kNanGradient,   // a NaN in the gradient
  kHugePull,      // a 40 KB pull naming block 0 10,000 times
  kBadEncoding,   // encoding 7 in a push, and in a pull
  kBadWorker,     // a valid gradient from worker -5 or 2^30 (never registered)
  kCount,
};
const char* const kBadNames[] = {
    "garbage_push", "garbage_pull", "unknown_block",
    "repeated_ids", "wrong_size",   "nan_gradient",
    "huge_pull",    "bad_encoding", "bad_worker"};

struct Daemons {
  std::unique_ptr<Subprocess> coordinator;
  std::unique_ptr<Subprocess> ps;
  std::string ps_address;
  uint64_t epoch = 0;
  std::vector<int64_t> block_floats;  // by block id
  // Per client: the incarnation the coordinator issued when it registered
  // as worker <client> (pushes carry MakeSequence(incarnation, n)).
  std::vector<uint64_t> incarnations;
  std::vector<uint64_t> push_keys;  // issued with each incarnation
};

// Registers every client as a worker, as ps_worker does, and waits until the
// ps has heard of its incarnation (an empty push, with its key and a
// sequence beyond the window, is refused as empty rather than UNAVAILABLE; it
// changes nothing. One within the window would fill its slot.)
absl::Status RegisterClients(const std::string& coordinator_address,
                             int clients, Daemons* d) {
  RpcSection rpc;
  auto stub = proto::ParameterServer::NewStub(MakeChannel(d->ps_address));
  for (int i = 0; i < clients; ++i) {
    membership::CoordinatorClient client(coordinator_address, rpc, "soak");
    auto registered =
        client.RegisterWorker(i, absl::StrCat("127.0.0.1:", 40000 + i));
    if (!registered.ok()) return registered.status();
    d->incarnations.push_back(registered->incarnation());
    d->push_keys.push_back(registered->push_key());
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  for (int i = 0; i < clients; ++i) {
    while (true) {
      proto::PushRequest push;
      push.set_placement_epoch(d->epoch);
      push.set_worker_id(i);
      push.set_sequence(MakeSequence(d->incarnations[i], 1000));
      push.set_push_key(d->push_keys[i]);
      proto::PushResponse ack;
      grpc::ClientContext context;
      context.set_deadline(DeadlineIn(5));
      const grpc::Status status = stub->Push(&context, push, &ack);
      if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT &&
          absl::StrContains(status.error_message(), "without blocks")) {
        break;
      }
      if (status.error_code() != grpc::StatusCode::UNAVAILABLE ||
          absl::Now() > deadline) {
        return absl::InternalError(absl::StrCat(
            "worker ", i,
            "'s first push was refused: ", status.error_message()));
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
  }
  return absl::OkStatus();
}

// VmRSS of `pid` in KiB, 0 when unreadable.
int64_t RssKib(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "VmRSS:")) {
      int64_t kib = 0;
      std::string number(absl::StripAsciiWhitespace(
          absl::StripSuffix(absl::StripPrefix(line, "VmRSS:"), "kB")));
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(number), &kib))
        return kib;
    }
  }
  return 0;
}

absl::StatusOr<std::string> WaitForPort(Subprocess& daemon,
                                        const std::string& port_file) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    if (auto status = daemon.Poll()) {
      return absl::AbortedError(absl::StrCat(
          daemon.name(), " exited with ", *status, ":\n", daemon.LogTail(20)));
    }
    absl::StatusOr<std::string> text = ReadFile(port_file);
    int port = 0;
    if (text.ok() &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &port)) {
      return absl::StrCat("127.0.0.1:", port);
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(
      absl::StrCat(daemon.name(), " did not listen:\n", daemon.LogTail(20)));
}

// Writes the job's config, with `clients` workers, under `dir`; returns its
// path.
std::string WriteConfig(const std::string& dir, int clients) {
  std::string workers;
  for (int i = 0; i < clients; ++i) {
    absl::StrAppend(&workers, i ? ", " : "", "127.0.0.1:0");
  }
  const std::string config_path = dir + "/soak.yaml";
  std::ofstream(config_path) << absl::StrCat(
      "cluster:\n  coordinator: 127.0.0.1:0\n  ps: [127.0.0.1:0]\n"
      "  workers: [",
      workers,
      "]\n  replication: 1\n"
      "model:\n  layers: [784, 256, 128, 10]\n  block_size: ",
      kBlockFloats,
      "\ndata:\n  source: synthetic\n"
      "optimizer:\n  type: adam\n  learning_rate: 0.001\n"
      "checkpoint:\n  dir: ''\n"
      "heartbeat:\n  interval_s: 0.5\n  timeout_s: 10\n"
      "coordinator:\n  state_dir: ",
      dir, "/coordinator\n");
  return config_path;
}

// Starts a daemon into *daemon and returns the address it listens at, once
// it wrote `port_file`.
absl::StatusOr<std::string> StartDaemon(const std::string& name,
                                        const std::vector<std::string>& argv,
                                        const std::string& log_path,
                                        const std::string& port_file,
                                        std::unique_ptr<Subprocess>* daemon) {
  auto started = Subprocess::Start(name, argv, log_path);
  if (!started.ok()) return started.status();
  *daemon = *std::move(started);
  return WaitForPort(**daemon, port_file);
}

// Waits until the ps serves: the placement names it and a pull of block 0
// answers. Then fills in the epoch and the blocks' sizes and registers the
// clients.
absl::Status AwaitServing(const std::string& coordinator_address, int clients,
                          Daemons* d) {
  RpcSection rpc;
  membership::CoordinatorClient client(coordinator_address, rpc, "soak");
  auto stub = proto::ParameterServer::NewStub(MakeChannel(d->ps_address));
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    auto placement = client.GetPlacement();
    if (placement.ok() && placement->shards_size() == 1 &&
        placement->shards(0).address() == d->ps_address) {
      d->epoch = placement->epoch();
      auto model = client.DescribeModel();
      proto::PullRequest pull;
      pull.set_placement_epoch(d->epoch);
      pull.add_block_ids(0);
      proto::PullResponse reply;
      grpc::ClientContext context;
      context.set_deadline(DeadlineIn(5));
      if (model.ok() && stub->Pull(&context, pull, &reply).ok()) {
        for (const proto::BlockInfo& b : model->blocks()) {
          d->block_floats.push_back(static_cast<int64_t>(b.floats()));
        }
        return RegisterClients(coordinator_address, clients, d);
      }
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError("the ps did not serve the placement");
}

absl::StatusOr<Daemons> StartDaemons(const std::string& bin_dir,
                                     const std::string& dir, int clients) {
  const std::string config_path = WriteConfig(dir, clients);
  Daemons d;
  auto coordinator_address = StartDaemon(
      "coordinator",
      {bin_dir + "/coordinator/coordinator", "--config", config_path,
       "--port_file", dir + "/coordinator.port"},
      dir + "/coordinator.log", dir + "/coordinator.port", &d.coordinator);
  if (!coordinator_address.ok()) return coordinator_address.status();
  auto ps_address = StartDaemon(
      "ps 0",
      {bin_dir + "/server/ps_server", "--config", config_path, "--index", "0",
       "--coordinator", *coordinator_address, "--port_file", dir + "/ps.port"},
      dir + "/ps.log", dir + "/ps.port", &d.ps);
  if (!ps_address.ok()) return ps_address.status();
  d.ps_address = *ps_address;
  if (absl::Status r = AwaitServing(*coordinator_address, clients, &d);
      !r.ok()) {
    return r;
  }
  return d;
}

// What one phase measured, merged over its clients.
struct Tally {
  std::vector<double> latency_us;
  std::map<grpc::StatusCode, int64_t> codes;
  std::map<int, std::map<grpc::StatusCode, int64_t>> codes_by_kind;  // invalid
  int64_t pairs = 0;  // valid: pull+push pairs completed

  void Merge(const Tally& t) {
    latency_us.insert(latency_us.end(), t.latency_us.begin(),
                      t.latency_us.end());
    for (const auto& [c, n] : t.codes) codes[c] += n;
    for (const auto& [k, m] : t.codes_by_kind) {
      for (const auto& [c, n] : m) codes_by_kind[k][c] += n;
    }
    pairs += t.pairs;
  }
};

const char* CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::OK:
      return "OK";
    case grpc::CANCELLED:
      return "CANCELLED";
    case grpc::UNKNOWN:
      return "UNKNOWN";
    case grpc::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::ABORTED:
      return "ABORTED";
    case grpc::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::INTERNAL:
      return "INTERNAL";
    case grpc::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "?";
  }
}

std::string Codes(const std::map<grpc::StatusCode, int64_t>& codes) {
  std::vector<std::string> parts;
  for (const auto& [c, n] : codes)
    parts.push_back(absl::StrCat(CodeName(c), " ", n));
  return absl::StrJoin(parts, ", ");
}

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(p * v.size()));
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k];
}

// One client's connection and request builders.
class Client {
 public:
  Client(const Daemons& d, int id)
      : d_(d),
        id_(id),
        channel_(grpc::CreateCustomChannel(d.ps_address,
                                           grpc::InsecureChannelCredentials(),
                                           DistinctChannel(id))),
        stub_(proto::ParameterServer::NewStub(channel_)),
        rng_(1000 + id) {}

  // One pull of a random block, then one push of a small gradient for it.
  void ValidPair(Tally* t) {
    const uint32_t block = rng_() % d_.block_floats.size();
    proto::PullRequest pull;
    pull.set_placement_epoch(d_.epoch);
    pull.set_worker_id(id_);
    pull.add_block_ids(block);
    proto::PullResponse reply;
    const grpc::StatusCode pulled = Timed(t, [&](grpc::ClientContext* c) {
      return stub_->Pull(c, pull, &reply);
    });
    const grpc::StatusCode pushed = Push(t, Gradient(block, id_, 1e-4f));
    if (pulled == grpc::OK && pushed == grpc::OK) ++t->pairs;
  }

  // The next invalid request of kind `kind`.
  void Invalid(int kind, Tally* t) {
    grpc::StatusCode code = grpc::OK;
    switch (static_cast<Bad>(kind)) {
      case Bad::kGarbagePush:
      case Bad::kGarbagePull: {
        std::string bytes(64 + rng_() % 4096, '\0');
        for (char& c : bytes) c = static_cast<char>(rng_());
        code = Raw(t,
                   kind == static_cast<int>(Bad::kGarbagePush) ? kPushMethod
                                                               : kPullMethod,
                   bytes);
        break;
      }
      case Bad::kUnknownBlock: {
        proto::PushRequest push = Gradient(0, id_, 1e-4f);
        push.mutable_blocks(0)->set_block_id(1000000 + rng_() % 1000);
        code = Push(t, push);
        break;
      }
      case Bad::kRepeatedIds: {
        proto::PushRequest push = Gradient(1, id_, 1e-4f);
        *push.add_blocks() = push.blocks(0);
        code = Push(t, push);
        break;
      }
      case Bad::kWrongSize: {
        proto::PushRequest push = Gradient(2, id_, 1e-4f);
        push.mutable_blocks(0)->mutable_data()->resize(4 * 1000);
        code = Push(t, push);
        break;
      }
      case Bad::kNanGradient: {
        proto::PushRequest push = Gradient(0, id_, std::nanf(""));
        code = Push(t, push);
        break;
      }
      case Bad::kHugePull: {
        proto::PullRequest pull;
        pull.set_placement_epoch(d_.epoch);
        pull.set_worker_id(id_);
        for (int i = 0; i < 10000; ++i) pull.add_block_ids(0);
        proto::PullResponse reply;
        code = Timed(t, [&](grpc::ClientContext* c) {
          return stub_->Pull(c, pull, &reply);
        });
        break;
      }
      case Bad::kBadEncoding: {
        if (rng_() % 2 == 0) {
          proto::PushRequest push = Gradient(0, id_, 1e-4f);
          push.mutable_blocks(0)->set_encoding(static_cast<proto::Encoding>(7));
          code = Push(t, push);
        } else {
          proto::PullRequest pull;
          pull.set_placement_epoch(d_.epoch);
          pull.add_block_ids(0);
          pull.set_encoding(static_cast<proto::Encoding>(9));
          proto::PullResponse reply;
          code = Timed(t, [&](grpc::ClientContext* c) {
            return stub_->Pull(c, pull, &reply);
          });
        }
        break;
      }
      case Bad::kBadWorker: {
        proto::PushRequest push =
            Gradient(0, rng_() % 2 ? -5 : (1 << 30), 1e-4f);
        push.set_sequence(1 + rng_() % 1000);
        code = Push(t, push);
        break;
      }
      case Bad::kCount:
        break;
    }
    ++t->codes_by_kind[kind][code];
  }

 private:
  static grpc::ChannelArguments DistinctChannel(int id) {
    grpc::ChannelArguments args;
    args.SetInt("soak.client", id);  // one connection per client
    args.SetMaxReceiveMessageSize(-1);
    return args;
  }

  proto::PushRequest Gradient(uint32_t block, int worker, float value) const {
    proto::PushRequest push;
    push.set_placement_epoch(d_.epoch);
    push.set_worker_id(worker);
    proto::BlockData* data = push.add_blocks();
    data->set_block_id(block);
    const int64_t n = d_.block_floats[block % d_.block_floats.size()];
    std::vector<float> g(n, value);
    data->set_data(g.data(), g.size() * sizeof(float));
    return push;
  }

  // A bad push as this client's own worker carries its next sequence and its
  // push key, so that the ps's checks behind the identity are the ones hit.
  // A sequence that may not have reached the ps (UNAVAILABLE, a deadline) is
  // sent again with the next push, as a worker retries it: a window the ps
  // never saw filled would otherwise run away from it.
  grpc::StatusCode Push(Tally* t, proto::PushRequest push) {
    const bool own = push.sequence() == 0 && push.worker_id() == id_;
    if (own) {
      push.set_sequence(MakeSequence(d_.incarnations[id_], ++sequence_));
      push.set_push_key(d_.push_keys[id_]);
    }
    proto::PushResponse ack;
    const grpc::StatusCode code = Timed(
        t, [&](grpc::ClientContext* c) { return stub_->Push(c, push, &ack); });
    if (own && (code == grpc::UNAVAILABLE || code == grpc::DEADLINE_EXCEEDED)) {
      --sequence_;
    }
    return code;
  }

  grpc::StatusCode Raw(Tally* t, const char* method, const std::string& bytes) {
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1), reply;
    return Timed(t, [&](grpc::ClientContext* c) {
      return grpc::internal::BlockingUnaryCall<grpc::ByteBuffer,
                                               grpc::ByteBuffer>(
          channel_.get(),
          grpc::internal::RpcMethod(method,
                                    grpc::internal::RpcMethod::NORMAL_RPC),
          c, request, &reply);
    });
  }

  template <typename Call>
  grpc::StatusCode Timed(Tally* t, const Call& call) {
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(10));
    const auto start = SteadyClock::now();
    const grpc::Status status = call(&context);
    t->latency_us.push_back(
        std::chrono::duration<double, std::micro>(SteadyClock::now() - start)
            .count());
    ++t->codes[status.error_code()];
    return status.error_code();
  }

  const Daemons& d_;
  const int id_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<proto::ParameterServer::Stub> stub_;
  std::mt19937 rng_;
  uint64_t sequence_ = 0;  // the n of this client's last push
};

struct PhaseResult {
  Tally tally;
  double seconds = 0;
  int64_t rss_start = 0, rss_10s = 0, rss_end = 0;
};

// Runs `clients` threads of `work` for `seconds`, sampling the ps's RSS.
template <typename Work>
PhaseResult RunPhase(std::vector<std::unique_ptr<Client>>& clients, pid_t ps,
                     int seconds, const Work& work) {
  PhaseResult r;
  r.rss_start = RssKib(ps);
  std::atomic<bool> stop{false};
  std::vector<Tally> tallies(clients.size());
  std::vector<std::thread> threads;
  const auto start = SteadyClock::now();
  for (size_t i = 0; i < clients.size(); ++i) {
    threads.emplace_back([&, i] {
      for (int64_t n = 0; !stop.load(std::memory_order_relaxed); ++n) {
        work(*clients[i], n, &tallies[i]);
      }
    });
  }
  // RSS at 10 s (or, for phases shorter than 20 s, at half time).
  const double mark = seconds >= 20 ? 10.0 : seconds / 2.0;
  std::this_thread::sleep_for(std::chrono::duration<double>(mark));
  r.rss_10s = RssKib(ps);
  std::this_thread::sleep_until(start + std::chrono::seconds(seconds));
  stop = true;
  for (std::thread& t : threads) t.join();
  r.seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  r.rss_end = RssKib(ps);
  for (const Tally& t : tallies) r.tally.Merge(t);
  return r;
}

void Print(const char* name, PhaseResult& r, int seconds) {
  Tally& t = r.tally;
  const double requests = static_cast<double>(t.latency_us.size());
  std::printf("%s phase: %d clients, %.1f s\n", name,
              absl::GetFlag(FLAGS_clients), r.seconds);
  std::printf("  requests/s  %.0f", requests / r.seconds);
  if (t.pairs > 0) {
    std::printf("  (%.0f pull+push pairs/s, %lld pairs)", t.pairs / r.seconds,
                static_cast<long long>(t.pairs));
  }
  const double p50 = Percentile(t.latency_us, 0.50);
  const double p99 = Percentile(t.latency_us, 0.99);
  std::printf("\n  latency     p50 %.2f ms, p99 %.2f ms\n", p50 / 1000,
              p99 / 1000);
  std::printf("  replies     %s\n", Codes(t.codes).c_str());
  for (const auto& [kind, codes] : t.codes_by_kind) {
    std::printf("    %-14s %s\n", kBadNames[kind], Codes(codes).c_str());
  }
  const double growth =
      r.rss_10s > 0 ? 100.0 * (r.rss_end - r.rss_10s) / r.rss_10s : 0;
  std::printf(
      "  ps VmRSS    start %.1f MiB, at %s %.1f MiB, end %.1f MiB: "
      "%+.1f %% after the first %s (target < 10 %%)\n",
      r.rss_start / 1024.0, seconds >= 20 ? "10 s" : "half time",
      r.rss_10s / 1024.0, r.rss_end / 1024.0, growth,
      seconds >= 20 ? "10 s" : "half");
}

absl::StatusOr<std::string> Checksums(const Daemons& d) {
  auto stub = proto::ParameterServer::NewStub(MakeChannel(d.ps_address));
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(10));
  proto::ChecksumResponse response;
  grpc::Status status =
      stub->Checksums(&context, proto::ChecksumRequest(), &response);
  if (!status.ok()) {
    return absl::UnavailableError(
        absl::StrCat("checksums: ", status.error_message()));
  }
  return response.SerializeAsString();
}

// The invalid kinds to send: all but --skip's. False (after saying why) when
// --skip names an unknown kind.
bool InvalidKinds(std::vector<int>* kinds) {
  const std::vector<std::string> skip =
      absl::StrSplit(absl::GetFlag(FLAGS_skip), ',', absl::SkipEmpty());
  for (int k = 0; k < static_cast<int>(Bad::kCount); ++k) {
    if (std::find(skip.begin(), skip.end(), kBadNames[k]) == skip.end()) {
      kinds->push_back(k);
    }
  }
  for (const std::string& s : skip) {
    if (std::find(std::begin(kBadNames), std::end(kBadNames), s) ==
        std::end(kBadNames)) {
      std::fprintf(stderr, "soak: --skip: no invalid kind '%s' (kinds: %s)\n",
                   s.c_str(), absl::StrJoin(kBadNames, ", ").c_str());
      return false;
    }
  }
  return true;
}

// Prints one check and whether it holds; clears *ok when it does not.
void Check(bool holds, const std::string& what, bool* ok) {
  std::printf("  check: %-62s %s\n", what.c_str(), holds ? "ok" : "FAILED");
  *ok = *ok && holds;
}

// How many invalid requests the ps accepted, printing each kind it accepted.
int64_t AcceptedInvalid(const PhaseResult& invalid) {
  int64_t accepted = 0;
  for (const auto& [kind, codes] : invalid.tally.codes_by_kind) {
    auto it = codes.find(grpc::OK);
    if (it != codes.end()) {
      accepted += it->second;
      std::printf("  invalid %s accepted %lld times\n", kBadNames[kind],
                  static_cast<long long>(it->second));
    }
  }
  return accepted;
}

// Makes and prints the checks after both phases, the last valid pair sent
// by `client`; true when all held.
bool ChecksHold(Daemons& d, Client& client, PhaseResult& valid,
                PhaseResult& invalid,
                const absl::StatusOr<std::string>& after_valid,
                const absl::StatusOr<std::string>& after_invalid, int seconds) {
  bool ok = true;
  std::printf("checks:\n");
  Check(d.ps->Poll() == std::nullopt, "the ps is still running", &ok);
  const int64_t valid_errors =
      static_cast<int64_t>(valid.tally.latency_us.size()) -
      valid.tally.codes[grpc::OK];
  Check(valid_errors == 0,
        absl::StrCat("valid traffic: no errors (", valid_errors, ")"), &ok);
  Check(AcceptedInvalid(invalid) == 0, "invalid traffic: every request refused",
        &ok);
  Check(
      after_valid.ok() && after_invalid.ok() && *after_valid == *after_invalid,
      "invalid traffic left the checksums as the valid phase did", &ok);
  Tally final_pair;
  client.ValidPair(&final_pair);
  Check(final_pair.pairs == 1, "the ps still serves a valid pull and push",
        &ok);
  absl::StatusOr<std::string> after_final = Checksums(d);
  Check(after_final.ok() && after_valid.ok() && *after_final != *after_valid,
        "that push changed the checksums", &ok);
  // Phases under 20 s are too short to tell warm-up from growth: printed,
  // not judged.
  for (const PhaseResult* r : {&valid, &invalid}) {
    if (seconds < 20) break;
    const double growth =
        r->rss_10s > 0 ? 100.0 * (r->rss_end - r->rss_10s) / r->rss_10s : 0;
    Check(growth < 10,
          absl::StrCat(r == &valid ? "valid" : "invalid",
                       " phase: ps RSS growth after 10 s < 10 %"),
          &ok);
  }
  return ok;
}

int Main() {
  const int seconds = absl::GetFlag(FLAGS_seconds);
  const int num_clients = absl::GetFlag(FLAGS_clients);
  if (seconds < 1 || num_clients < 1) {
    std::fprintf(stderr, "soak: --seconds and --clients must be >= 1\n");
    return 2;
  }
  std::vector<int> kinds;
  if (!InvalidKinds(&kinds)) return 2;
  const std::string bin_dir = BinDirOr(absl::GetFlag(FLAGS_bin_dir));
  const std::string dir = RunDirOr(absl::GetFlag(FLAGS_run_dir), "soak");
  fs::create_directories(dir);
  signal(SIGPIPE, SIG_IGN);

  absl::StatusOr<Daemons> daemons = StartDaemons(bin_dir, dir, num_clients);
  if (!daemons.ok()) {
    std::fprintf(stderr, "soak: %s\n", daemons.status().ToString().c_str());
    return 1;
  }
  Daemons& d = *daemons;
  std::printf(
      "soak: ps pid %d at %s, %zu blocks of up to %lld floats; logs in %s\n",
      d.ps->pid(), d.ps_address.c_str(), d.block_floats.size(),
      static_cast<long long>(kBlockFloats), dir.c_str());
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < num_clients; ++i)
    clients.push_back(std::make_unique<Client>(d, i));

  PhaseResult valid =
      RunPhase(clients, d.ps->pid(), seconds,
               [](Client& c, int64_t, Tally* t) { c.ValidPair(t); });
  Print("valid", valid, seconds);
  absl::StatusOr<std::string> after_valid = Checksums(d);

  PhaseResult invalid = RunPhase(clients, d.ps->pid(), seconds,
                                 [&](Client& c, int64_t n, Tally* t) {
                                   c.Invalid(kinds[n % kinds.size()], t);
                                 });
  Print("invalid", invalid, seconds);
  absl::StatusOr<std::string> after_invalid = Checksums(d);

  const bool ok = ChecksHold(d, *clients[0], valid, invalid, after_valid,
                             after_invalid, seconds);
  clients.clear();
  d.ps->Stop(absl::Seconds(10));
  d.coordinator->Stop(absl::Seconds(10));
  std::printf("soak: %s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace downpour::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "soak [--seconds=60] [--clients=64] [--bin_dir=DIR] [--run_dir=DIR] "
      "[--skip=bad_worker,...]: a real ps under valid then invalid traffic. "
      "Invalid kinds: garbage_push, garbage_pull, unknown_block, repeated_ids, "
      "wrong_size, nan_gradient, huge_pull, bad_encoding, bad_worker.");
  absl::ParseCommandLine(argc, argv);
  return downpour::bench::Main();
}
