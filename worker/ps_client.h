// How a worker reads and updates the parameters: Pull and Push of the whole
// flat parameter vector, split into blocks and gathered across the ps shards by
// the coordinator's placement map.
//
// PsClient is the interface the Downpour loop uses: plain C++, no gRPC. Tests
// drive the loop with worker/testing/fake_ps_client.h; GrpcPsClient
// (worker/grpc_ps_client.h) talks to the real shards. Pushes are asynchronous,
// shaped like ps-lite's KVWorker::Push and Wait (include/ps/kv_app.h):
//
//   std::vector<float> params(spec.num_params());
//   std::vector<uint64_t> versions;  // by global block id
//   RETURN_IF_ERROR(client.Pull(params.data(), &versions));
//   ASSIGN_OR_RETURN(PushTicket ticket,
//                    client.StartPush(std::move(gradient), versions));
//   ...  // compute the next gradient meanwhile
//   PushReport report;  // updates each block saw since `versions`, refusals
//   RETURN_IF_ERROR(client.Wait(ticket, &report, &gradient));
#ifndef DOWNPOUR_WORKER_PS_CLIENT_H_
#define DOWNPOUR_WORKER_PS_CLIENT_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/counters.h"
#include "worker/push_pipeline.h"

namespace downpour::worker {

// The parameters as the worker sees them. `versions` is indexed by global block
// id (ModelSpec::blocks()[id].id == id) and has spec.blocks().size() entries:
// versions[id] is the version of block `id` the values came from (Pull) or the
// gradient was computed on (Push).
//
// Backpressure has one knob, the client's max_pushes_in_flight
// (training.max_pushes_in_flight), and the client alone counts the pushes in
// flight: begun (StartPush or Push) and not yet ended, acknowledged or failed.
//
// Implementations are thread-safe: Pulls, StartPush, Wait and Push may run at
// once from any threads.
class PsClient {
 public:
  virtual ~PsClient() = default;

  // Fills params[0..spec.num_params()) with the current values of every block
  // and resizes *versions to spec.blocks().size(), setting (*versions)[id] to
  // block id's version. On error both may be partly written.
  virtual absl::Status Pull(float* params, std::vector<uint64_t>* versions) = 0;

  // Begins pushing `grad` (spec.num_params() floats), computed from parameters
  // at `versions`, to be applied once by the shards, and returns its ticket
  // without waiting for the shards. While max_pushes_in_flight() pushes are in
  // flight it first waits for one to end (backpressure). The client owns
  // `grad` until Wait hands it back. Returns, without beginning this push (the
  // gradient is dropped), the error of an earlier push of this client that
  // failed and has not been waited for yet: a caller that stops at the first
  // failure sends nothing behind it.
  // REQUIRES: versions.size() == spec.blocks().size().
  absl::StatusOr<PushTicket> StartPush(std::vector<float> grad,
                                       std::vector<uint64_t> versions) {
    return push_pipeline().Start(std::move(grad), std::move(versions));
  }

  // Waits until push `ticket` has ended and returns its status (the errors of
  // the implementation's Push). On OK, if `report` is not null, merges into
  // it (PushReport, worker/push_pipeline.h) one staleness value per block the
  // ps acknowledged applying, the updates applied to the block after
  // versions[id] and before this one (a block whose update the ps had
  // already applied, a retried duplicate, records nothing), and the requests
  // a shard's push guard refused as outliers (nothing of them applied). If
  // `grad` is not null, the push's gradient buffer is moved into it, for the
  // caller to reuse. Each ticket is waited for once; InvalidArgument for one
  // that is unknown or was waited for already.
  absl::Status Wait(PushTicket ticket, PushReport* report,
                    std::vector<float>* grad = nullptr) {
    return push_pipeline().Wait(ticket, report, grad);
  }

  // Whether push `ticket` has ended (Wait returns at once); false for a
  // ticket that is unknown or was waited for already.
  bool PushDone(PushTicket ticket) const {
    return push_pipeline().Done(ticket);
  }

  // Pushes in flight now, at most max_pushes_in_flight().
  int pushes_in_flight() const { return push_pipeline().in_flight(); }
  int max_pushes_in_flight() const { return push_pipeline().max_in_flight(); }

  // A push waited for: StartPush and Wait without copying `grad` (it is read
  // in place until Push returns), counted among the pushes in flight alike.
  absl::Status Push(const float* grad, const std::vector<uint64_t>& versions,
                    PushReport* report) {
    return push_pipeline().Run(grad, versions, report);
  }

  // training.fetch layerwise: pushes grad's blocks `ids` only (global block
  // ids, any shards), computed from parameters at versions[id], and gets
  // their values back in the same round trip: once it returns OK,
  // params[block] and (*fresh)[id] hold each block's values and version
  // right after this push was applied (a retried duplicate: as the shard
  // holds them now). Report as Wait's. Waited for, outside the push
  // pipeline; calls on disjoint `ids` may run at once. `fresh` may be
  // &versions (read before it is written, block by block). REQUIRES:
  // fresh->size() == spec.blocks().size(). The default: Unimplemented.
  virtual absl::Status PushPullBlocks(const float* grad,
                                      const std::vector<uint64_t>& versions,
                                      const std::vector<uint32_t>& ids,
                                      PushReport* report, float* params,
                                      std::vector<uint64_t>* fresh);

 protected:
  // The pushes in flight, counted in this one place: every client runs its
  // own synchronous send (one push, retried until acknowledged or failed) on
  // a PushPipeline (worker/push_pipeline.h), which hands out the tickets and
  // applies the backpressure.
  virtual PushPipeline& push_pipeline() const = 0;
};

}  // namespace downpour::worker

#endif  // DOWNPOUR_WORKER_PS_CLIENT_H_
