// gRPC adapter for the ParameterServer service: forwards each RPC to a Shard.
#ifndef DOWNPOUR_SERVER_PS_SERVICE_H_
#define DOWNPOUR_SERVER_PS_SERVICE_H_

#include <atomic>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/config.h"
#include "proto/ps.grpc.pb.h"
#include "server/replication/replica.h"
#include "server/replication/replicator.h"
#include "server/shard.h"

namespace downpour::server {

// Thread-safe. Does not own the shard. Without a shard (a standby, or a ps that
// was replaced) every call is UNAVAILABLE. A push that the shard may hold
// (training.consistency ssp/bsp) runs on the service's own threads, not on
// gRPC's: held pushes must not starve the calls that would release them. The
// call keeps its reactor and is finished from there. There are at most
// `max_push_threads` of them (PushThreadsFor: one per request the workers can
// have in flight to a shard). When every one is taken, a push runs at once on
// gRPC's thread without being held: applied if it need not wait, answered
// UNAVAILABLE at once (the client retries) if it would. No push ever waits for
// a thread, so the pushes that release held ones (the slowest ssp worker's, the
// last of a bsp round, which contributes even when refused) always get in: the
// bound cannot deadlock a round.
//
// With a Replicator (cluster.replication 2), a push is answered only once the
// shard's backup holds it (Replicator::WhenReplicated). A standby serves
// Replicate into its Replica; a daemon that serves a shard refuses it.
//
// Pull, Push and Lookup take and give raw bytes (rpc/wire_format.h): a push's
// payloads are applied from the received slices, a pull's are copied once,
// from the shard into the reply. The bytes are ps.proto's messages, so
// protobuf clients see no difference.
class PsService final
    : public proto::ParameterServer::WithRawCallbackMethod_Pull<
          proto::ParameterServer::WithRawCallbackMethod_Push<
              proto::ParameterServer::WithCallbackMethod_Checksums<
                  proto::ParameterServer::WithCallbackMethod_Replicate<
                      proto::ParameterServer::WithRawCallbackMethod_Lookup<
                          proto::ParameterServer::
                              WithCallbackMethod_CopyBuckets<
                                  proto::ParameterServer::
                                      WithCallbackMethod_CopyBlocks<
                                          proto::ParameterServer::
                                              Service>>>>>>> {
 public:
  // A bound on threads for held pushes: workers x kPushRequestsPerShard (the
  // requests each can have in flight to one shard), at most kMaxPushThreads.
  static int PushThreadsFor(const Config& config);
  static constexpr int kMaxPushThreads = 1024;

  // REQUIRES: max_push_threads >= 1.
  explicit PsService(Shard* shard = nullptr, int max_push_threads = 64)
      : max_push_threads_(max_push_threads), shard_(shard) {}
  // Joins the push threads. REQUIRES: the server is shut down.
  ~PsService() override;

  // The shard served from now on (nullptr: none). REQUIRES: it outlives the
  // service.
  void set_shard(Shard* shard) { shard_.store(shard); }

  // Logs the summary lines of refusal bursts whose interval ended (refused
  // requests are logged throttled, common/log_throttle.h), so that the count
  // of a burst that stopped is not held until the next refusal. The ps calls
  // it every heartbeat. Thread-safe.
  static void FlushRefusalLog();
  // Pushes are answered once replicated (nullptr: at once). REQUIRES: it
  // outlives the service, or is reset to nullptr before it goes.
  void set_replicator(Replicator* replicator) { replicator_.store(replicator); }
  // Where a standby keeps what its primary streams (nullptr: Replicate is
  // refused). REQUIRES: it outlives the service.
  void set_replica(Replica* replica) { replica_.store(replica); }

  // Push payload bytes applied straight from gRPC's received slices, and
  // those copied once first (they spanned slices or were unaligned).
  int64_t push_bytes_in_place() const { return bytes_in_place_.load(); }
  int64_t push_bytes_copied() const { return bytes_copied_.load(); }
  // Threads started for held pushes (at most max_push_threads), and the
  // pushes that found them all taken and ran without a hold.
  int push_threads() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t pushes_not_held() const { return not_held_.load(); }

  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Checksums(
      grpc::CallbackServerContext* context,
      const proto::ChecksumRequest* request,
      proto::ChecksumResponse* response) override;
  grpc::ServerUnaryReactor* Replicate(
      grpc::CallbackServerContext* context,
      const proto::ReplicateRequest* request,
      proto::ReplicateResponse* response) override;
  // Raw, so that a request too large for the bytes of replies in flight
  // (Shard::CheckReadSize) is refused before it is parsed.
  grpc::ServerUnaryReactor* Lookup(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;
  // Ps to ps, a live bucket move: Shard::CopyBuckets.
  grpc::ServerUnaryReactor* CopyBuckets(
      grpc::CallbackServerContext* context,
      const proto::CopyBucketsRequest* request,
      proto::CopyBucketsResponse* response) override;
  // Ps to ps, a live move's dense blocks: Shard::CopyBlocks.
  grpc::ServerUnaryReactor* CopyBlocks(
      grpc::CallbackServerContext* context,
      const proto::CopyBlocksRequest* request,
      proto::CopyBlocksResponse* response) override;

 private:
  struct PushCall;

  // Runs `task` on an idle push thread, starting one if none is idle and
  // fewer than max_push_threads_ run; false (task not run) if all are taken.
  bool TryRunOnPushThread(std::function<void()> task) ABSL_LOCKS_EXCLUDED(mu_);
  void PushThread() ABSL_LOCKS_EXCLUDED(mu_);
  // CopyBuckets' and CopyBlocks' caller check (a ps, under mutual TLS) and
  // the shard served (`what` begins the errors).
  absl::Status MayCopyMoved(grpc::CallbackServerContext* context,
                            const char* what, Shard** shard) const;

  // Finishes a push: at once, or once replicated.
  void Answer(grpc::CallbackServerContext* context,
              grpc::ServerUnaryReactor* reactor, absl::Status status,
              std::function<absl::Status(const absl::Status&)> answer);

  const int max_push_threads_;
  std::atomic<Shard*> shard_;
  std::atomic<Replicator*> replicator_{nullptr};
  std::atomic<Replica*> replica_{nullptr};
  // Push payload bytes applied from the received slices / copied first.
  std::atomic<int64_t> bytes_in_place_{0};
  std::atomic<int64_t> bytes_copied_{0};
  std::atomic<int64_t> not_held_{0};

  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  int idle_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_PS_SERVICE_H_
