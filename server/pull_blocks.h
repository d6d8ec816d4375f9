// The dense pull path of a shard: its checks before any lock (block ids asked
// once, the reader, the encoding, the reply's size from the model), the
// visit of the blocks under its owner's lock, a protobuf reply to visit
// into, and the blocks' checksums. Constant after construction; the
// store it visits is locked by its owner (Shard).
#ifndef DOWNPOUR_SERVER_PULL_BLOCKS_H_
#define DOWNPOUR_SERVER_PULL_BLOCKS_H_

#include <cstddef>
#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/model_spec.h"
#include "common/wire_encoding.h"
#include "proto/ps.pb.h"
#include "server/block_store.h"

namespace downpour::server {

// One block of a pull as it is handed out: `bytes` bytes of values in
// `encoding` (the request's proto::Encoding value).
struct PulledBlock {
  uint32_t id = 0;
  uint64_t version = 0;
  int32_t encoding = 0;
  size_t bytes = 0;
};

// InvalidArgument naming the first block id that appears twice in `ids` of a
// request of `worker` (`op`: "pull", "push").
absl::Status CheckUniqueBlocks(const char* op, absl::Span<const uint32_t> ids,
                               int32_t worker);

class PullBlocks {
 public:
  // `spec` outlives this; `num_workers`: WorkerSlots(config.cluster).
  PullBlocks(const ModelSpec* spec, size_t num_workers)
      : spec_(spec), num_workers_(num_workers) {}

  // InvalidArgument for a pull's (dense or sparse) worker_id that is neither a
  // configured worker nor -1 (a tool).
  absl::Status CheckReader(int32_t worker_id) const;

  // A pull as checked: its encoding and the reply's payload.
  struct Plan {
    WireEncoding encoding = WireEncoding::kFloat32;
    size_t width = 0;          // bytes per value
    size_t payload_bytes = 0;  // of the blocks the model has
  };
  // InvalidArgument for a block id asked twice, a worker_id neither a
  // configured worker nor -1 (a tool), or an unknown encoding. Sizes come
  // from the model spec, so the caller sizes (and may refuse) the reply
  // before anything is allocated or locked.
  absl::StatusOr<Plan> Check(const proto::PullRequest& request) const;

  // In request order, `room(block)` for each block of `request`, and the
  // block's values from `store` written there. NotFound for a block not in
  // `store` (the blocks before it were written). The caller holds the lock
  // over `store`.
  absl::Status Visit(
      const proto::PullRequest& request, const Plan& plan,
      const BlockStore& store,
      const std::function<char*(const PulledBlock&)>& room) const;

  // The reserve and room of a visit into `response` (Shard::Pull): one
  // BlockData per block, its bytes where the values go.
  struct Sink {
    std::function<absl::Status(size_t num_blocks, size_t payload_bytes)>
        reserve;
    std::function<char*(const PulledBlock& block)> room;
  };
  static Sink Into(proto::PullResponse* response);

  // Every block of `store`: its id, version and values' CRC32C. The caller
  // holds the lock over `store`.
  static proto::ChecksumResponse Checksums(const BlockStore& store);

 private:
  const ModelSpec* const spec_;
  const size_t num_workers_;
};

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_PULL_BLOCKS_H_
