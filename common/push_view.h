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

// The rows of one sparse table in a push (proto::SparseRows), referenced as
// byte ranges of any alignment: little-endian uint64 keys, float32 gradients
// and uint32 occurrence counts (none: all 1). The core checks the lengths.
struct SparseRef {
  uint32_t table = 0;
  const char* keys = nullptr;
  size_t keys_size = 0;
  const char* values = nullptr;
  size_t values_size = 0;
  const char* counts = nullptr;
  size_t counts_size = 0;
};

// A PushRequest whose block payloads are referenced, not owned.
struct PushView {
  uint64_t placement_epoch = 0;
  int32_t worker_id = 0;
  uint64_t sequence = 0;  // common/push_sequence.h; 0: untracked
  uint64_t clock = 0;
  uint64_t push_key = 0;      // PushRequest.push_key; 0: none
  bool reply_values = false;  // PushRequest.reply_values
  std::vector<BlockRef> blocks;
  std::vector<SparseRef> sparse;
};

// A view of `request`: valid while `request` is alive and unchanged.
PushView ViewOf(const proto::PushRequest& request);

}  // namespace downpour::wire

#endif  // DOWNPOUR_COMMON_PUSH_VIEW_H_
