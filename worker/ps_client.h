// How a worker reads and updates the parameters: Pull and Push of the whole
// flat parameter vector, split into blocks and gathered across the ps shards by
// the coordinator's placement map.
//
// PsClient is the interface the Downpour loop uses: plain C++, no gRPC. Tests
// drive the loop with worker/testing/fake_ps_client.h; GrpcPsClient
// (worker/grpc_ps_client.h) talks to the real shards.
//
//   std::vector<float> params(spec.num_params());
//   std::vector<uint64_t> versions;  // by global block id
//   RETURN_IF_ERROR(client.Pull(params.data(), &versions));
//   StalenessHistogram staleness;  // updates each block saw since `versions`
//   RETURN_IF_ERROR(client.Push(gradient.data(), versions, &staleness));
#ifndef DOWNPOUR_WORKER_PS_CLIENT_H_
#define DOWNPOUR_WORKER_PS_CLIENT_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/counters.h"

namespace downpour::worker {

// The parameters as the worker sees them. `versions` is indexed by global block
// id (ModelSpec::blocks()[id].id == id) and has spec.blocks().size() entries:
// versions[id] is the version of block `id` the values came from (Pull) or the
// gradient was computed on (Push).
//
// Implementations are thread-safe: a Pull and a Push may run at once (the
// loop's fetch and push threads).
class PsClient {
 public:
  virtual ~PsClient() = default;

  // Fills params[0..spec.num_params()) with the current values of every block
  // and resizes *versions to spec.blocks().size(), setting (*versions)[id] to
  // block id's version. On error both may be partly written.
  virtual absl::Status Pull(float* params, std::vector<uint64_t>* versions) = 0;

  // Sends grad[0..spec.num_params()), computed from parameters at `versions`
  // (indexed as Pull fills them), to be applied once by the shards. On OK, if
  // `staleness` is not null, records into it (adding to what it holds) one
  // value per block the ps acknowledged applying: its staleness, the updates
  // applied to the block after versions[id] and before this one. A block whose
  // update the ps had already applied (a retried duplicate) records nothing.
  // REQUIRES: versions.size() == spec.blocks().size().
  virtual absl::Status Push(const float* grad,
                            const std::vector<uint64_t>& versions,
                            StalenessHistogram* staleness) = 0;
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_PS_CLIENT_H_
