// training.fetch layerwise (async): the step runs on the backend's
// LossAndGradientInStages. Blocks are grouped in the order backprop finishes
// them (about FetchContext::layer_group_floats a group); a few send threads
// push each group's gradient as soon as it is complete and pull the group's
// blocks right after the ack, and the next step's forward pass waits only for
// the pieces it is about to read. Every gradient is still computed on
// parameters that hold the worker's own previous update, as with after_push.
#ifndef DOWNPOUR_WORKER_FETCHER_LAYERWISE_H_
#define DOWNPOUR_WORKER_FETCHER_LAYERWISE_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/fetcher.h"
#include "worker/push_pipeline.h"

namespace downpour::worker {

// The compute thread calls it; its send threads (Start to Flush) share the
// queue of groups and the blocks' freshness with it under mu_. A send thread
// alone touches buffers->grad and params in its group's blocks, and versions
// at its ids, until it marks them fresh.
class LayerwiseFetcher : public Fetcher {
 public:
  explicit LayerwiseFetcher(const FetchContext& context);
  // Stops the send threads if Flush did not.
  ~LayerwiseFetcher() override;

  // Starts the send threads (as many as groups a step may have, up to 4).
  void Start() override ABSL_LOCKS_EXCLUDED(mu_);
  // The first error of a push or pull.
  absl::Status BeforeStep(int64_t step) override { return error(); }
  // The step in stages: awaits the blocks it reads, hands off each group of
  // blocks whose gradient is final and checked.
  absl::StatusOr<float> LossAndGradient(int64_t step, const float* x,
                                        const float* y, int batch,
                                        std::string* bad) override
      ABSL_LOCKS_EXCLUDED(mu_);
  // Handed to the send threads as backprop went.
  void TakeGradient() override {}
  absl::Status AwaitParams(int64_t step) override ABSL_LOCKS_EXCLUDED(mu_) {
    return AwaitBlocks(step, 0, ctx_.spec->num_params());
  }
  absl::Duration TakeParamsWait() override;
  absl::Status AfterStep(int64_t step, int64_t total) override {
    return absl::OkStatus();
  }
  // Waits until every group handed off has been pushed and pulled (or one
  // failed), then stops the send threads.
  absl::Status Flush() override ABSL_LOCKS_EXCLUDED(mu_);
  const char* DivergedNote() const override {
    return "; of this step only the blocks before the bad one were pushed "
           "(training.fetch "
           "layerwise)";
  }

 private:
  // Blocks of one step handed to the send threads together.
  struct Group {
    int64_t step = 0;
    std::vector<uint32_t> ids;
  };

  void SendThread() ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until every block overlapping params[begin, end) holds the values
  // for step `step`; Cancelled once Stop() is called, the first push or pull
  // error once one failed.
  absl::Status AwaitBlocks(int64_t step, int64_t begin, int64_t end)
      ABSL_LOCKS_EXCLUDED(mu_);
  // grad[begin, end) of step `step` is final: each block it completes joins
  // the open group, which is handed to the send threads once it holds
  // group_floats_; a block with a non-finite or too large value is recorded
  // in bad_ and nothing more of the step is handed off.
  void GradientReady(int64_t step, int64_t begin, int64_t end)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Hands the open group of step `step` to the send threads (`last`: the
  // step's last group).
  void HandOffGroup(int64_t step, bool last) ABSL_LOCKS_EXCLUDED(mu_);
  // Counts step step_ as pushed and pulled once its last group is handed off
  // and every group finished.
  void MaybeCountStep() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The first block whose floats reach past offset `begin` (blocks are in
  // offset order): where a range starting at `begin` begins.
  size_t FirstBlockEndingAfter(int64_t begin) const {
    return static_cast<size_t>(
        std::upper_bound(block_ends_.begin(), block_ends_.end(), begin) -
        block_ends_.begin());
  }
  void StopThreads() ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after Start.
  std::vector<int64_t> block_ends_;  // by block id: offset + length
  int64_t group_floats_ = 1;         // the context's or its default
  std::vector<std::thread> threads_;

  // Compute thread only: what the step has yet to report.
  std::vector<int64_t> block_left_;   // floats, by block id
  std::vector<uint32_t> open_group_;  // complete blocks not yet handed off
  int64_t open_floats_ = 0;
  std::string bad_;      // the step's first bad block
  absl::Duration wait_;  // time in AwaitBlocks since TakeParamsWait

  // State below is protected by mu_ (shared with the send threads).
  absl::Mutex mu_;
  std::deque<Group> queue_ ABSL_GUARDED_BY(mu_);  // handed off, not taken
  int sending_ ABSL_GUARDED_BY(mu_) = 0;          // groups taken, not finished
  // By block id: params hold the values step fresh_for_ computes on.
  std::vector<int64_t> fresh_for_ ABSL_GUARDED_BY(mu_);
  // The step whose groups are handed off now: how many, how many finished,
  // whether its last one was, and what its pushes came to.
  int64_t step_ ABSL_GUARDED_BY(mu_) = 0;
  int step_groups_ ABSL_GUARDED_BY(mu_) = 0;
  int step_finished_ ABSL_GUARDED_BY(mu_) = 0;
  bool step_closed_ ABSL_GUARDED_BY(mu_) = false;
  PushReport step_report_ ABSL_GUARDED_BY(mu_);
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_FETCHER_LAYERWISE_H_
