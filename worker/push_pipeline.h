// The asynchronous half of a PsClient: pushes in flight, counted in one place.
//
//   PushPipeline pushes(max_in_flight, [this](const float* grad,
//                                             const std::vector<uint64_t>& v,
//                                             PushReport* r) {
//     return SendPush(grad, v, r);  // the implementation's synchronous push
//   });
//   ASSIGN_OR_RETURN(PushTicket t, pushes.Start(std::move(grad), versions));
//   RETURN_IF_ERROR(pushes.Wait(t, &report, &grad));
//
// GrpcPsClient and FakePsClient forward PsClient's StartPush, Wait, PushDone,
// pushes_in_flight and Push to one of these.
#ifndef DOWNPOUR_WORKER_PUSH_PIPELINE_H_
#define DOWNPOUR_WORKER_PUSH_PIPELINE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/counters.h"

namespace downpour::worker {

// Names one push begun by PsClient::StartPush, for Wait. A client numbers its
// pushes 1, 2, 3, ... in the order StartPush returned them.
using PushTicket = uint64_t;

// What one push came to beyond its status, filled when it ended OK.
struct PushReport {
  // One value per block a shard acknowledged applying: its staleness, the
  // updates applied to the block after the version the gradient was
  // computed on and before this one. A retried duplicate records nothing.
  StalenessHistogram staleness;
  // Requests of the push that a shard's push guard refused as outliers
  // (PushResponse.refused): nothing of them was applied, and the worker goes
  // on without that gradient. `refused_why`: the first one's reason.
  int refused = 0;
  std::string refused_why;

  // One more refused request; `why` is kept when it is the first.
  void AddRefusal(std::string why) {
    if (refused++ == 0) refused_why = std::move(why);
  }
  void Merge(const PushReport& other) {
    staleness.Merge(other.staleness);
    if (refused == 0 && other.refused > 0) refused_why = other.refused_why;
    refused += other.refused;
  }
};

// Runs pushes begun by Start on threads of its own, at most `max_in_flight` at
// once; Start blocks while that many are in flight (backpressure), and Run
// (a push on the caller's thread) takes its turn alike. Threads are started
// as needed, up to max_in_flight, and kept until the pipeline goes.
// Thread-safe. The semantics of Start, Wait, Done and Run are PsClient's
// StartPush, Wait, PushDone and Push (worker/ps_client.h).
class PushPipeline {
 public:
  // Sends one push and waits for its acknowledgement: the client's own
  // synchronous push. Called on the pipeline's threads (Start) or the
  // caller's (Run), up to max_in_flight at once.
  using Send = std::function<absl::Status(const float* grad,
                                          const std::vector<uint64_t>& versions,
                                          PushReport* report)>;

  // REQUIRES: max_in_flight >= 1.
  PushPipeline(int max_in_flight, Send send);
  // Waits for every push in flight to end, then joins the threads. Must run
  // while `send` can still be called (declare the pipeline after what `send`
  // uses, so that it goes first).
  ~PushPipeline() ABSL_LOCKS_EXCLUDED(mu_);

  PushPipeline(const PushPipeline&) = delete;
  PushPipeline& operator=(const PushPipeline&) = delete;

  absl::StatusOr<PushTicket> Start(std::vector<float> grad,
                                   std::vector<uint64_t> versions)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Wait(PushTicket ticket, PushReport* report,
                    std::vector<float>* grad) ABSL_LOCKS_EXCLUDED(mu_);
  bool Done(PushTicket ticket) const ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Run(const float* grad, const std::vector<uint64_t>& versions,
                   PushReport* report) ABSL_LOCKS_EXCLUDED(mu_);

  int in_flight() const ABSL_LOCKS_EXCLUDED(mu_);
  int max_in_flight() const { return max_in_flight_; }

 private:
  // One push begun by Start, from Start until its Wait.
  struct Push {
    std::vector<float> grad;
    std::vector<uint64_t> versions;
    PushReport report;
    absl::Status status;
    bool done = false;
  };

  void SendThread() ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  const int max_in_flight_;
  const Send send_;

  // State below is protected by mu_.
  mutable absl::Mutex mu_;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // begun, not yet ended
  PushTicket last_ticket_ ABSL_GUARDED_BY(mu_) = 0;
  // Begun by Start and not yet waited for, by ticket; the ones not yet taken
  // by a thread are those after `sent_`.
  std::map<PushTicket, Push> pushes_ ABSL_GUARDED_BY(mu_);
  PushTicket sent_ ABSL_GUARDED_BY(mu_) = 0;  // the last one a thread took
  // Failed pushes not yet waited for: Start refuses while there is one.
  int unseen_failures_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  int idle_threads_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_PUSH_PIPELINE_H_
