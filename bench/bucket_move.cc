// A live bucket move (issue 43; docs/BENCHMARKS.md, "Moving buckets"): half
// of a --rows-row FTRL table moves from ps 0 to ps 1 while a pusher thread
// keeps applying pushes to both, as a ps sees them. Two in-process ps shards
// serve over gRPC on loopback (LocalCluster, real TCP); the destination's
// BucketMover copies the rows over CopyBuckets exactly as a ps daemon does
// (copy passes until caught up, then the switch's last pass). The switch
// itself is made here (each shard given the new placement epoch, as the
// coordinator's heartbeats do).
//
//   bazel run -c opt //bench:bucket_move -- --rows=10000000
//
// Prints: rows moved; the copy's passes, time and rows/s; the last pass
// (the time the moved buckets answer nothing: their pushes wait); pushes
// applied per second before, during the copy, and after the switch, as
// ratios of the rate before; and the row updates held by both shards against
// those applied (0 lost, none counted twice).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/bench_util.h"
#include "bench/local_cluster.h"
#include "common/config.h"
#include "common/push_sequence.h"
#include "common/sparse_keys.h"
#include "server/bucket_mover.h"

ABSL_FLAG(int64_t, rows, 10'000'000, "rows of ps 0's table before the move");
ABSL_FLAG(int, buckets, 1024, "model.sparse_buckets");
ABSL_FLAG(int, keys_per_push, 4096, "unique keys per push");
ABSL_FLAG(double, window_s, 3, "seconds each push-rate window lasts");
ABSL_FLAG(int, replication, 2,
          "cluster.replication (2: the tables keep the replication record "
          "and each row's key; no backup runs here)");

namespace downpour::bench {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Keys whose bucket `owner` gives shard `shard`.
std::vector<uint64_t> KeysOf(const std::vector<int>& owner, int shard,
                             int64_t n, uint64_t from) {
  std::vector<uint64_t> keys;
  keys.reserve(n);
  for (uint64_t k = from; static_cast<int64_t>(keys.size()) < n; ++k) {
    if (owner[BucketOf(k, owner.size())] == shard) keys.push_back(k);
  }
  return keys;
}

// Pushes `keys` (sorted) to `shard` at `epoch`; the sequence of `worker`'s
// next push.
absl::Status PushKeys(server::Shard* shard, const std::vector<uint64_t>& keys,
                      uint64_t epoch, uint64_t sequence, int worker) {
  proto::PushRequest request;
  request.set_placement_epoch(epoch);
  request.set_worker_id(worker);
  request.set_sequence(sequence);
  proto::SparseRows* rows = request.add_sparse();
  rows->set_table(0);
  rows->set_keys(keys.data(), keys.size() * sizeof(uint64_t));
  const std::vector<float> grads(keys.size(), 0.01f);
  rows->set_values(grads.data(), grads.size() * sizeof(float));
  proto::PushResponse response;
  return shard->Push(request, &response);
}

// The pusher: pushes of random held keys to whichever shard owns them, at
// the epoch each serves; counts applied pushes and the keys' updates. A push
// refused for a moved bucket is split and sent again, as a worker does.
class Pusher {
 public:
  Pusher(LocalCluster* cluster, std::vector<uint64_t> keys,
         std::vector<int> owner)
      : cluster_(cluster), keys_(std::move(keys)) {
    SetOwner(std::move(owner), 1);
    thread_ = std::thread([this] { Loop(); });
  }
  ~Pusher() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int64_t pushes() const { return pushes_.load(); }
  int64_t updates() const { return updates_.load(); }
  // The placement the pushes follow from now on (the switch).
  void SetOwner(std::vector<int> owner, uint64_t epoch) {
    absl::MutexLock lock(&mu_);
    owner_ = std::make_shared<const std::vector<int>>(std::move(owner));
    epoch_ = epoch;
  }

 private:
  std::shared_ptr<const std::vector<int>> Owner(uint64_t* epoch) const {
    absl::MutexLock lock(&mu_);
    *epoch = epoch_;
    return owner_;
  }

  // Keys of one shard: sent until applied. Keys of a bucket the shard
  // moved away are split off to their new shard (a new sequence there), the
  // rest sent again with the same sequence, as a worker does.
  void Send(int s, std::vector<uint64_t> k, uint64_t seq,
            std::vector<uint64_t>* sequence) {
    for (;;) {
      uint64_t epoch = 0;
      const auto owner = Owner(&epoch);
      const absl::Status pushed =
          PushKeys(cluster_->shard(s), k, epoch, seq, 1);
      if (pushed.ok()) {
        pushes_ += 1;
        updates_ += static_cast<int64_t>(k.size());
        return;
      }
      if (stop_) return;
      if (!absl::StrContains(pushed.message(), kBucketMovedMessage)) continue;
      std::vector<uint64_t> stay, moved;
      for (uint64_t key : k) {
        ((*owner)[BucketOf(key, owner->size())] == s ? stay : moved)
            .push_back(key);
      }
      if (!moved.empty()) {
        Send(1 - s, moved, MakeSequence(1, ++(*sequence)[1 - s]), sequence);
      }
      k = std::move(stay);
    }
  }

