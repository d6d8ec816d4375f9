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
#include "proto/ps.grpc.pb.h"
#include "server/shard.h"

namespace downpour::server {

// Thread-safe. Does not own the shard. Without a shard (a standby, or a ps that
// was replaced) every call is UNAVAILABLE. A push that the shard may hold
// (training.consistency ssp/bsp) runs on the service's own threads, not on
// gRPC's: held pushes must not starve the calls that would release them. The
// call keeps its reactor and is finished from there.
class PsService final : public proto::ParameterServer::CallbackService {
 public:
  explicit PsService(Shard* shard = nullptr) : shard_(shard) {}
  // Joins the push threads. REQUIRES: the server is shut down.
  ~PsService() override;

  // The shard served from now on (nullptr: none). REQUIRES: it outlives the
  // service.
  void set_shard(Shard* shard) { shard_.store(shard); }

  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* context,
                                 const proto::PullRequest* request,
                                 proto::PullResponse* response) override;
  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* context,
                                 const proto::PushRequest* request,
                                 proto::PushResponse* response) override;
  grpc::ServerUnaryReactor* Checksums(grpc::CallbackServerContext* context,
                                      const proto::ChecksumRequest* request,
                                      proto::ChecksumResponse* response) override;

 private:
  // Runs `task` on an idle push thread, starting one if none is idle.
  void RunOnPushThread(std::function<void()> task) ABSL_LOCKS_EXCLUDED(mu_);
  void PushThread() ABSL_LOCKS_EXCLUDED(mu_);

  std::atomic<Shard*> shard_;

  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  int idle_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_PS_SERVICE_H_
