// The values a ps served each worker in its latest pulls, kept for DC-ASGD's
// delay compensation (Zheng et al. 2017): a push computed on version v of a
// block is corrected with (w_now - w_v), so the ps remembers w_v.
//
//   ServedValues served(/*num_workers=*/4);
//   served.Record(/*worker=*/2, /*block=*/7, /*version=*/12, w, n);
//   bool held = served.Visit(2, 7, 12, n, [&](const float* w_12) { ... });
//
// Per (worker, block) the last kVersionsKept distinct versions are kept: a
// worker that double-buffers its pulls computes on the previous pull while
// the next one lands. Memory is bounded by num_workers * kVersionsKept * the
// floats of the blocks recorded (the shard's size).
#ifndef DOWNPOUR_SERVER_SERVED_VALUES_H_
#define DOWNPOUR_SERVER_SERVED_VALUES_H_

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"

namespace downpour::server {

// Thread-safe. One mutex per worker: pulls of different workers (which run
// concurrently under the Shard's shared lock) never wait for each other's
// copies, and a worker has at most a pull or two in flight. Callers may hold
// the Shard's mutex (lock order: Shard::mu_, then a worker's mutex here).
class ServedValues {
 public:
  static constexpr int kVersionsKept = 2;

  // Remembers pulls of workers 0 .. num_workers - 1; others are ignored.
  explicit ServedValues(int num_workers);
  ServedValues(const ServedValues&) = delete;
  ServedValues& operator=(const ServedValues&) = delete;
  ~ServedValues();

  int num_workers() const { return static_cast<int>(workers_.size()); }

  // Remembers that `worker` was served values[0, n) of block `block` at
  // `version`, replacing the older of the versions held when both are other
  // versions. No-op for a worker outside [0, num_workers) or a version
  // already held.
  void Record(int32_t worker, uint32_t block, uint64_t version,
              const float* values, int64_t n);

  // Calls use(values) with the n floats `worker` was served of `block` at
  // `version`, under that worker's lock, and returns true; returns false (and
  // does not call `use`) when that copy is not held or has another length.
  bool Visit(int32_t worker, uint32_t block, uint64_t version, int64_t n,
             absl::FunctionRef<void(const float*)> use) const;

  // Drops every copy of `block` (its values were replaced).
  void Forget(uint32_t block);

  // Floats held in all copies (for tests and memory accounting).
  int64_t num_floats() const;

 private:
  struct Copy {
    bool held = false;
    uint64_t version = 0;
    std::vector<float> values;
  };
  using Copies = std::array<Copy, kVersionsKept>;
  struct Worker {
    mutable absl::Mutex mu;
    absl::flat_hash_map<uint32_t, Copies> blocks ABSL_GUARDED_BY(mu);
  };

  Worker* Find(int32_t worker) const;

  // Constant after construction (the Workers themselves lock).
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_SERVED_VALUES_H_
