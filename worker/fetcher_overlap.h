// training.fetch overlap: every n_fetch steps the compute thread asks the
// fetch thread for fresh parameters and carries on with the ones it has; the
// new values are swapped in at a step boundary once they arrive (double
// buffering). Pushes go as with after_push (worker/gradient_pusher.h).
#ifndef DOWNPOUR_WORKER_FETCHER_OVERLAP_H_
#define DOWNPOUR_WORKER_FETCHER_OVERLAP_H_

#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "worker/fetcher.h"
#include "worker/gradient_pusher.h"

namespace downpour::worker {

// The compute thread calls it; the fetch thread (Start to Flush) shares the
// back buffer with it under mu_.
class OverlapFetcher : public Fetcher {
 public:
  explicit OverlapFetcher(const FetchContext& context);
  // Stops the fetch thread if Flush did not.
  ~OverlapFetcher() override;

  // Starts the fetch thread.
  void Start() override ABSL_LOCKS_EXCLUDED(mu_);
  // Counts the acknowledgements, swaps in parameters that arrived and asks
  // for a fetch every n_fetch steps.
  absl::Status BeforeStep(int64_t step) override ABSL_LOCKS_EXCLUDED(mu_);
  void TakeGradient() override;
  // Pushes every n_push steps.
  absl::Status AfterStep(int64_t step, int64_t total) override;
  absl::Status Flush() override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void FetchThread() ABSL_LOCKS_EXCLUDED(mu_);
  // Swaps the back buffer in if it holds newer values.
  void MaybeSwapParams() ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the fetch thread and joins it.
  void StopThread() ABSL_LOCKS_EXCLUDED(mu_);

  GradientPusher pusher_;  // compute thread only
  std::thread thread_;

  // State below is protected by mu_ (shared with the fetch thread).
  absl::Mutex mu_;
  bool fetch_wanted_ ABSL_GUARDED_BY(mu_) = false;
  bool fetched_ ABSL_GUARDED_BY(mu_) = false;  // back_ holds newer values
  std::vector<float> back_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> back_versions_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_FETCHER_OVERLAP_H_
