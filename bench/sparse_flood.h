// An attacker with a free worker slot (issue 42, item 4): it registers as
// worker `worker_id`, heartbeats to keep the slot, and pushes sparse keys
// never seen before to every ps, as fast as they answer. bench/soak's
// --sparse_flood and tests/sparse_budget_test run it next to a real job.
//
//   ASSIGN_OR_RETURN(auto flood, SparseFlood::Start({coordinator, 1}));
//   ... watch the ps ...
//   SparseFlood::Figures f = flood->Stop();
//
// Thread-safe: figures() may be read while it runs.
#ifndef DOWNPOUR_BENCH_SPARSE_FLOOD_H_
#define DOWNPOUR_BENCH_SPARSE_FLOOD_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace downpour::bench {

class SparseFlood {
 public:
  struct Options {
    std::string coordinator;    // host:port
    int worker_id = 1;          // a slot of cluster.workers no worker runs
    int keys_per_push = 20000;  // fresh keys per push, over all ps
    uint64_t first_key = uint64_t{1} << 62;  // keys count up from here
  };
  struct Figures {
    int64_t pushes = 0;     // answered OK
    int64_t keys_sent = 0;  // in pushes answered OK
    // Pushes answered with an error, by gRPC code name.
    std::map<std::string, int64_t> refused;
    std::string last_error;
  };

  // Registers, reads the placement and starts pushing on a thread of its
  // own. The registration's errors.
  static absl::StatusOr<std::unique_ptr<SparseFlood>> Start(Options options);
  ~SparseFlood();
  SparseFlood(const SparseFlood&) = delete;
  SparseFlood& operator=(const SparseFlood&) = delete;

  // Stops the pushes and heartbeats; returns the figures. Idempotent.
  Figures Stop();
  Figures figures() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Impl;
  explicit SparseFlood(std::unique_ptr<Impl> impl);

  const std::unique_ptr<Impl> impl_;
  std::atomic<bool> stop_{false};
  std::thread pusher_;
  std::thread heartbeat_;
  mutable absl::Mutex mu_;
  Figures figures_ ABSL_GUARDED_BY(mu_);
};

}  // namespace downpour::bench

#endif  // DOWNPOUR_BENCH_SPARSE_FLOOD_H_
