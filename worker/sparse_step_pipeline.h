// The two halves of a sparse step that need not wait for its compute: what
// comes before it (drawing the batch, its sorted keys and pulling their rows)
// and what comes after it (the push). With training.fetch overlap or
// layerwise, SparseLoop prepares step t+1 on a thread of its own while it
// computes step t, and pushes step t on other threads while it computes step
// t+1, at most training.max_pushes_in_flight pushes at once (the one
// backpressure knob). With after_push both run on the caller's thread, in
// order, as a step always did.
//
//   StepPrefetcher prefetch(/*background=*/true, [&](SparseStepInput* in) {
//     return DrawAndPull(in);  // false: no batch left
//   });
//   StepPusher pushes(/*background=*/true, 1, send, done);
//   while (true) {
//     ASSIGN_OR_RETURN(bool more, prefetch.Take(&input, &waited));
//     if (!more) break;
//     ASSIGN_OR_RETURN(SparseStepPush* job, pushes.Acquire());
//     Compute(input, job);
//     RETURN_IF_ERROR(pushes.Start(job, &waited));
//   }
//   RETURN_IF_ERROR(pushes.Drain());
//
// The rows a prepared step pulled may miss the updates of the steps still
// computing or in flight when it pulled them: at most max_pushes_in_flight + 1
// of the worker's own steps. The ps measures every push's staleness on the
// dense blocks (the bias, or wide_deep's MLP) that each push carries, and the
// worker reports it (WorkerStats staleness_*).
#ifndef DOWNPOUR_WORKER_SPARSE_STEP_PIPELINE_H_
#define DOWNPOUR_WORKER_SPARSE_STEP_PIPELINE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/push_view.h"
#include "data/sparse_dataset.h"
#include "worker/push_pipeline.h"

namespace downpour::worker {

// What a step computes on: its batch and the rows of its keys.
struct SparseStepInput {
  data::SparseDataset batch;
  std::vector<int32_t> epochs;     // the epoch each row was read in
  std::vector<uint64_t> keys;      // the batch's keys, sorted and unique
  std::vector<uint32_t> slot;      // each entry's position in keys
  std::vector<float> weights;      // table 0's row of each key
  std::vector<float> embeddings;   // fm, wide_deep: table 1's rows
  std::vector<float> dense;        // the dense parameters
  std::vector<uint64_t> versions;  // of the dense blocks pulled
  // The time spent sorting the keys (compute) and pulling (communication).
  absl::Duration sort_time;
  absl::Duration pull_time;
};

// What a step pushes, owned until the push ends: the refs point into the
// vectors beside them.
struct SparseStepPush {
  std::vector<float> dense_grad;
  std::vector<uint64_t> versions;
  std::vector<std::vector<uint64_t>> shard_keys;
  std::vector<std::vector<float>> shard_grads;
  std::vector<std::vector<uint32_t>> shard_counts;
  std::vector<std::vector<float>> shard_embedding_grads;
  std::vector<std::vector<wire::SparseRef>> refs;  // by ps
  // The dense blocks' values and versions right after the push was applied
  // (SparsePs::PushWithRowsAndPull), for the next step's input.
  std::vector<float> fresh_dense;
  std::vector<uint64_t> fresh_versions;
  // For the count once the push is acknowledged.
  int64_t examples = 0;
  int64_t row_updates = 0;
  std::vector<int32_t> epochs;
};

// Prepares the next step's input, in the background or on the caller's
// thread. Take() is called by one thread; `prepare` runs on the prefetch
// thread (background) or inside Take().
class StepPrefetcher {
 public:
  // Fills *input with the next step's batch and rows (the vectors hold an
  // earlier step's contents to reuse); false when no batch is left.
  using Prepare = std::function<absl::StatusOr<bool>(SparseStepInput* input)>;

  // background: starts preparing the first step at once.
  StepPrefetcher(bool background, Prepare prepare);
  // Joins the thread after the step it is preparing (the caller stops the
  // batch source first so that a wait for data ends).
  ~StepPrefetcher() ABSL_LOCKS_EXCLUDED(mu_);

  // The next step's input into *input (its old contents kept for reuse) and
  // the time spent waiting for it into *waited; starts preparing the one
  // after. false when no batch is left; the first error of `prepare`.
  absl::StatusOr<bool> Take(SparseStepInput* input, absl::Duration* waited)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  const Prepare prepare_;
  absl::Mutex mu_;
  // The prefetch thread owns next_ while busy_; Take() while ready_.
  SparseStepInput next_;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool ready_ ABSL_GUARDED_BY(mu_) = false;
  bool want_ ABSL_GUARDED_BY(mu_) = false;
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  absl::StatusOr<bool> result_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // background only
};

// Runs the pushes of steps, at most `max_in_flight` at once on threads of its
// own (background), or each on the caller's thread as it starts. Acquire()
// and Start() are called by one thread; `send` and `done` run on the push
// threads (background) or inside Start().
class StepPusher {
 public:
  // Sends the push and waits for its acknowledgement.
  using Send =
      std::function<absl::Status(SparseStepPush* push, PushReport* report)>;
  // Called once a push ended OK, in the order the pushes end.
  using Done =
      std::function<void(const SparseStepPush& push, const PushReport& report)>;

  // REQUIRES: max_in_flight >= 1.
  StepPusher(bool background, int max_in_flight, Send send, Done done);
  // Waits for every push in flight, then joins the threads.
  ~StepPusher() ABSL_LOCKS_EXCLUDED(mu_);

  // A push to fill (an earlier one's buffers, reused), or the first error
  // of an earlier push, after which no push starts.
  absl::StatusOr<SparseStepPush*> Acquire() ABSL_LOCKS_EXCLUDED(mu_);
  // Sends `push` (from Acquire). In the background it waits while
  // max_in_flight pushes are in flight (backpressure) and returns once the
  // push is queued; its error comes from a later Acquire, Start or Drain. In
  // the foreground it is sent and waited for here, and its error returned.
  // *waited: the time spent waiting for room (background) or sending
  // (foreground).
  absl::Status Start(SparseStepPush* push, absl::Duration* waited)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until no push is in flight; the first error of any push.
  absl::Status Drain() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  // Sends one push and reports it to done_; its status.
  absl::Status SendOne(SparseStepPush* push);

  const bool background_;
  const int max_in_flight_;
  const Send send_;
  const Done done_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<SparseStepPush>> all_ ABSL_GUARDED_BY(mu_);
  std::vector<SparseStepPush*> free_ ABSL_GUARDED_BY(mu_);
  std::deque<SparseStepPush*> queued_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // started and not yet ended
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_SPARSE_STEP_PIPELINE_H_
