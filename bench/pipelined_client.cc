// PipelinedClient: every chunk issued with the callback API, then one wait.
#include "bench/pipelined_client.h"

#include <cstring>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "common/status_macros.h"
#include "rpc/grpc_status.h"
#include "rpc/server_util.h"

namespace downpour::bench {
namespace {

// Issues issue(i, done) for i in [0, n) and waits for every done(status).
absl::Status AllInFlight(
    int n,
    const std::function<void(int, std::function<void(grpc::Status)>)>& issue) {
  absl::BlockingCounter pending(n);
  std::vector<grpc::Status> results(n);
  for (int i = 0; i < n; ++i) {
    issue(i, [&, i](grpc::Status status) {
      results[i] = std::move(status);
      pending.DecrementCount();
    });
  }
  pending.Wait();
  for (const grpc::Status& status : results) {
    if (!status.ok()) return FromGrpcStatus(status, "pipelined call");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<PipelinedClient>> PipelinedClient::Create(
    const ModelSpec& spec, membership::CoordinatorClient* coordinator,
    int64_t chunk_bytes, const float* grad) {
  ASSIGN_OR_RETURN(proto::GetPlacementResponse placement,
                   coordinator->WaitForPlacement(1));
  std::unique_ptr<PipelinedClient> c(new PipelinedClient(spec));
  for (const proto::ShardInfo& info : placement.shards()) {
    c->stubs_.push_back(
        proto::ParameterServer::NewStub(MakeChannel(info.address())));
    int64_t bytes = chunk_bytes;
    for (uint32_t id : info.block_ids()) {
      const BlockSpec& block = spec.blocks()[id];
      if (bytes + block.length * 4 > chunk_bytes) {
        Chunk& chunk = c->chunks_.emplace_back();
        chunk.stub = c->stubs_.back().get();
        chunk.push.set_placement_epoch(placement.epoch());
        chunk.push.set_worker_id(1);
        chunk.pull.set_placement_epoch(placement.epoch());
        chunk.pull.set_worker_id(1);
        bytes = 0;
      }
      Chunk& chunk = c->chunks_.back();
      proto::BlockData* data = chunk.push.add_blocks();
      data->set_block_id(id);
      data->set_data(reinterpret_cast<const char*>(grad + block.offset),
                     block.length * 4);
      chunk.pull.add_block_ids(id);
      bytes += block.length * 4;
    }
  }
  return c;
}

absl::Status PipelinedClient::Push() {
  std::vector<grpc::ClientContext> contexts(chunks_.size());
  std::vector<proto::PushResponse> responses(chunks_.size());
  return AllInFlight(static_cast<int>(chunks_.size()), [&](int i, auto done) {
    contexts[i].set_deadline(DeadlineIn(30));
    chunks_[i].stub->async()->Push(&contexts[i], &chunks_[i].push,
                                   &responses[i], std::move(done));
  });
}

absl::Status PipelinedClient::Pull(float* params) {
  std::vector<grpc::ClientContext> contexts(chunks_.size());
  RETURN_IF_ERROR(
      AllInFlight(static_cast<int>(chunks_.size()), [&](int i, auto done) {
        contexts[i].set_deadline(DeadlineIn(30));
        chunks_[i].stub->async()->Pull(&contexts[i], &chunks_[i].pull,
                                       &chunks_[i].pulled, std::move(done));
      }));
  for (const Chunk& chunk : chunks_) {
    for (const proto::BlockData& block : chunk.pulled.blocks()) {
      const BlockSpec& spec = spec_.blocks()[block.block_id()];
      if (static_cast<int64_t>(block.data().size()) != spec.length * 4) {
        return absl::InternalError(absl::StrCat("pipelined pull: block ",
                                                spec.id, " has ",
                                                block.data().size(), " bytes"));
      }
      std::memcpy(params + spec.offset, block.data().data(),
                  block.data().size());
    }
  }
  return absl::OkStatus();
}

}  // namespace downpour::bench
