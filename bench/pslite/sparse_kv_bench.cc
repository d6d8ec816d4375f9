// ps-lite's key-value path on the key stream of bench/sparse (issue 21): the
// same Criteo-shaped batches (39 fields, Zipf s = ZIPF over KEYS keys, BATCH
// examples a batch, keys sorted and unique, the same generator and seeds),
// each pulled and then pushed by one worker against DMLC_NUM_SERVER servers.
// The servers keep a real table, as Downpour's shards do: an
// std::unordered_map<Key, std::vector<float>> of DIM floats a key (env DIM,
// default 1), whose pull reads a key without creating it (0 when absent) and
// whose push applies w -= 0.01 * g, creating the key. Values travel as
// ps-lite's KVPairs with DIM values a key (vals.size() == keys.size() * DIM).
// (ps-lite's own tests/test_kv_app_benchmark.cc answers from no table at all,
// with one request of 10^7 keys.) Prints unique keys per second per server
// for pull and push, the median of REPS samples, as bench/sparse's rpc
// section does. Build and run: bench/pslite/run.sh.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <unordered_map>
#include <vector>

#include "ps/ps.h"

using namespace ps;

static double Env(const char* name, double fallback) {
  const char* v = getenv(name);
  return v != nullptr ? atof(v) : fallback;
}

static const size_t kDim = static_cast<size_t>(Env("DIM", 1));

// The table of rows of D floats, held in the map's nodes (D = 1: the
// std::unordered_map<Key, float> of the harness before DIM).
template <size_t D>
static void Handler(const KVMeta& meta, const KVPairs<float>& req,
                    KVServer<float>* server) {
  static std::unordered_map<Key, std::array<float, D>> table;
  if (meta.push) {
    for (size_t i = 0; i < req.keys.size(); ++i) {
      auto it = table.find(req.keys[i]);
      if (it == table.end()) {
        it = table.emplace(req.keys[i], std::array<float, D>{}).first;
      }
      for (size_t j = 0; j < D; ++j)
        it->second[j] -= 0.01f * req.vals[i * D + j];
    }
    server->Response(meta, KVPairs<float>());
    return;
  }
  KVPairs<float> res;
  res.keys = req.keys;
  res.vals.resize(req.keys.size() * D);
  for (size_t i = 0; i < req.keys.size(); ++i) {
    auto it = table.find(req.keys[i]);
    for (size_t j = 0; j < D; ++j) {
      res.vals[i * D + j] = it == table.end() ? 0.0f : it->second[j];
    }
  }
  server->Response(meta, res);
}

static uint64_t Mix(uint64_t x) {  // bench/sparse.cc's Mix
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// bench/sparse.cc's MakeBatches, keys mapped into ps-lite's key range
// (kMaxKey: ps-lite cuts [0, kMaxKey) into one range per server).
static std::vector<std::vector<Key>> MakeBatches(int count, uint64_t seed) {
  const int64_t n = static_cast<int64_t>(Env("KEYS", 1e7)) / 39;
  const double s = Env("ZIPF", 1.1);
  const int batch = static_cast<int>(Env("BATCH", 1024));
  std::mt19937_64 rng(seed);
  std::vector<std::vector<Key>> batches(count);
  for (auto& keys : batches) {
    for (int e = 0; e < batch; ++e) {
      for (uint64_t f = 0; f < 39; ++f) {
        const double u = std::uniform_real_distribution<double>()(rng);
        const double a = 1.0 - s;
        const double x =
            std::pow((std::pow(n + 1.0, a) - 1.0) * u + 1.0, 1.0 / a);
        const int64_t rank =
            std::min<int64_t>(n - 1, static_cast<int64_t>(x) - 1);
        keys.push_back(Mix((f << 48) ^ static_cast<uint64_t>(rank)) % kMaxKey);
      }
    }
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  }
  return batches;
}

static double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

static void RunWorker() {
  KVWorker<float> kv(0, 0);
  const int servers = NumServers();
  const int count = static_cast<int>(Env("BATCHES", 200));
  const auto warm = MakeBatches(count / 4, 1);
  const auto batches = MakeBatches(count, 2);
  double unique = 0;
  for (const auto& b : batches) unique += b.size();
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  auto step = [&](const std::vector<Key>& keys, double* pull_s,
                  double* push_s) {
    std::vector<float> values, grads(keys.size() * kDim);
    for (float& g : grads) g = normal(rng);
    auto t0 = std::chrono::steady_clock::now();
    kv.Wait(kv.Pull(keys, &values));
    auto t1 = std::chrono::steady_clock::now();
    kv.Wait(kv.Push(keys, grads));
    auto t2 = std::chrono::steady_clock::now();
    *pull_s += std::chrono::duration<double>(t1 - t0).count();
    *push_s += std::chrono::duration<double>(t2 - t1).count();
  };
  double ignored_pull = 0, ignored_push = 0;
  for (const auto& keys : warm) step(keys, &ignored_pull, &ignored_push);
  std::vector<double> pull_rates, push_rates;
  const int reps = static_cast<int>(Env("REPS", 3));
  for (int r = 0; r < reps; ++r) {
    double pull_s = 0, push_s = 0;
    for (const auto& keys : batches) step(keys, &pull_s, &push_s);
    pull_rates.push_back(unique / pull_s / servers);
    push_rates.push_back(unique / push_s / servers);
  }
  printf(
      "pslite dim %d servers %d: %.0f unique keys a batch; pull %.0f "
      "keys/s/server, push %.0f keys/s/server (medians of %d)\n",
      static_cast<int>(kDim), servers, unique / batches.size(),
      Median(pull_rates), Median(push_rates), reps);
  fflush(stdout);
}

int main() {
  if (kDim != 1 && kDim != 16 && kDim != 64) {
    fprintf(stderr, "sparse_kv_bench: DIM must be 1, 16 or 64, got %zu\n",
            kDim);
    return 1;
  }
  Start(0);
  if (IsServer()) {
    auto server = new KVServer<float>(0);
    switch (kDim) {
      case 1:
        server->set_request_handle(Handler<1>);
        break;
      case 16:
        server->set_request_handle(Handler<16>);
        break;
      case 64:
        server->set_request_handle(Handler<64>);
        break;
      default:
        break;  // refused before Start
    }
    RegisterExitCallback([server]() { delete server; });
  }
  if (IsWorker()) RunWorker();
  Finalize(0, true);
  return 0;
}