  void Loop() {
    std::mt19937_64 rng(7);
    const int n = absl::GetFlag(FLAGS_keys_per_push);
    std::vector<uint64_t> sequence(2, 0);
    while (!stop_) {
      uint64_t epoch = 0;
      const auto owner = Owner(&epoch);
      std::vector<std::vector<uint64_t>> by_shard(2);
      for (int i = 0; i < n; ++i) {
        const uint64_t k = keys_[rng() % keys_.size()];
        by_shard[(*owner)[BucketOf(k, owner->size())]].push_back(k);
      }
      for (int s = 0; s < 2; ++s) {
        std::vector<uint64_t>& k = by_shard[s];
        std::sort(k.begin(), k.end());
        k.erase(std::unique(k.begin(), k.end()), k.end());
        if (!k.empty()) Send(s, k, MakeSequence(1, ++sequence[s]), &sequence);
      }
    }
  }

  LocalCluster* const cluster_;
  const std::vector<uint64_t> keys_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const std::vector<int>> owner_ ABSL_GUARDED_BY(mu_);
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 1;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> pushes_{0};
  std::atomic<int64_t> updates_{0};
  std::thread thread_;
};

double PushRate(const Pusher& pusher, double seconds) {
  const int64_t before = pusher.pushes();
  const auto start = Clock::now();
  absl::SleepFor(absl::Seconds(seconds));
  return static_cast<double>(pusher.pushes() - before) / SecondsSince(start);
}

// ps 0 holds `keys` (one update each) before anything moves.
void Fill(server::Shard* shard, const std::vector<uint64_t>& keys) {
  const auto fill = Clock::now();
  uint64_t n = 0;
  for (size_t i = 0; i < keys.size(); i += 100000) {
    const std::vector<uint64_t> part(
        keys.begin() + i, keys.begin() + std::min(keys.size(), i + 100000));
    CheckOrExit(PushKeys(shard, part, 1, MakeSequence(2, ++n), 0),
                "bucket_move", "fill ps 0");
  }
  std::printf("filled ps 0 with %zu rows in %.1f s\n", keys.size(),
              SecondsSince(fill));
}

// Phase copy: the mover copies until caught up; the push rate meanwhile.
double Copy(Pusher* pusher, server::BucketMover* mover,
            const proto::BucketMove& move) {
  google::protobuf::RepeatedPtrField<proto::BucketMove> in, out;
  *in.Add() = move;
  mover->Update(in, out);
  double during = 0;
  int windows = 0;
  for (;;) {
    during += PushRate(*pusher, 0.5);
    ++windows;
    const auto progress = mover->Progress();
    if (!progress.empty() && progress[0].caught_up()) break;
  }
  return during / windows;
}

// The switch: placement epoch 2 gives `move`'s buckets to ps 1, as the
// coordinator's heartbeats would; the last pass before ps 1 serves it.
void Switch(LocalCluster* cluster, Pusher* pusher, server::BucketMover* mover,
            proto::BucketMove move, std::vector<int>* owner) {
  std::vector<uint32_t> held[2];
  for (uint32_t b : move.buckets()) (*owner)[b] = 1;
  for (uint32_t b = 0; b < owner->size(); ++b) held[(*owner)[b]].push_back(b);
  CheckOrExit(cluster->shard(0)->AssignBuckets(held[0]), "bucket_move",
              "switch");
  CheckOrExit(cluster->shard(0)->Assign(2, {0}), "bucket_move", "switch");
  pusher->SetOwner(*owner, 2);
  proto::GetPlacementResponse placement;
  placement.set_epoch(2);
  for (int s = 0; s < 2; ++s) {
    proto::ShardInfo* info = placement.add_shards();
    info->set_index(s);
    info->set_address(cluster->ps_address(s));
  }
  move.set_phase("switched");
  move.set_switch_epoch(2);
  *placement.add_moves() = move;
  CheckOrExit(
      mover->FinishSwitched(placement, absl::Seconds(30), [] { return false; }),
      "bucket_move", "last pass");
  CheckOrExit(cluster->shard(1)->AssignBuckets(held[1]), "bucket_move",
              "switch");
  CheckOrExit(cluster->shard(1)->Assign(2, {}), "bucket_move", "switch");
}

uint64_t UpdatesHeld(LocalCluster* cluster) {
  return cluster->shard(0)->sparse_stats()[0].updates +
         cluster->shard(1)->sparse_stats()[0].updates;
}

int Run() {
  Config config;
  config.model.type = ModelType::kSparseLinear;
  config.model.task = Task::kBinary;
  config.model.sparse_buckets = absl::GetFlag(FLAGS_buckets);
  config.cluster.ps.assign(2, "127.0.0.1:0");
  config.cluster.workers.assign(2, "127.0.0.1:0");
  config.optimizer.type = OptimizerType::kFtrl;
  config.cluster.replication = absl::GetFlag(FLAGS_replication);
  auto started = LocalCluster::Start(config);
  CheckOrExit(started.status(), "bucket_move", "start the shards");
  LocalCluster* cluster = started->get();
  const uint32_t total = static_cast<uint32_t>(config.model.sparse_buckets);
  std::vector<int> owner(total);
  std::vector<uint32_t> held[2];
  for (uint32_t b = 0; b < total; ++b) {
    owner[b] = static_cast<int>(b % 2);
    held[b % 2].push_back(b);
  }
  for (int s = 0; s < 2; ++s) {
    CheckOrExit(cluster->shard(s)->AssignBuckets(held[s]), "bucket_move",
                "assign buckets");
  }
  const std::vector<uint64_t> keys =
      KeysOf(owner, 0, absl::GetFlag(FLAGS_rows), 1);
  Fill(cluster->shard(0), keys);
  const uint64_t updates_before = UpdatesHeld(cluster);
  Pusher pusher(cluster, keys, owner);
  const double before = PushRate(pusher, absl::GetFlag(FLAGS_window_s));

  // Half of ps 0's buckets move to ps 1.
  proto::BucketMove move;
  move.set_id(1);
  move.mutable_buckets()->Add(held[0].begin(),
                              held[0].begin() + held[0].size() / 2);
  move.set_from_shard(0);
  move.set_to_shard(1);
  move.set_phase("copy");
  move.set_from_address(cluster->ps_address(0));
  server::BucketMover mover(cluster->shard(1), 1);
  const auto copy_start = Clock::now();
  const double during = Copy(&pusher, &mover, move);
  const double copy_s = SecondsSince(copy_start);
  const int64_t copied = mover.Progress()[0].rows_copied();
  const auto switch_start = Clock::now();
  Switch(cluster, &pusher, &mover, move, &owner);
  const double last_pass_s = SecondsSince(switch_start);
  // The source drops the moved rows (as its sweep does once the move is
  // done) while the pusher goes on: the push rate meanwhile.
  const auto drop_start = Clock::now();
  std::atomic<bool> drop_done{false};
  int64_t dropped = 0;
  std::thread dropper([&] {
    dropped = cluster->shard(0)->DropUnheldRows({});
    drop_done = true;
  });
  double during_drop = 0;
  int drop_windows = 0;
  while (!drop_done) {
    during_drop += PushRate(pusher, 0.25);
    ++drop_windows;
  }
  dropper.join();
  during_drop /= std::max(1, drop_windows);
  const double drop_s = SecondsSince(drop_start);
  const double after = PushRate(pusher, absl::GetFlag(FLAGS_window_s));
  pusher.Stop();  // the counts are final
  const int64_t applied = pusher.updates();
  const uint64_t held_after = UpdatesHeld(cluster);
  const int64_t updates_lost = static_cast<int64_t>(updates_before) + applied -
                               static_cast<int64_t>(held_after);
  std::printf(
      "moved %d of %u buckets (%lld rows dropped from ps 0 in %.2f s)\n"
      "copy: %.2f s, %lld rows copied (%.0f rows/s); %lld pushes applied\n"
      "switch: the moved buckets answered nothing for %.3f s (last pass and "
      "import)\n"
      "pushes/s: before %.0f, during the copy %.0f (%.2fx), during the drop "
      "%.0f (%.2fx), after %.0f (%.2fx)\n"
      "row updates: held %llu, applied %llu, lost %lld\n",
      move.buckets_size(), total, static_cast<long long>(dropped), drop_s,
      copy_s, static_cast<long long>(copied), copied / copy_s,
      static_cast<long long>(pusher.pushes()), last_pass_s, before, during,
      during / before, during_drop, during_drop / before, after, after / before,
      static_cast<unsigned long long>(held_after),
      static_cast<unsigned long long>(updates_before + applied),
      static_cast<long long>(updates_lost));
  return updates_lost == 0 ? 0 : 1;
}

}  // namespace
}  // namespace downpour::bench

int main(int argc, char** argv) {
  return downpour::bench::ParseFlagsAndRun(argc, argv, downpour::bench::Run);
}
