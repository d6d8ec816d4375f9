// A PsClient in memory, standing in for the ps shards so the Downpour loop's
// threading and accounting can be tested alone.
//
//   FakePsClient ps(spec.InitAll(1), spec.blocks().size(), 0.1f);
//   DownpourLoop loop(spec, &backend, &ps, &train, &test, options);
//   ASSERT_THAT(loop.Run(), IsOk());
//   EXPECT_EQ(ps.pushes(), loop.stats().pushes);
#ifndef DOWNPOUR_WORKER_TESTING_FAKE_PS_CLIENT_H_
#define DOWNPOUR_WORKER_TESTING_FAKE_PS_CLIENT_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/model_spec.h"
#include "worker/ps_client.h"
#include "worker/push_pipeline.h"

namespace downpour::worker {

// Thread-safe. Pull copies the parameters and the per-block versions; a push
// (Push, or one begun by StartPush, on the pipeline's threads) applies plain
// SGD (params -= learning_rate * grad), bumps every block's version, records
// every block's staleness (the updates it saw since `versions`) and counts
// what it received. After HoldPushes, each push waits until AllowPushes grants
// it a turn: a slow ps, under the test's control.
// Pushes in flight are counted by a PushPipeline, as in GrpcPsClient.
class FakePsClient final : public PsClient {
 public:
  // Up to `max_pushes_in_flight` pushes are in flight at once (PsClient).
  FakePsClient(std::vector<float> params, int num_blocks, float learning_rate,
               int max_pushes_in_flight = 1);

  absl::Status Pull(float* params, std::vector<uint64_t>* versions) override
      ABSL_LOCKS_EXCLUDED(mu_);
  // training.fetch layerwise: a push of some blocks applies SGD to those
  // blocks alone, bumps their versions and copies their values back (held
  // and failed as Push is). It needs the blocks' layout first (UseBlocks);
  // without it, it is PsClient's Unimplemented.
  void UseBlocks(const std::vector<BlockSpec>& blocks) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status PushPullBlocks(const float* grad,
                              const std::vector<uint64_t>& versions,
                              const std::vector<uint32_t>& ids,
                              PushReport* report, float* params,
                              std::vector<uint64_t>* fresh) override
      ABSL_LOCKS_EXCLUDED(mu_);
  // Each block's version: the pushes applied to it.
  std::vector<uint64_t> versions() const ABSL_LOCKS_EXCLUDED(mu_);

  // From now on each Push blocks until a turn is granted by AllowPushes.
  void HoldPushes() ABSL_LOCKS_EXCLUDED(mu_);
  // Lets `n` more held Pushes go on (in any order).
  void AllowPushes(int n) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until at least `n` Pushes are blocked in HoldPushes' gate; false if
  // `timeout` passed first.
  bool AwaitBlockedPushes(int n, absl::Duration timeout)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The most Push calls that were in progress at once.
  int max_concurrent_pushes() const ABSL_LOCKS_EXCLUDED(mu_);

  // From now on Push applies nothing and returns InvalidArgument
  // "push: gradient has NaN", as a shard rejecting a gradient does.
  void FailPushes() ABSL_LOCKS_EXCLUDED(mu_);
  // The next `n` pushes apply nothing and end OK with one refusal in their
  // PushReport, as a shard's push guard refusing an outlier answers.
  void RefusePushes(int n) ABSL_LOCKS_EXCLUDED(mu_);
  // Pushes refused so.
  int refused() const ABSL_LOCKS_EXCLUDED(mu_);

  int pulls() const ABSL_LOCKS_EXCLUDED(mu_);
  // Pushes applied.
  int pushes() const ABSL_LOCKS_EXCLUDED(mu_);
  // The sum of grad[0] over the pushes applied: with a backend whose gradient
  // is all ones, the number of steps' worth of gradient received.
  double pushed_sum() const ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<float> params() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // What a push does (PushPipeline::Send).
  absl::Status Apply(const float* grad, const std::vector<uint64_t>& versions,
                     PushReport* report) ABSL_LOCKS_EXCLUDED(mu_);

  // HoldPushes' gate and FailPushes' refusal; false when refused.
  bool Admit() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // RefusePushes: true (and *report told) when this push is refused.
  bool Refuse(PushReport* report) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const float learning_rate_;
  mutable absl::Mutex mu_;
  std::vector<BlockSpec> blocks_ ABSL_GUARDED_BY(mu_);
  std::vector<float> params_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> versions_ ABSL_GUARDED_BY(mu_);
  int pulls_ ABSL_GUARDED_BY(mu_) = 0;
  int pushes_ ABSL_GUARDED_BY(mu_) = 0;
  double pushed_sum_ ABSL_GUARDED_BY(mu_) = 0;
  bool fail_pushes_ ABSL_GUARDED_BY(mu_) = false;
  int to_refuse_ ABSL_GUARDED_BY(mu_) = 0;
  int refused_ ABSL_GUARDED_BY(mu_) = 0;
  bool hold_ ABSL_GUARDED_BY(mu_) = false;
  int allowed_ ABSL_GUARDED_BY(mu_) = 0;  // held Pushes that may go on
  int blocked_ ABSL_GUARDED_BY(mu_) = 0;  // Pushes waiting at the gate
  int concurrent_ ABSL_GUARDED_BY(mu_) = 0;
  int max_concurrent_ ABSL_GUARDED_BY(mu_) = 0;

  PushPipeline& push_pipeline() const override { return pipeline_; }
  // Last, so that it goes first: its threads call Apply.
  mutable PushPipeline pipeline_;
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_TESTING_FAKE_PS_CLIENT_H_
