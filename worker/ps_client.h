// How a worker reads and updates the parameters: Pull and Push of the whole flat
// parameter vector, split into blocks and gathered across the ps shards by the
// coordinator's placement map.
//
// PsClient is the interface the Downpour loop uses (tests drive the loop with a
// fake); GrpcPsClient talks to the real shards.
#ifndef DOWNPOUR_WORKER_PS_CLIENT_H_
#define DOWNPOUR_WORKER_PS_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/config.h"
#include "common/counters.h"
#include "common/model_spec.h"
#include "coordinator/coordinator_client.h"
#include "proto/ps.grpc.pb.h"

namespace downpour::worker {

class PsClient {
 public:
  virtual ~PsClient() = default;
  // Fills params[0..num_params) and (*versions)[block id] with the current values.
  virtual absl::Status Pull(float* params, std::vector<uint64_t>* versions) = 0;
  // Pushes grad[0..num_params), computed from parameters at `versions`.
  virtual absl::Status Push(const float* grad,
                            const std::vector<uint64_t>& versions) = 0;
};

// Thread-safe: a pull and a push may run at once (from the worker's fetch and push
// threads). Retryable failures (UNAVAILABLE, DEADLINE_EXCEEDED, stale epoch) are
// retried with capped exponential backoff and jitter after re-reading the
// placement, for up to rpc.connect_timeout_s, logging what it waits for; other
// errors (a rejected gradient) are returned at once. Each push request carries this
// worker's id and a per-shard sequence number, kept across retries, so a retried
// push is never applied twice.
class GrpcPsClient : public PsClient {
 public:
  GrpcPsClient(const ModelSpec& spec, coordinator::CoordinatorClient* coordinator,
               const RpcSection& rpc, int worker_id, Counters* counters,
               std::function<bool()> should_stop = nullptr);
  ~GrpcPsClient() override;

  // Waits for the placement (bounded) and connects to the shards.
  absl::Status Connect();

  absl::Status Pull(float* params, std::vector<uint64_t>* versions) override;
  absl::Status Push(const float* grad,
                    const std::vector<uint64_t>& versions) override;

  uint64_t epoch() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Shard;  // one ps: its address, stub, blocks cut into request chunks

  // Re-reads the placement if it is newer than `seen_epoch`.
  absl::Status Refresh(uint64_t seen_epoch) ABSL_LOCKS_EXCLUDED(mu_);
  std::shared_ptr<const Shard> GetShard(int index, uint64_t* epoch) const
      ABSL_LOCKS_EXCLUDED(mu_);
  int num_shards() const ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status PullShard(int index, float* params, std::vector<uint64_t>* versions);
  // Copies a pull reply's blocks into params and versions, checking their sizes.
  absl::Status CopyBlocks(int index, const proto::PullResponse& response,
                          float* params, std::vector<uint64_t>* versions);
  absl::Status PushShard(int index, const float* grad,
                         const std::vector<uint64_t>& versions);
  // Runs `call` against shard `index` until it succeeds, re-reading the placement
  // after retryable failures.
  absl::Status WithRetries(
      int index, const std::string& what,
      const std::function<grpc::Status(const Shard&, uint64_t epoch)>& call);
  // Runs fn(i) for every shard in parallel and returns the first error.
  absl::Status ForEachShard(const std::function<absl::Status(int)>& fn);

  // Constant after construction.
  const ModelSpec& spec_;
  coordinator::CoordinatorClient* const coordinator_;
  const RpcSection rpc_;
  const int worker_id_;
  Counters* const counters_;
  const std::function<bool()> should_stop_;

  mutable absl::Mutex mu_;
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::shared_ptr<const Shard>> shards_ ABSL_GUARDED_BY(mu_);
  // Next push sequence number per shard index; pushes to a shard are serialised
  // by push_mu_ so sequences reach it in order.
  absl::Mutex push_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::vector<uint64_t> next_sequence_ ABSL_GUARDED_BY(push_mu_);
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_PS_CLIENT_H_
