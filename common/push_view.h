// A push request as the ps core reads it: the request's fields and, per block,
// a reference to its payload bytes wherever they lie (gRPC's received slices,
// a parse arena, a protobuf string), so the core applies gradients without
// copying them and without knowing the transport.
//
//   wire::PushView view = wire::ViewOf(request);  // valid while request is
//   shard->Push(view, &response);
//
// Plain C++ (messages at most, no gRPC): rpc/wire_format.h reads and
// writes these from gRPC byte buffers.
#ifndef DOWNPOUR_COMMON_PUSH_VIEW_H_
#define DOWNPOUR_COMMON_PUSH_VIEW_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "proto/ps.pb.h"

namespace downpour::wire {

// One block of a push request or pull reply: its payload is `size` bytes at
// `data` (little-endian values in `encoding`, a proto::Encoding value).
struct BlockRef {
  uint32_t id = 0;
  uint64_t version = 0;
  int32_t encoding = 0;
  const char* data = nullptr;
  size_t size = 0;
};

// A PushRequest whose block payloads are referenced, not owned.
struct PushView {
  uint64_t placement_epoch = 0;
  int32_t worker_id = 0;
  uint64_t sequence = 0;  // common/push_sequence.h; 0: untracked
  uint64_t clock = 0;
  uint64_t push_key = 0;  // PushRequest.push_key; 0: none
  std::vector<BlockRef> blocks;
};

// A view of `request`: valid while `request` is alive and unchanged.
PushView ViewOf(const proto::PushRequest& request);

}  // namespace downpour::wire

#endif  // DOWNPOUR_COMMON_PUSH_VIEW_H_
