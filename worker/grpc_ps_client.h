// The worker's PsClient over gRPC: pulls and pushes of the whole flat parameter
// vector, split into blocks and gathered across the ps shards by the
// coordinator's placement map.
//
//   GrpcPsClient client(spec, &coordinator, config.rpc, index, &counters);
//   RETURN_IF_ERROR(client.Connect());
//   RETURN_IF_ERROR(client.Pull(params.data(), &versions));
#ifndef DOWNPOUR_WORKER_GRPC_PS_CLIENT_H_
#define DOWNPOUR_WORKER_GRPC_PS_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/counters.h"
#include "common/model_spec.h"
#include "common/wire_encoding.h"
#include "coordinator/coordinator_client.h"
#include "proto/ps.grpc.pb.h"
#include "worker/ps_client.h"

namespace downpour::worker {

// PsClient over gRPC. Thread-safe: Pulls and Pushes may run at once from any
// threads. No mutex is held while an RPC or a backoff sleep runs.
//
// Each shard's blocks are cut into requests of at most 4 MiB. Every request is
// retried on its own: a retryable failure (common/retry.h IsRetryable:
// UNAVAILABLE, DEADLINE_EXCEEDED, FAILED_PRECONDITION such as a stale placement
// epoch, ABORTED) makes the client re-read the placement (the shard may have
// moved or restarted) and try again with capped exponential backoff and jitter
// on `clock`, for up to rpc.connect_timeout_s per request, logging what it
// waits for. Errors Pull and Push return:
//   DeadlineExceeded  "worker N: gave up waiting for <pull from|push to> ps I
//                     at ADDR after S s: <last error>": retries ran out.
//   Cancelled         "worker N: stopped while waiting for ...": `should_stop`
//                     returned true while retrying.
//   Internal          Pull only: a shard returned a block it does not hold in
//                     the spec, or one of the wrong size (the daemons disagree
//                     on the config).
//   any other code    the shard's non-retryable answer, returned at once,
//                     e.g. InvalidArgument for a gradient with NaN.
// Pulls and Pushes run on all shards in parallel and return the first shard's
// error in shard order; a failed Push may have been applied on other shards
// and, on the failing shard, for the requests before the failed one.
//
// Exactly once: each push request carries this worker's id and a per-shard
// sequence number, kept across its retries, and the ps skips a sequence it has
// already applied. For that to hold, push requests reach each shard one at a
// time and in the order the Push calls began (each Push takes a ticket per
// shard on entry and waits for its turn on that shard only). Sequences start at
// the wall-clock time in microseconds, so a restarted worker numbers above its
// last run.
class GrpcPsClient : public PsClient {
 public:
  // Borrows spec, coordinator, counters and clock; they must outlive the
  // client. `should_stop` (optional) ends a retry wait early with Cancelled.
  // `clock` (nullptr = Clock::Real()) times backoff sleeps, the retry timeout
  // and the outage figure; tests pass a FakeClock.
  GrpcPsClient(const ModelSpec& spec,
               coordinator::CoordinatorClient* coordinator,
               const RpcSection& rpc, int worker_id, Counters* counters,
               std::function<bool()> should_stop = nullptr,
               Clock* clock = nullptr);
  ~GrpcPsClient() override;

  GrpcPsClient(const GrpcPsClient&) = delete;
  GrpcPsClient& operator=(const GrpcPsClient&) = delete;

  // Waits for the first placement (epoch >= 1) and connects to its shards.
  // Returns the coordinator client's errors: DeadlineExceeded after
  // rpc.connect_timeout_s, Cancelled when `should_stop` says so.
  // REQUIRES: called once, before Pull and Push.
  absl::Status Connect() ABSL_LOCKS_EXCLUDED(mu_);

  absl::Status Pull(float* params, std::vector<uint64_t>* versions) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Push(const float* grad, const std::vector<uint64_t>& versions,
                    StalenessHistogram* staleness) override
      ABSL_LOCKS_EXCLUDED(mu_);

  // The placement epoch in use (0 before Connect).
  uint64_t epoch() const ABSL_LOCKS_EXCLUDED(mu_);

  // ssp clocks: each Push carries start + the number of Pushes begun so far
  // (the same in every shard request of one push), so all shards see one
  // clock per worker. `start` is RegisterWorkerResponse.start_clock; only the
  // first call before any Push counts.
  void set_start_clock(uint64_t start) ABSL_LOCKS_EXCLUDED(mu_);
  // The clock of the last Push acknowledged (start clock before any).
  uint64_t acked_clock() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Shard;  // one ps: its address, stub, blocks cut into request chunks

  // Push ordering for one shard index: a ticket lock plus the next sequence.
  struct PushLane {
    uint64_t next_ticket = 0;    // handed to the next Push
    uint64_t serving = 0;        // the ticket whose push may send now
    uint64_t next_sequence = 0;  // for the next push request
  };

  // Re-reads the placement if it is newer than `seen_epoch`.
  absl::Status Refresh(uint64_t seen_epoch) ABSL_LOCKS_EXCLUDED(mu_);
  std::shared_ptr<const Shard> GetShard(int index, uint64_t* epoch) const
      ABSL_LOCKS_EXCLUDED(mu_);
  int num_shards() const ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status PullShard(int index, float* params,
                         std::vector<uint64_t>* versions)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Copies a pull reply's blocks into params and versions, checking their
  // sizes.
  absl::Status CopyBlocks(int index, const proto::PullResponse& response,
                          float* params, std::vector<uint64_t>* versions);
  // Waits for `ticket`'s turn on shard `index`, sends its push requests, and
  // passes the turn on (also on error).
  absl::Status PushShard(int index, uint64_t ticket, uint64_t push_clock,
                         const float* grad,
                         const std::vector<uint64_t>& versions,
                         StalenessHistogram* staleness)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Sends grad's chunks to shard `index` and records the staleness of each
  // block the ps applied into *staleness. REQUIRES: the caller holds its turn.
  absl::Status SendPushChunks(int index, uint64_t push_clock, const float* grad,
                              const std::vector<uint64_t>& versions,
                              StalenessHistogram* staleness)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Runs `call` against shard `index` until it succeeds, re-reading the
  // placement after retryable failures.
  absl::Status WithRetries(
      int index, const std::string& what,
      const std::function<grpc::Status(const Shard&, uint64_t epoch)>& call)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Runs fn(i) for shards 0..n-1 in parallel and returns the first error.
  static absl::Status ForEachShard(int n,
                                   const std::function<absl::Status(int)>& fn);

  // Constant after construction.
  const ModelSpec& spec_;
  coordinator::CoordinatorClient* const coordinator_;
  const RpcSection rpc_;
  const int worker_id_;
  Counters* const counters_;
  const std::function<bool()> should_stop_;
  Clock* const clock_;
  // rpc.encoding: how gradients are pushed and parameters asked for.
  const WireEncoding encoding_;

  // State below is protected by mu_.
  mutable absl::Mutex mu_;
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::shared_ptr<const Shard>> shards_ ABSL_GUARDED_BY(mu_);
  std::vector<PushLane> lanes_ ABSL_GUARDED_BY(mu_);  // by shard index
  uint64_t start_clock_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t pushes_begun_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t acked_clock_ ABSL_GUARDED_BY(mu_) = 0;
  absl::CondVar turn_changed_;  // some lane's `serving` moved on
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_GRPC_PS_CLIENT_H_
