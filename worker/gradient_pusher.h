// The pushes of training.fetch after_push and overlap: the gradients of
// training.n_push steps summed at full weight, handed to PsClient::StartPush,
// and the tickets waited for.
#ifndef DOWNPOUR_WORKER_GRADIENT_PUSHER_H_
#define DOWNPOUR_WORKER_GRADIENT_PUSHER_H_

#include <cstdint>
#include <deque>
#include <vector>

#include "worker/fetcher.h"
#include "worker/loop_stats.h"
#include "worker/ps_client.h"

namespace downpour::worker {

// Single-threaded: the compute thread's (its fetcher owns it). The client
// keeps up to training.max_pushes_in_flight pushes in flight and, when that
// many are, StartPush waits for one to be acknowledged (backpressure): no
// step's gradient is dropped, merged into a later push or scaled down.
class GradientPusher {
 public:
  // Borrows everything; errors go to `error`, counts and waits to `stats`.
  GradientPusher(PsClient* client, StepBuffers* buffers, LoopStats* stats,
                 FirstError* error);
  GradientPusher(const GradientPusher&) = delete;
  GradientPusher& operator=(const GradientPusher&) = delete;

  // Sizes the first sum to the parameters (buffers->params sized).
  void Start();
  // Sums buffers->grad, computed on buffers->versions, into the next push.
  void Add();
  // Starts the summed gradient's push (StartPush waits while the client has
  // max_pushes_in_flight in flight) and sums the next steps into a spare
  // buffer. False if a push failed.
  bool HandOff();
  // Waits for the pushes handed off, oldest first: all of them (`all`), or
  // those that have ended. Counts each acknowledged push, records the first
  // failure and keeps the buffers for reuse.
  void Collect(bool all);
  // Hands off what is owed (unless a push failed) and waits for every push.
  void Flush();

 private:
  // A summed gradient handed to the client, not yet waited for.
  struct PushInFlight {
    PushTicket ticket = 0;
    int steps = 0;  // steps summed into it
  };

  // Constant after construction.
  PsClient* const client_;
  StepBuffers* const buffers_;
  LoopStats* const stats_;
  FirstError* const error_;

  std::vector<float> accum_;  // gradients since the last hand-off
  std::vector<uint64_t> accum_versions_;
  int accum_steps_ = 0;
  std::deque<PushInFlight> pushes_;  // handed off, not yet waited for
  // Gradient buffers of pushes waited for, for the next accum_.
  std::vector<std::vector<float>> spare_;
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_GRADIENT_PUSHER_H_
