// PullBlocks: a dense pull's checks and the visit of its blocks.
#include "server/pull_blocks.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace downpour::server {

absl::Status CheckUniqueBlocks(const char* op, absl::Span<const uint32_t> ids,
                               int32_t worker) {
  std::vector<uint32_t> sorted(ids.begin(), ids.end());
  std::sort(sorted.begin(), sorted.end());
  const auto twice = std::adjacent_find(sorted.begin(), sorted.end());
  if (twice == sorted.end()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      op, ": block ", *twice, " appears more than once in one request (worker ",
      worker, ")"));
}

absl::Status PullBlocks::CheckReader(int32_t worker_id) const {
  const size_t workers = num_workers_;
  // -1: a reader that is not a worker (tools); it leaves no per-worker state.
  if (worker_id == -1 ||
      (worker_id >= 0 && static_cast<size_t>(worker_id) < workers)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "pull: worker_id ", worker_id, " is not a configured worker (", workers,
      " worker slots in cluster.workers and cluster.max_workers: 0 to ",
      static_cast<int64_t>(workers) - 1, ", or -1 for a tool)"));
}

absl::StatusOr<PullBlocks::Plan> PullBlocks::Check(
    const proto::PullRequest& request) const {
  RETURN_IF_ERROR(
      CheckUniqueBlocks("pull", request.block_ids(), request.worker_id()));
  RETURN_IF_ERROR(CheckReader(request.worker_id()));
  Plan plan;
  // The proto value as it came; proto::Encoding and WireEncoding share values.
  plan.encoding = static_cast<WireEncoding>(request.encoding());
  if (!IsKnownWireEncoding(plan.encoding)) {
    return absl::InvalidArgumentError(
        absl::StrCat("pull: unknown encoding ", request.encoding(),
                     " (valid: 0 float32, 1 bf16, 2 fp16)"));
  }
  plan.width = BytesPerElement(plan.encoding);
  for (uint32_t id : request.block_ids()) {
    if (id < spec_->blocks().size()) {
      plan.payload_bytes += spec_->blocks()[id].length * plan.width;
    }
  }
  return plan;
}

absl::Status PullBlocks::Visit(
    const proto::PullRequest& request, const Plan& plan,
    const BlockStore& store,
    const std::function<char*(const PulledBlock&)>& room) const {
  for (uint32_t id : request.block_ids()) {
    ASSIGN_OR_RETURN(const uint64_t version, store.Version(id));
    const PulledBlock block{id, version, request.encoding(),
                            spec_->blocks()[id].length * plan.width};
    RETURN_IF_ERROR(
        store.PullInto(id, room(block), request.worker_id(), plan.encoding)
            .status());
  }
  return absl::OkStatus();
}

PullBlocks::Sink PullBlocks::Into(proto::PullResponse* response) {
  Sink sink;
  sink.reserve = [response](size_t num_blocks, size_t) {
    response->mutable_blocks()->Reserve(static_cast<int>(num_blocks));
    return absl::OkStatus();
  };
  sink.room = [response](const PulledBlock& block) {
    proto::BlockData* data = response->add_blocks();
    data->set_block_id(block.id);
    data->set_version(block.version);
    data->set_encoding(static_cast<proto::Encoding>(block.encoding));
    std::string* bytes = data->mutable_data();
    bytes->resize(block.bytes);
    return bytes->data();
  };
  return sink;
}

proto::ChecksumResponse PullBlocks::Checksums(const BlockStore& store) {
  proto::ChecksumResponse response;
  for (uint32_t id : store.block_ids()) {
    proto::BlockChecksum* sum = response.add_blocks();
    uint64_t version = 0;
    sum->set_block_id(id);
    sum->set_crc32c(store.BlockCrc32c(id, &version));
    sum->set_version(version);
  }
  return response;
}

}  // namespace downpour::server
