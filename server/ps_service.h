// gRPC adapter for the ParameterServer service: forwards each RPC to a Shard.
#ifndef DOWNPOUR_SERVER_PS_SERVICE_H_
#define DOWNPOUR_SERVER_PS_SERVICE_H_

#include "proto/ps.grpc.pb.h"
#include "server/shard.h"

namespace downpour::server {

// Thread-safe. Does not own the shard.
class PsService final : public proto::ParameterServer::CallbackService {
 public:
  explicit PsService(Shard* shard) : shard_(shard) {}

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
  Shard* const shard_;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_PS_SERVICE_H_
