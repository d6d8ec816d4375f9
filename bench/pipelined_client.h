// A comparison point for GrpcPsClient: Push and Pull of the whole flat vector
// cut into chunks of `chunk_bytes`, every chunk of every shard in flight at
// once (gRPC callback API), with the push requests built once and reused.
// GrpcPsClient instead sends 4 MiB chunks one after another per shard and
// builds fresh messages for each. No retries, no sequence numbers (pushes are
// untracked): a measuring tool, not a client to train with.
//
//   ASSIGN_OR_RETURN(auto client, PipelinedClient::Create(spec, coordinator,
//                                                         1 << 20, grad));
//   RETURN_IF_ERROR(client->Push());
#ifndef DOWNPOUR_BENCH_PIPELINED_CLIENT_H_
#define DOWNPOUR_BENCH_PIPELINED_CLIENT_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model_spec.h"
#include "membership/coordinator_client.h"
#include "proto/ps.grpc.pb.h"

namespace downpour::bench {

// One Push() or Pull() at a time.
class PipelinedClient {
 public:
  // Reads the placement; `grad` (spec.num_params() floats) is copied into the
  // push requests now. `spec` must outlive the client.
  static absl::StatusOr<std::unique_ptr<PipelinedClient>> Create(
      const ModelSpec& spec, membership::CoordinatorClient* coordinator,
      int64_t chunk_bytes, const float* grad);

  PipelinedClient(const PipelinedClient&) = delete;
  PipelinedClient& operator=(const PipelinedClient&) = delete;

  absl::Status Push();
  // Fills params[0..num_params).
  absl::Status Pull(float* params);

 private:
  struct Chunk {
    proto::ParameterServer::Stub* stub;
    proto::PushRequest push;
    proto::PullRequest pull;
    proto::PullResponse pulled;  // reused between pulls
  };

  explicit PipelinedClient(const ModelSpec& spec) : spec_(spec) {}

  const ModelSpec& spec_;
  std::vector<std::unique_ptr<proto::ParameterServer::Stub>> stubs_;
  std::vector<Chunk> chunks_;
};

}  // namespace downpour::bench

#endif  // DOWNPOUR_BENCH_PIPELINED_CLIENT_H_
