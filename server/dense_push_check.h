// The dense half of a push's validation, beside the PushGuard it asks: the
// guard's rate bound, block ids pushed once, and each block's gradient (the
// store's size and NaN/Inf checks, the guard's norm bounds), in one pass and
// without changing anything but the guard's push count. Plain functions over
// parts its caller (Shard) owns and locks.
#ifndef DOWNPOUR_SERVER_DENSE_PUSH_CHECK_H_
#define DOWNPOUR_SERVER_DENSE_PUSH_CHECK_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/push_view.h"
#include "server/block_store.h"
#include "server/push_guard.h"

namespace downpour::server {

// The dense blocks of a push as validated for Apply, kept across the waits
// of one push.
struct CheckedBlocks {
  std::vector<BlockStore::Block*> blocks;
  std::vector<BlockStore::GradientStats> stats;  // with the clip bound
  bool counted = false;  // by the PushGuard's rate bound
};

// The block ids of `request`, in order.
std::vector<uint32_t> BlockIds(const wire::PushView& request);

// Validates the dense part of `request` into *checked (its blocks and
// stats, each block looked up once): Unavailable past the guard's rate
// bound (the sequence is not used up: retried); InvalidArgument for a block
// id pushed twice, a wrong size or a NaN/Inf gradient, NotFound for a block
// not in `store`; Aborted for an outlier the guard refused. A push past the
// rate bound counts for it once, whatever follows (checked->counted).
absl::Status ValidateDensePush(const wire::PushView& request,
                               const BlockStore& store, PushGuard* guard,
                               CheckedBlocks* checked);

}  // namespace downpour::server

#endif  // DOWNPOUR_SERVER_DENSE_PUSH_CHECK_H_
