// SparseFlood: registration, a heartbeat thread and a push thread that
// re-reads the placement whenever a ps says it moved on.
#include "bench/sparse_flood.h"

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/config.h"
#include "common/push_sequence.h"
#include "common/sparse_keys.h"
#include "grpcpp/grpcpp.h"
#include "membership/coordinator_client.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/server_util.h"

namespace downpour::bench {

struct SparseFlood::Impl {
  Options options;
  RpcSection rpc;
  std::unique_ptr<membership::CoordinatorClient> client;
  uint64_t incarnation = 0;
  uint64_t push_key = 0;
  // The placement as last read.
  uint64_t epoch = 0;
  uint32_t buckets = 0;
  std::vector<int> owner;  // by bucket: the shard's place in `stubs`
  std::vector<std::unique_ptr<proto::ParameterServer::Stub>> stubs;
  std::vector<uint64_t> sent;  // per stub: pushes numbered so far
  uint64_t next_key = 0;

  absl::Status ReadPlacement() {
    auto placement = client->GetPlacement();
    if (!placement.ok()) return placement.status();
    if (placement->epoch() == 0) {
      return absl::UnavailableError("no placement yet");
    }
    epoch = placement->epoch();
    buckets = 0;
    for (const proto::ShardInfo& s : placement->shards()) {
      buckets += static_cast<uint32_t>(s.buckets_size());
    }
    owner.assign(buckets, 0);
    stubs.clear();
    for (const proto::ShardInfo& s : placement->shards()) {
      for (uint32_t b : s.buckets()) {
        if (b < buckets) owner[b] = static_cast<int>(stubs.size());
      }
      stubs.push_back(
          proto::ParameterServer::NewStub(MakeChannel(s.address())));
    }
    // Sequences per ps go on from the last: a new placement keeps them.
    sent.resize(stubs.size(), 0);
    return absl::OkStatus();
  }

  // One push per ps of its share of keys_per_push fresh keys: the status
  // of each (OK or the error) appended to *results.
  void PushRound(std::vector<grpc::Status>* results, int64_t* keys_ok) {
    std::vector<std::vector<uint64_t>> keys(stubs.size());
    for (int i = 0; i < options.keys_per_push; ++i) {
      const uint64_t key = next_key++;
      keys[owner[BucketOf(key, buckets)]].push_back(key);
    }
    for (size_t s = 0; s < stubs.size(); ++s) {
      std::vector<uint64_t>& k = keys[s];
      std::sort(k.begin(), k.end());
      const std::vector<float> grads(k.size(), 0.01f);
      proto::PushRequest push;
      push.set_placement_epoch(epoch);
      push.set_worker_id(options.worker_id);
      push.set_sequence(MakeSequence(incarnation, ++sent[s]));
      push.set_push_key(push_key);
      proto::SparseRows* rows = push.add_sparse();
      rows->set_table(0);
      rows->set_keys(k.data(), k.size() * sizeof(uint64_t));
      rows->set_values(grads.data(), grads.size() * sizeof(float));
      proto::PushResponse ack;
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::seconds(10));
      results->push_back(stubs[s]->Push(&context, push, &ack));
      if (results->back().ok()) *keys_ok += static_cast<int64_t>(k.size());
    }
  }
};

absl::StatusOr<std::unique_ptr<SparseFlood>> SparseFlood::Start(
    Options options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->next_key = options.first_key;
  impl->client = std::make_unique<membership::CoordinatorClient>(
      options.coordinator, impl->rpc, "sparse_flood");
  auto registered = impl->client->RegisterWorker(
      options.worker_id, absl::StrCat("127.0.0.1:", 45000 + options.worker_id));
  if (!registered.ok()) return registered.status();
  impl->incarnation = registered->incarnation();
  impl->push_key = registered->push_key();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  absl::Status read;
  while (!(read = impl->ReadPlacement()).ok() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  if (!read.ok()) return read;
  return std::unique_ptr<SparseFlood>(new SparseFlood(std::move(impl)));
}

SparseFlood::SparseFlood(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  heartbeat_ = std::thread([this] {
    while (!stop_.load()) {
      proto::HeartbeatRequest beat;
      beat.set_role("worker");
      beat.set_index(impl_->options.worker_id);
      (void)impl_->client->Heartbeat(beat);
      absl::SleepFor(absl::Milliseconds(100));
    }
  });
  pusher_ = std::thread([this] {
    while (!stop_.load()) {
      std::vector<grpc::Status> results;
      int64_t keys = 0;
      impl_->PushRound(&results, &keys);
      bool reread = false;
      {
        absl::MutexLock lock(&mu_);
        figures_.keys_sent += keys;
        for (const grpc::Status& s : results) {
          if (s.ok()) {
            ++figures_.pushes;
            continue;
          }
          ++figures_.refused[absl::StatusCodeToString(
              static_cast<absl::StatusCode>(s.error_code()))];
          figures_.last_error = s.error_message();
          reread = reread ||
                   s.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
                   s.error_code() == grpc::StatusCode::UNAVAILABLE;
        }
      }
      if (reread) {
        (void)impl_->ReadPlacement();
        absl::SleepFor(absl::Milliseconds(20));
      }
    }
  });
}

SparseFlood::~SparseFlood() { Stop(); }

SparseFlood::Figures SparseFlood::Stop() {
  stop_.store(true);
  if (pusher_.joinable()) pusher_.join();
  if (heartbeat_.joinable()) heartbeat_.join();
  return figures();
}

SparseFlood::Figures SparseFlood::figures() const {
  absl::MutexLock lock(&mu_);
  return figures_;
}

}  // namespace downpour::bench
