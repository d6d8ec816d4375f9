// ValidateDensePush: the dense half of a push's validation.
#include "server/dense_push_check.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "common/wire_encoding.h"
#include "server/pull_blocks.h"

namespace downpour::server {

std::vector<uint32_t> BlockIds(const wire::PushView& request) {
  std::vector<uint32_t> ids;
  ids.reserve(request.blocks.size());
  for (const wire::BlockRef& block : request.blocks) ids.push_back(block.id);
  return ids;
}

namespace {

// Each block's store checks and the guard's norm bounds.
absl::Status ValidateBlocks(const wire::PushView& request,
                            const BlockStore& store, PushGuard* guard,
                            CheckedBlocks* checked) {
  checked->blocks.reserve(request.blocks.size());
  for (size_t i = 0; i < request.blocks.size(); ++i) {
    const wire::BlockRef& block = request.blocks[i];
    BlockStore::GradientStats& stat = checked->stats[i];
    absl::StatusOr<BlockStore::Block*> resolved =
        store.ValidatePush(block.id, block.data, block.size,
                           static_cast<WireEncoding>(block.encoding), &stat);
    if (!resolved.ok()) {
      return absl::Status(resolved.status().code(),
                          absl::StrCat(resolved.status().message(), " (worker ",
                                       request.worker_id, ")"));
    }
    // The norm against the block's typical one: clipped, or refused.
    stat.clip_norm = 0.0;
    if (stat.norm >= 0) {
      ASSIGN_OR_RETURN(
          stat.clip_norm,
          guard->CheckNorm(block.id, request.worker_id, stat.norm));
    }
    checked->blocks.push_back(*resolved);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateDensePush(const wire::PushView& request,
                               const BlockStore& store, PushGuard* guard,
                               CheckedBlocks* checked) {
  // A worker pushing far more than the others is refused before its
  // gradients are read (Unavailable: retried, the sequence is not used up).
  const absl::Time now = absl::Now();
  absl::Status valid = guard->CheckRate(request.worker_id, now);
  // Counted now, not once applied: an honest worker whose pushes the guard
  // refuses for their norms (or anything else) still pushes, and must stay
  // in the median the rate bound is drawn from. When it dropped out, a
  // flood starving the others made the bound fail open (issue 26).
  if (valid.ok() && !checked->counted) {
    guard->RecordPush(request.worker_id, now);
    checked->counted = true;
  }
  if (valid.ok() && request.blocks.size() > 1) {
    valid = CheckUniqueBlocks("push", BlockIds(request), request.worker_id);
  }
  checked->blocks.clear();
  checked->stats.resize(request.blocks.size());
  if (valid.ok()) valid = ValidateBlocks(request, store, guard, checked);
  return valid;
}

}  // namespace downpour::server
