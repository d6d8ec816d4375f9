// training.fetch after_push, and training.consistency bsp: every n_fetch
// steps the compute thread waits until each push handed off is acknowledged,
// then pulls, so each gradient is computed on parameters that hold the
// worker's own updates (in bsp: on the parameters of the round just applied;
// the ps acknowledges once the round is applied).
#ifndef DOWNPOUR_WORKER_FETCHER_AFTER_PUSH_H_
#define DOWNPOUR_WORKER_FETCHER_AFTER_PUSH_H_

#include <cstdint>

#include "absl/status/status.h"
#include "worker/fetcher.h"
#include "worker/gradient_pusher.h"

namespace downpour::worker {

// Single-threaded: the compute thread's; pushes run on the client's threads.
class AfterPushFetcher : public Fetcher {
 public:
  explicit AfterPushFetcher(const FetchContext& context);

  void Start() override;
  // Counts the acknowledgements that came in.
  absl::Status BeforeStep(int64_t step) override;
  void TakeGradient() override;
  // Pushes every n_push steps; every n_fetch steps, but for the last, waits
  // for the pushes and pulls.
  absl::Status AfterStep(int64_t step, int64_t total) override;
  absl::Status Flush() override;

 private:
  // Waits until every push handed off is acknowledged, then pulls the
  // parameters into buffers. False if a push or the pull failed.
  bool SyncAfterPush();

  GradientPusher pusher_;
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_FETCHER_AFTER_PUSH_H_
