// gRPC adapter for the ParameterServer service: forwards each RPC to a Shard.
#ifndef DOWNPOUR_SERVER_PS_SERVICE_H_
#define DOWNPOUR_SERVER_PS_SERVICE_H_

#include <atomic>

#include "proto/ps.grpc.pb.h"
#include "server/shard.h"

namespace downpour::server {

// Thread-safe. Does not own the shard. Without a shard (a standby, or a ps that
// was replaced) every call is UNAVAILABLE.
class PsService final : public proto::ParameterServer::CallbackService {
 public:
  explicit PsService(Shard* shard = nullptr) : shard_(shard) {}

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
  std::atomic<Shard*> shard_;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_PS_SERVICE_H_
